"""HTTP in the wire's own small types: `Headers`, `Request`, `Response`, `TransportError`.

The request programs (`exchange`, `endpoints`) build a `Request` and read a `Response`, as
h11's callers get h11's own events; they never see another library's objects. A *driver*
translates at its edge: `drivers` carries requests over httpx, the batch engine over the lean
client of `http11`. So a new release of either library changes one translation, not the
programs, and a test can step a program with answers made by hand.

What a body may cost is enforced here, while it is read, whatever carries it: at most
``Request.max_bytes`` (a hostile gateway's gigabytes never reach the memory), and, for a
request with a ``deadline``, the whole body by then (a gateway trickling a byte at a time
stays inside every per-read timeout for ever). Nothing here decompresses: the client asks
for uncompressed bodies and `exchange` refuses a compressed one, whose size after inflating
no cap could bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, ItemsView, Iterable, Iterator, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

__all__ = [
    "Headers",
    "Request",
    "Response",
    "Body",
    "TransportError",
    "BodyTooLarge",
    "same_origin",
    "request_id_of",
    "retry_after",
    "CREDENTIALS",
]

# Headers that carry a credential: never shown, never sent to another origin.
CREDENTIALS = ("authorization", "x-goog-api-key", "x-api-key", "proxy-authorization", "cookie")


class Headers(Mapping[str, str]):
    """Header fields: names are case-insensitive (kept in lower case), values are text.

    A name that comes more than once is read as its values joined by ``", "`` (RFC 9110
    5.3). The values of credential headers never appear in the repr.
    """

    __slots__ = ("_map",)

    def __init__(self, fields: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        found: dict[str, str] = {}
        for name, value in fields.items() if isinstance(fields, Mapping) else fields:
            key = name.lower()
            found[key] = f"{found[key]}, {value}" if key in found else value
        self._map = found

    @classmethod
    def from_raw(cls, fields: Iterable[tuple[bytes, bytes]]) -> Headers:
        """From the bytes of a head, as a parser hands them over (latin-1, RFC 9110 5.5)."""
        return cls((name.decode("latin-1"), value.decode("latin-1")) for name, value in fields)

    def __getitem__(self, name: str) -> str:
        return self._map[name.lower()]

    def get(self, name: str, default: Any = None) -> Any:
        return self._map.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._map

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def items(self) -> ItemsView[str, str]:
        return self._map.items()

    def with_fields(self, **changes: str | None) -> Headers:
        """A copy with these fields set (``_`` for ``-`` in names), or removed when None."""
        copy = Headers()
        copy._map = dict(self._map)
        for name, value in changes.items():
            key = name.replace("_", "-")
            if value is None:
                copy._map.pop(key, None)
            else:
                copy._map[key] = value
        return copy

    def without(self, names: Iterable[str]) -> Headers:
        copy = Headers()
        drop = set(names)
        copy._map = {k: v for k, v in self._map.items() if k not in drop}
        return copy

    def __repr__(self) -> str:
        shown = {k: "[secure]" if k in CREDENTIALS else v for k, v in self._map.items()}
        return f"Headers({shown!r})"


class Request:
    """What a driver sends: ``method`` to the absolute ``url`` with ``headers`` and ``body``.

    ``stream``: the caller reads the body itself, as it arrives, and ``read_timeout`` (when
    set) is the longest wait for the next piece of it; otherwise the driver's own timeouts
    apply. ``max_bytes`` caps the body of the answer; ``deadline`` (a `time.monotonic` time,
    from the allowance of ``seconds``) is when the whole answer must have arrived.
    """

    __slots__ = (
        "method",
        "url",
        "headers",
        "body",
        "stream",
        "read_timeout",
        "max_bytes",
        "deadline",
        "seconds",
    )

    def __init__(
        self,
        method: str,
        url: str,
        headers: Headers,
        body: bytes = b"",
        *,
        stream: bool = False,
        read_timeout: float | None = None,
        max_bytes: int = 2**63,
        seconds: float | None = None,
    ) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.stream = stream
        self.read_timeout = read_timeout
        self.max_bytes = max_bytes
        self.seconds = seconds
        self.deadline = None if seconds is None else time.monotonic() + seconds

    @property
    def path(self) -> str:
        return urlsplit(self.url).path

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.url}>"


class Body(Protocol):
    """A body being read off its connection, as a driver provides it: iterated once (sync or
    async, as the driver is), then closed."""

    def __iter__(self) -> Iterator[bytes]: ...
    def __aiter__(self) -> AsyncIterator[bytes]: ...
    def close(self) -> None: ...
    async def aclose(self) -> None: ...


class TransportError(Exception):
    """The request could not be sent or its answer not read (``timeout``: a timeout ended it;
    ``kind``: what broke, in the words of the library that carried it, say ``ReadTimeout``).
    Drivers raise it for whatever their library raises; `errors.connection_error` turns it
    into the one line the caller sees."""

    def __init__(self, message: str, *, timeout: bool = False, kind: str | None = None) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.kind = kind or type(self).__name__


class BodyTooLarge(TransportError):
    """The body passed the request's ``max_bytes``: reading stopped there."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"the body passed {max_bytes} bytes")
        self.max_bytes = max_bytes


class Response:
    """An answer: ``status`` and ``headers``, and a body that is either already ``content``
    or read from the driver's `Body` (``read``/``aread`` at once, or ``iter_bytes``/
    ``aiter_bytes`` as it arrives), within the request's cap and deadline either way."""

    __slots__ = ("status", "headers", "request", "content", "_body", "_size")

    def __init__(
        self,
        status: int,
        headers: Headers,
        request: Request,
        *,
        content: bytes = b"",
        body: Body | None = None,
    ) -> None:
        self.status = status
        self.headers = headers
        self.request = request
        self.content = content
        self._body = body
        self._size = 0

    @property
    def is_redirect(self) -> bool:
        return self.status in (301, 302, 303, 307, 308) and "location" in self.headers

    @property
    def is_closed(self) -> bool:
        """Whether its connection is done with: the body read whole, or closed unread."""
        return self._body is None

    def _count(self, chunk: bytes) -> None:
        self._size += len(chunk)
        request = self.request
        if self._size > request.max_bytes:
            raise BodyTooLarge(request.max_bytes)
        if request.deadline is not None and time.monotonic() > request.deadline:
            raise TransportError(f"the whole request took longer than {request.seconds:g} s", timeout=True)

    def _declared_too_large(self) -> None:
        length = self.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.request.max_bytes:
            raise BodyTooLarge(self.request.max_bytes)

    def iter_bytes(self) -> Iterator[bytes]:
        """The body's pieces as they arrive (once; an already read body in one piece)."""
        body, self._body = self._body, None
        if body is None:
            if self.content:
                yield self.content
            return
        try:
            self._declared_too_large()
            for chunk in body:
                self._count(chunk)
                yield chunk
        finally:
            body.close()

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        body, self._body = self._body, None
        if body is None:
            if self.content:
                yield self.content
            return
        try:
            self._declared_too_large()
            async for chunk in body:
                self._count(chunk)
                yield chunk
        finally:
            await body.aclose()

    def read(self) -> bytes:
        if self._body is not None:
            self.content = b"".join(self.iter_bytes())
        return self.content

    async def aread(self) -> bytes:
        if self._body is not None:
            self.content = b"".join([chunk async for chunk in self.aiter_bytes()])
        return self.content

    def close(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            body.close()

    async def aclose(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            await body.aclose()

    def __repr__(self) -> str:
        return f"<Response {self.status} to {self.request.method} {self.request.url}>"


def same_origin(a: str, b: str) -> bool:
    """Same scheme, host and port; or ``b`` is the https upgrade of ``a`` on default ports."""
    x, y = urlsplit(a), urlsplit(b)
    if x.hostname != y.hostname:
        return False
    if x.scheme == y.scheme:
        return _port(x.scheme, x.port) == _port(y.scheme, y.port)
    return x.scheme == "http" and y.scheme == "https" and x.port in (None, 80) and y.port in (None, 443)


def _port(scheme: str, port: int | None) -> int | None:
    return port if port is not None else {"http": 80, "https": 443}.get(scheme)


# The request id headers of common gateways and providers, most specific first: OpenAI and
# most gateways, Anthropic, LiteLLM's proxy, new-api/one-api, Azure, AWS, Google; then a
# correlation id, and Cloudflare's ray id as the last resort.
_REQUEST_ID_HEADERS = (
    "x-request-id",
    "request-id",
    "x-litellm-call-id",
    "x-litellm-response-id",
    "x-oneapi-request-id",
    "apim-request-id",
    "x-ms-request-id",
    "x-amzn-requestid",
    "x-amz-request-id",
    "x-goog-request-id",
    "x-correlation-id",
    "cf-ray",
)


def request_id_of(headers: Mapping[str, str]) -> str | None:
    """The gateway's request id, under whichever header name it uses, redacted: it is shown
    in errors and footers, saved with notebooks and logged, and a gateway may put anything
    there, the client's own key too (issue 20)."""
    for name in _REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value:
            from gatecell.wire.util.secret import redact

            return redact(value)
    return None


def _seconds(value: str, scale: float) -> float | None:
    try:
        seconds = float(value) / scale
    except ValueError:
        return None
    return None if math.isnan(seconds) else max(seconds, 0.0)


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a response asks for, in seconds (``inf`` for an endless one: whoever waits
    caps it), or None when it asks none that reads as a number or a date (``nan`` does not).
    ``now`` is a Unix time (for tests)."""
    ms = headers.get("retry-after-ms")
    seconds = _seconds(ms, 1000.0) if ms is not None else None
    if seconds is not None:
        return seconds
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value, 1.0)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)
