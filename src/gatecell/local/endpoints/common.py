"""What every handler does first: read the JSON body, pick local model or upstream, pace."""

from __future__ import annotations

import asyncio
import functools
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gatecell.wire.apis.spec import validate
from gatecell.wire.transport.errors import InvalidRequest

from ..backends import Refused
from ..backends._stop import running
from ..errors import Fail, shown
from ..registry import MODELS, LocalModel, endpoint_error
from ..render import off_loop
from ..runtime import Runtime
from ..upstream import Upstream

__all__ = [
    "OWNER",
    "owner",
    "runtime",
    "read_json",
    "validated",
    "compose",
    "requested",
    "MAX_PROMPT",
    "check_length",
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
OWNER = "gatecell.owner"  # the scope key where `Guard` puts the caller's owner id
INLINE_BODY = 64 * 1024  # bodies up to this are parsed on the event loop (cheaper than a thread hop)
MAX_PROMPT = 8192  # characters of a media prompt: jobs keep theirs, and 1000 jobs are kept
T = TypeVar("T")

# json.loads turns a \uD800-\uDFFF escape that is not half of a pair into a lone surrogate,
# which no UTF-8 text can hold: every later encode (an echo, a seed, a caption) would fail.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def runtime(request: Request) -> Runtime:
    return request.app.state.runtime


def owner(request: Request) -> str:
    """The owner id of the caller's key (set by `Guard`): jobs and files are theirs alone."""
    return request.scope[OWNER]


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
    big = len(body) > INLINE_BODY
    try:
        data = await off_loop(json.loads, body) if big else json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise Fail(400, f"malformed JSON in the request body: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise Fail(400, f"the request body must be a JSON object, got {type(data).__name__}")
    return body, data


async def _check_text(body: bytes, data: dict[str, Any]) -> None:
    """400 when a string of a body served here holds a lone surrogate (forwarded bodies go as sent)."""
    if not _SURROGATE_ESCAPE.search(body):
        return
    where = await off_loop(_lone_surrogate, data) if len(body) > INLINE_BODY else _lone_surrogate(data)
    if where is not None:
        where = where.encode("utf-8", "backslashreplace").decode()  # the path may hold one too (a key)
        raise Fail(
            400,
            f"{where or 'the body'}: a string holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff "
            "escape), which is not text; send valid Unicode",
            param=where or None,
        )


def _lone_surrogate(data: Any) -> str | None:
    """The dotted path of the first string (or key) holding a lone surrogate, else None.

    Iterative, so no nesting depth makes it fail."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return where
        elif isinstance(item, dict):
            for key, value in item.items():
                inner = f"{where}.{key}" if where else str(key)
                if _SURROGATE.search(key):
                    return inner
                stack.append((value, inner))
        elif isinstance(item, list):
            stack.extend((value, f"{where}.{i}" if where else str(i)) for i, value in enumerate(item))
    return None


async def compose(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """Compose a local-chat reply off the event loop; what the stand-in refuses is a 400.
    Once the client has gone, the work is told to stop (`backends._stop.current`): a PDF's
    text extraction kills its worker rather than spend its budget for no one."""
    stop = threading.Event()
    watching = asyncio.ensure_future(_gone(request, stop))
    try:
        return await off_loop(running, stop, fn, *args)
    except Refused as exc:
        raise Fail(400, str(exc)) from None
    finally:
        watching.cancel()


async def _gone(request: Request, stop: threading.Event) -> None:
    """Set ``stop`` when the client disconnects (the body is read: what comes next is that)."""
    while not await request.is_disconnected():
        await asyncio.sleep(_WATCH)
    stop.set()


_WATCH = 0.2  # seconds between looks at a client's connection while its reply is made


def requested(reader: Callable[[dict[str, Any]], T], data: dict[str, Any]) -> T:
    """What the body asks of the stand-in, as `reader` finds it; a malformed ask is a 400."""
    try:
        return reader(data)
    except Refused as exc:
        raise Fail(400, str(exc)) from None


def check_length(name: str, text: str | None, limit: int = MAX_PROMPT) -> None:
    """Media prompts (and styles) are bounded: a job keeps them, echoes them in every poll, draws them."""
    if text is not None and len(text) > limit:
        raise Fail(400, f"{name}: at most {limit} characters, got {len(text)}", param=name)


def check(schema: type[BaseModel], data: dict[str, Any]) -> Any:
    """SPEC 2 rules; a broken one is a 400 naming the field."""
    try:
        return validate(schema, data)
    except InvalidRequest as exc:
        raise Fail(400, str(exc), param=exc.field or None, code="invalid_value") from None


Reader = Callable[[dict[str, Any]], Any]  # a body's reader that raises `Fail` itself


async def validated(schema: type[BaseModel] | Reader, body: bytes, data: dict[str, Any]) -> Any:
    """A body served here, checked: text that is text (`_check_text`), then SPEC 2 rules (`check`)
    or, for a body SPEC does not describe, its own reader; off the event loop when the body is big."""
    await _check_text(body, data)
    read = functools.partial(check, schema) if isinstance(schema, type) else schema
    return await off_loop(read, data) if len(body) > INLINE_BODY else read(data)


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
            f"model {shown(model)} not found; GET /v1/models lists the models this gateway serves",
            param="model",
            code="model_not_found",
        )
    why = endpoint_error(local, endpoint)
    if why:
        raise Fail(400, why, param="model", code="unsupported_endpoint")
    return local


def model_endpoint(schema: type[BaseModel] | Reader, endpoint: str):
    """Decorate ``handler(request, req, data)`` of an endpoint whose body names a model.

    The wrapper does what they all share, in this order: read the JSON body, forward a model
    not served here to the upstream (raw bytes, unvalidated: upstream has its own rules),
    check SPEC 2 rules (or the reader's), and check the local model may be called on `endpoint`.
    """

    def wrap(handler: Callable[[Request, Any, dict[str, Any]], Awaitable[Response]]):
        @functools.wraps(handler)
        async def run(request: Request) -> Response:
            rt = runtime(request)
            body, data = await read_json(request)
            upstream = remote(rt, data.get("model"))
            if upstream is not None:
                return await upstream.forward(request, body)
            req = await validated(schema, body, data)
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
        raise Fail(400, f"x-gatecell-pace must be a number of seconds, got {shown(raw)}") from None
    if not 0 <= value <= 2:
        raise Fail(400, f"x-gatecell-pace must be between 0 and 2 seconds, got {shown(raw)}")
    return value


async def paced(tokens: list[T], pace: float) -> AsyncIterator[T]:
    """Yield `tokens` one by one, `pace` seconds apart, like a model generating them."""
    for i, token in enumerate(tokens):
        if i:
            await asyncio.sleep(pace)
        yield token


def event_stream(events: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)
