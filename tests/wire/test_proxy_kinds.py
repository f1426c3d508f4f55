"""Every kind of proxy URL on both drivers: a call (httpx) and a map (the lean HTTP/1.1
driver, which hands httpx the proxies it does not speak itself). Real proxies on loopback:
squid (``http://``), squid behind TLS (``https://``), a SOCKS5 server of the tests' own
(``socks5://``, ``socks5h://``); a URL that is none of them is refused, in one line, when the
client is made."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest
from fault_server import KEY
from proxy import Socks5, TLSFront
from test_client_proxy import HI

from gatecell import AsyncGateway, Gateway
from gatecell.wire.transport.errors import ConfigError

Through = Callable[[], int]  # how many connections or requests the proxy has carried so far


@pytest.fixture
def socks() -> Iterator[Socks5]:
    server = Socks5()
    yield server
    server.stop()


@pytest.fixture
def proxy_of(squid, test_ca, socks, environ) -> Iterator[Callable[[str], tuple[str, Through]]]:
    """``proxy_of(kind)``: the URL of a proxy of that kind, and its count of what went through."""
    fronts: list[TLSFront] = []

    def make(kind: str) -> tuple[str, Through]:
        if kind == "http":
            return squid.url, lambda: len(squid.log())
        if kind == "https":  # TLS to the proxy itself, whose certificate only the test CA signs
            environ.setenv("SSL_CERT_FILE", str(test_ca.ca))
            front = TLSFront(test_ca, ("127.0.0.1", squid.port))
            fronts.append(front)
            return front.url, lambda: front.connections
        return socks.url.replace("socks5://", f"{kind}://"), lambda: len(socks.targets)

    yield make
    for front in fronts:
        front.stop()


KINDS = ["http", "https", "socks5", "socks5h"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_goes_through_every_kind_of_proxy(fault, proxy_of, kind):
    url, through = proxy_of(kind)
    before = through()
    with Gateway(f"{fault.url}/s/ok/{uuid.uuid4().hex[:12]}", KEY, proxy=url, max_retries=0) as gw:
        assert gw.chat("m", HI).text
    assert through() > before


@pytest.mark.parametrize("kind", KINDS)
def test_a_map_goes_through_every_kind_of_proxy(fault, proxy_of, kind):
    url, through = proxy_of(kind)
    before = through()
    with Gateway(f"{fault.url}/s/ok/{uuid.uuid4().hex[:12]}", KEY, proxy=url, max_retries=0) as gw:
        batch = gw.map("say {item}", [f"row {i}" for i in range(5)], model="m", progress=False, cache=False)
    assert (batch.done, batch.errors) == (5, {})
    assert through() > before


@pytest.mark.parametrize("kind", ["socks5", "socks5h"])
def test_a_socks_proxy_in_the_environment_carries_an_async_map(fault, proxy_of, environ, kind):
    url, through = proxy_of(kind)
    environ.setenv("ALL_PROXY", url)
    before = through()

    async def mapped() -> int:
        async with AsyncGateway(f"{fault.url}/s/ok/{uuid.uuid4().hex[:12]}", KEY, max_retries=0) as gw:
            return (await gw.map("say {item}", ["a", "b"], model="m", progress=False, cache=False)).done

    assert asyncio.run(mapped()) == 2
    assert through() > before


@pytest.mark.parametrize(
    "url", ["ftp://proxy.example:21", "socks4://127.0.0.1:1080", "http://user:hunter2@[bad", "://"]
)
@pytest.mark.parametrize("client", [Gateway, AsyncGateway])
def test_a_url_no_driver_speaks_is_refused_in_one_line_when_the_client_is_made(fault, environ, client, url):
    with pytest.raises(ConfigError) as refused:
        client(fault.url, KEY, proxy=url)
    line = str(refused.value)
    assert "\n" not in line and "hunter2" not in line and "not a proxy URL" in line


def test_socks_without_its_package_is_refused_in_one_line_when_the_client_is_made(
    fault,
    socks,
    environ,
    monkeypatch,
):
    monkeypatch.setitem(sys.modules, "socksio", None)  # as if not installed: importing it fails
    for url in (socks.url.replace("://", "://ann:hunter2@"), socks.url.replace("socks5", "socks5h")):
        with pytest.raises(ConfigError) as refused:
            Gateway(fault.url, KEY, proxy=url)
        line = str(refused.value)
        assert "\n" not in line and "hunter2" not in line and "pip install 'gatecell[socks]'" in line
    environ.setenv("ALL_PROXY", socks.url)
    with pytest.raises(ConfigError, match="socksio"):
        AsyncGateway(fault.url, KEY)
