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

Answers are read by h11, a tested sans-IO parser, plus three rules of our own it is lenient
about: no obs-fold, no bare LF, and not both Transfer-Encoding and Content-Length (RFC 9112
lets a recipient accept the first two; this client sits in front of a relay, where being lax
about framing is how responses get smuggled). Anything malformed raises `ProtocolError`; every
failure of an exchange is one of `BROKEN`. A proxy that cannot be reached or refuses is a
`ProxyError`, one line naming the proxy with its password masked.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import h11

from .proxies import Proxy

__all__ = ["Pool", "Answer", "BROKEN", "ProtocolError", "ProxyError", "timeout", "with_body"]

READ = 65536  # bytes asked for per read, and the longest head an answer may have


class ProtocolError(ValueError):
    """The answer broke HTTP/1.1: a malformed head, bad framing, a body cut short."""


class ProxyError(ConnectionError):
    """The proxy could not be reached, or refused (407, 403, 502...): the message names the
    proxy (password masked) and what happened."""


# What a broken or malformed exchange raises (a `ValueError` for bad framing).
BROKEN = (OSError, ValueError)

_NO_BODY_METHODS = ("GET", "HEAD", "DELETE", "OPTIONS")
_END = h11.EndOfMessage()
# h11 learns what an answer answers from a request of the same method shown to it; the
# request itself goes on the wire as the caller built it.
_ASKED: dict[str, h11.Request] = {}


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


class _Connection:
    """A socket's streams and the h11 state of the exchanges on it."""

    __slots__ = ("reader", "writer", "h11")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=READ)


def _asked(method: str) -> h11.Request:
    request = _ASKED.get(method)
    if request is None:
        request = _ASKED[method] = h11.Request(method=method, target="/", headers=[("host", "-")])
    return request


def _strict(head: bytes) -> None:
    """The rules h11 leaves to its caller (see the module's docstring)."""
    if head.count(b"\n") != head.count(b"\r\n"):
        raise ProtocolError("a bare LF in the head")
    if b"\n " in head or b"\n\t" in head:
        raise ProtocolError("an obsolete line folding in the head")


class Answer:
    """One answer: status, headers, and a body read off its pooled connection.

    ``headers`` are (name, value) pairs, names in lower case; ``length`` the Content-Length
    the server declared, ``coding`` its Content-Encoding in lower case, ``empty`` whether
    there is no body at all (HEAD, 204, 304, a length of 0), ``done`` whether the body was
    read whole.
    """

    def __init__(self, pool: Pool, conn: _Connection) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self._reader = conn.reader
        self._h11 = conn.h11
        self.status = 0
        self.reason = b""
        self.head = b""  # as it came, the interim answers before it included
        self.headers: list[tuple[bytes, bytes]] = []
        self.length: int | None = None
        self.coding = b""
        self.chunked = False
        self.done = False
        self.empty = False

    def _event(self) -> object:
        try:
            return self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            raise ProtocolError(str(exc)) from None

    async def read_head(self, method: str) -> None:
        """Read up to the end of the (final) head; a `ConnectionResetError` when the server
        closes before it is whole."""
        parser = self._h11
        parser.send(_asked(method))
        parser.send(_END)
        fed = b""
        while True:
            event = self._event()
            if event is h11.NEED_DATA:
                data = await self._reader.read(READ)
                if not data:
                    raise ConnectionResetError("closed before the answer's head was whole")
                fed += data
                parser.receive_data(data)
            elif type(event) is h11.Response:
                break
            # else an interim answer (h11 refuses a 101 nobody asked for)
        self.head = fed[: len(fed) - len(parser.trailing_data[0])]
        _strict(self.head)
        self.status, self.reason = event.status_code, event.reason
        self.headers = headers = list(event.headers)
        for name, value in headers:
            if name == b"content-length":
                self.length = int(value)  # h11 checked it, and that copies agree
            elif name == b"transfer-encoding":
                self.chunked = True  # h11 allows chunked alone
            elif name == b"content-encoding":
                self.coding = value.lower()
        if self.chunked and self.length is not None:
            raise ProtocolError("both Transfer-Encoding and Content-Length")
        if method == "HEAD" or self.status in (204, 304):
            self.empty, self.chunked = True, False
        else:
            self.empty = self.length == 0

    async def _piece(self) -> bytes | bytearray:
        """The next piece of the body as h11 gives it, b"" at the end (and the connection freed)."""
        parser = self._h11
        while True:
            event = self._event()
            kind = type(event)
            if kind is h11.Data:
                return event.data  # type: ignore[attr-defined]
            if kind is h11.EndOfMessage:
                self.done = True
                self.release()
                return b""
            if event is not h11.NEED_DATA:
                raise ProtocolError(f"unexpected {kind.__name__} in a body")
            parser.receive_data(await self._reader.read(READ))  # b"" tells h11 it closed

    async def read(self) -> bytes:
        """The next piece of the body as it arrives, b"" once it is over. The connection goes
        back to the pool as soon as the body was read whole."""
        if self.done:
            return b""
        return bytes(await self._piece())

    async def body(self, cap: int) -> bytes:
        """The whole body; `OverflowError` as soon as it passes ``cap`` bytes (a declared
        length past it is refused before reading)."""
        if not self.empty and self.length is not None and self.length > cap:
            raise OverflowError(cap)
        if self.done:
            return b""
        pieces, size = [], 0
        while piece := await self._piece():
            size += len(piece)
            if size > cap:
                raise OverflowError(cap)
            pieces.append(piece)
        return b"".join(pieces)

    def release(self) -> None:
        """Give the connection back to the pool when the answer was read whole, else close it."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool._give_back(conn, reusable=self.done)


def with_body(method: str, head: bytes, body: bytes) -> bytes:
    """A `Pool.request_head` completed with the body and its Content-Length."""
    if body or method not in _NO_BODY_METHODS:
        return b"%scontent-length: %d\r\n\r\n%s" % (head, len(body), body)
    return head + b"\r\n"


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _refused(proxy: Proxy | None, what: str, status: int, reason: bytes) -> ProxyError:
    return ProxyError(f"proxy {proxy} refused {what}: {status} {reason.decode('latin-1')}")


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
      (see `gatecell.wire.proxies.proxy_for` for the one the settings name).
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
        self._idle: list[_Connection] = []
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
        for conn in idle:
            conn.writer.close()

    def _give_back(self, conn: _Connection, reusable: bool) -> None:
        parser = conn.h11
        if (
            reusable
            and parser.our_state is h11.DONE
            and parser.their_state is h11.DONE
            and not parser.trailing_data[0]  # bytes past the answer answer no request of ours
            and len(self._idle) < self.max_idle
            and not conn.writer.is_closing()
        ):
            parser.start_next_cycle()
            self._idle.append(conn)
        else:
            conn.writer.close()

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
        connection the server closed meanwhile is retried once on a new one."""
        while True:
            reused = bool(self._idle)
            conn = self._idle.pop() if reused else await self._connect()
            answer = Answer(self, conn)
            try:
                conn.writer.write(raw)
                if self.answer_timeout is None:
                    await answer.read_head(method)
                else:
                    async with timeout(self.answer_timeout):
                        await answer.read_head(method)
            except ConnectionError as exc:
                answer.release()
                if not reused or answer.status:
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

    async def _connect(self) -> _Connection:
        try:
            async with timeout(self.connect_timeout):
                if self.proxy is None:
                    streams = await asyncio.open_connection(
                        self.host,
                        self.port,
                        ssl=self._ssl,
                        server_hostname=self.host if self._ssl else None,
                        limit=READ,
                    )
                else:
                    streams = await self._through_proxy(self.proxy)
        except asyncio.TimeoutError:
            if self.proxy is None:
                raise
            raise ProxyError(
                f"no connection through proxy {self.proxy} within {self.connect_timeout:g} s"
            ) from None
        return _Connection(*streams)

    async def _through_proxy(self, proxy: Proxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
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
        parser = h11.Connection(h11.CLIENT, max_incomplete_event_size=READ)
        request = h11.Request(
            method="CONNECT", target=authority, headers=[(b"host", authority), *self._proxy_auth]
        )
        try:
            await loop.sock_sendall(sock, parser.send(request) + parser.send(_END))
            while True:
                event = parser.next_event()
                if event is h11.NEED_DATA:
                    data = await loop.sock_recv(sock, READ)
                    if not data:
                        raise ProxyError(f"proxy {proxy} closed the connection before answering CONNECT")
                    parser.receive_data(data)
                elif type(event) is h11.Response:
                    break
        except h11.RemoteProtocolError as exc:
            raise ProxyError(f"proxy {proxy} answered CONNECT malformed: {exc}") from None
        except OSError as exc:
            if isinstance(exc, ProxyError):
                raise
            raise ProxyError(f"proxy {proxy} broke off CONNECT: {_reason(exc)}") from None
        if not 200 <= event.status_code < 300:
            raise _refused(proxy, f"CONNECT {authority.decode()}", event.status_code, event.reason)
        if parser.trailing_data[0]:
            raise ProxyError(f"proxy {proxy} sent data before the tunnel's TLS began")
