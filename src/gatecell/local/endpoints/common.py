"""What every handler does first: read the JSON body, pick local model or upstream, pace."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gatecell.wire.errors import InvalidRequest
from gatecell.wire.schemas import validate

from ..errors import Fail
from ..registry import MODELS, LocalModel, endpoint_error
from ..runtime import Runtime
from ..upstream import Upstream

__all__ = [
    "runtime",
    "read_json",
    "check",
    "remote",
    "served",
    "model_endpoint",
    "pace_of",
    "paced",
    "event_stream",
    "json_response",
    "now",
]

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def runtime(request: Request) -> Runtime:
    return request.app.state.runtime


def now() -> int:
    return int(time.time())


def json_response(data: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(data, ensure_ascii=False, separators=(",", ":")),
        status_code=status,
        media_type="application/json",
    )


async def read_json(request: Request) -> tuple[bytes, dict[str, Any]]:
    """The raw body (kept for forwarding) and its JSON object; 400 when it is not one."""
    body = await request.body()
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/") or kind.startswith("application/x-www-form-urlencoded"):
        raise Fail(
            400, f"this gateway takes JSON bodies (Content-Type: application/json), not {kind.split(';')[0]}"
        )
    if not body.strip():
        raise Fail(400, "the request body is empty; send a JSON object (Content-Type: application/json)")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise Fail(400, f"malformed JSON in the request body: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise Fail(400, f"the request body must be a JSON object, got {type(data).__name__}")
    return body, data


def check(schema: type[BaseModel], data: dict[str, Any]) -> Any:
    """SPEC 2 rules; a broken one is a 400 naming the field."""
    try:
        return validate(schema, data)
    except InvalidRequest as exc:
        raise Fail(400, str(exc), param=exc.field or None, code="invalid_value") from None


def remote(rt: Runtime, model: Any) -> Upstream | None:
    """The upstream gateway when `model` is not served here and upstream may have it, else None."""
    if rt.upstream is not None and isinstance(model, str) and model and model not in MODELS:
        return rt.upstream
    return None


def served(model: str, endpoint: str) -> LocalModel:
    """The local model called `model`, allowed on `endpoint`; 404 or 400 otherwise."""
    local = MODELS.get(model)
    if local is None:
        raise Fail(
            404,
            f"model {model!r} not found; GET /v1/models lists the models this gateway serves",
            param="model",
            code="model_not_found",
        )
    why = endpoint_error(local, endpoint)
    if why:
        raise Fail(400, why, param="model", code="unsupported_endpoint")
    return local


def model_endpoint(schema: type[BaseModel], endpoint: str):
    """Decorate ``handler(request, req, data)`` of a SPEC endpoint whose body names a model.

    The wrapper does what they all share, in this order: read the JSON body, forward a model
    not served here to the upstream (raw bytes, unvalidated: upstream has its own rules),
    check SPEC 2 rules, and check the local model may be called on `endpoint`.
    """

    def wrap(handler: Callable[[Request, Any, dict[str, Any]], Awaitable[Response]]):
        @functools.wraps(handler)
        async def run(request: Request) -> Response:
            rt = runtime(request)
            body, data = await read_json(request)
            upstream = remote(rt, data.get("model"))
            if upstream is not None:
                return await upstream.forward(request, body)
            req = check(schema, data)
            served(req.model, endpoint)
            return await handler(request, req, data)

        return run

    return wrap


def pace_of(request: Request, rt: Runtime) -> float:
    """Seconds between streamed tokens: the app's pace, or the ``x-gatecell-pace`` header (max 2 s)."""
    raw = request.headers.get("x-gatecell-pace")
    if raw is None:
        return rt.config.pace
    try:
        value = float(raw)
    except ValueError:
        raise Fail(400, f"x-gatecell-pace must be a number of seconds, got {raw!r}") from None
    if not 0 <= value <= 2:
        raise Fail(400, f"x-gatecell-pace must be between 0 and 2 seconds, got {raw!r}")
    return value


async def paced(tokens: list[str], pace: float) -> AsyncIterator[str]:
    """Yield `tokens` one by one, `pace` seconds apart, like a model generating them."""
    for i, token in enumerate(tokens):
        if i:
            await asyncio.sleep(pace)
        yield token


def event_stream(events: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)
