"""The client behind a proxy: every outgoing path through Debian's squid (counted in its access
log), ``NO_PROXY``, ``https`` through a ``CONNECT`` tunnel, a proxy that wants credentials, and
the local gateway, which is always reached directly."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import pytest
from fault_server import KEY
from proxy import TLSFront, free_port

from gatecell import AsyncGateway, Gateway
from gatecell.wire.transport.errors import APIConnectionError, ConfigError

HI = [{"role": "user", "content": "hi"}]


def _every_path(gw: Gateway) -> None:
    gw.chat("m", HI)
    gw.chat("m", HI, stream=True).read()
    gw.models()
    job = gw.imagine("a castle", wait=True, interval=0.01)  # a submit, polls, a media download
    assert job.media[0].data
    batch = gw.map("say {item}", [f"row {i}" for i in range(10)], model="m", progress=False, cache=False)
    assert batch.errors == {} and batch.done == 10


def test_every_path_of_both_clients_goes_through_the_proxy(fault, squid, environ):
    environ.setenv("HTTP_PROXY", squid.url)
    token = uuid.uuid4().hex[:12]
    base = f"{fault.url}/s/ok/{token}"
    mark = len(squid.log())
    with Gateway(base, KEY, max_retries=0) as gw:
        _every_path(gw)

    async def asynchronously() -> None:
        async with AsyncGateway(base, KEY, max_retries=0) as gw:
            await gw.chat("m", HI)
            await (await gw.chat("m", HI, stream=True)).aread()
            assert (await gw.map("say {item}", ["a", "b"], model="m", progress=False, cache=False)).done == 2

    asyncio.run(asynchronously())
    sent = fault.seen(token)
    entries = squid.wait_for(len(sent), since=mark)
    assert len(entries) == len(sent) >= 20
    assert all(entry.url.startswith(base) and entry.method in ("GET", "POST") for entry in entries)
    assert sorted(entry.url.removeprefix(base) for entry in entries) == sorted(r.path for r in sent)


def test_no_proxy_exempts_the_gateway_and_trust_env_false_ignores_the_variables(fault, squid, environ):
    environ.setenv("HTTP_PROXY", squid.url)
    environ.setenv("NO_PROXY", "127.0.0.0/8")
    mark = len(squid.log())
    with Gateway(f"{fault.url}/s/ok/{uuid.uuid4().hex[:12]}", KEY) as gw:
        _every_path(gw)
    environ.delenv("NO_PROXY")
    with Gateway(f"{fault.url}/s/ok/{uuid.uuid4().hex[:12]}", KEY, trust_env=False) as gw:
        _every_path(gw)
    assert squid.wait_for(1, since=mark, timeout=1) == []


def test_the_local_gateway_is_never_proxied(local_gateway, squid, environ):
    environ.setenv("ALL_PROXY", squid.url)
    environ.setenv("GATECELL_PROXY", squid.url)  # not even an explicit one
    mark = len(squid.log())
    with Gateway(local_gateway.base_url, local_gateway.api_key) as gw:
        assert gw.local
        assert gw.chat("local-chat", [{"role": "user", "content": "What is 2+2?"}]).text
        assert gw.map("What is {item} + 1?", [1, 2], model="local-chat", progress=False).done == 2
    assert squid.wait_for(1, since=mark, timeout=1) == []


def test_https_goes_through_a_tunnel_that_shows_the_proxy_no_request(fault, squid, test_ca, environ):
    environ.setenv("HTTPS_PROXY", squid.url)
    environ.setenv("SSL_CERT_FILE", str(test_ca.ca))
    front = TLSFront(test_ca, ("127.0.0.1", int(fault.url.rsplit(":", 1)[1])))
    token = uuid.uuid4().hex[:12]
    mark = len(squid.log())
    try:
        with Gateway(f"{front.url}/s/ok/{token}", KEY, max_retries=0) as gw:
            assert gw.chat("m", HI).text
            assert gw.map("say {item}", ["a", "b"], model="m", progress=False, cache=False).done == 2
    finally:
        front.stop()
    entries = squid.wait_for(3, since=mark)  # logged as each tunnel closes
    assert {(entry.method, entry.url) for entry in entries} == {("CONNECT", f"127.0.0.1:{front.port}")}
    assert len(fault.seen(token)) == 3


def test_map_at_64_in_flight_through_the_proxy_completes_every_row(fault, squid, environ):
    environ.setenv("HTTP_PROXY", squid.url)
    token = uuid.uuid4().hex[:12]
    mark = len(squid.log())
    with Gateway(f"{fault.url}/s/ok/{token}", KEY) as gw:
        batch = gw.map("row {item}", range(300), model="m", concurrency=64, progress=False, cache=False)
    assert (batch.done, batch.failed) == (300, 0)
    assert len(squid.wait_for(300, since=mark)) == 300


def test_a_proxy_that_wants_credentials(fault, squid_auth, environ):
    password = squid_auth.users["alice"]
    base = f"{fault.url}/s/ok/{uuid.uuid4().hex[:12]}"
    with Gateway(base, KEY, proxy=f"http://alice:{password}@127.0.0.1:{squid_auth.port}") as gw:
        assert gw.chat("m", HI).text
        assert gw.map("say {item}", ["a"], model="m", progress=False, cache=False).done == 1
        assert password not in repr(gw.proxies)
    for proxy in (f"http://alice:wrong-{password}@127.0.0.1:{squid_auth.port}", squid_auth.url):
        with Gateway(base, KEY, proxy=proxy, max_retries=0) as gw:
            with pytest.raises(APIConnectionError) as caught:
                gw.chat("m", HI)
            batch = gw.map("say {item}", ["a"], model="m", progress=False, cache=False)
        for line in (str(caught.value), batch.errors[0]):
            assert "\n" not in line and password not in line
            assert (
                f"127.0.0.1:{squid_auth.port} refused the request: 407 Proxy Authentication Required" in line
            )


def test_an_unreachable_or_malformed_proxy_is_one_line(fault, environ):
    dead = free_port()
    with Gateway(fault.url, KEY, proxy=f"http://bob:hunter2@127.0.0.1:{dead}", max_retries=0) as gw:
        with pytest.raises(APIConnectionError) as caught:
            gw.models()
    line = str(caught.value)
    assert "hunter2" not in line and f"(through proxy http://bob:****@127.0.0.1:{dead})" in line
    environ.setenv("GATECELL_PROXY", "http://bob:hunter2@[bad")
    with pytest.raises(ConfigError, match="GATECELL_PROXY") as bad:
        Gateway(fault.url, KEY)
    assert "hunter2" not in str(bad.value)


def test_the_command_line_goes_through_the_proxy(fault, squid, environ):
    token = uuid.uuid4().hex[:12]
    base = f"{fault.url}/s/ok/{token}"
    mark = len(squid.log())
    env = {**os.environ, "HTTP_PROXY": squid.url, "GATECELL_BASE_URL": base, "GATECELL_API_KEY": KEY}
    done = subprocess.run(
        [sys.executable, "-m", "gatecell", "chat", "-m", "m", "hi"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert [entry.method for entry in squid.wait_for(1, since=mark)] == ["POST"]
