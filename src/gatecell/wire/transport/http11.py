"""A lean HTTP/1.1 client on asyncio streams: a pool of kept-alive connections to one origin.

Two hot paths use it: the local gateway's forwarder, which relays each answer piece by piece
as it arrives, and the batch engine, which reads each answer whole under a size cap. A
general-purpose client (httpx) costs a millisecond or more of CPU per request on a small
machine, mostly in its connection pool; this one costs a few tens of microseconds
(`benchmarks/bench_http11.py`), so that a batch of short prompts is paced by the gateway,
not by the client.

What it does: plain TCP or TLS (`ssl`'s default context, so ``SSL_CERT_FILE`` is honoured),
keep-alive (a connection goes back to the pool only when its answer was read whole and
neither side asked to close), bodies framed by Content-Length, chunked, or read to close, 1xx
interim answers skipped, a connect timeout and a timeout until the head of the answer
arrives, and one silent retry when a kept-alive connection turns out to be closed by the
server before it answered. Through an ``http://`` proxy (`Proxy`): ``http://`` origins get
absolute-form requests on connections kept alive to the proxy, ``https://`` origins a
``CONNECT`` tunnel with TLS to the origin inside it, so the proxy sees neither the key nor
the prompt. What it never does: follow a redirect, decompress, or parse a body.

Answers are read by a parser of its own that holds the whole head to RFC 9112's grammar
(one regular expression, matched whole): obs-fold, a bare LF or CR, a control character, a
name that is not a token, a Content-Length that is not a number or disagrees with another, a
Transfer-Encoding other than a single ``chunked``, both framings at once, a malformed chunk
size or trailer: each raises `ProtocolError`, nothing is skipped. (RFC 9112 lets a recipient
unfold obs-fold and take a bare LF for a line end, as h11 does; this client feeds a relay,
where leniency about where a head or a line ends is how answers get smuggled.) h11, the
reference sans-IO parser, was measured as the reader (`benchmarks/bench_http11.py`): over
twice this client's CPU per request and about a third more of the batch's CPU per row. So
the tests hold this parser to h11's verdicts instead: it refuses every head h11 refuses, and
reads every head both accept as h11 does. Every failure of an exchange is one of `BROKEN`; a proxy that cannot
be reached or refuses is a `ProxyError`, one line naming the proxy with its password masked.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple
from urllib.parse import urlsplit

from gatecell.wire.transport.errors import cut
from gatecell.wire.transport.proxies import Proxy

__all__ = [
    "Pool",
    "Answer",
    "BROKEN",
    "Head",
    "ProtocolError",
    "ProxyError",
    "parse_head",
    "timeout",
    "with_body",
]

READ = 65536  # bytes asked for per read, and the longest head an answer may have


class ProtocolError(ValueError):
    """The answer broke HTTP/1.1: a malformed head, framing or chunk."""


class ProxyError(ConnectionError):
    """The proxy could not be reached, or refused (407, 403, 502...): the message names the
    proxy (password masked) and what happened."""


# What a broken or malformed exchange raises (a `ValueError` for bad framing).
BROKEN = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)

# RFC 9112's grammar of an answer's head, whole: a head that does not match it is refused,
# never read in part. Header values are kept without their surrounding whitespace. No two
# quantifiers of the patterns can take the same spaces, so a hostile head costs linear time.
_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_VALUE = rb"[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*"  # not empty
_FIELD = _TOKEN + rb":[ \t]*(?:" + _VALUE + rb"[ \t]*)?\r\n"
_HEAD = re.compile(
    rb"HTTP/1\.[01] [1-5][0-9][0-9](?: [\t \x21-\x7e\x80-\xff]*)?\r\n(?:" + _FIELD + rb")*\r\n"
)
_FIELDS = re.compile(rb"\r\n(" + _TOKEN + rb"):[ \t]*(" + _VALUE + rb")?")  # on a head _HEAD matched
_TRAILER = re.compile(_FIELD)
# A chunk's size (16 hex digits at most: 2**64 - 1) and extensions, which are ignored.
_CHUNK = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[\t \x21-\x7e\x80-\xff]*)?\r\n")
_FRAMING = frozenset((b"content-length", b"transfer-encoding", b"content-encoding", b"connection"))
_NO_BODY_METHODS = ("GET", "HEAD", "DELETE", "OPTIONS")


class Head(NamedTuple):
    """An answer's head as read: ``headers`` with names in lower case, ``length`` the declared
    Content-Length, ``coding`` the Content-Encoding in lower case, ``keep_alive`` whether the
    connection may carry another request (HTTP/1.1 without ``Connection: close``)."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    length: int | None
    chunked: bool
    coding: bytes
    keep_alive: bool


def parse_head(head: bytes) -> Head:
    """One head, its final CRLF CRLF included; `ProtocolError` unless all of it follows the
    grammar and its framing is one that can be read one way only."""
    if _HEAD.fullmatch(head) is None:
        raise ProtocolError(f"malformed head {head[:200]!r}")
    headers = [(name.lower(), value) for name, value in _FIELDS.findall(head)]
    length, chunked, coding, keep_alive = None, False, b"", head[5:8] == b"1.1"
    for name, value in headers:
        if name not in _FRAMING:
            continue
        if name == b"content-length":
            if not value.isdigit() or len(value) > 20 or length not in (None, int(value)):
                raise ProtocolError(f"bad Content-Length {value[:40]!r}")
            length = int(value)
        elif name == b"transfer-encoding":
            if chunked or value.lower() != b"chunked":
                raise ProtocolError(f"Transfer-Encoding {value[:40]!r}: only one, chunked, is understood")
            chunked = True
        elif name == b"content-encoding":
            coding = value.lower()
        elif b"close" in (token.strip() for token in value.lower().split(b",")):  # Connection
            keep_alive = False
    if chunked and length is not None:
        raise ProtocolError("both Transfer-Encoding and Content-Length")
    return Head(int(head[9:12]), head[13 : head.index(b"\r\n")], headers, length, chunked, coding, keep_alive)


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
    """One answer: status, headers, and a body read off its pooled connection.

    ``headers`` are (name, value) pairs, names in lower case; ``head`` the head as it came;
    ``length`` the Content-Length the server declared, ``coding`` its Content-Encoding in
    lower case, ``empty`` whether there is no body at all (HEAD, 204, 304, a length of 0),
    ``done`` whether the body was read whole.
    """

    def __init__(self, pool: Pool, conn: Connection) -> None:
        self._pool = pool
        self._conn: Connection | None = conn
        self._reader = conn[0]
        self.status = 0
        self.reason = b""
        self.head = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.length: int | None = None
        self.coding = b""
        self.chunked = False
        self.done = False
        self.empty = False
        self._left: int | None = None  # bytes left in the body, or in the current chunk
        self._reusable = True

    async def read_head(self, method: str) -> None:
        while True:
            try:
                head = await self._reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                raise ProtocolError(f"a head over {READ} bytes") from None
            parsed = parse_head(head)
            self.status = parsed.status
            if parsed.status >= 200:
                break
            if parsed.status == 101:  # it was never asked to switch
                raise ProtocolError("101 Switching Protocols, which nothing asked for")
            # other 1xx interim answers are skipped
        self.head = head
        self.status, self.reason, self.headers, self.length, self.chunked, self.coding, self._reusable = (
            parsed
        )
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
            size = self._chunk_size(await reader.readuntil(b"\r\n"))
            if not size:
                while (line := await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    if _TRAILER.fullmatch(line) is None:
                        raise ProtocolError(f"malformed trailer {line[:80]!r}")
                self._finish()
                return b""
            if size <= READ:  # a small chunk (an event of a stream) and its CRLF in one read
                data = await reader.readexactly(size + 2)
                if data[-2:] != b"\r\n":
                    raise ProtocolError("a chunk longer than its size")
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
                    raise ProtocolError("a chunk longer than its size")
            else:
                self._finish()
        return data

    @staticmethod
    def _chunk_size(line: bytes) -> int:
        m = _CHUNK.fullmatch(line)
        if m is None:
            raise ProtocolError(f"malformed chunk size line {line[:80]!r}")
        return int(m[1], 16)

    async def body(self, cap: int) -> bytes:
        """The whole body; `OverflowError` as soon as it passes ``cap`` bytes (a declared
        length past it is refused before reading)."""
        if not self.empty and self.length is not None and self.length > cap:
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


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _refused(proxy: Proxy | None, what: str, status: int, reason: bytes) -> ProxyError:
    return ProxyError(f"proxy {proxy} refused {what}: {status} {cut(reason.decode('latin-1'))}")


class Pool:
    """Kept-alive connections to the origin of ``url`` (its path is the caller's business).

    **Parameters:**

    * **url** - an ``http://`` or ``https://`` URL; its origin is where requests go.
    * **connect_timeout** - bounds opening a connection: through a proxy, reaching it, its
      ``CONNECT`` answer and TLS with the origin.
    * **answer_timeout** - the wait from sending a request to the head of its answer (None:
      the caller bounds it, say with a deadline for the whole answer).
    * **idle** - at most this many connections are kept.
    * **proxy** - an ``http://`` proxy (a URL or a `Proxy`) to go through, or None for direct
      (see `gatecell.wire.transport.proxies.proxy_for` for the one the settings name).
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        answer_timeout: float | None = 600.0,
        idle: int = 256,
        proxy: str | Proxy | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = (host if parts.port is None else f"{host}:{self.port}").encode()
        self._authority = f"{host}:{self.port}".encode()  # what a CONNECT names
        self.connect_timeout = connect_timeout
        self.answer_timeout = answer_timeout
        self.max_idle = idle
        self._idle: list[Connection] = []
        self.proxy = Proxy(proxy) if isinstance(proxy, str) else proxy
        if self.proxy is not None and self.proxy.scheme != "http":
            raise ValueError(f"only an http:// proxy can carry these requests, not {self.proxy}")
        # Through a proxy, an http:// origin's requests name it whole (absolute form) and carry
        # the proxy's credentials; an https:// origin's go inside a tunnel, as they are.
        self._forwarded = self.proxy is not None and self._ssl is None
        self._target_prefix = b"http://" + self.host_header if self._forwarded else b""
        auth = self.proxy.authorization if self.proxy is not None else None
        self._proxy_auth = [(b"proxy-authorization", auth.encode())] if auth else []
        self._extra = b"".join(b"%s: %s\r\n" % pair for pair in self._proxy_auth) if self._forwarded else b""

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
        head = [
            b"%s %s%s HTTP/1.1\r\nhost: %s\r\n%s"
            % (method.encode(), self._target_prefix, target, self.host_header, self._extra)
        ]
        head += [b"%s: %s\r\n" % pair for pair in headers]
        return b"".join(head)

    async def send(self, method: str, raw: bytes) -> Answer:
        """Send ``raw`` (see `request_bytes`) and read the head of its answer. A kept-alive
        connection that turns out closed, not a byte of an answer on it, is retried on another;
        a new connection that closes is an error."""
        while True:
            reused = bool(self._idle)
            conn = self._idle.pop() if reused else await self._connect()
            answer = Answer(self, conn)
            try:
                conn[1].write(raw)
                if self.answer_timeout is None:
                    await answer.read_head(method)
                else:
                    async with timeout(self.answer_timeout):
                        await answer.read_head(method)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                answer.release()
                # Once anything came back (an interim answer, part of a head), the server had
                # begun on the request: it is not sent again.
                began = isinstance(exc, asyncio.IncompleteReadError) and exc.partial
                if not reused or answer.status or began:
                    raise ConnectionError(
                        f"the server closed the connection ({type(exc).__name__})"
                    ) from None
                continue
            except BaseException:
                answer.release()
                raise
            if answer.status == 407 and self._forwarded:  # only a proxy asks for its credentials
                answer.release()
                raise _refused(self.proxy, "the request", answer.status, answer.reason)
            return answer

    # -- connections --------------------------------------------------------------------

    async def _connect(self) -> Connection:
        try:
            async with timeout(self.connect_timeout):
                if self.proxy is None:
                    return await asyncio.open_connection(
                        self.host,
                        self.port,
                        ssl=self._ssl,
                        server_hostname=self.host if self._ssl else None,
                        limit=READ,
                    )
                else:
                    return await self._through_proxy(self.proxy)
        except asyncio.TimeoutError:
            if self.proxy is None:
                raise
            raise ProxyError(
                f"no connection through proxy {self.proxy} within {self.connect_timeout:g} s"
            ) from None

    async def _through_proxy(self, proxy: Proxy) -> Connection:
        """A connection to the proxy; for an https:// origin, a tunnel with TLS inside it.

        The tunnel is set up on the bare socket, so that TLS can then start on it the same way
        on every Python (``StreamWriter.start_tls`` is 3.11+).
        """
        sock = await self._proxy_socket(proxy)
        try:
            if self._ssl is not None:
                await self._tunnel(sock, proxy)
            return await asyncio.open_connection(
                sock=sock,
                ssl=self._ssl,
                server_hostname=self.host if self._ssl else None,
                limit=READ,
            )
        except BaseException:
            sock.close()
            raise

    async def _proxy_socket(self, proxy: Proxy) -> socket.socket:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(proxy.host, proxy.port, type=socket.SOCK_STREAM)
            error: OSError = OSError(f"no address for {proxy.host}")
            for family, kind, number, _, address in infos:
                sock = socket.socket(family, kind, number)
                try:
                    sock.setblocking(False)
                    await loop.sock_connect(sock, address)
                    return sock
                except OSError as exc:
                    sock.close()
                    error = exc
                except BaseException:
                    sock.close()
                    raise
            raise error
        except OSError as exc:
            raise ProxyError(f"proxy {proxy} unreachable: {_reason(exc)}") from None

    async def _tunnel(self, sock: socket.socket, proxy: Proxy) -> None:
        """``CONNECT host:port`` on ``sock``; a `ProxyError` unless the proxy answers 2xx."""
        loop = asyncio.get_running_loop()
        authority = self._authority
        request = b"CONNECT %s HTTP/1.1\r\nhost: %s\r\n" % (authority, authority)
        request += b"".join(b"%s: %s\r\n" % pair for pair in self._proxy_auth)
        buffer = b""
        try:
            await loop.sock_sendall(sock, request + b"\r\n")
            while True:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(buffer) > READ:
                        raise ProtocolError(f"a head over {READ} bytes")
                    data = await loop.sock_recv(sock, READ)
                    if not data:
                        raise ProxyError(f"proxy {proxy} closed the connection before answering CONNECT")
                    buffer += data
                    continue
                head = parse_head(buffer[: end + 4])
                buffer = buffer[end + 4 :]
                if head.status >= 200:  # 1xx interim answers are skipped
                    break
        except ProtocolError as exc:
            raise ProxyError(f"proxy {proxy} answered CONNECT in broken HTTP: {exc}") from None
        except OSError as exc:
            if isinstance(exc, ProxyError):
                raise
            raise ProxyError(f"proxy {proxy} broke off CONNECT: {_reason(exc)}") from None
        if not 200 <= head.status < 300:
            raise _refused(proxy, f"CONNECT {authority.decode()}", head.status, head.reason)
        if buffer:
            raise ProxyError(f"proxy {proxy} sent data before the tunnel's TLS began")
