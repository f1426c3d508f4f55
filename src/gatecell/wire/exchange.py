"""One request/response exchange as a sans-IO program, shared by the sync and async clients.

A *program* is a generator that yields commands (`Send`, `Read`, `Sleep`) and receives
their results; it returns the outcome. Everything that decides (retries, backoff, error
mapping, redaction, logging) lives in programs, so `Gateway` and `AsyncGateway` only
differ in the few lines that carry out a command: ``client.send`` or ``await
client.send``, ``time.sleep`` or ``await asyncio.sleep``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Generator

import httpx

from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    RateLimitError,
    error_message,
    status_error,
)
from .results import ResponseMeta, request_id_of
from .retry import RetryPolicy, retry_after
from .secret import Secret, redact

__all__ = ["Send", "Read", "Sleep", "Call", "Program", "exchange", "api_error", "body_error", "connection_error", "json_body", "logger"]

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


def exchange(build: Callable[[Call], httpx.Request], call: Call, policy: RetryPolicy, key: Secret | None) -> Program:
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
                meta = ResponseMeta(call.path, call.model, status, time.perf_counter() - started, attempts=attempt + 1, headers=response.headers)
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("%s %s model=%s -> %d in %.3fs (request id %s)", call.method, call.path, call.model, status, meta.latency, meta.request_id)
                return response, meta
            if call.stream:
                try:
                    yield Read(response)
                except httpx.HTTPError as exc:
                    raise connection_error(exc, call) from None
            error = api_error(response, key, call)
            if attempt >= policy.max_retries or not policy.retryable(status):
                raise error
            delay = policy.delay(attempt, response.headers)
            _log_retry(call, attempt, policy, delay, str(error))
        yield Sleep(delay)
        attempt += 1


def _log_retry(call: Call, attempt: int, policy: RetryPolicy, delay: float, why: str) -> None:
    logger.info("retry %d/%d of %s %s in %.3fs after: %s", attempt + 1, policy.max_retries, call.method, call.path, delay, why)


def connection_error(exc: httpx.HTTPError, call: Call | None = None) -> APIConnectionError:
    cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    where = {"method": call.method, "path": call.path} if call else {}
    return cls(" ".join(f"{type(exc).__name__}: {exc}".split()), **where)


def json_body(content: bytes) -> Any:
    """The JSON of a body, or its text when it is not JSON."""
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")


def api_error(response: httpx.Response, key: Secret | None, call: Call, body: Any = None) -> APIError:
    """An error from a response, with the gateway's message and any key in it masked."""
    text = redact(response.content.decode("utf-8", "replace"), key)
    if body is None:
        body = json_body(text.encode())
    else:  # the body came from the caller: scrub it the same way
        body = json_body(redact(json.dumps(body), key).encode())
    found = error_message(body)
    message, code, kind = found if found else (text.strip()[:300] or response.reason_phrase or "no message", None, None)
    status = response.status_code
    if 300 <= status < 400:
        message = f"redirect to {response.headers.get('location')} not followed (the key would go along)"
    if status < 400 and code is not None and code.isdigit() and 400 <= int(code) < 600:
        status = int(code)  # a 200 carrying an error: its code is the better status
    cls = status_error(status)
    error = cls(
        " ".join(message.split()),
        status=status,
        method=call.method,
        path=call.path,
        code=code,
        type=kind,
        request_id=request_id_of(response.headers),
        body=body,
        hint=_hint(status),
    )
    if isinstance(error, RateLimitError):
        error.retry_after = retry_after(response.headers)
    return error


def body_error(response: httpx.Response, body: Any, key: Secret | None, call: Call) -> APIError | None:
    """The error a 200 body carries (``{"error": {...}}`` and kin), or None."""
    if isinstance(body, dict) and body.get("error") and error_message(body) and not body.get("choices"):
        return api_error(response, key, call, body)
    return None


def _hint(status: int) -> str | None:
    if status == 401:
        return "Check the API key (GATECELL_API_KEY or OPENAI_API_KEY)"
    return None
