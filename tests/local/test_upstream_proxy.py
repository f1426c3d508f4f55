"""The local gateway's forwarder reaches its upstream through the proxy the environment names:
squid on loopback (tests/proxy.py), counted in its access log."""

from __future__ import annotations

import logging
from urllib.parse import quote

import httpx
import pytest
from neutral import UPSTREAM_KEY, Neutral
from proxy import TLSFront

from gatecell.local.embedded import run_in_thread

CHAT = {"model": "remote-chat", "messages": [{"role": "user", "content": "ping"}]}


@pytest.fixture(scope="module")
def upstream():
    """A plain http:// upstream gateway on loopback: one remote chat model."""
    neutral = Neutral()
    neutral.gate.set()
    url, stop = run_in_thread(neutral.app)
    yield url
    stop()


@pytest.fixture
def front(make_gateway, monkeypatch):
    """``front(upstream_url, **proxy_environment)``: a local gateway forwarding to that upstream,
    started under that environment; the test's own client never goes through a proxy."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "GATECELL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("TEST_UPSTREAM_KEY", UPSTREAM_KEY)

    def make(upstream_url: str, **env: str):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        gateway = make_gateway(upstream=upstream_url, upstream_key_env="TEST_UPSTREAM_KEY")
        client = httpx.Client(
            base_url=f"{gateway.base_url}/v1",
            headers={"authorization": f"Bearer {gateway.api_key.reveal()}"},
            trust_env=False,
            timeout=30,
        )
        return gateway, client

    return make


def test_the_upstream_is_reached_through_the_proxy(front, upstream, squid):
    mark = len(squid.log())
    gateway, client = front(upstream, HTTP_PROXY=squid.url)
    with client:
        reply = client.post("/chat/completions", json=CHAT)
        listed = [m["id"] for m in client.get("/models").json()["data"]]
    assert reply.json()["choices"][0]["message"]["content"] == "remote says ping"
    assert "remote-chat" in listed and "local-chat" in listed
    entries = squid.wait_for(2, since=mark)
    assert sorted((e.method, e.url) for e in entries) == [
        ("GET", f"{upstream}/v1/models"),
        ("POST", f"{upstream}/v1/chat/completions"),
    ]  # and never the front gateway itself


def test_no_proxy_exempts_the_upstream(front, upstream, squid):
    mark = len(squid.log())
    _, client = front(upstream, HTTP_PROXY=squid.url, NO_PROXY="localhost,127.0.0.1")
    with client:
        assert client.post("/chat/completions", json=CHAT).status_code == 200
    assert squid.wait_for(1, since=mark, timeout=1) == []


def test_an_https_upstream_goes_through_a_tunnel(front, upstream, squid, test_ca, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(test_ca.ca))
    host, port = upstream.removeprefix("http://").split(":")
    tls = TLSFront(test_ca, (host, int(port)))
    mark = len(squid.log())
    try:
        gateway, client = front(tls.url, HTTPS_PROXY=squid.url)
        with client:
            reply = client.post("/chat/completions", json=CHAT)
        assert reply.json()["choices"][0]["message"]["content"] == "remote says ping"
        gateway.stop()  # closes the forwarder's connections: squid logs the tunnel as it ends
        entries = squid.wait_for(1, since=mark)
        assert [(e.method, e.url) for e in entries] == [("CONNECT", f"127.0.0.1:{tls.port}")]
    finally:
        tls.stop()


def test_a_proxy_that_refuses_is_a_502_and_one_log_line(front, upstream, squid_auth, caplog):
    proxy = f"http://alice:hunter2@127.0.0.1:{squid_auth.port}"
    _, client = front(upstream, HTTP_PROXY=proxy)
    with client, caplog.at_level(logging.WARNING, logger="gatecell.local"):
        reply = client.post("/chat/completions", json=CHAT)
    assert reply.status_code == 502
    assert str(squid_auth.port) not in reply.text  # the caller is not told where the proxy is
    assert f"proxy http://alice:****@127.0.0.1:{squid_auth.port} refused the request: 407" in caplog.text
    assert "hunter2" not in caplog.text and "hunter2" not in reply.text


def test_credentials_from_the_environment_reach_the_proxy(front, upstream, squid_auth):
    mark = len(squid_auth.log())
    password = quote(squid_auth.users["alice"], safe="")
    _, client = front(upstream, HTTP_PROXY=f"http://alice:{password}@127.0.0.1:{squid_auth.port}")
    with client:
        assert client.post("/chat/completions", json=CHAT).status_code == 200
    assert [(e.status, e.user) for e in squid_auth.wait_for(1, since=mark)] == [(200, "alice")]
