"""One request/response exchange, with its retries and redirects, as a sans-IO program.

A *program* is a generator that yields commands (`Send`, `Read`, `Sleep`) and receives
their results; it returns the outcome. Everything that decides (retries, backoff,
redirects, what a head may announce, error mapping, redaction) lives in programs, and
`drivers` carries out the commands: the same program runs under `Gateway`, `AsyncGateway`
and the batch engine, and a test can step it by hand with made-up `http.Response` objects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import APIError, api_error, connection_error
from .http import BodyTooLarge, Request, Response, TransportError
from .redirects import redirected
from .results import ResponseMeta
from .retry import RetryPolicy
from .secret import Secret

__all__ = ["Send", "Read", "Close", "Sleep", "Command", "Call", "Program", "exchange", "logger"]

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


Command = Send | Read | Close | Sleep
Program = Generator[Command, Any, T]


@dataclass(frozen=True)
class Call:
    """What to send. ``body`` is already JSON bytes: serialising is the caller's business.
    ``media`` marks an answer that is media bytes, which may be larger than JSON."""

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
