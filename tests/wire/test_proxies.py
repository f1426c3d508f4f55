"""Proxies: the environment read as httpx reads it (`gatecell.wire.transport.proxies`), and the lean
pool and httpx (`gatecell.wire.transport._httpx_proxies`) through a real proxy, Debian's squid, counted
in its access log (tests/proxy.py)."""

from __future__ import annotations

import asyncio
import logging
import pickle
import ssl
from urllib.parse import quote

import httpx
import pytest
from httpx._utils import URLPattern, get_environment_proxies  # httpx's own matcher, the reference
from loopback import OK, Loopback, answering
from proxy import TLSFront, free_port

from gatecell.wire.transport._httpx_proxies import ProxiedTransport
from gatecell.wire.transport.errors import ConfigError
from gatecell.wire.transport.http11 import Pool, ProxyError
from gatecell.wire.transport.proxies import ENV_PROXY, Proxies, Proxy, is_loopback, proxy_for

P = "http://proxy.corp:3128"
Q = "http://other.corp:8080"

# (environment, URL, the proxy it goes through or None, how httpx 0.28 differs if it does:
# see gatecell.wire.transport.proxies)
CASES: list[tuple[dict[str, str], str, str | None, str]] = [
    ({"HTTPS_PROXY": P}, "https://api.example.com", P, ""),
    ({"HTTPS_PROXY": P}, "http://api.example.com", None, ""),
    ({"HTTP_PROXY": P}, "http://api.example.com", P, ""),
    ({"HTTP_PROXY": P}, "https://api.example.com", None, ""),
    ({"ALL_PROXY": P}, "https://api.example.com", P, ""),
    ({"all_proxy": P}, "http://api.example.com:8000/v1", P, ""),
    ({"HTTPS_PROXY": P, "ALL_PROXY": Q}, "https://a.example.com", P, ""),
    ({"HTTPS_PROXY": P, "ALL_PROXY": Q}, "http://a.example.com", Q, ""),
    ({"https_proxy": Q, "HTTPS_PROXY": P}, "https://a.example.com", Q, ""),
    ({"https_proxy": "", "HTTPS_PROXY": P}, "https://a.example.com", None, ""),
    ({"HTTPS_PROXY": "proxy.corp:3128"}, "https://a.example.com", P, ""),
    ({"HTTP_PROXY": P, "REQUEST_METHOD": "GET"}, "http://a.example.com", None, ""),
    ({"http_proxy": P, "REQUEST_METHOD": "GET"}, "http://a.example.com", P, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": "*"}, "https://a.example.com", None, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": "a.org,*"}, "https://b.org", None, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, "https://example.com", None, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, "https://api.example.com", None, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, "https://notexample.com", P, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, "https://example.com.evil.org", P, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": ".example.com"}, "https://api.example.com", None, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": ".example.com"}, "https://example.com", P, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": "*.example.com"}, "https://api.example.com", P, ""),
    ({"HTTPS_PROXY": P, "no_proxy": " a.org , Example.COM "}, "https://API.example.com", None, ""),
    ({"HTTP_PROXY": P, "NO_PROXY": "localhost"}, "http://localhost:8000", None, ""),
    ({"HTTP_PROXY": P, "NO_PROXY": "localhost"}, "http://127.0.0.1:8000", P, ""),
    ({"HTTP_PROXY": P}, "http://127.0.0.1:8000", P, ""),
    ({"HTTP_PROXY": P, "NO_PROXY": "127.0.0.1"}, "http://127.0.0.1:8000", None, ""),
    ({"HTTP_PROXY": P, "NO_PROXY": "127.0.0.1"}, "http://127.0.0.2:8000", P, ""),
    ({"HTTP_PROXY": P, "NO_PROXY": "::1"}, "http://[::1]:8000", None, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": "example.com:8443"}, "https://example.com:8443", None, ""),
    ({"HTTPS_PROXY": P, "NO_PROXY": "example.com:8443"}, "https://example.com", P, ""),
    ({"HTTP_PROXY": P, "NO_PROXY": "127.0.0.1:8000"}, "http://127.0.0.1:8000", None, ""),
    ({"HTTP_PROXY": P, "NO_PROXY": "127.0.0.1:8000"}, "http://127.0.0.1:9000", P, ""),
    ({"ALL_PROXY": P, "NO_PROXY": "http://internal.corp"}, "http://internal.corp", None, ""),
    ({"ALL_PROXY": P, "NO_PROXY": "http://internal.corp"}, "https://internal.corp", P, ""),
    ({"ALL_PROXY": P, "NO_PROXY": "http://"}, "http://a.org", None, ""),
    ({"ALL_PROXY": P, "NO_PROXY": "http://"}, "https://a.org", P, ""),
    ({"HTTP_PROXY": P, "NO_PROXY": "10.0.0.0/8"}, "http://10.0.0.0", None, ""),
    ({"HTTP_PROXY": P, "NO_PROXY": "10.0.0.0/8"}, "http://11.0.0.1", P, ""),
    (
        {"HTTP_PROXY": P, "NO_PROXY": "10.0.0.0/8"},
        "http://10.20.30.40",
        None,
        "httpx: its address alone",
    ),
    (
        {"HTTP_PROXY": P, "NO_PROXY": "fd00::/8"},
        "http://[fd12::1]",
        None,
        "httpx: fails to start",
    ),
    (
        {"HTTPS_PROXY": P, "NO_PROXY": "example.com:443"},
        "https://example.com",
        None,
        "httpx: explicit ports",
    ),
    ({}, "https://a.example.com", None, ""),
    ({"NO_PROXY": "a.org"}, "https://b.org", None, ""),
]


def _httpx(url: str) -> str | None:
    """What httpx picks for ``url`` from this process's environment: its mounts, most specific
    first, as `httpx.Client` sorts and matches them."""
    mounts = {URLPattern(key): proxy for key, proxy in get_environment_proxies().items()}
    for pattern in sorted(mounts):
        if pattern.matches(httpx.URL(url)):
            found = mounts[pattern]
            return None if found is None else Proxy(found).url
    return None


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch):
    """Set a proxy environment, with none of the machine's own in the way."""
    import os

    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name in ("REQUEST_METHOD", ENV_PROXY):
            monkeypatch.delenv(name)

    def set_all(env: dict[str, str]) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)

    return set_all


@pytest.mark.parametrize(("env", "url", "expected", "differs"), CASES)
def test_the_environment_is_read_as_httpx_reads_it(environ, env, url, expected, differs):
    environ(env)
    found = proxy_for(url)
    assert (found.url if found else None) == expected
    if not differs:
        assert _httpx(url) == expected


def test_an_explicit_proxy_wins_and_serves_every_url(environ):
    environ({"HTTPS_PROXY": P, "NO_PROXY": "example.com", ENV_PROXY: "http://env.corp:1"})
    assert str(proxy_for("https://example.com")) == "http://env.corp:1"  # NO_PROXY too, as httpx's proxy=
    assert str(proxy_for("http://a.org", proxy=Q)) == Q
    assert str(proxy_for("https://a.org", trust_env=False)) == "http://env.corp:1"  # gatecell's own setting
    environ({ENV_PROXY: " "})
    assert str(proxy_for("https://a.org")) == P
    assert proxy_for("https://a.org", trust_env=False) is None


def test_the_rules_are_read_once_for_many_urls():
    proxies = Proxies(env={"HTTPS_PROXY": P, "NO_PROXY": ".corp"})
    assert [proxies.for_url(u) for u in ("https://a.corp", "http://a.org")] == [None, None]
    assert proxies.for_url("https://a.org") == Proxy(P)


def test_loopback_addresses():
    assert all(
        map(is_loopback, ["http://127.0.0.1:8000", "http://127.9.9.9", "http://[::1]:1", "http://localhost"])
    )
    assert not any(
        map(is_loopback, ["http://10.0.0.1", "https://api.example.com", "http://localhost.example.com"])
    )


# -- Proxy values ---------------------------------------------------------------------------


def test_credentials_are_masked_and_sent_as_basic():
    proxy = Proxy("http://us%40er:p%3Ass%20w@proxy.corp:3128")
    assert str(proxy) == "http://us%40er:****@proxy.corp:3128"
    assert repr(proxy) == "Proxy('http://us%40er:****@proxy.corp:3128')"
    assert f"{proxy}" == str(proxy) and "p:ss" not in repr([proxy]) and "p%3Ass" not in repr([proxy])
    assert proxy.authorization == "Basic dXNAZXI6cDpzcyB3"  # base64("us@er:p:ss w"), as httpx sends it
    assert Proxy(proxy.reveal()) == proxy and proxy.url == "http://proxy.corp:3128"
    assert Proxy("proxy.corp").url == "http://proxy.corp:80" and Proxy(P).authorization is None
    with pytest.raises(TypeError):
        pickle.dumps(proxy)


@pytest.mark.parametrize(
    "bad",
    [
        "ftp://user:hunter2@proxy.corp",
        "http://user:hunter2@proxy.corp:99999",
        "http://user:hunter2@:3128",
        "http://user:hunter2/x@y@proxy.corp:3128",  # a password that should have been escaped
    ],
)
def test_a_bad_proxy_is_one_line_without_its_password(environ, bad):
    with pytest.raises(ConfigError) as caught:
        Proxy(bad)
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)
    environ({"HTTPS_PROXY": bad})
    with pytest.raises(ConfigError, match="HTTPS_PROXY") as caught:
        proxy_for("https://a.org")
    assert "hunter2" not in str(caught.value)


def test_the_lean_pool_takes_http_proxies_only():
    with pytest.raises(ValueError, match=r"socks5://u:\*\*\*\*@127.0.0.1:1080") as caught:
        Pool("https://a.org", proxy="socks5://u:hunter2@127.0.0.1:1080")
    assert "hunter2" not in str(caught.value)


# -- the pool through squid -----------------------------------------------------------------


KEY = b"Bearer sk-key-0123456789"


async def _get(pool: Pool, n: int = 1) -> list[bytes]:
    bodies = []
    for _ in range(n):
        raw = pool.request_bytes(
            "POST", b"/v1/chat/completions", [(b"authorization", b"Bearer sk-key")], b"{}"
        )
        answer = await pool.send("POST", raw)
        try:
            assert answer.status == 200
            bodies.append(await answer.body(1 << 20))
        finally:
            answer.release()
    return bodies


def _through(handler, test, **pool_options) -> Loopback:
    """Run ``test(server, pool)`` with a pool to a loopback server of ``handler``'s."""

    async def main() -> Loopback:
        async with Loopback(handler) as server:
            pool = Pool(server.url, **pool_options)
            try:
                await asyncio.wait_for(test(server, pool), 60)
            finally:
                await pool.aclose()
            return server

    return asyncio.run(main())


def test_http_goes_through_in_absolute_form_on_one_kept_alive_connection(squid):
    mark = len(squid.log())

    async def test(server: Loopback, pool: Pool) -> None:
        assert await _get(pool, 3) == [b"ok"] * 3

    server = _through(answering(OK), test, proxy=squid.url)
    entries = squid.wait_for(3, since=mark)
    assert [(e.method, e.url) for e in entries] == [("POST", f"{server.url}/v1/chat/completions")] * 3
    assert len({e.client for e in entries}) == 1  # one connection to the proxy, kept alive
    assert all(b"via:" in head.lower() for head in server.requests)  # it did come through squid


@pytest.fixture
def tls(test_ca, monkeypatch):
    """``tls(server)``: an https:// gateway in front of a loopback server, trusted through
    SSL_CERT_FILE."""
    monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca))
    fronts: list[TLSFront] = []

    def front(server: Loopback) -> TLSFront:
        fronts.append(TLSFront(test_ca, ("127.0.0.1", server.port)))
        return fronts[-1]

    yield front
    for f in fronts:
        f.stop()


def _through_tls(tls, handler, test, **pool_options) -> tuple[Loopback, TLSFront]:
    async def main() -> tuple[Loopback, TLSFront]:
        async with Loopback(handler) as server:
            front = tls(server)
            pool = Pool(front.url, **pool_options)
            try:
                await asyncio.wait_for(test(server, pool), 60)
            finally:
                await pool.aclose()
            return server, front

    return asyncio.run(main())


def test_https_goes_through_a_connect_tunnel_the_proxy_cannot_read(squid, tls):
    mark = len(squid.log())

    async def test(server: Loopback, pool: Pool) -> None:
        assert await _get(pool, 3) == [b"ok"] * 3

    server, front = _through_tls(tls, answering(OK), test, proxy=squid.url)
    entries = squid.wait_for(1, since=mark)  # logged once the tunnel closed
    assert [(e.method, e.url) for e in entries] == [("CONNECT", f"127.0.0.1:{front.port}")]
    assert front.connections == 1 and len(server.requests) == 3  # three requests in one tunnel


def test_the_origin_certificate_is_checked_inside_the_tunnel(squid, test_ca, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the tests' CA is not trusted

    async def main() -> None:
        async with Loopback(answering(OK)) as server:
            front = TLSFront(test_ca, ("127.0.0.1", server.port))
            try:
                with pytest.raises(ssl.SSLCertVerificationError):
                    await _get(Pool(front.url, proxy=squid.url))
            finally:
                front.stop()

    asyncio.run(main())


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_64_concurrent_requests_through_the_proxy_reuse_its_connections(squid, tls, scheme):
    mark = len(squid.log())

    async def test(server: Loopback, pool: Pool) -> None:
        for _ in range(2):
            bodies = await asyncio.gather(*(_get(pool) for _ in range(64)))
            assert bodies == [[b"ok"]] * 64

    if scheme == "http":
        server = _through(answering(OK, delay=0.01), test, proxy=squid.url, idle=64)
        entries = squid.wait_for(128, since=mark)
        assert len(entries) == 128 and {e.method for e in entries} == {"POST"}
    else:
        server, front = _through_tls(tls, answering(OK, delay=0.01), test, proxy=squid.url, idle=64)
        entries = squid.wait_for(64, since=mark)
        assert len(entries) == 64 and {e.method for e in entries} == {"CONNECT"}
        assert front.connections == 64
    assert len(server.requests) == 128
    assert len({e.client for e in entries}) == 64  # the second 64 went on the first 64's connections


# -- refusals -------------------------------------------------------------------------------


def _refusal(pool_url: str, proxy: str) -> ProxyError:
    async def main() -> ProxyError:
        pool = Pool(pool_url, proxy=proxy, connect_timeout=10)
        try:
            with pytest.raises(ProxyError) as caught:
                await _get(pool)
            return caught.value
        finally:
            await pool.aclose()

    return asyncio.run(main())


def _one_line(error: Exception, *secrets: str) -> str:
    text = str(error)
    assert "\n" not in text and all(s not in text and s not in repr(error) for s in secrets)
    return text


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_credentials_go_to_a_proxy_that_asks_for_them(squid_auth, tls, scheme):
    mark = len(squid_auth.log())
    password = squid_auth.users["alice"]
    proxy = f"http://alice:{quote(password, safe='')}@127.0.0.1:{squid_auth.port}"

    async def test(server: Loopback, pool: Pool) -> None:
        assert await _get(pool, 2) == [b"ok"] * 2

    if scheme == "http":
        _through(answering(OK), test, proxy=proxy)
        entries = squid_auth.wait_for(2, since=mark)
    else:
        _through_tls(tls, answering(OK), test, proxy=proxy)
        entries = squid_auth.wait_for(1, since=mark)
    assert entries and {(e.status, e.user) for e in entries} == {(200, "alice")}


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_proxy_that_wants_credentials_is_one_line_naming_it(squid_auth, scheme):
    port = free_port()  # the origin is never reached
    url = f"{scheme}://127.0.0.1:{port}"
    what = "the request" if scheme == "http" else f"CONNECT 127.0.0.1:{port}"
    proxy = f"127.0.0.1:{squid_auth.port}"
    assert _one_line(_refusal(url, f"http://{proxy}")) == (
        f"proxy http://{proxy} refused {what}: 407 Proxy Authentication Required"
    )
    assert _one_line(_refusal(url, f"http://alice:hunter2@{proxy}"), "hunter2") == (
        f"proxy http://alice:****@{proxy} refused {what}: 407 Proxy Authentication Required"
    )


def test_a_proxy_that_refuses_a_tunnel(squid):
    closed = free_port()
    assert _one_line(_refusal(f"https://127.0.0.2:{closed}", squid.url)).endswith(  # not allowed
        f"refused CONNECT 127.0.0.2:{closed}: 403 Forbidden"
    )
    assert _one_line(_refusal(f"https://127.0.0.1:{closed}", squid.url)).endswith(  # nothing there
        f"refused CONNECT 127.0.0.1:{closed}: 503 Service Unavailable"
    )


def test_an_http_origin_the_proxy_cannot_reach_is_the_proxy_answer(squid):
    """Through a proxy, an http:// origin's answer may be the proxy's (503 here) or the
    origin's: nothing tells them apart but a 407, so it is returned, as httpx returns it."""

    async def main() -> int:
        pool = Pool(f"http://127.0.0.1:{free_port()}", proxy=squid.url)
        answer = await pool.send("GET", pool.request_bytes("GET", b"/v1/models", [], b""))
        answer.release()
        await pool.aclose()
        return answer.status

    assert asyncio.run(main()) == 503


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_an_unreachable_proxy_is_one_line_naming_it(scheme, caplog):
    dead = free_port()
    with caplog.at_level(logging.DEBUG):
        error = _refusal(f"{scheme}://127.0.0.1:9", f"http://bob:hunter2@127.0.0.1:{dead}")
    text = _one_line(error, "hunter2")
    assert text.startswith(f"proxy http://bob:****@127.0.0.1:{dead} unreachable: ")
    assert "hunter2" not in caplog.text


# -- httpx through the same settings ---------------------------------------------------------


def _httpx_server():
    """A loopback server in a thread of its own (httpx's sync client blocks the caller)."""
    from gatecell.local.embedded import run_in_thread

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    return run_in_thread(app)


def test_httpx_goes_where_the_settings_say(squid, test_ca, monkeypatch):
    url, stop = _httpx_server()
    port = int(url.rsplit(":", 1)[1])
    monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca))
    front = TLSFront(test_ca, ("127.0.0.1", port))
    mark = len(squid.log())
    try:
        env = {"HTTP_PROXY": squid.url, "HTTPS_PROXY": squid.url, "NO_PROXY": "10.0.0.0/8"}
        transport = ProxiedTransport(Proxies(env=env), lambda proxy: httpx.HTTPTransport(proxy=proxy))
        with httpx.Client(transport=transport) as client:
            assert [client.get(f"{url}/a").text, client.get(f"{front.url}/b").text] == ["ok", "ok"]
        entries = squid.wait_for(2, since=mark)
        assert sorted((e.method, e.url) for e in entries) == [
            ("CONNECT", f"127.0.0.1:{front.port}"),
            ("GET", f"{url}/a"),
        ]
        mark = len(squid.log())
        exempt = Proxies(env={**env, "NO_PROXY": "127.0.0.0/8"})  # a range httpx's own rules miss

        async def main() -> str:
            transport = ProxiedTransport(exempt, lambda proxy: httpx.AsyncHTTPTransport(proxy=proxy))
            async with httpx.AsyncClient(transport=transport) as client:
                return (await client.get(f"{front.url}/c")).text

        assert asyncio.run(main()) == "ok"
        assert squid.wait_for(1, since=mark, timeout=1) == []
    finally:
        front.stop()
        stop()


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_httpx_refusals_name_the_proxy_in_one_line(squid_auth, scheme):
    port = free_port()
    proxy = f"http://alice:hunter2@127.0.0.1:{squid_auth.port}"
    transport = ProxiedTransport(Proxies(proxy), lambda p: httpx.HTTPTransport(proxy=p))
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.ProxyError) as caught:
        client.get(f"{scheme}://127.0.0.1:{port}/v1/models")
    what = "the request" if scheme == "http" else f"CONNECT 127.0.0.1:{port}"
    named = f"proxy http://alice:****@127.0.0.1:{squid_auth.port}"
    assert _one_line(caught.value, "hunter2") == f"{named} refused {what}: 407 Proxy Authentication Required"
    dead = free_port()
    transport = ProxiedTransport(
        Proxies(f"http://bob:hunter2@127.0.0.1:{dead}"), lambda p: httpx.HTTPTransport(proxy=p)
    )
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.ConnectError) as failed:
        client.get(f"{scheme}://127.0.0.1:{port}/v1/models")
    assert _one_line(failed.value, "hunter2").endswith(f"(through proxy http://bob:****@127.0.0.1:{dead})")
