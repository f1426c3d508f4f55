"""A hostile upstream gateway on loopback, for the local gateway's forwarder.

A raw asyncio HTTP/1.1 server in a background thread, so every byte is under control. It
records every request it receives (so a test can prove what never arrived), and answers by
scenario: the ``model`` of a POST body, or the job id of a poll path. Its answers echo its own
key (in any case, in bodies and headers, split across reads), send hop-by-hop headers and
cookies, break off, ignore ``Accept-Encoding``, or run to hundreds of megabytes generated
lazily, one block at a time, so the test process never holds them.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

KEY = "sk-upstream-Secr3tKey-0123456789abcdefXYZ"
OTHER_KEY = "sk-proj-SomeoneElse-9876543210zyxw"  # not ours, but shaped like a key
FILLER = b'{"filler": "lorem ipsum dolor sit amet, 0123456789"}\n'  # 55 bytes, no key shape


@dataclass
class Seen:
    """One request as it reached the upstream."""

    method: str
    target: str
    headers: list[tuple[str, str]]  # lower-case names, in order
    body: bytes

    def header(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n == name]


Writer = asyncio.StreamWriter
Scenario = Callable[[Seen, Writer], Awaitable[bool]]  # True: keep the connection alive


def head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} X", *(f"{n}: {v}" for n, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunked(pieces: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p) + b"0\r\n\r\n"


def split_everywhere(key: str, prefix: str = "") -> list[bytes]:
    """Body pieces holding `key` once for every place it can be cut in two, cut there."""
    pieces, carry = [], b""
    for i in range(1, len(key)):
        pieces.append(carry + f"{prefix}{i}: {key[:i]}".encode())
        carry = f"{key[i:]} end\n".encode()
    return [*pieces, carry]


def split_pieces() -> list[bytes]:
    """Our key cut at every offset, in lower and upper case; an unknown key; a key inside a run
    of key characters longer than any look-back window, cut twice; one cut at the very end."""
    pieces = split_everywhere(KEY, "lower") + split_everywhere(KEY.upper(), "upper")
    pieces += split_everywhere(OTHER_KEY.upper(), "other")
    run = "a" * 300 + KEY + "b" * 300
    pieces += [run[:150].encode(), run[150:320].encode(), run[320:].encode()]
    return [*pieces, b" last: " + KEY[:20].encode(), KEY[20:].encode()]


class HostileUpstream:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.abandoned: dict[str, int] = {}  # scenario -> bytes sent when the gateway hung up
        self.hung_up = threading.Event()
        self.scenarios: dict[str, Scenario] = {
            "ok": self.ok,
            "echo": self.echo,
            "split": self.split,
            "split-sse": self.split_sse,
            "split-length": self.split_length,
            "gzip": self.gzip,
            "models": self.models,
        }
        ready = threading.Event()
        self.loop = asyncio.new_event_loop()

        async def main() -> None:
            self._stopped = asyncio.Event()
            server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await self._stopped.wait()
            server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),), daemon=True)
        self.thread.start()
        ready.wait(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def targets(self) -> list[str]:
        return [f"{s.method} {s.target}" for s in self.seen]

    async def handle(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        try:
            while True:
                raw = await reader.readuntil(b"\r\n\r\n")
                lines = raw.decode("latin-1").split("\r\n")[:-2]
                method, target, _ = lines[0].split(" ", 2)
                headers = [
                    (n.strip().lower(), v.strip()) for n, _, v in (x.partition(":") for x in lines[1:])
                ]
                length = int(next((v for n, v in headers if n == "content-length"), "0"))
                seen = Seen(method, target, headers, await reader.readexactly(length))
                self.seen.append(seen)
                if not await self.scenarios[self.scenario(seen)](seen, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    def scenario(seen: Seen) -> str:
        native = re.fullmatch(r"(?:/v1beta|/v1)?/models/([^/:]+):\w+(?:\?.*)?", seen.target)
        if native:
            return native[1]
        if seen.method == "POST":
            return json.loads(seen.body)["model"]
        if seen.target.split("?")[0] == "/v1/models":
            return "models"
        job = re.fullmatch(
            r"/(?:v1/)?videos/([^/?]+).*|/imgjob/task/([^/]+)/fetch|/musicjob/fetch/([^/?]+)", seen.target
        )
        return next(g for g in job.groups() if g) if job else "ok"

    # -- scenarios -----------------------------------------------------------------------

    async def ok(self, seen: Seen, w: Writer) -> bool:
        body = b'{"ok":true}'
        w.write(head(200, [("content-type", "application/json"), ("content-length", str(len(body)))]) + body)
        await w.drain()
        return True

    async def echo(self, seen: Seen, w: Writer) -> bool:
        """A 401 that echoes our key every way it can, with hop-by-hop headers and cookies."""
        message = f"key {KEY} refused; as sent: {KEY.upper()} / {KEY.lower()}; also tried {OTHER_KEY.upper()}"
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
        headers = [
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
            ("x-echo-key", f"Bearer {KEY}"),
            ("x-echo-upper", KEY.upper()),
            ("www-authenticate", f'Bearer error="invalid_token", key="{KEY}"'),
            (KEY.lower(), "a header named like the key"),
            ("connection", "x-hop-private, keep-alive"),
            ("x-hop-private", "hop-only"),
            ("keep-alive", "timeout=5"),
            ("proxy-authenticate", "Basic realm=upstream"),
            ("upgrade", "h2c"),
            ("trailer", "x-checksum"),
            ("set-cookie", "upstream_session=abc123; Path=/"),
            ("set-cookie2", "legacy=1"),
            ("x-request-id", "req-upstream-1"),  # an ordinary header: passed on
        ]
        w.write(head(401, headers) + body)
        await w.drain()
        return True

    async def split(self, seen: Seen, w: Writer) -> bool:
        """Chunked, one chunk a read: see `split_pieces`."""
        w.write(
            head(200, [("content-type", "text/plain"), ("transfer-encoding", "chunked")])
            + chunked(split_pieces())
        )
        await w.drain()
        return True

    async def split_sse(self, seen: Seen, w: Writer) -> bool:
        event = json.dumps(
            {"id": "r1", "choices": [{"index": 0, "delta": {"content": f"your key is {KEY}"}}]}
        )
        data = f"data: {event}\n\n".encode()
        at = data.index(KEY.encode()) + 7
        pieces = [data[:at], data[at:], b"data: [DONE]\n\n"]
        w.write(head(200, [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]))
        for piece in pieces:  # one write each, with the reader's turn in between
            w.write(chunked([piece])[:-5])
            await w.drain()
            await asyncio.sleep(0.05)
        w.write(b"0\r\n\r\n")
        await w.drain()
        return True

    async def split_length(self, seen: Seen, w: Writer) -> bool:
        body = f'{{"error": {{"message": "bad key {KEY.upper()} (sent as {KEY})"}}}}'.encode()
        at = body.index(KEY.upper().encode()) + 10
        w.write(head(400, [("content-type", "application/json"), ("content-length", str(len(body)))]))
        w.write(body[:at])
        await w.drain()
        await asyncio.sleep(0.2)  # most likely a read of its own at the gateway
        w.write(body[at:])
        await w.drain()
        return True

    async def gzip(self, seen: Seen, w: Writer) -> bool:
        """Compressed although asked for identity, so a key inside cannot be seen on the way."""
        body = gzip.compress(json.dumps({"error": {"message": f"bad key {KEY}"}}).encode())
        headers = [("content-type", "application/json"), ("content-encoding", "gzip")]
        w.write(head(401, [*headers, ("content-length", str(len(body)))]) + body)
        await w.drain()
        return True

    async def models(self, seen: Seen, w: Writer) -> bool:
        entries = [{"id": "remote-chat", "object": "model", "created": 1, "owned_by": f"team of {KEY}"}]
        body = json.dumps({"object": "list", "data": entries}).encode()
        w.write(head(200, [("content-type", "application/json"), ("content-length", str(len(body)))]) + body)
        await w.drain()
        return True

    def add_huge(
        self, name: str, size: int, framing: str, block: int = 1 << 20, cut_at: int | None = None
    ) -> None:
        """Scenario `name`: `size` bytes of FILLER, framed by length or chunked, written one
        `block` at a time as the gateway takes them; `cut_at` closes the connection there."""

        async def huge(seen: Seen, w: Writer) -> bool:
            framing_header = (
                ("content-length", str(size)) if framing == "length" else ("transfer-encoding", "chunked")
            )
            w.write(head(200, [("content-type", "application/octet-stream"), framing_header]))
            unit = FILLER * (block // len(FILLER) + 1)
            sent = 0
            while sent < size:
                if cut_at is not None and sent >= cut_at:
                    return False  # close without finishing
                n = min(block, size - sent)
                data = unit[:n]
                try:
                    w.write(data if framing == "length" else b"%x\r\n%s\r\n" % (n, data))
                    await w.drain()
                except ConnectionError:
                    self.abandoned[name] = sent
                    self.hung_up.set()
                    return False
                sent += n
            if framing != "length":
                w.write(b"0\r\n\r\n")
            await w.drain()
            return True

        self.scenarios[name] = huge

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self._stopped.set)
        self.thread.join(5)
