"""What the client hands back for the endpoints whose responses SPEC does not show.

Each result keeps the raw JSON (or bytes) and *recognises* the common shapes of
WIRE-NOTES on top: text of a messages / generate-content / responses reply, images from
``b64_json`` or a URL, audio with its format sniffed from the bytes. Recognise, never
require: an unknown shape gives ``None`` or an empty list, never an exception.
"""

from __future__ import annotations

import base64
import inspect
import mimetypes
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from gatecell.wire.transport.errors import GatecellError
from gatecell.wire.transport.http import request_id_of

__all__ = [
    "Answer",
    "ResponseMeta",
    "response_cost",
    "dollars",
    "MAX_COST",
    "Media",
    "Audio",
    "ImageResult",
    "Reply",
    "Model",
    "ModelList",
    "Job",
    "sniff",
    "reply_text",
    "reply_reasoning",
    "reply_finish",
    "cut_by_limit",
]

Loaded = tuple[bytes, str | None]
Loader = Callable[[], Loaded | Awaitable[Loaded]]


_UNREAD: Any = object()


MAX_COST = 10_000.0
"""US dollars one exchange may cost, at most: a million tokens of the dearest model cost
hundreds. A figure past it (``1e308``, which two of make ``inf`` when summed) is no cost."""


def dollars(value: Any, cap: float = MAX_COST) -> float | None:
    """``value`` (a number, or its text) as US dollars when it is one: finite, from 0 to
    ``cap``; else None (unknown), never ``inf`` or ``NaN``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):  # LiteLLM sends "None" when it does not know
        return None
    return number if 0 <= number <= cap else None  # NaN compares false


def response_cost(headers: Mapping[str, str]) -> float | None:
    """What the gateway says a whole answer cost, in US dollars: LiteLLM's
    ``x-litellm-response-cost`` (the sum of its ``-input`` and ``-output`` parts, which a
    stream's head carries too, as zeros: a stream says its cost in its last usage)."""
    return dollars(headers.get("x-litellm-response-cost"))


class ResponseMeta:
    """Provenance of one answer: which path, which model, how it went, what it cost.

    The request id and the gateway's cost are looked up in the headers on first use: most
    callers never ask. ``cost`` is in US dollars, None when unknown; ``cost_source`` says who
    said (``gateway``, or what the client priced it by: ``model-info``, ``prices``).
    """

    __slots__ = (
        "endpoint",
        "model",
        "status",
        "latency",
        "usage",
        "attempts",
        "cached",
        "body",
        "earlier",
        "_headers",
        "_request_id",
        "_cost",
        "_cost_source",
    )

    def __init__(
        self,
        endpoint: str,
        model: str | None,
        status: int,
        latency: float,
        request_id: str | None = None,
        usage: Any = None,
        attempts: int = 1,
        headers: Mapping[str, str] | None = None,
        cached: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self.model = model
        self.status = status
        self.latency = latency  # seconds from sending to the whole body (or the stream's headers)
        self.usage = usage  # a `schemas.Usage` in chat terms, whatever shape the gateway used
        self.attempts = attempts
        self.cached = cached  # answered from the log (``Gateway(cache=True)``): no request was sent
        self.body: bytes | None = None  # the raw body of a whole answer (None: a stream's)
        # The answers before this one in a call of several rounds (a typed answer's repairs).
        self.earlier: tuple[ResponseMeta, ...] = ()
        self._headers = headers
        self._request_id = request_id
        self._cost: Any = None if headers is None else _UNREAD
        self._cost_source: str | None = None

    @property
    def request_id(self) -> str | None:
        if self._request_id is None and self._headers is not None:
            self._request_id = request_id_of(self._headers)
        return self._request_id

    @property
    def cost(self) -> float | None:
        if self._cost is _UNREAD:
            self._cost = response_cost(self._headers) if self._headers is not None else None
            self._cost_source = "gateway" if self._cost is not None else None
        return self._cost

    @property
    def cost_source(self) -> str | None:
        return self._cost_source if self.cost is not None else None

    def priced(self, cost: float | None, source: str | None) -> None:
        """Set the cost and its source (the client's, when the answer did not say)."""
        self._cost, self._cost_source = cost, source

    def __repr__(self) -> str:
        return (
            f"ResponseMeta(endpoint={self.endpoint!r}, model={self.model!r}, status={self.status}, "
            f"latency={self.latency:.3f}, request_id={self.request_id!r}, attempts={self.attempts}"
            + (", cached=True)" if self.cached else ")")
        )


@runtime_checkable
class Answer(Protocol):
    """What every text answer gives, whichever API and whether it streamed (`ChatCompletion`,
    `Reply`, the chat and text streams): ``text`` (None when none is recognised), ``meta``
    (its `ResponseMeta`: provenance, ``meta.usage`` in chat terms), ``usage`` (as the
    answer's type keeps it), ``parsed`` (a typed answer's value; None otherwise)."""

    @property
    def text(self) -> str | None: ...

    @property
    def meta(self) -> ResponseMeta | None: ...

    @property
    def usage(self) -> Any: ...

    @property
    def parsed(self) -> Any: ...


# -- media ------------------------------------------------------------------------------

_SIGNATURES: list[tuple[int, bytes, str, str]] = [
    (0, b"\x89PNG", "png", "image/png"),
    (0, b"\xff\xd8\xff", "jpeg", "image/jpeg"),
    (0, b"GIF8", "gif", "image/gif"),
    (0, b"fLaC", "flac", "audio/flac"),
    (0, b"OggS", "ogg", "audio/ogg"),
    (0, b"ID3", "mp3", "audio/mpeg"),
    (4, b"ftyp", "mp4", "video/mp4"),
    (0, b"\x1aE\xdf\xa3", "webm", "video/webm"),
]

_MIME_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/ogg": "ogg",
    "audio/opus": "opus",
    "audio/flac": "flac",
    "audio/aac": "aac",
    "audio/pcm": "pcm",
    "audio/l16": "pcm",
}
_FORMAT_MIMES = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "pcm": "audio/pcm",
}


def sniff(data: bytes) -> tuple[str, str] | None:
    """``(format, mime)`` from the first bytes, or None. Content-Type headers lie; bytes do not."""
    if data[:4] == b"RIFF" and data[8:12] in (b"WAVE", b"WEBP"):
        return ("wav", "audio/wav") if data[8:12] == b"WAVE" else ("webp", "image/webp")
    for offset, magic, fmt, mime in _SIGNATURES:
        if data[offset : offset + len(magic)] == magic:
            return fmt, mime
    if len(data) > 1 and data[0] == 0xFF:
        if data[1] & 0xF6 == 0xF0:
            return "aac", "audio/aac"
        if data[1] & 0xE0 == 0xE0:
            return "mp3", "audio/mpeg"
    return None


class Media:
    """Bytes of an image, a sound or a video. From a URL, the bytes are fetched on first use
    through the same client (with the key only when the URL is on the gateway's host)."""

    def __init__(
        self,
        data: bytes | None = None,
        mime: str | None = None,
        url: str | None = None,
        load: Loader | None = None,
    ) -> None:
        self._data = data
        self._mime = mime
        self.url = url
        self._load = load

    @property
    def data(self) -> bytes:
        if self._data is None:
            if self._load is None:
                return b""
            loaded = self._load()
            if inspect.isawaitable(loaded):
                if inspect.iscoroutine(loaded):
                    loaded.close()
                raise GatecellError("this media comes from an AsyncGateway: use `await media.aread()`")
            self._set(loaded)
        assert self._data is not None
        return self._data

    async def aread(self) -> bytes:
        """The bytes, fetched if needed; works for media of either client."""
        if self._data is None and self._load is not None:
            loaded = self._load()
            self._set(await loaded if inspect.isawaitable(loaded) else loaded)
        return self.data

    def _set(self, loaded: Loaded) -> None:
        self._data, mime = loaded
        found = sniff(self._data)
        self._mime = found[1] if found else (self._mime or mime)

    @property
    def loaded(self) -> bool:
        return self._data is not None

    @property
    def mime(self) -> str | None:
        """From the bytes once fetched; before that, a guess from the URL (no request)."""
        if self._mime is None and self._data is not None:
            found = sniff(self._data)
            self._mime = found[1] if found else None
        if self._mime is None and self._data is None and self.url:
            return mimetypes.guess_type(self.url.split("?")[0])[0]
        return self._mime

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_bytes(self.data)
        return path

    def __repr__(self) -> str:
        size = f"{len(self._data)} bytes" if self._data is not None else "not fetched"
        return f"{type(self).__name__}(mime={self.mime!r}, url={self.url!r}, {size})"


class Audio(Media):
    """Speech output. ``format`` comes from the bytes first, then from Content-Type."""

    def __init__(
        self,
        data: bytes,
        mime: str | None = None,
        meta: ResponseMeta | None = None,
        requested: str | None = None,
    ) -> None:
        self.meta = meta
        found = sniff(data)
        generic = mime is None or mime.split(";")[0].strip().lower() not in _MIME_FORMATS
        if found:
            self.format, mime = found
        elif not generic:
            self.format = _MIME_FORMATS[mime.split(";")[0].strip().lower()]  # type: ignore[union-attr]
        else:
            self.format = requested or "bin"
            mime = _FORMAT_MIMES.get(self.format, mime or "application/octet-stream")
        super().__init__(data, mime)


@dataclass
class ImageResult:
    raw: Any
    images: list[Media]
    meta: ResponseMeta | None = None


def images_of(body: Any, media_for: Callable[[str, str | None], Media]) -> list[Media]:
    """Images of ``{"data": [{"b64_json"|"url"}]}`` (also a bare ``url``/``b64_json`` list)."""
    items = body.get("data") if isinstance(body, dict) else body
    out: list[Media] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("b64_json"), str):
            out.append(Media(base64.b64decode(item["b64_json"])))
        elif isinstance(item.get("url"), str):
            out.append(media_for(item["url"], None))
    return out


# -- text replies -----------------------------------------------------------------------


def _texts(items: Any, kinds: tuple[str, ...]) -> list[str]:
    return (
        [
            i["text"]
            for i in items
            if isinstance(i, dict) and i.get("type") in kinds and isinstance(i.get("text"), str)
        ]
        if isinstance(items, list)
        else []
    )


def reply_text(body: Any) -> str | None:
    """The text of a chat, messages, generate-content or responses reply, or None."""
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("choices"), list) and body["choices"]:
        message = body["choices"][0].get("message") or {}
        return message.get("content") if isinstance(message, dict) else None
    if body.get("type") == "message" and isinstance(body.get("content"), list):
        return "".join(_texts(body["content"], ("text",)))
    if isinstance(body.get("candidates"), list) and body["candidates"]:
        parts = ((body["candidates"][0] or {}).get("content") or {}).get("parts") or []
        return "".join(
            p["text"]
            for p in parts
            if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
        )
    if isinstance(body.get("output"), list):
        texts = [
            t
            for item in body["output"]
            if isinstance(item, dict) and item.get("type") == "message"
            for t in _texts(item.get("content"), ("output_text",))
        ]
        return "".join(texts)
    if isinstance(body.get("output_text"), str):
        return body["output_text"]
    return None


def reply_finish(body: Any) -> str | None:
    """Why a reply ended, as its gateway said (``finish_reason``, ``stop_reason``,
    ``finishReason``; a responses reply's status: "stop" when completed, the reason it is
    incomplete, or "length"), or None."""
    if not isinstance(body, dict):
        return None
    choice = (body.get("choices") or [{}])[0] or {}
    candidate = (body.get("candidates") or [{}])[0] or {}
    status = body.get("status")
    incomplete = (body.get("incomplete_details") or {}).get("reason") or "length"
    return (
        choice.get("finish_reason")
        or body.get("stop_reason")
        or candidate.get("finishReason")
        or ("stop" if status == "completed" else incomplete if status == "incomplete" else None)
    )


def cut_by_limit(reason: Any) -> bool:
    """Whether a finish reason says the reply stopped at its token limit (chat's "length",
    messages' "max_tokens", generate-content's "MAX_TOKENS")."""
    return isinstance(reason, str) and reason.lower() in ("length", "max_tokens", "max_output_tokens")


def reply_reasoning(body: Any) -> str | None:
    """Reasoning summary / thinking text of a reply, when the gateway sent any."""
    if not isinstance(body, dict):
        return None
    found: list[str] = []
    for item in body.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "reasoning":
            found += _texts(item.get("summary"), ("summary_text",))
    if body.get("type") == "message":
        found += [
            b["thinking"]
            for b in body.get("content") or []
            if isinstance(b, dict) and isinstance(b.get("thinking"), str)
        ]
    for cand in (body.get("candidates") or [])[:1]:
        parts = ((cand or {}).get("content") or {}).get("parts") or []
        found += [
            p["text"]
            for p in parts
            if isinstance(p, dict) and p.get("thought") and isinstance(p.get("text"), str)
        ]
    for choice in (body.get("choices") or [])[:1]:
        message = (choice or {}).get("message") or {}
        value = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(value, str):
            found.append(value)
    return "\n".join(found) if found else None


@dataclass
class Reply:
    """A native reply (messages, generate-content, responses): raw JSON plus recognised parts.

    Asked for a typed answer (``schema=`` or ``choices=``), ``parsed`` is the validated value
    (None when the answer never validated, and ``parse_error`` says why in one line); both
    are None when no schema was asked. Given ``tools=``, ``tool_calls`` lists every call of
    the chain (see `gatecell.tools`); empty otherwise.
    """

    raw: Any
    meta: ResponseMeta | None = None
    parsed: Any = None
    parse_error: str | None = None
    tool_calls: list[Any] = field(default_factory=list, repr=False)

    @property
    def text(self) -> str | None:
        return reply_text(self.raw)

    @property
    def reasoning(self) -> str | None:
        return reply_reasoning(self.raw)

    @property
    def usage(self) -> dict[str, Any] | None:
        """The usage block as the gateway sent it; ``meta.usage`` has it in chat terms."""
        if isinstance(self.raw, dict):
            usage = self.raw.get("usage") or self.raw.get("usageMetadata")
            return usage if isinstance(usage, dict) else None
        return None


# -- models -----------------------------------------------------------------------------


# What gateways call the endpoints a model serves, as the paths of SPEC 4: new-api's
# ``supported_endpoint_types`` and LiteLLM's ``mode``. Names not listed are kept as they are.
_ENDPOINT_NAMES = {
    "openai": "/v1/chat/completions",
    "chat": "/v1/chat/completions",
    "openai-response": "/v1/responses",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/{model}:generateContent",
    "image-generation": "/v1/images/generations",
    "image_generation": "/v1/images/generations",
    "audio_speech": "/v1/audio/speech",
    "openai-video": "/v1/videos",
    "video_generation": "/v1/videos",
    "embeddings": "/v1/embeddings",
    "embedding": "/v1/embeddings",
    "completion": "/v1/completions",
}


def _endpoints(item: dict[str, Any]) -> list[str] | None:
    """The paths a model entry says it serves, or None when it does not say."""
    declared = item.get("supported_endpoints") or item.get("supported_endpoint_types")
    if not isinstance(declared, list):
        mode = item.get("mode")
        declared = [mode] if isinstance(mode, str) and mode else None
    if declared is None:
        return None
    paths = (_ENDPOINT_NAMES.get(e.lower(), e) for e in declared if isinstance(e, str))
    return [p.replace("{model}", item["id"]) for p in paths]


@dataclass
class Model:
    id: str
    owned_by: str | None
    # SPEC 4 paths from ``supported_endpoints``, ``supported_endpoint_types`` (new-api) or
    # ``mode`` (LiteLLM); None when the gateway does not say. ``raw`` keeps the entry as sent.
    endpoints: list[str] | None
    raw: dict[str, Any]


@dataclass
class ModelList:
    """Iterable of `Model`; ``"name" in models`` tests an id."""

    models: list[Model]
    raw: Any
    meta: ResponseMeta | None = None

    @classmethod
    def from_body(cls, body: Any, meta: ResponseMeta | None = None) -> ModelList:
        """The list as the gateway sent it, redacted: model ids and every other string a
        gateway chose are shown in tables, panels, hints and reprs, so a key echoed in them
        (the client's own, in any shape) is masked here, once, for all of those."""
        from gatecell.wire.util.secret import redact_data

        body = redact_data(body)
        items = body.get("data") if isinstance(body, dict) else body
        models = [
            Model(item["id"], item.get("owned_by"), _endpoints(item), item)
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, dict) and isinstance(item.get("id"), str)
        ]
        return cls(models, body, meta)

    def suggest(self, model: str, path: str | None = None, limit: int = 5) -> str | None:
        """When ``model`` is not listed, one clause naming a few that are: those that serve
        ``path`` (or do not say what they serve) first. None when it is listed, or the list
        is empty."""
        if model in self or not self.models:
            return None
        fitting = [m.id for m in self.models if path is None or m.endpoints is None or path in m.endpoints]
        ids = (fitting or self.ids)[:limit]
        more = len(fitting or self.ids) - len(ids)
        served = ", ".join(ids) + (f" and {more} more" if more > 0 else "")
        return f"the gateway does not serve {model!r}; it serves {served}"

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.models]

    def __iter__(self) -> Iterator[Model]:
        return iter(self.models)

    def __len__(self) -> int:
        return len(self.models)

    def __getitem__(self, index: int) -> Model:
        return self.models[index]

    def __contains__(self, model_id: object) -> bool:
        return model_id in self.ids


# -- jobs -------------------------------------------------------------------------------


@dataclass
class Job:
    """A job-style task (imagine, music, video) as of its last poll.

    ``status`` is one of queued, running, succeeded, failed whatever words the gateway
    used; ``raw`` keeps its last body. ``media`` fetches the results on first use.
    """

    kind: str
    id: str
    status: str = "queued"
    progress: float | None = None
    raw: Any = None
    error: str | None = None
    meta: ResponseMeta | None = None
    media_urls: list[tuple[str, str | None]] = field(default_factory=list)
    _media_for: Callable[[str, str | None], Media] | None = field(default=None, repr=False, compare=False)
    _media: list[Media] | None = field(default=None, repr=False, compare=False)

    @property
    def done(self) -> bool:
        return self.status in ("succeeded", "failed")

    @property
    def media(self) -> list[Media]:
        if self._media is None:
            make = self._media_for or (lambda url, mime: Media(url=url, mime=mime))
            self._media = [make(url, mime) for url, mime in self.media_urls]
        return self._media
