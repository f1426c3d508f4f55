"""A lean HTTP/1.1 client on asyncio streams: a pool of kept-alive connections to one origin.

Two hot paths use it: the local gateway's forwarder, which relays each answer piece by piece
as it arrives, and the batch engine, which reads each answer whole under a size cap. A
general-purpose client (httpx) costs a millisecond or more of CPU per request on a small
machine, mostly in its connection pool; this one costs a few tens of microseconds, so that a
batch of short prompts is paced by the gateway, not by the client.

What it does: plain TCP or TLS (`ssl`, with the host's certificates), keep-alive (a
connection goes back to the pool only when its answer was read whole and the server did not
ask to close), bodies framed by Content-Length, chunked, or read to close, 1xx interim
answers skipped, a connect timeout and a timeout until the head of the answer arrives, and
one silent retry when a kept-alive connection turns out to be closed by the server before it
answered. What it never does: follow a redirect, decompress, or parse a body. Anything
malformed raises one of `BROKEN`.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

__all__ = ["Pool", "Answer", "BROKEN", "timeout", "with_body"]

READ = 65536  # bytes asked for per read, and the longest head line a reader takes
# What a broken or malformed answer raises (a `ValueError` for bad framing).
BROKEN = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)

# The header lines of an answer; anything else (obs-fold, control characters, a bare LF, a
# name that is not a token) is dropped rather than read.
_FIELDS = re.compile(
    rb"\r\n([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*"
    rb"((?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?)[ \t]*(?=\r\n)"
)
_FRAMING = frozenset((b"content-length", b"transfer-encoding", b"content-encoding", b"connection"))
_NO_BODY_METHODS = ("GET", "HEAD", "DELETE", "OPTIONS")


@asynccontextmanager
async def _timeout_310(seconds: float) -> AsyncIterator[None]:
    """``asyncio.timeout`` for Python 3.10: the task cancelled by a timer, as a `TimeoutError`."""
    task = asyncio.current_task()
    assert task is not None
    fired = False

    def expire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    handle = asyncio.get_running_loop().call_later(seconds, expire)
    try:
        yield
    except asyncio.CancelledError:
        if fired:
            raise asyncio.TimeoutError from None
        raise
    finally:
        handle.cancel()


# A timer, not a task per use (``asyncio.wait_for`` makes a task): on every request's path.
timeout = getattr(asyncio, "timeout", _timeout_310)

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Answer:
    """One answer: status, headers, and a body read off its pooled connection."""

    def __init__(self, pool: Pool, conn: Connection) -> None:
        self._pool = pool
        self._conn: Connection | None = conn
        self._reader = conn[0]
        self.status = 0
        self.head = b""  # as it came
        self.headers: list[tuple[bytes, bytes]] = []  # names in lower case
        self.length: int | None = None  # the Content-Length the server declared
        self.coding = b""  # its Content-Encoding, in lower case
        self.chunked = False
        self.done = False  # the body was read whole
        self.empty = False  # there is no body (HEAD, 204, 304, a length of 0)
        self._left: int | None = None  # bytes left in the body, or in the current chunk
        self._reusable = True

    async def read_head(self, method: str) -> None:
        while True:
            head = await self._reader.readuntil(b"\r\n\r\n")
            version, status = head.split(b" ", 2)[:2]
            self.status = int(status)
            if not 100 <= self.status <= 599 or self.status == 101:  # it was never asked to switch
                raise ValueError("bad status")
            if self.status >= 200:
                break  # 1xx interim answers are skipped
        self._reusable = version == b"HTTP/1.1"
        self.head = head
        for name, value in _FIELDS.findall(head):
            name = name.lower()
            if name in _FRAMING:
                lower = value.lower()
                if name == b"content-length":
                    if not value.isdigit() or self.length not in (None, int(value)):
                        raise ValueError("bad content-length")
                    self.length = int(value)
                elif name == b"transfer-encoding":
                    self.chunked = b"chunked" in lower
                elif name == b"content-encoding":
                    self.coding = lower
                elif b"close" in lower:
                    self._reusable = False
            self.headers.append((name, value))
        if method == "HEAD" or self.status in (204, 304):
            self._left, self.chunked = 0, False
        elif not self.chunked:
            self._left = self.length
        self.empty = self._left == 0

    async def read(self) -> bytes:
        """The next piece of the body as it arrives, b"" once it is over. The connection goes
        back to the pool as soon as the body was read whole."""
        if self.done:
            return b""
        reader = self._reader
        if self.chunked and not self._left:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size < 0:  # int() takes a sign; read() takes a negative size as "all"
                raise ValueError("bad chunk size")
            if not size:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                self._finish()
                return b""
            if size <= READ:  # a small chunk (an event of a stream) and its CRLF in one read
                data = await reader.readexactly(size + 2)
                if data[-2:] != b"\r\n":
                    raise ValueError("bad chunk end")
                return data[:-2]
            self._left = size
        if self._left is None:  # up to close
            data = await reader.read(READ)
            if not data:
                self._reusable = False
                self._finish()
            return data
        if not self._left:
            self._finish()
            return b""
        data = await reader.read(min(self._left, READ))
        if not data:
            raise asyncio.IncompleteReadError(data, self._left)
        self._left -= len(data)
        if not self._left:
            if self.chunked:
                if await reader.readexactly(2) != b"\r\n":
                    raise ValueError("bad chunk end")
            else:
                self._finish()
        return data

    async def body(self, cap: int) -> bytes:
        """The whole body; `OverflowError` as soon as it passes ``cap`` bytes (a declared
        length past it is refused before reading)."""
        if self.length is not None and not self.chunked and self.length > cap:
            raise OverflowError(cap)
        if self._left is not None and not self.chunked:  # one read when the length is known
            data = await self._reader.readexactly(self._left) if self._left else b""
            self._finish()
            return data
        pieces, size = [], 0
        while piece := await self.read():
            size += len(piece)
            if size > cap:
                raise OverflowError(cap)
            pieces.append(piece)
        return b"".join(pieces)

    def _finish(self) -> None:
        self.done = True
        self.release()

    def release(self) -> None:
        """Give the connection back to the pool when the answer was read whole, else close it."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._give_back(conn, reusable=self.done and self._reusable)


def with_body(method: str, head: bytes, body: bytes) -> bytes:
    """A `Pool.request_head` completed with the body and its Content-Length."""
    if body or method not in _NO_BODY_METHODS:
        return b"%scontent-length: %d\r\n\r\n%s" % (head, len(body), body)
    return head + b"\r\n"


class Pool:
    """Kept-alive connections to the origin of ``url`` (its path is the caller's business).

    ``connect_timeout`` bounds opening a connection (TLS included); ``answer_timeout`` the wait
    from sending a request to the head of its answer (None: the caller bounds it, say with a
    deadline for the whole answer). At most ``idle`` connections are kept.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        answer_timeout: float | None = 600.0,
        idle: int = 256,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = (host if parts.port is None else f"{host}:{self.port}").encode()
        self.connect_timeout = connect_timeout
        self.answer_timeout = answer_timeout
        self.max_idle = idle
        self._idle: list[Connection] = []

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()

    def _give_back(self, conn: Connection, reusable: bool) -> None:
        if reusable and len(self._idle) < self.max_idle and not conn[1].is_closing():
            self._idle.append(conn)
        else:
            conn[1].close()

    def request_bytes(
        self, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> bytes:
        """The request as it goes on the wire: ``headers`` must hold neither Host nor framing."""
        return with_body(method, self.request_head(method, target, headers), body)

    def request_head(self, method: str, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
        """A request's line, Host and ``headers``: all of it but the framing and the body, the
        same for every request of a kind (a caller sending many may keep it)."""
        head = [b"%s %s HTTP/1.1\r\nhost: %s\r\n" % (method.encode(), target, self.host_header)]
        head += [b"%s: %s\r\n" % pair for pair in headers]
        return b"".join(head)

    async def send(self, method: str, raw: bytes) -> Answer:
        """Send ``raw`` (see `request_bytes`) and read the head of its answer. A kept-alive
        connection the server closed meanwhile is retried once on a new one."""
        while True:
            reused = bool(self._idle)
            if reused:
                conn = self._idle.pop()
            else:
                async with timeout(self.connect_timeout):
                    conn = await asyncio.open_connection(
                        self.host, self.port, ssl=self._ssl, limit=READ, server_hostname=self._server_name
                    )
            answer = Answer(self, conn)
            try:
                conn[1].write(raw)
                if self.answer_timeout is None:
                    await answer.read_head(method)
                else:
                    async with timeout(self.answer_timeout):
                        await answer.read_head(method)
                return answer
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                answer.release()
                if not reused or answer.status:
                    raise ConnectionError(
                        f"the server closed the connection ({type(exc).__name__})"
                    ) from None
            except BaseException:
                answer.release()
                raise

    @property
    def _server_name(self) -> str | None:
        return self.host if self._ssl is not None else None
