"""One request/response exchange, with its retries and redirects, as a sans-IO program.

A *program* is a generator that yields commands (`Send`, `Read`, `Close`, `Sleep`, `Wait`,
`Perform`)
and receives their results; it returns the outcome. Everything that decides (retries, backoff,
redirects, what a head may announce, error mapping, redaction) lives in programs, and
`drivers` carries out the commands: the same program runs under `Gateway`, `AsyncGateway`
and the batch engine, and a test can step it by hand with made-up `http.Response` objects.

**Retries** match the official SDKs (WIRE-NOTES): 408, 409, 429, 5xx and connection errors
are tried again a bounded number of times, with exponential backoff and jitter, and a wait
the gateway asks for (``retry-after-ms``, ``Retry-After`` in seconds or as an HTTP date) is
honoured up to a cap (`RetryPolicy`). A body past its cap is never tried again.

**Redirects** are followed here, not by httpx, which would follow a 307/308 to any host with
the same method and body (so a prompt could be re-posted to a stranger) and drops only
``Authorization`` on the way, not the ``x-goog-api-key`` that generate-content uses (SPEC 5).
The rules (`redirected`):

- a request with a body is never sent to another origin: the redirect fails with an
  `APIError` instead (on its own origin it is followed, as the status says);
- a request without a body may go to another origin, but without any credential header;
- only to http(s) addresses;
- an upgrade from ``http`` to ``https`` on the same host counts as the same origin;
- 303, and 301/302 after a POST, continue with a GET and no body, as browsers and httpx do;
- at most `MAX_REDIRECTS` hops.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import quote, urljoin, urlsplit

from .errors import APIError, api_error, connection_error
from .http import (
    CREDENTIALS,
    BodyTooLarge,
    Request,
    Response,
    TransportError,
    request_id_of,
    retry_after,
    same_origin,
)
from .results import ResponseMeta
from .secret import Secret, redact

__all__ = [
    "Send",
    "Read",
    "Close",
    "Sleep",
    "Wait",
    "Perform",
    "Pending",
    "Command",
    "Call",
    "Program",
    "RetryPolicy",
    "RETRY_STATUSES",
    "MAX_REDIRECTS",
    "exchange",
    "redirected",
    "logger",
]

logger = logging.getLogger("gatecell")

T = TypeVar("T")


class Send:
    """Send ``request`` and return the `Response` with its head (redirects are not followed:
    `exchange` decides). Its body may still be unread: see `Read`."""

    __slots__ = ("request",)

    def __init__(self, request: Request) -> None:
        self.request = request

    def __repr__(self) -> str:
        return f"Send({self.request.method} {self.request.url})"


class Read:
    """Read the whole body of ``response`` (and free its connection); returns the bytes."""

    __slots__ = ("response",)

    def __init__(self, response: Response) -> None:
        self.response = response

    def __repr__(self) -> str:
        return f"Read({self.response.status})"


class Close:
    """Close ``response`` unread (its body is not wanted); returns None."""

    __slots__ = ("response",)

    def __init__(self, response: Response) -> None:
        self.response = response

    def __repr__(self) -> str:
        return f"Close({self.response.status})"


class Sleep:
    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"Sleep({self.seconds:g})"


class Pending(Protocol):
    """Work the client's hooks started off the caller's path (the commit of a call's log
    entry) that the call must see finished before it returns: ``wait()`` blocks until then,
    awaiting it does the same without blocking an event loop."""

    def wait(self) -> None: ...

    def __await__(self) -> Generator[Any, None, None]: ...


class Wait:
    """Wait for ``pending`` (see `Pending`); returns None."""

    __slots__ = ("pending",)

    def __init__(self, pending: Pending) -> None:
        self.pending = pending

    def __repr__(self) -> str:
        return f"Wait({self.pending!r})"


class Perform:
    """Call ``fn()`` and return what it returns; the async driver awaits it when it is
    awaitable. How a program runs something beyond the wire between two requests (the tool
    loop's calls, its reading of a stream: `gatecell.tools.loop`)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"Perform({self.fn!r})"


Command = Send | Read | Close | Sleep | Wait | Perform
Program = Generator[Command, Any, T]


@dataclass(frozen=True)
class Call:
    """What to send. ``body`` is already JSON bytes: serialising is the caller's business.
    ``media`` marks an answer that is media bytes, which may be larger than JSON; ``schema``
    (a `structured.Schema`) what a typed answer must be (see `typed_calls`)."""

    method: str
    path: str
    body: bytes | None = None
    stream: bool = False
    model: str | None = None
    auth: str = "bearer"  # "bearer", "goog" (x-goog-api-key, SPEC 5) or "none"
    media: bool = False
    # A row of its own in the log; a job poll or a media download is not one (the job's
    # record keeps what a poll says).
    logged: bool = True
    schema: Any = None


# -- retries --------------------------------------------------------------------------

RETRY_STATUSES = frozenset({408, 409, 429})


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` extra attempts; backoff ``base * 2**n`` capped at ``cap``, with jitter."""

    max_retries: int = 2
    base: float = 0.5
    cap: float = 8.0
    retry_after_cap: float = 60.0

    def retryable(self, status: int) -> bool:
        return status in RETRY_STATUSES or status >= 500

    def delay(
        self, attempt: int, headers: Mapping[str, str] | None = None, now: float | None = None
    ) -> float:
        """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
        asked = retry_after(headers, now) if headers is not None else None
        if asked is not None:
            return min(asked, self.retry_after_cap)
        backoff = min(self.base * 2**attempt, self.cap)
        return backoff * (1 - 0.25 * random.random())


# -- redirects --------------------------------------------------------------------------

MAX_REDIRECTS = 10
_BODY_HEADERS = ("content-type", "content-length", "transfer-encoding")
_URL_SAFE = "%:/?#[]@!$&'()*+,;=~"


def redirected(path: str, request: Request, response: Response, hops: int, key: Secret | None) -> Request:
    """The request that follows ``response`` (a redirect with a Location) to the call of
    ``path``, or an `APIError` when following it is not allowed."""
    location = response.headers["location"]

    def refuse(why: str) -> APIError:
        return APIError(
            f"redirect to {redact(location[:200], key)!r} not followed: {why}",
            status=response.status,
            method=request.method,
            path=path,
            request_id=request_id_of(response.headers),
        )

    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in location):
        raise refuse("not a valid address")
    try:
        # As httpx does: what may not stand in a URL as it is (a space, non-ASCII) is encoded.
        target = quote(urljoin(request.url, location), safe=_URL_SAFE)
        parts = urlsplit(target)
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError:
        raise refuse("not a valid address") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise refuse("not an http(s) address")
    if hops >= MAX_REDIRECTS:
        raise refuse(f"more than {MAX_REDIRECTS} redirects")
    same = same_origin(request.url, target)
    body = request.body
    if body and not same:
        raise refuse("another origin, and the request's body goes to its own gateway only")
    method = request.method
    status = response.status
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method = "GET"
    headers = request.headers
    if method != request.method:
        body = b""
        headers = headers.without(_BODY_HEADERS)
    if not same:
        headers = headers.without(CREDENTIALS)
    following = Request(
        method,
        target,
        headers,
        body,
        stream=request.stream,
        read_timeout=request.read_timeout,
        max_bytes=request.max_bytes,
    )
    following.seconds, following.deadline = request.seconds, request.deadline  # one deadline for all hops
    return following


# -- the exchange -----------------------------------------------------------------------


def compressed(response: Response, call: Call) -> APIError | None:
    """A body in a content coding the client did not ask for: refused, since its size after
    decompressing cannot be bounded (the client asks for ``Accept-Encoding: identity``)."""
    coding = response.headers.get("content-encoding", "identity").strip().lower()
    if coding in ("identity", ""):
        return None
    return APIError(
        f"the body came compressed ({coding}) though the client asked for none "
        "(Accept-Encoding: identity), so its size cannot be bounded",
        status=response.status,
        method=call.method,
        path=call.path,
    )


def exchange(
    build: Callable[[Call], Request], call: Call, policy: RetryPolicy, key: Secret | None
) -> Program[tuple[Response, ResponseMeta]]:
    """Send ``call`` with retries; return ``(response, meta)`` for a status below 300.

    A streamed response comes back with its body unread, so the caller decides by its
    Content-Type how to parse it; nothing past this point is ever retried.
    """
    attempt = 0
    while True:
        request = build(call)
        started = time.perf_counter()
        try:
            response = yield Send(request)
            hops = 0
            while response.is_redirect:
                yield from _read(response)  # a redirect's body: read, to free the connection
                request = redirected(call.path, request, response, hops, key)
                hops += 1
                response = yield Send(request)
            refused = compressed(response, call)
            if refused is not None:
                yield Close(response)
                raise refused
            if not call.stream or response.status >= 300:
                yield from _read(response)
        except TransportError as exc:
            error = connection_error(exc, call.method, call.path)
            if isinstance(exc, BodyTooLarge) or attempt >= policy.max_retries:  # a cap: never retried
                raise error from None
            delay = policy.delay(attempt)
            _log_retry(call, attempt, policy, delay, str(error))
        else:
            status = response.status
            if status < 300:
                return response, ResponseMeta(
                    call.path,
                    call.model,
                    status,
                    time.perf_counter() - started,
                    attempts=attempt + 1,
                    headers=response.headers,
                )
            failure = api_error(response, key, call.method, call.path)
            if attempt >= policy.max_retries or not policy.retryable(status):
                raise failure
            delay = policy.delay(attempt, response.headers)
            _log_retry(call, attempt, policy, delay, str(failure))
        yield Sleep(delay)
        attempt += 1


def _read(response: Response) -> Program[None]:
    """Read the body, unless the driver already has (the lean client reads answers whole)."""
    if not response.is_closed:
        yield Read(response)


def _log_retry(call: Call, attempt: int, policy: RetryPolicy, delay: float, why: str) -> None:
    logger.info(
        "retry %d/%d of %s %s in %.3fs after: %s",
        attempt + 1,
        policy.max_retries,
        call.method,
        call.path,
        delay,
        why,
    )
