"""The local gateway as a Starlette app: SPEC 4 routes, SPEC 5 auth, errors in each format.

Every SPEC path is served twice, under ``/v1`` and under the unversioned base (SPEC 4 note 2).
`Guard`, a plain ASGI layer, runs before routing: it refuses tricky paths, checks the key,
enforces the body cap (by Content-Length up front, by counting bytes for chunked bodies), and
turns any unexpected exception into a clean 500 in the endpoint's format, logged without keys.
"""

from __future__ import annotations

import logging
import re
import traceback
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gatecell.wire.util.secret import redact

from .auth import credential
from .config import Config
from .endpoints import completions, embeddings, media, media_jobs, models, native, responses
from .endpoints.common import OWNER
from .errors import Fail, error_response, format_for, shown
from .runtime import Runtime

__all__ = ["create_app"]

log = logging.getLogger("gatecell.local")

_KEY_HINT = {
    "openai": "'Authorization: Bearer sk-...'",
    "messages": "'x-api-key: sk-...' or 'Authorization: Bearer sk-...'",
    "google": "'x-goog-api-key: sk-...'",
}
# What a path may not hold, as sent (raw) or as decoded: dot segments, percent-encoded "/",
# "." or "\\" (also encoded twice), backslashes and control characters. Each could make the
# path mean one thing here and another after a further decoding or normalisation (upstream's).
_TRICKY = r"%(?:2[ef]|5c|[01][0-9a-f]|7f)|\.\.|\\|[\x00-\x1f\x7f]|(?:^|/)\.(?:/|$)"
_TRICKY_PATH = re.compile(_TRICKY, re.I)
_TRICKY_RAW = re.compile(_TRICKY.encode(), re.I)


def _routes() -> list[Route]:
    """Every route there is. Nothing else is forwarded: a model this gateway does not serve goes
    upstream from its SPEC endpoint, an unknown job id from its poll path (`Upstream.forward`
    allows exactly those), and any other path is a 404 here."""
    versioned = [
        ("/v1/chat/completions", completions.completions, ["POST"]),
        ("/v1/messages", native.messages, ["POST"]),
        ("/v1/responses", responses.responses, ["POST"]),
        ("/v1/images/generations", media.images, ["POST"]),
        ("/v1/audio/speech", media.speech, ["POST"]),
        ("/v1/videos", media_jobs.create_video, ["POST"]),
        ("/v1/videos/{id}", media_jobs.get_video, ["GET"]),
        ("/v1/videos/{id}/content", media_jobs.video_content, ["GET"]),
        ("/v1/models", models.list_models, ["GET"]),
        ("/v1/embeddings", embeddings.embeddings, ["POST"]),  # WIRE-NOTES, not SPEC
        ("/v1/rerank", embeddings.rerank, ["POST"]),
    ]
    routes = [Route(path, fn, methods=methods) for path, fn, methods in versioned]
    # SPEC 4 note 2: the same endpoints under the base address without a version.
    routes += [Route(path[3:], fn, methods=methods) for path, fn, methods in versioned]
    routes += [
        Route("/v1beta/models/{target:path}", native.generate, methods=["POST"]),
        Route("/v1/models/{target:path}", _model_or_generate, methods=["GET", "POST"]),
        Route("/models/{target:path}", _model_or_generate, methods=["GET", "POST"]),
        Route("/imgjob/submit/imagine", media_jobs.submit_imagine, methods=["POST"]),
        Route("/imgjob/task/{id}/fetch", media_jobs.fetch_imagine, methods=["GET"]),
        Route("/musicjob/submit/music", media_jobs.submit_music, methods=["POST"]),
        Route("/musicjob/fetch/{id}", media_jobs.fetch_music, methods=["GET"]),
        Route("/files/{name}", media.files, methods=["GET"]),
        Route("/health", _health, methods=["GET"]),
    ]
    return routes


async def _model_or_generate(request: Request) -> Response:
    """``/v1/models/...`` and ``/models/...``: GET retrieves a model, POST is generate-content."""
    if request.method == "POST":
        return await native.generate(request)
    request.path_params["name"] = request.path_params["target"]
    return await models.get_model(request)


async def _health(request: Request) -> Response:
    return Response('{"status":"ok"}', media_type="application/json")


async def _on_fail(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Fail)
    return error_response(
        request.url.path, exc.status, exc.message, param=exc.param, code=exc.code, headers=exc.headers
    )


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    path = request.url.path
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        message = f"method {request.method} is not allowed on {path}; use {allowed or 'another method'}"
        return error_response(path, 405, message, headers=dict(exc.headers or {}))
    if exc.status_code == 404:
        return error_response(path, 404, f"unknown route {request.method} {path}", code="unknown_route")
    return error_response(path, exc.status_code, str(exc.detail))


class Guard:
    """Path check, key check, body cap and last-resort error handling around the whole app.

    Nothing reaches routing (and so nothing is forwarded upstream) without a valid key, except
    exactly ``GET /health`` and ``HEAD /health``. The key's owner id goes into the scope for
    the endpoints, which keep jobs and files per owner.
    """

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if _TRICKY_PATH.search(path) or _TRICKY_RAW.search(scope.get("raw_path") or b""):
            message = (
                f"the path {shown(path)} holds a dot segment, an encoded '/', '.' or '\\', a backslash "
                "or a control character; send the plain path"
            )
            await error_response(path, 400, message, code="invalid_path")(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if path != "/health" or scope["method"] not in ("GET", "HEAD"):
            owner = self.runtime.keys.owner(credential(path, headers))
            if owner is None:
                hint = _KEY_HINT.get(format_for(path), _KEY_HINT["openai"])
                message = f"missing or invalid API key; send it as {hint}"
                await error_response(path, 401, message, code="invalid_api_key")(scope, receive, send)
                return
            scope[OWNER] = owner
        cap = self.runtime.config.max_body
        declared = headers.get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > cap:
            status, why = (
                (413, f"request body over the {cap} byte limit")
                if declared.isdigit()
                else (400, "bad Content-Length")
            )
            await error_response(path, status, why)(scope, receive, send)
            return
        started = False
        seen = 0

        async def capped() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > cap:
                raise Fail(413, f"request body over the {cap} byte limit")
            return message

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, capped, watch)
        except ClientDisconnect:
            return  # the client left (or was cut off for stalling); nobody to answer
        except Exception as exc:
            keys = self.runtime.config.api_keys
            trace = redact(traceback.format_exc(), *keys, self.runtime.config.upstream_key)
            log.error("unexpected error on %s %s: %s", scope["method"], path, trace)
            if not started:
                await error_response(
                    path, 500, f"internal error in the local gateway ({type(exc).__name__})"
                )(scope, receive, send)


def create_app(config: Config | None = None, **options: Any) -> Starlette:
    """The local gateway app; `options` are those of `Config.create` when no config is given."""
    config = config or Config.create(**options)
    runtime = Runtime.create(config)

    @asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        runtime.jobs.close()
        if runtime.upstream is not None:
            await runtime.upstream.aclose()

    app = Starlette(
        routes=_routes(),
        exception_handlers={Fail: _on_fail, HTTPException: _on_http},
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.add_middleware(Guard, runtime=runtime)
    return app
