"""Forwarding to an upstream gateway for every model this gateway does not serve itself.

This path sits in front of every remote call, so it is kept lean on purpose: a small HTTP/1.1
client on asyncio streams with a pool of kept-alive connections (a general-purpose client
costs over a millisecond of CPU per request on a small machine; this one a tenth of that),
the request body passed on as the bytes that arrived (never parsed and re-serialised), the
caller's key swapped for the upstream key, and the answer relayed as raw bytes: event streams
chunk by chunk as they arrive, other bodies whole. Upstream errors keep their status and body.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from gatecell.wire.secret import Secret
from gatecell.wire.settings import root_url

from .errors import Fail, is_generate_content

__all__ = ["Upstream"]

log = logging.getLogger("gatecell.local")

# Hop-by-hop headers, framing we redo ourselves, and the credentials that belong to this
# gateway, not the upstream one.
_DROP_REQUEST = frozenset(
    b"host content-length connection keep-alive transfer-encoding te upgrade expect proxy-authorization "
    b"proxy-connection authorization x-api-key x-goog-api-key".split()
)
_DROP_RESPONSE = frozenset(
    b"content-length connection keep-alive transfer-encoding te upgrade proxy-connection date server".split()
)
_CONNECT_TIMEOUT = 10.0
_ANSWER_TIMEOUT = 600.0  # until the status line of an answer arrives
_IDLE_POOL = 256
_READ = 65536
_timeout = getattr(asyncio, "timeout", None)


class _Answer:
    """One upstream answer: status, headers, and a body read off its pooled connection."""

    def __init__(self, upstream: Upstream, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self._upstream = upstream
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = conn
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._length: int | None = None
        self._chunked = False
        self._reusable = True

    async def read_head(self, method: str) -> None:
        reader = self._conn[0]  # type: ignore[index]
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            version, status = lines[0].split(b" ", 2)[:2]
            self.status = int(status)
            if self.status >= 200 or self.status == 101:
                break  # 1xx interim answers are skipped
        self._reusable = version == b"HTTP/1.1"
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip()
            if name == b"content-length":
                self._length = int(value)
            elif name == b"transfer-encoding":
                self._chunked = b"chunked" in value.lower()
            elif name == b"connection" and b"close" in value.lower():
                self._reusable = False
            self.headers.append((name, value))
        if method == "HEAD" or self.status in (204, 304) or 100 <= self.status < 200:
            self._length = 0

    @property
    def streamed(self) -> bool:
        """Bodies without a length (chunked, or up to close) and event streams go out as they come."""
        return self._length is None or any(
            n == b"content-type" and v.startswith(b"text/event-stream") for n, v in self.headers
        )

    async def body(self) -> AsyncIterator[bytes]:
        reader = self._conn[0]  # type: ignore[index]
        if self._chunked:
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                        pass
                    break
                while size:
                    data = await reader.readexactly(min(size, _READ))
                    size -= len(data)
                    yield data
                await reader.readexactly(2)
        elif self._length is not None:
            left = self._length
            while left:
                data = await reader.readexactly(min(left, _READ))
                left -= len(data)
                yield data
        else:
            self._reusable = False
            while data := await reader.read(_READ):
                yield data
        self.release(done=True)

    def release(self, done: bool = False) -> None:
        """Give the connection back to the pool when the answer was read whole, else close it."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._upstream._give_back(conn, reusable=done and self._reusable)


class _Relay(Response):
    """A whole upstream body as an ASGI response, its headers passed through as they came."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status_code = status
        self.raw_headers = headers
        self.body = body
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body})


class Upstream:
    def __init__(self, base_url: str, key: Secret | None) -> None:
        self.base_url = root_url(base_url)
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, got {base_url!r}")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._prefix = parts.path.rstrip("/").encode()
        default = parts.port is None
        self._host_header = (self._host if default else f"{self._host}:{self._port}").encode()
        self._key = key.reveal().encode() if key else None
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()

    def _give_back(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], reusable: bool) -> None:
        if reusable and len(self._idle) < _IDLE_POOL and not conn[1].is_closing():
            self._idle.append(conn)
        else:
            conn[1].close()

    def _credentials(self, path: str) -> list[tuple[bytes, bytes]]:
        if not self._key:
            return []
        if is_generate_content(path):
            return [(b"x-goog-api-key", self._key)]
        if path.startswith(("/v1/messages", "/messages")):
            return [(b"x-api-key", self._key), (b"authorization", b"Bearer " + self._key)]
        return [(b"authorization", b"Bearer " + self._key)]

    async def send(
        self, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> _Answer:
        """Send one request; a kept-alive connection the upstream closed meanwhile is retried once."""
        head = [
            b"%s %s%s HTTP/1.1\r\nhost: %s\r\n" % (method.encode(), self._prefix, target, self._host_header)
        ]
        head += [b"%s: %s\r\n" % pair for pair in headers]
        if body or method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
            head.append(b"content-length: %d\r\n" % len(body))
        raw = b"".join(head) + b"\r\n" + body
        while True:
            reused = bool(self._idle)
            if reused:
                conn = self._idle.pop()
            else:
                conn = await asyncio.wait_for(
                    asyncio.open_connection(self._host, self._port, ssl=self._ssl, limit=_READ),
                    _CONNECT_TIMEOUT,
                )
            answer = _Answer(self, conn)
            try:
                conn[1].write(raw)
                if _timeout is not None:  # 3.11+: a timer, not a task per request
                    async with _timeout(_ANSWER_TIMEOUT):
                        await answer.read_head(method)
                else:
                    await asyncio.wait_for(answer.read_head(method), _ANSWER_TIMEOUT)
                return answer
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                answer.release()
                if not reused or answer.status:
                    raise ConnectionError(f"upstream closed the connection ({type(exc).__name__})") from None
            except BaseException:
                answer.release()
                raise

    async def forward(self, request: Request, body: bytes | None = None) -> Response:
        """Send `request` (with `body`, the bytes already read) upstream; relay the answer."""
        if body is None:
            body = await request.body()
        scope = request.scope
        target = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        headers = [(k, v) for k, v in scope["headers"] if k not in _DROP_REQUEST]
        headers += self._credentials(scope["path"])
        try:
            answer = await self.send(scope["method"], target, headers, body)
        except (
            OSError,
            asyncio.TimeoutError,
            asyncio.IncompleteReadError,
            ValueError,
            asyncio.LimitOverrunError,
        ) as exc:
            log.warning("upstream %s unreachable: %s", self.base_url, type(exc).__name__)
            raise Fail(502, f"upstream gateway unreachable ({type(exc).__name__})") from None
        out_headers = [(n, v) for n, v in answer.headers if n not in _DROP_RESPONSE]
        if answer.streamed:
            response = StreamingResponse(_relay(answer), status_code=answer.status)
            response.raw_headers = out_headers
            return response
        try:
            data = b"".join([chunk async for chunk in answer.body()])
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            answer.release()
            raise Fail(502, f"upstream gateway broke off its answer ({type(exc).__name__})") from None
        if scope["method"] == "HEAD":  # the length of the body a GET would have had
            out_headers += [(n, v) for n, v in answer.headers if n == b"content-length"]
        else:
            out_headers.append((b"content-length", b"%d" % len(data)))
        return _Relay(answer.status, out_headers, data)

    async def models(self) -> list[dict]:
        """Upstream's model entries, or [] when it cannot be listed."""
        try:
            answer = await self.send(
                "GET", b"/v1/models", [(b"accept", b"application/json"), *self._credentials("")], b""
            )
            data = b"".join([chunk async for chunk in answer.body()])
            listed = json.loads(data).get("data") if answer.status == 200 else None
        except (
            OSError,
            asyncio.TimeoutError,
            asyncio.IncompleteReadError,
            ValueError,
            AttributeError,
        ) as exc:
            log.warning("could not list upstream models: %s", type(exc).__name__)
            return []
        if not isinstance(listed, list):
            return []
        return [m for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]


async def _relay(answer: _Answer) -> AsyncIterator[bytes]:
    try:
        async for chunk in answer.body():
            yield chunk
    except (OSError, asyncio.IncompleteReadError, ValueError):
        log.warning("upstream stream broke off")  # the client sees the stream end early
    finally:
        answer.release()
