"""One request/response exchange, with its retries and redirects, as a sans-IO program.

A *program* is a generator that yields commands (`Send`, `Read`, `Sleep`) and receives
their results; it returns the outcome. Everything that decides (retries, backoff,
redirects, error mapping, redaction, logging) lives in programs, and `drivers` carries
out the commands: the same program runs under `Gateway` and `AsyncGateway`, and a test can
step it by hand with made-up responses.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from .context import CallContext
from .error_mapping import api_error, connection_error
from .errors import GatecellError
from .redirects import redirected
from .results import ResponseMeta
from .retry import RetryPolicy
from .secret import Secret

__all__ = ["Send", "Read", "Sleep", "Command", "Call", "Outcome", "Program", "exchange", "logger"]

logger = logging.getLogger("gatecell")

T = TypeVar("T")


class Send:
    """Send ``request`` (redirects are not followed: `exchange` decides); with ``stream``
    only the headers are read."""

    __slots__ = ("request", "stream")

    def __init__(self, request: httpx.Request, stream: bool) -> None:
        self.request = request
        self.stream = stream

    def __repr__(self) -> str:
        return f"Send({self.request.method} {self.request.url}, stream={self.stream})"


class Read:
    """Read (and close) the body of a response sent with ``stream``."""

    __slots__ = ("response",)

    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    def __repr__(self) -> str:
        return f"Read({self.response.status_code})"


class Sleep:
    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"Sleep({self.seconds:g})"


Command = Send | Read | Sleep
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


@dataclass(frozen=True)
class Outcome:
    """How one call ended: what was sent, and what came of it.

    ``result`` is what the endpoint returned (a `ChatCompletion`, a `Reply`, a `Job`...);
    for a stream it is the stream itself, reported when it ends, with all its text, and
    ``partial`` tells a stream cut by an error or closed by the caller before its end.
    ``error`` is the `GatecellError` the call raised; ``meta`` is None when no answer came.
    ``body`` is the raw body of a whole (not streamed) answer; ``context`` what the call was
    part of (`context.CallContext`), ``at`` when it started (unix seconds), and
    ``cache_key`` its key when the cache was asked.
    """

    call: Call
    result: Any = None
    error: GatecellError | None = None
    meta: ResponseMeta | None = None
    partial: bool = False
    body: bytes | None = None
    context: CallContext | None = None
    at: float | None = None
    cache_key: str | None = None


def exchange(
    build: Callable[[Call], httpx.Request], call: Call, policy: RetryPolicy, key: Secret | None
) -> Program[tuple[httpx.Response, ResponseMeta]]:
    """Send ``call`` with retries; return ``(response, meta)`` for a status below 300.

    A streamed response comes back unread, so the caller decides by its Content-Type
    how to parse it; nothing past this point is ever retried.
    """
    attempt = 0
    while True:
        request = build(call)
        started = time.perf_counter()
        try:
            response = yield Send(request, call.stream)
            hops = 0
            while response.has_redirect_location:
                if call.stream:
                    yield Read(response)  # a redirect's body: read, to free the connection
                request = redirected(call, request, response, hops, key)
                hops += 1
                response = yield Send(request, call.stream)
        except httpx.HTTPError as exc:
            error = connection_error(exc, call)
            if attempt >= policy.max_retries:
                raise error from None
            delay = policy.delay(attempt)
            _log_retry(call, attempt, policy, delay, str(error))
        else:
            status = response.status_code
            if status < 300:
                return response, ResponseMeta(
                    call.path,
                    call.model,
                    status,
                    time.perf_counter() - started,
                    attempts=attempt + 1,
                    headers=response.headers,
                )
            if call.stream:
                try:
                    yield Read(response)
                except httpx.HTTPError as exc:
                    raise connection_error(exc, call) from None
            failure = api_error(response, key, call)
            if attempt >= policy.max_retries or not policy.retryable(status):
                raise failure
            delay = policy.delay(attempt, response.headers)
            _log_retry(call, attempt, policy, delay, str(failure))
        yield Sleep(delay)
        attempt += 1


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
