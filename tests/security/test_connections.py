"""Issue 9, item 11: connections that never finish a request do not pile up.

A request head must be complete within ``head_timeout`` (however slowly it trickles in), a
body may not stall and a kept-alive connection may not idle past ``idle_timeout``, and
beyond ``max_connections`` the connection that has kept the server waiting longest makes room
for a new one. Each test holds sockets open the way a slowloris client does and watches the
server close them; a deadline only catches a server that never does.
"""

from __future__ import annotations

import resource
import select
import socket
import time
from urllib.parse import urlsplit

import httpx
from probes import serving

KEY = "sk-conn-" + "c" * 24


def _connect(base_url: str) -> socket.socket:
    parts = urlsplit(base_url)
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def _closed_by_server(sock: socket.socket, within: float = 10.0) -> bool:
    """True once the server closes its end (reads hit EOF or a reset) before `within` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def _still_open(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return True
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except ConnectionResetError:
        return False


def test_a_request_head_that_never_ends_is_cut_off(make_gateway):
    gw = make_gateway(api_keys=[KEY], head_timeout=0.5)
    sock = _connect(gw.base_url)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    assert _closed_by_server(sock)
    silent = _connect(gw.base_url)  # a connection that says nothing at all
    assert _closed_by_server(silent)


def test_a_trickled_head_is_cut_off_while_it_still_trickles(make_gateway):
    gw = make_gateway(api_keys=[KEY], head_timeout=0.5)
    sock = _connect(gw.base_url)
    sock.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")
    for _ in range(400):  # one byte every 50 ms: 20 s if nobody stops it
        if not _still_open(sock):
            break
        try:
            sock.sendall(b"a")
        except (BrokenPipeError, ConnectionResetError):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the server let the head trickle on for 20 s")


def test_a_stalled_body_and_an_idle_connection_are_closed(make_gateway, caplog):
    gw = make_gateway(api_keys=[KEY], idle_timeout=0.5, head_timeout=60)
    stalled = _connect(gw.base_url)
    stalled.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + KEY.encode()
        + b'\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model": '
    )
    with caplog.at_level("WARNING"):
        assert _closed_by_server(stalled)
        time.sleep(0.2)  # let the cut-off request finish, to see what it logs
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text
    idle = _connect(gw.base_url)
    idle.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    idle.settimeout(10)
    assert idle.recv(65536).startswith(b"HTTP/1.1 200")
    assert _closed_by_server(idle)  # kept alive, then idle for too long


def test_idle_connections_make_room_for_real_clients(make_gateway):
    gw = make_gateway(api_keys=[KEY], max_connections=16, head_timeout=60, idle_timeout=60)
    idle = []
    for _ in range(40):
        sock = _connect(gw.base_url)
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        idle.append(sock)
    with httpx.Client(base_url=gw.base_url, timeout=10) as client:
        assert client.get("/health").status_code == 200
        models = client.get("/v1/models", headers={"authorization": f"Bearer {KEY}"})
        assert models.status_code == 200
    closed = sum(1 for sock in idle if _closed_by_server(sock, within=0.1))
    assert closed >= 40 - 16, f"only {closed} of 40 idle connections were closed"


def test_gatecell_serve_outlasts_more_idle_sockets_than_it_has_file_descriptors():
    """`gatecell serve` limited to 256 file descriptors, 400 silent connections, then a real client."""

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    env = {"GATECELL_LOCAL_KEYS": KEY, "GATECELL_LOCAL_HEAD_TIMEOUT": "120"}
    idle: list[socket.socket] = []
    with serving(env=env, preexec_fn=few_descriptors) as (server, base):
        try:
            for _ in range(400):
                idle.append(_connect(base))
                idle[-1].sendall(b"GET /health HTTP/1.1\r\n")
            health = httpx.get(f"{base}/health", timeout=15)
            models = httpx.get(f"{base}/v1/models", headers={"authorization": f"Bearer {KEY}"}, timeout=15)
            assert health.status_code == models.status_code == 200
            assert server.poll() is None
        finally:
            for sock in idle:
                sock.close()
