"""Embeddings and rerank (WIRE-NOTES "Embeddings and rerank"; not in SPEC): the request
models, and the readers of their answers.

``POST /v1/embeddings`` takes ``input`` as a list and answers one vector per input in
``data``, in any order (``index`` says whose), each a list of floats or, when asked with
``encoding_format: "base64"``, the base64 of little-endian float32: a fifth of the bytes of
the JSON floats and no float parsing. A gateway that ignores the format sends floats; both
are read. ``POST /v1/rerank`` (Cohere/Jina shape) answers ``results`` of ``index`` and
``relevance_score``.

What ``Gateway.embed`` returns is `gatecell.wire.apis.vectors.Vectors` (a module of its own: it
imports numpy, which this one imports only when an answer is read).
"""

from __future__ import annotations

import base64
import binascii
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator

from gatecell.wire.apis.spec import RequestModel
from gatecell.wire.transport.errors import APIError, echo

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "EmbeddingsRequest",
    "RerankRequest",
    "Embeddings",
    "EmbedMeta",
    "Ranked",
    "Reranked",
    "read_embeddings",
    "read_rerank",
    "MAX_DIMENSIONS",
    "embed_model",
    "rerank_model",
]

MAX_DIMENSIONS = 65_536  # no model's vectors are longer; past it a typo, refused before sending
EMBED_MODEL = "local-embed"  # the local gateway's; GATECELL_EMBED_MODEL names another
RERANK_MODEL = "local-embed"  # the local gateway ranks with its embedding model


def embed_model(model: str | None) -> str:
    """The embedding model: ``model``, else ``GATECELL_EMBED_MODEL``, else `EMBED_MODEL`."""
    return model or os.environ.get("GATECELL_EMBED_MODEL", "").strip() or EMBED_MODEL


def rerank_model(model: str | None) -> str:
    """The rerank model: ``model``, else ``GATECELL_RERANK_MODEL``, else `RERANK_MODEL`."""
    return model or os.environ.get("GATECELL_RERANK_MODEL", "").strip() or RERANK_MODEL


def _texts(values: list[str], what: str) -> list[str]:
    for position, value in enumerate(values):
        if not value.strip():
            raise ValueError(
                f"{what}[{position}] is empty: gateways embed no empty text (drop it or fill it)"
            )
    return values


class EmbeddingsRequest(RequestModel):
    """``POST /v1/embeddings``: ``input`` always a list (one text is a list of one)."""

    known_fields: ClassVar[frozenset[str]] = frozenset({"user"})

    model: str = Field(min_length=1)
    input: list[str] = Field(min_length=1)
    encoding_format: Literal["float", "base64"] | None = None
    dimensions: int | None = Field(default=None, ge=1, le=MAX_DIMENSIONS)

    @field_validator("input")
    @classmethod
    def _inputs(cls, value: list[str]) -> list[str]:
        return _texts(value, "input")


class RerankRequest(RequestModel):
    """``POST /v1/rerank``: a query, the documents to order, and how many to keep."""

    known_fields: ClassVar[frozenset[str]] = frozenset({"return_documents", "max_chunks_per_doc"})

    model: str = Field(min_length=1)
    query: str = Field(min_length=1)
    documents: list[str] = Field(min_length=1)
    top_n: int | None = Field(default=None, ge=1)

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("documents")
    @classmethod
    def _documents(cls, value: list[str]) -> list[str]:
        return _texts(value, "documents")


def _malformed(why: str, path: str) -> APIError:
    return APIError(f"the gateway's answer is not one gatecell can read: {why}", status=200, path=path)


@dataclass(frozen=True)
class Embeddings:
    """One answer of ``/v1/embeddings``: ``matrix`` (n, d) float32 in the order of the inputs,
    the ``model`` that answered, and its ``prompt_tokens`` (None when it did not say);
    ``meta``: its `ResponseMeta` (what it cost, once the client's hooks priced it)."""

    matrix: np.ndarray
    model: str | None
    prompt_tokens: int | None
    usage: Any = None
    meta: Any = None


def _vector(item: Any, path: str) -> np.ndarray:
    import numpy as np

    embedding = item.get("embedding") if isinstance(item, dict) else None
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except ValueError:
            raise _malformed("an embedding is neither base64 nor a list of numbers", path) from None
        if not raw or len(raw) % 4:
            raise _malformed(f"an embedding of {len(raw)} bytes is no float32 vector", path)
        return np.frombuffer(raw, dtype="<f4")
    if isinstance(embedding, list) and embedding:
        try:
            return np.asarray(embedding, dtype=np.float32)
        except (TypeError, ValueError):
            raise _malformed("an embedding holds something other than numbers", path) from None
    raise _malformed(f"an embedding is {echo(embedding)}", path)


_STRICT: dict[str, Any] = {"strict_mode": True} if sys.version_info >= (3, 11) else {}


def _packed(data: list[Any], count: int) -> np.ndarray | None:
    """All the vectors at once, when every one is base64 of the same length with no padding
    (the usual answer): one decode of their concatenation. None otherwise."""
    import numpy as np

    texts: list[Any] = [item.get("embedding") if isinstance(item, dict) else None for item in data]
    first = texts[0] if texts else None
    if not isinstance(first, str) or not first or len(first) % 4 or first.endswith("="):
        return None
    if not all(isinstance(t, str) and len(t) == len(first) and not t.endswith("=") for t in texts):
        return None
    try:
        raw = binascii.a2b_base64("".join(texts).encode("ascii"), **_STRICT)
    except (ValueError, UnicodeEncodeError):
        return None  # said one by one
    if len(raw) != len(first) // 4 * 3 * count:  # a character outside base64 (skipped before 3.11)
        return None
    return np.frombuffer(raw, dtype="<f4").reshape(count, -1).astype(np.float32, copy=False)


def _one_by_one(data: list[Any], count: int, path: str) -> np.ndarray:
    import numpy as np

    matrix: np.ndarray | None = None
    for position, item in enumerate(data):
        vector = _vector(item, path)
        if matrix is None:
            matrix = np.empty((count, vector.shape[0]), dtype=np.float32)
        elif vector.shape[0] != matrix.shape[1]:
            lengths = f"{matrix.shape[1]} and {vector.shape[0]}"
            raise _malformed(f"vectors of {lengths} numbers in one answer", path)
        matrix[position] = vector
    assert matrix is not None
    return matrix


def read_embeddings(body: Any, count: int, path: str = "/v1/embeddings", meta: Any = None) -> Embeddings:
    """The vectors of an answer to ``count`` inputs, ordered by their ``index``; an
    `APIError` in one line when the answer does not hold exactly one vector per input, all
    of one length."""
    import numpy as np

    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise _malformed("no 'data' list", path)
    if len(data) != count:
        raise _malformed(f"{len(data)} embeddings for {count} inputs", path)
    indices = [item.get("index", i) if isinstance(item, dict) else i for i, item in enumerate(data)]
    wrong = next((i for i in indices if not isinstance(i, int) or isinstance(i, bool)), None)
    if wrong is not None or sorted(indices) != list(range(count)):
        said = echo(wrong) if wrong is not None else "repeated or missing"
        raise _malformed(f"embedding indexes {said}: not one per input 0..{count - 1}", path)
    matrix = _packed(data, count)
    if matrix is None:
        matrix = _one_by_one(data, count, path)
    if indices != list(range(count)):
        ordered = np.empty_like(matrix)
        ordered[indices] = matrix
        matrix = ordered
    usage = body.get("usage")
    tokens = usage.get("prompt_tokens", usage.get("total_tokens")) if isinstance(usage, dict) else None
    model = body.get("model")
    return Embeddings(
        matrix,
        model if isinstance(model, str) else None,
        tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
        usage if isinstance(usage, dict) else None,
        meta,
    )


@dataclass
class EmbedMeta:
    """How a `Vectors` was made: the ``model`` asked, its ``dimensions`` (None: the model's
    own), whether every row has length 1 (``normalized``: cosine is then a dot product),
    ``texts`` given, ``unique`` among them, ``cached`` (from the store: not sent), ``sent``
    (to the gateway), ``requests`` made, their ``prompt_tokens`` and ``cost`` (US dollars,
    None when unknown)."""

    model: str
    dimensions: int | None = None
    normalized: bool = False
    texts: int = 0
    unique: int = 0
    cached: int = 0
    sent: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    cost: float | None = None


@dataclass(frozen=True)
class Ranked:
    """One document of a rerank: its ``index`` in the documents given, its
    ``relevance_score``, and the ``document`` text."""

    index: int
    relevance_score: float
    document: str


@dataclass(frozen=True)
class Reranked:
    """The answer of ``/v1/rerank``: ``results`` best first, the ``model``, the raw ``usage``."""

    results: list[Ranked]
    model: str | None = None
    usage: Any = None

    def __iter__(self) -> Any:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def indices(self) -> list[int]:
        return [r.index for r in self.results]


def read_rerank(body: Any, documents: list[str], path: str = "/v1/rerank") -> Reranked:
    """The ranking of an answer to ``/v1/rerank``, best first (ties in the documents' order)."""
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list):
        raise _malformed("no 'results' list", path)
    ranked = []
    for item in results:
        index = item.get("index") if isinstance(item, dict) else None
        score = item.get("relevance_score", item.get("score")) if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(documents):
            raise _malformed(f"rerank index {echo(index)} is not one of the documents'", path)
        if not isinstance(score, (int, float)) or isinstance(score, bool):
            raise _malformed(f"relevance score {echo(score)} is not a number", path)
        ranked.append(Ranked(index, float(score), documents[index]))
    ranked.sort(key=lambda r: (-r.relevance_score, r.index))
    model = body.get("model")
    return Reranked(ranked, model if isinstance(model, str) else None, body.get("usage"))
