"""Issue 33.10: a hostile proxy's reason phrase (60 KB) is cut like every other echoed value,
in the error line and in the log, on every path: the client (httpx), the batch (the lean
HTTP/1.1 pool), plain http (a 407 to the request) and https (a refused CONNECT)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from gatecell import Gateway
from gatecell.store import Store, settings
from gatecell.wire.transport.errors import APIConnectionError

REASON = "Proxy Authentication Required " + "x" * 60_108  # 60,138 characters, as the probe's
HI = [{"role": "user", "content": "hi"}]


class HostileProxy:
    """Answers every request (a CONNECT or a forwarded one) with a 407 whose reason phrase is
    ``reason`` (60,138 characters), in a head under the 64 KiB a head may have."""

    def __init__(self, reason: str = REASON) -> None:
        self.reason = reason
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.heads: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            self.heads.append(head.split(b"\r\n", 1)[0])
            conn.sendall(
                b"HTTP/1.1 407 "
                + self.reason.encode()
                + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def proxy() -> Iterator[HostileProxy]:
    server = HostileProxy()
    yield server
    server.close()


def _short(line: str) -> None:
    assert "\n" not in line
    assert len(line) < 400, f"{len(line):,} characters: {line[:120]}…"
    assert "407 Proxy Authentication Required" in line
    assert "x" * 100 not in line  # where the reason is quoted, it is cut: "… (60,138 characters)"


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_60_kb_reason_phrase_is_cut_in_the_error_line_and_the_log(proxy, home, scheme):
    base = f"{scheme}://127.0.0.1:9/v1"  # never reached: the proxy answers first
    with Gateway(base, "sk-test-0123456789abcdef", proxy=proxy.url, max_retries=0) as gw:
        with pytest.raises(APIConnectionError) as caught:
            gw.chat("m", HI)
        batch = gw.map("say {item}", ["a"], model="m", progress=False, cache=False)
    assert proxy.heads, "the request went around the proxy"
    _short(str(caught.value))
    _short(batch.errors[0])
    assert "60,138 characters)" in batch.errors[0]  # the lean pool quotes the proxy's own words
    logged = [row["error"] for row in Store(settings().path, log=False).logs(n=0)]
    assert len(logged) == 2
    for line in logged:
        _short(line)


def test_a_key_across_the_cut_is_masked_whole(home):
    key = "sk-test-0123456789abcdef"
    server = HostileProxy("x" * 70 + key + "y" * 1000)  # the key straddles the 80th character
    try:
        with Gateway("http://127.0.0.1:9/v1", key, proxy=server.url, max_retries=0) as gw:
            batch = gw.map("say {item}", ["a"], model="m", progress=False, cache=False)
    finally:
        server.close()
    line = batch.errors[0]
    assert "sk-test-01" not in line and "x" * 70 in line and "characters)" in line
