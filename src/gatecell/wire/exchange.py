"""One request/response exchange, with its retries, as a sans-IO program.

A *program* is a generator that yields commands (`Send`, `Read`, `Sleep`) and receives
their results; it returns the outcome. Everything that decides (retries, backoff, error
mapping, redaction, logging) lives in programs, so `Gateway` and `AsyncGateway` only
differ in the few lines that carry out a command: ``client.send`` or ``await
client.send``, ``time.sleep`` or ``await asyncio.sleep``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import httpx

from .error_mapping import api_error, connection_error
from .results import ResponseMeta
from .retry import RetryPolicy
from .secret import Secret

__all__ = ["Send", "Read", "Sleep", "Call", "Program", "exchange", "logger"]

logger = logging.getLogger("gatecell")


class Send:
    """Send ``request``; with ``stream`` only the headers are read. Redirects are followed
    unless the key travels in ``x-goog-api-key``, which httpx would carry to another host
    (it drops only ``Authorization`` there)."""

    __slots__ = ("request", "stream", "follow")

    def __init__(self, request: httpx.Request, stream: bool, follow: bool = True) -> None:
        self.request = request
        self.stream = stream
        self.follow = follow


class Read:
    """Read (and close) the body of a response sent with ``stream``."""

    __slots__ = ("response",)

    def __init__(self, response: httpx.Response) -> None:
        self.response = response


class Sleep:
    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


Command = Send | Read | Sleep
Program = Generator[Command, Any, Any]


@dataclass(frozen=True)
class Call:
    """What to send. ``body`` is already JSON bytes: serialising is the caller's business."""

    method: str
    path: str
    body: bytes | None = None
    stream: bool = False
    model: str | None = None
    auth: str = "bearer"  # "bearer", "goog" (x-goog-api-key, SPEC 5) or "none"


def exchange(
    build: Callable[[Call], httpx.Request], call: Call, policy: RetryPolicy, key: Secret | None
) -> Program:
    """Send ``call`` with retries; return ``(response, meta)`` for a status below 400.

    A streamed response comes back unread, so the caller decides by its Content-Type
    how to parse it; nothing past this point is ever retried.
    """
    attempt = 0
    while True:
        request = build(call)
        started = time.perf_counter()
        try:
            response = yield Send(request, call.stream, call.auth != "goog")
        except httpx.HTTPError as exc:
            error = connection_error(exc, call)
            if attempt >= policy.max_retries:
                raise error from None
            delay = policy.delay(attempt)
            _log_retry(call, attempt, policy, delay, str(error))
        else:
            status = response.status_code
            if status < 300:
                meta = ResponseMeta(
                    call.path,
                    call.model,
                    status,
                    time.perf_counter() - started,
                    attempts=attempt + 1,
                    headers=response.headers,
                )
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug(
                        "%s %s model=%s -> %d in %.3fs (request id %s)",
                        call.method,
                        call.path,
                        call.model,
                        status,
                        meta.latency,
                        meta.request_id,
                    )
                return response, meta
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
