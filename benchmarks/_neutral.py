"""Neutral loopback servers for the benchmarks, each run in a process of its own.

``neutral``: a chat-completions server written as a raw asyncio protocol. Every answer is
built once and cached, so the server costs next to nothing per request and the client or
gateway in front of it is what gets measured. A streaming answer (SPEC 6) holds
``max_tokens`` content chunks (default ``--chunks``), one HTTP chunk per SSE event as real
gateways flush them, written to the socket in one go: it leaves as fast as the socket takes it.

``/v1/embeddings`` answers one vector per input (the same ``DIMENSIONS`` numbers each, base64
when asked, else floats), each answer of a given size and format built once.

``hello``: the smallest uvicorn app (a bare ASGI callable), the peer of the idle-memory benchmark.

Both print ``READY <port>`` on stdout once they listen.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys

_STREAM = re.compile(rb'"stream"\s*:\s*true')
_MAX_TOKENS = re.compile(rb'"max_tokens"\s*:\s*(\d+)')
_WORDS = ("Hello", " there", ",", " this", " is", " a", " neutral", " loopback", " stream", ".")
_MODEL = "bench-model"


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": _MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def stream_body(n: int) -> bytes:
    """The chunked-encoded SSE body of an ``n``-fragment chat completion stream."""
    events = [_chunk({"role": "assistant", "content": ""})]
    events += [_chunk({"content": _WORDS[i % len(_WORDS)]}) for i in range(n)]
    events.append(_chunk({}, "stop"))
    lines = [b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n" for e in events]
    lines.append(b"data: [DONE]\n\n")
    return b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in lines) + b"0\r\n\r\n"


REPLY = "Hello from the neutral server."


def completion(text: str = REPLY) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1700000000,
            "model": _MODEL,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
        }
    ).encode()


def reply_text(size: int) -> str:
    """A reply of ``size`` characters: the neutral words, repeated."""
    return ("".join(_WORDS) * (size // len("".join(_WORDS)) + 1))[:size]


COMPLETION = completion()

MODELS = json.dumps(
    {"object": "list", "data": [{"id": _MODEL, "object": "model", "created": 0, "owned_by": "bench"}]}
).encode()


def _plain(status: bytes, body: bytes) -> bytes:
    return (
        b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"x-request-id: req-bench\r\n\r\n%s" % (status, len(body), body)
    )


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\nx-request-id: req-bench\r\n\r\n"
)


DIMENSIONS = 384  # multilingual-e5-small's
_UNIT = [1 / DIMENSIONS**0.5] * DIMENSIONS
_EMBEDDINGS: dict[tuple[int, bool], bytes] = {}


def embeddings(body: bytes) -> bytes:
    """The answer to an embeddings request: as many vectors as inputs, in its format."""
    import base64
    import struct

    request = json.loads(body)
    count = len(request["input"]) if isinstance(request["input"], list) else 1
    packed = request.get("encoding_format") == "base64"
    key = (count, packed)
    if key not in _EMBEDDINGS:
        vector = base64.b64encode(struct.pack(f"<{DIMENSIONS}f", *_UNIT)).decode() if packed else _UNIT
        data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(count)]
        usage = {"prompt_tokens": 8 * count, "total_tokens": 8 * count}
        answer = {"object": "list", "data": data, "model": _MODEL, "usage": usage}
        _EMBEDDINGS[key] = json.dumps(answer, separators=(",", ":")).encode()
    return _EMBEDDINGS[key]


class Neutral(asyncio.Protocol):
    """HTTP/1.1 with keep-alive; bodies by content-length or chunked; answers from a cache."""

    default_chunks = 50_000
    streams: dict[int, bytes] = {}
    completion = COMPLETION

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (request := self._take_request()) is not None:
            head, body = request
            self.transport.write(self._answer(head, body))
            if b"\r\nconnection: close" in head.lower():
                self.transport.close()
                return

    def _take_request(self) -> tuple[bytes, bytes] | None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = bytes(self.buf[:end])
        lower = head.lower()
        start = end + 4
        if b"transfer-encoding: chunked" in lower:
            body, pos = bytearray(), start
            while True:
                eol = self.buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                size = int(bytes(self.buf[pos:eol]).split(b";")[0], 16)
                if len(self.buf) < eol + 2 + size + 2:
                    return None
                if size == 0:
                    pos = eol + 4
                    break
                body += self.buf[eol + 2 : eol + 2 + size]
                pos = eol + 2 + size + 2
            del self.buf[:pos]
            return head, bytes(body)
        match = re.search(rb"\r\ncontent-length:\s*(\d+)", lower)
        length = int(match.group(1)) if match else 0
        if len(self.buf) < start + length:
            return None
        body = bytes(self.buf[start : start + length])
        del self.buf[: start + length]
        return head, body

    def _answer(self, head: bytes, body: bytes) -> bytes:
        path = head.split(b" ", 2)[1].split(b"?")[0]
        if path.endswith(b"/chat/completions"):
            if not _STREAM.search(body):
                return _plain(b"200 OK", self.completion)
            match = _MAX_TOKENS.search(body)
            n = int(match.group(1)) if match else self.default_chunks
            if n not in self.streams:
                self.streams[n] = _STREAM_HEAD + stream_body(n)
            return self.streams[n]
        if path.endswith(b"/models"):
            return _plain(b"200 OK", MODELS)
        if path.endswith(b"/embeddings"):
            return _plain(b"200 OK", embeddings(body))
        return _plain(b"404 Not Found", b'{"error":{"message":"not found","type":"not_found"}}')


# The reply of ``--reply-json``: a typed answer (bench_batch.py's ``Review``).
JSON_REPLY = json.dumps({"sentiment": "positive", "product": "Hello kettle", "stars": 4})


async def _serve_neutral(host: str, chunks: int, reply: int | None, reply_json: bool = False) -> None:
    Neutral.default_chunks = chunks
    if reply is not None:
        Neutral.completion = completion(reply_text(reply))
    if reply_json:
        Neutral.completion = completion(JSON_REPLY)
    Neutral.streams[chunks] = _STREAM_HEAD + stream_body(chunks)
    server = await asyncio.get_running_loop().create_server(Neutral, host, 0, backlog=2048)
    print("READY", server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


async def hello_app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


def _serve_hello(host: str) -> None:
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind((host, 0))
    sock.listen(2048)
    print("READY", sock.getsockname()[1], flush=True)
    uvicorn.Server(uvicorn.Config(hello_app, log_level="warning", lifespan="off")).run(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=["neutral", "hello"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--reply", type=int, help="characters of the (non-streamed) reply's text")
    parser.add_argument("--reply-json", action="store_true", help="the reply's text is a JSON object")
    args = parser.parse_args()
    if args.kind == "neutral":
        asyncio.run(_serve_neutral(args.host, args.chunks, args.reply, args.reply_json))
    else:
        _serve_hello(args.host)


if __name__ == "__main__":
    sys.exit(main())
