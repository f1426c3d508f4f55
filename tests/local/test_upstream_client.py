"""The forwarding client's HTTP/1.1 edges, against a raw socket server that misbehaves on purpose."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest


class RawServer:
    """Answers each request with the next canned bytes; `close_after` closes the connection after
    answering."""

    def __init__(self, answers: list[bytes], close_after: bool) -> None:
        self.answers = answers
        self.close_after = close_after
        self.requests: list[bytes] = []
        self.connections = 0
        ready = threading.Event()
        self.loop = asyncio.new_event_loop()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                self.requests.append(head + await reader.readexactly(length))
                writer.write(self.answers[min(len(self.requests), len(self.answers)) - 1])
                await writer.drain()
                if self.close_after:
                    break
            writer.close()

        async def main() -> None:
            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await asyncio.Event().wait()

        threading.Thread(target=self.loop.run_until_complete, args=(main(),), daemon=True).start()
        ready.wait(5)


OK = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}'
CHAT = {"model": "remote-x", "messages": [{"role": "user", "content": "x"}]}


def front(make_gateway, raw: RawServer):
    gw = make_gateway(upstream=f"http://127.0.0.1:{raw.port}")
    return gw, {"authorization": f"Bearer {gw.api_key.reveal()}"}


def test_a_pooled_connection_the_upstream_closed_is_retried(make_gateway):
    raw = RawServer([OK], close_after=True)  # closes without saying so
    gw, headers = front(make_gateway, raw)
    for _ in range(3):
        r = httpx.post(f"{gw.base_url}/v1/chat/completions", json=CHAT, headers=headers)
        assert r.status_code == 200 and r.json() == {"ok": True}
    assert raw.connections == 3 and len(raw.requests) == 3


def test_kept_alive_connections_are_reused(make_gateway):
    raw = RawServer([OK], close_after=False)
    gw, headers = front(make_gateway, raw)
    with httpx.Client(headers=headers) as client:
        for _ in range(5):
            assert client.post(f"{gw.base_url}/v1/chat/completions", json=CHAT).status_code == 200
    assert raw.connections == 1
    sent = raw.requests[0]
    assert b"authorization" not in sent.lower()  # no upstream key configured: the caller's is not passed on
    assert sent.endswith(b'"content":"x"}]}')  # the body as it arrived


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 100 Continue\r\n\r\n" + OK,
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        b'4\r\n{"ok\r\n7\r\n":true}\r\n0\r\n\r\n',
        b'HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{"ok":true}',
    ],
    ids=["interim-1xx", "chunked", "until-close"],
)
def test_body_framings(make_gateway, answer):
    raw = RawServer([answer], close_after=True)
    gw, headers = front(make_gateway, raw)
    r = httpx.post(f"{gw.base_url}/v1/chat/completions", json=CHAT, headers=headers)
    assert r.status_code == 200 and r.json() == {"ok": True}


def test_garbage_from_upstream_is_502(make_gateway):
    raw = RawServer([b"NOT HTTP AT ALL\r\n\r\n"], close_after=True)
    gw, headers = front(make_gateway, raw)
    r = httpx.post(f"{gw.base_url}/v1/chat/completions", json=CHAT, headers=headers)
    assert r.status_code == 502 and r.json()["error"]["message"].startswith("upstream gateway")


def test_head_answers_carry_no_body(make_gateway):
    raw = RawServer(
        [b"HTTP/1.1 200 OK\r\ncontent-type: video/mp4\r\ncontent-length: 11\r\n\r\n", OK],
        close_after=False,
    )
    gw, headers = front(make_gateway, raw)
    with httpx.Client(headers=headers, timeout=5) as client:
        r = client.head(f"{gw.base_url}/v1/videos/video_remote/content")
        assert r.status_code == 200 and r.headers["content-length"] == "11" and r.content == b""
        # the bodiless answer was read whole: the next request rides the same upstream connection
        assert client.get(f"{gw.base_url}/v1/videos/video_remote").json() == {"ok": True}
    assert raw.connections == 1 and raw.requests[0].startswith(b"HEAD /v1/videos/video_remote/content ")
