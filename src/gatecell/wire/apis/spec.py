"""Pydantic models of SPEC section 2, shared by the client and the local gateway.

Request models carry SPEC's rules (2.1, 2.5, 8) so that both sides refuse the same bad
input with the same words. They allow extra fields: SPEC leaves much "not shown", and a
caller may pass what a real gateway accepts (``stream_options``, ``response_format``...).
Each request model lists those it knows (``known_fields``): the client takes them as
keyword arguments and refuses any other name, so a typo fails before sending instead of
travelling in the body (anything else goes, deliberately, in ``extra_body``). Typed answers
(`structured.request_fields`) need ``response_format`` on chat, ``text`` on responses,
``generationConfig`` on generate-content, and ``tools`` + ``tool_choice`` on messages.
Response models cover what SPEC shows (2.3), and `usage_of` reads every usage shape as one
`Usage`; everything else is left to the raw body.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from difflib import get_close_matches
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from gatecell.wire.transport.errors import InvalidRequest, echo

__all__ = [
    "RequestModel",
    "Message",
    "ChatRequest",
    "MessagesRequest",
    "GenerateContentRequest",
    "Content",
    "Part",
    "ImageRequest",
    "ImagineRequest",
    "VideoRequest",
    "MusicRequest",
    "SpeechRequest",
    "ResponsesRequest",
    "Reasoning",
    "ChatCompletion",
    "Choice",
    "ChoiceMessage",
    "Usage",
    "RANGES",
    "SIZE",
    "usage_of",
    "check_parts",
    "refuse_unknown",
    "validate",
    "explain",
]

# SPEC 2.2's roles, and "tool" for a tool's result (WIRE-NOTES "Tools").
Role = Literal["system", "user", "assistant", "tool"]
M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound="RequestModel")

# SPEC 8: the bounds a request must keep; also used by magics and widgets for their sliders.
RANGES: dict[str, tuple[float, float]] = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)}

# Image sizes, ``WIDTHxHEIGHT`` (SPEC 2.5), for ``SIZE.fullmatch``: checked here, by the
# magics' options and the panels.
SIZE = re.compile(r"[1-9][0-9]*x[1-9][0-9]*")


class RequestModel(BaseModel):
    """Base of the request models: extra fields allowed, and the known ones listed."""

    model_config = ConfigDict(extra="allow")

    # Body fields beyond SPEC that public SDKs and gateways send for this endpoint.
    known_fields: ClassVar[frozenset[str]] = frozenset()


def _non_empty(value: str) -> str:
    """Strings SPEC treats as content (prompt, input) must hold something."""
    if not value.strip():
        raise ValueError("must not be empty")
    return value


# -- content parts (WIRE-NOTES "Content beyond a plain string") ---------------------------
#
# SPEC's content is a plain string; gateways of the family also take a list of parts. The
# shapes of the parts every API uses for text, pictures and files are checked here (on both
# sides: the client before sending, the local gateway on receipt), each broken rule one
# line. Chat completions' parts are a closed set; the native APIs have many more kinds of
# block (tool calls, thinking...), which pass as long as they name their type. A part of
# another API's shape is refused with the shape this API takes.

_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[^;,]*)*;base64,.", re.I | re.S)
_HTTP_URL = re.compile(r"https?://\S", re.I)
_CHAT_PARTS = ("text", "image_url", "file", "input_audio", "refusal")
# Which API a part type belongs to, to say so when one is sent to another API.
_OWNERS = {
    "image_url": "chat",
    "file": "chat",
    "input_audio": "chat",
    "image": "messages",
    "document": "messages",
    "input_text": "responses",
    "input_image": "responses",
    "input_file": "responses",
}
_SHAPES = {
    "chat": "text, image_url, file",
    "messages": "text, image, document",
    "responses": "input_text, input_image, input_file",
    "generate-content": '{"text": ...}, {"inline_data": ...}, {"file_data": ...}',
}


def _string(part: dict[str, Any], key: str, where: str) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{where}{key} must be a string, got {echo(value)}")
    return value


def _object(part: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = part.get(key)
    if not isinstance(value, dict):
        raise ValueError(f"{where}{key} must be an object, got {echo(value)}")
    return value


def _url(value: Any, where: str, *, data: bool = True, http: bool = True) -> None:
    if isinstance(value, str) and ((data and _DATA_URL.match(value)) or (http and _HTTP_URL.match(value))):
        return
    wanted = " or ".join(
        w for w, on in (("an http(s) URL", http), ("a data:<type>;base64,<data> URL", data)) if on
    )
    raise ValueError(f"{where} must be {wanted}, got {echo(value)}")


def _one_of(part: dict[str, Any], keys: tuple[str, ...], where: str) -> str:
    found = [k for k in keys if k in part]
    if len(found) != 1:
        raise ValueError(f"{where} needs exactly one of {', '.join(keys)}")
    return found[0]


def _chat_part(part: dict[str, Any], where: str) -> None:
    kind = part["type"]
    if kind in ("text", "refusal"):
        _string(part, kind, where)
    elif kind == "image_url":
        _url(_object(part, "image_url", where).get("url"), f"{where}image_url.url")
    elif kind == "file":
        file = _object(part, "file", where)
        key = _one_of(file, ("file_data", "file_id"), f"{where}file")
        if key == "file_data":
            _url(file["file_data"], f"{where}file.file_data", http=False)
        else:
            _string(file, "file_id", f"{where}file.")
    elif kind == "input_audio":
        audio = _object(part, "input_audio", where)
        _string(audio, "data", f"{where}input_audio.")
        _string(audio, "format", f"{where}input_audio.")


def _messages_part(part: dict[str, Any], where: str) -> None:
    kind = part["type"]
    if kind == "text":
        _string(part, "text", where)
    elif kind in ("image", "document"):
        source = _object(part, "source", where)
        at = f"{where}source."
        shape = source.get("type")
        if shape == "base64":
            media_type = _string(source, "media_type", at)
            if kind == "image" and not media_type.startswith("image/"):
                raise ValueError(f"{at}media_type of an image must be image/..., got {echo(media_type)}")
            _string(source, "data", at)
        elif shape == "url":
            _url(source.get("url"), f"{at}url", data=False)
        elif not (kind == "document" and shape in ("text", "content", "file")):
            raise ValueError(f"{at}type must be base64 or url, got {echo(shape)}")


def _responses_part(part: dict[str, Any], where: str) -> None:
    kind = part["type"]
    if kind in ("input_text", "output_text"):
        _string(part, "text", where)
    elif kind == "input_image":
        key = _one_of(part, ("image_url", "file_id"), where.rstrip(".") or "the part")
        if key == "image_url":
            _url(part["image_url"], f"{where}image_url")
    elif kind == "input_file":
        key = _one_of(part, ("file_data", "file_url", "file_id"), where.rstrip(".") or "the part")
        if key == "file_data":
            _url(part["file_data"], f"{where}file_data", http=False)
        elif key == "file_url":
            _url(part["file_url"], f"{where}file_url", data=False)


_CHECKS: dict[str, Callable[[dict[str, Any], str], None]] = {
    "chat": _chat_part,
    "messages": _messages_part,
    "responses": _responses_part,
}


def check_parts(api: str, content: Any) -> Any:
    """``content`` as it is when it is a string or a list of well-formed parts of ``api``;
    else a ValueError saying which part breaks which rule."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValueError(f"must be a string or a list of content parts, got {type(content).__name__}")
    if not content:
        raise ValueError("must not be an empty list")
    for i, part in enumerate(content):
        where = f"part {i}: "
        if not isinstance(part, dict):
            raise ValueError(f"{where}must be an object ({_SHAPES[api]}), got {echo(part)}")
        if api == "generate-content":
            _gc_part(part, where)
            continue
        kind = part.get("type")
        if not isinstance(kind, str):
            raise ValueError(f"{where}needs a type ({_SHAPES[api]})")
        owner = _OWNERS.get(kind)
        if owner is not None and owner != api:
            raise ValueError(f"{where}{kind} is a {owner} part; {api} takes {_SHAPES[api]}")
        if api == "chat" and kind not in _CHAT_PARTS:
            raise ValueError(f"{where}type must be one of {', '.join(_CHAT_PARTS)}, got {echo(kind)}")
        _CHECKS[api](part, where)
    return content


def _gc_part(part: dict[str, Any], where: str) -> None:
    if "type" in part:
        raise ValueError(
            f"{where}generate-content parts have no type; they are {_SHAPES['generate-content']}"
        )
    if "text" in part:
        _string(part, "text", where)
    inline = part.get("inline_data", part.get("inlineData"))
    if inline is not None:
        at = f"{where}inline_data."
        if not isinstance(inline, dict):
            raise ValueError(f"{where}inline_data must be an object, got {echo(inline)}")
        if not isinstance(inline.get("mime_type", inline.get("mimeType")), str):
            raise ValueError(f"{at}mime_type must be a string")
        _string(inline, "data", at)
    linked = part.get("file_data", part.get("fileData"))
    if linked is not None:
        if not isinstance(linked, dict):
            raise ValueError(f"{where}file_data must be an object, got {echo(linked)}")
        _url(linked.get("file_uri", linked.get("fileUri")), f"{where}file_data.file_uri", data=False)


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Role
    # SPEC 2.2: a string; or content parts (WIRE-NOTES); none beside an assistant's tool calls
    content: str | list[Any] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        return None if value is None else check_parts("chat", value)

    @model_validator(mode="after")
    def _said(self) -> Message:
        calls = (self.model_extra or {}).get("tool_calls")
        if self.content is None and not (self.role == "assistant" and calls):
            raise ValueError("content must be a string or a list of content parts, got None")
        return self


class ChatRequest(RequestModel):
    """SPEC 2.1."""

    known_fields = frozenset(
        {
            "audio",
            "frequency_penalty",
            "logit_bias",
            "logprobs",
            "max_completion_tokens",
            "metadata",
            "modalities",
            "n",
            "parallel_tool_calls",
            "prediction",
            "presence_penalty",
            "reasoning_effort",
            "response_format",
            "seed",
            "service_tier",
            "stop",
            "store",
            "stream_options",
            "tool_choice",
            "tools",
            "top_logprobs",
            "user",
            "verbosity",
            "web_search_options",
        }
    )

    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    top_p: float | None = Field(default=None, ge=0, le=1)


class NativeMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "assistant"]
    content: str | list[Any]  # a string in SPEC 2.5; block lists are common in the wild

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        return check_parts("messages", value)


class MessagesRequest(RequestModel):
    """SPEC 2.5, native messages."""

    known_fields = frozenset(
        {
            "metadata",
            "service_tier",
            "stop_sequences",
            "system",
            "temperature",
            "thinking",
            "tool_choice",
            "tools",
            "top_k",
            "top_p",
        }
    )

    model: str = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    messages: list[NativeMessage] = Field(min_length=1)
    stream: bool = False


class Part(BaseModel):
    model_config = ConfigDict(extra="allow")
    text: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError(f"must be an object ({_SHAPES['generate-content']}), got {echo(value)}")
        _gc_part(value, "")
        return value


class Content(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str | None = None
    parts: list[Part] = Field(min_length=1)


class GenerateContentRequest(RequestModel):
    """SPEC 2.5, native generate-content (the model name travels in the path)."""

    known_fields = frozenset(
        {"cachedContent", "generationConfig", "safetySettings", "systemInstruction", "toolConfig", "tools"}
    )

    contents: list[Content] = Field(min_length=1)


class ImageRequest(RequestModel):
    known_fields = frozenset(
        {
            "background",
            "moderation",
            "n",
            "output_compression",
            "output_format",
            "partial_images",
            "quality",
            "response_format",
            "style",
            "user",
        }
    )

    model: str = Field(min_length=1)
    prompt: str
    size: str | None = Field(default=None, pattern=f"^{SIZE.pattern}$")

    _prompt = field_validator("prompt")(_non_empty)


class ImagineRequest(RequestModel):
    known_fields = frozenset({"accountFilter", "base64Array", "botType", "notifyHook", "state"})

    prompt: str

    _prompt = field_validator("prompt")(_non_empty)


class VideoRequest(RequestModel):
    known_fields = frozenset({"input_reference", "seconds", "size"})

    model: str = Field(min_length=1)
    prompt: str

    _prompt = field_validator("prompt")(_non_empty)


class MusicRequest(RequestModel):
    known_fields = frozenset(
        {
            "continue_at",
            "continue_clip_id",
            "gpt_description_prompt",
            "make_instrumental",
            "mv",
            "negative_tags",
            "tags",
            "task",
            "title",
        }
    )

    prompt: str
    style: str | None = None

    _prompt = field_validator("prompt")(_non_empty)


class SpeechRequest(RequestModel):
    known_fields = frozenset({"instructions", "response_format", "speed", "stream_format"})

    model: str = Field(min_length=1)
    voice: str = Field(min_length=1)
    input: str

    _input = field_validator("input")(_non_empty)


class Reasoning(BaseModel):
    model_config = ConfigDict(extra="allow")
    effort: str | None = None


class ResponsesRequest(RequestModel):
    known_fields = frozenset(
        {
            "background",
            "include",
            "instructions",
            "max_output_tokens",
            "max_tool_calls",
            "metadata",
            "parallel_tool_calls",
            "previous_response_id",
            "prompt",
            "prompt_cache_key",
            "reasoning",
            "safety_identifier",
            "service_tier",
            "store",
            "temperature",
            "text",
            "tool_choice",
            "tools",
            "top_logprobs",
            "top_p",
            "truncation",
            "user",
        }
    )

    model: str = Field(min_length=1)
    input: str | list[Any]
    reasoning: Reasoning | None = None
    stream: bool = False

    @field_validator("input")
    @classmethod
    def _input(cls, value: str | list[Any]) -> str | list[Any]:
        if not value or (isinstance(value, str) and not value.strip()):
            raise ValueError("must not be empty")
        if isinstance(value, list):
            for i, item in enumerate(value):
                content = item.get("content") if isinstance(item, dict) else None
                if isinstance(content, list):
                    try:
                        check_parts("responses", content)
                    except ValueError as exc:
                        raise ValueError(f"item {i}: content {exc}") from None
        return value


# -- responses SPEC shows (2.3, 2.4) ---------------------------------------------------


class Usage(BaseModel):
    model_config = ConfigDict(extra="allow")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


def usage_of(raw: Any) -> Usage | None:
    """Any usage shape as one `Usage` in chat terms, or None.

    Chat ``prompt_tokens``/``completion_tokens``, messages and responses
    ``input_tokens``/``output_tokens``, generate-content ``promptTokenCount``/
    ``candidatesTokenCount``; reasoning tokens, when reported, land in
    ``completion_tokens_details.reasoning_tokens`` as chat puts them.
    """
    if isinstance(raw, Usage) or not isinstance(raw, dict):
        return raw if isinstance(raw, Usage) else None
    try:
        if "prompt_tokens" in raw or "completion_tokens" in raw:
            return Usage.model_validate(raw)
        prompt = raw.get("input_tokens", raw.get("promptTokenCount"))
        completion = raw.get("output_tokens", raw.get("candidatesTokenCount"))
        total = raw.get("total_tokens", raw.get("totalTokenCount"))
        if prompt is None and completion is None and total is None:
            return None
        usage: dict[str, Any] = {
            "prompt_tokens": prompt or 0,
            "completion_tokens": completion or 0,
            "total_tokens": total or (prompt or 0) + (completion or 0),
        }
        details = raw.get("output_tokens_details")
        reasoning = (details or {}).get("reasoning_tokens") if isinstance(details, dict) else None
        reasoning = reasoning or raw.get("thoughtsTokenCount")
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return Usage.model_validate(usage)
    except ValidationError:  # recognise, never require
        return None


class ChoiceMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str = "assistant"
    content: str | None = None


class Choice(BaseModel):
    model_config = ConfigDict(extra="allow")
    index: int = 0
    message: ChoiceMessage
    finish_reason: str | None = None


class ChatCompletion(BaseModel):
    """SPEC 2.3. Extra fields a gateway sends (``system_fingerprint``...) are kept.

    Asked for a typed answer (``schema=`` or ``choices=``), ``parsed`` is the validated value
    (None when the answer never validated, and ``parse_error`` says why in one line); both
    are None when no schema was asked. Given ``tools=``, ``tool_calls`` lists every call of
    the chain (see `gatecell.tools`); empty otherwise (the calls in a message are its own
    ``message.tool_calls``).
    """

    model_config = ConfigDict(extra="allow")
    id: str = ""
    object: str = "chat.completion"
    created: int = 0
    model: str = ""
    choices: list[Choice] = Field(default_factory=list)
    usage: Usage | None = None
    # A typed answer's value, and why there is none: the client's reading of the answer (see
    # `typed_calls.read_answer`), never a body's (a gateway's "parsed" is dropped), never dumped.
    parsed: Any = Field(default=None, exclude=True, repr=False)
    parse_error: str | None = Field(default=None, exclude=True, repr=False)
    tool_calls: list[Any] = Field(default_factory=list, exclude=True, repr=False)
    _meta: Any = PrivateAttr(default=None)

    @field_validator("parsed", "parse_error", mode="plain")
    @classmethod
    def _not_from_the_body(cls, value: Any) -> None:
        return None

    @property
    def meta(self) -> Any:
        """The client's `ResponseMeta` (path, latency, request id); None when built by hand."""
        return self._meta

    @property
    def text(self) -> str:
        """The first choice's content, or ``""``."""
        if not self.choices:
            return ""
        return self.choices[0].message.content or ""


# -- one readable line per broken rule --------------------------------------------------


def explain(exc: ValidationError) -> InvalidRequest:
    """Turn pydantic's report into an `InvalidRequest` naming the field and its rule."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    field = str(err["loc"][0]) if err["loc"] else ""
    kind = err["type"]
    got = err.get("input")
    if field in RANGES and kind in ("greater_than_equal", "less_than_equal"):
        lo, hi = RANGES[field]
        return InvalidRequest(loc, f"must be between {lo:g} and {hi:g}, got {echo(got)}")
    if kind == "string_pattern_mismatch" and field == "size":
        return InvalidRequest(loc, f"must look like WIDTHxHEIGHT (e.g. 1024x1024), got {echo(got)}")
    if kind == "literal_error" and loc.endswith("role"):
        return InvalidRequest(loc, f"must be one of system, user, assistant; got {echo(got)}")
    if kind == "missing":
        return InvalidRequest(loc, "is required")
    if kind == "too_short":
        return InvalidRequest(loc, "must not be empty")
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return InvalidRequest(
        loc, f"{msg[0].lower()}{msg[1:]}" + ("" if kind == "value_error" else f", got {echo(got)}")
    )


def _closest(name: str, known: list[str]) -> str | None:
    """The first known name with ``name`` as one of its words (format → response_format),
    else the most similar one."""
    for candidate in known:
        if name.lower() in candidate.lower().split("_"):
            return candidate
    close = get_close_matches(name, known, n=1)
    return close[0] if close else None


def refuse_unknown(model: type[RequestModel], method: Callable[..., Any], fields: Mapping[str, Any]) -> None:
    """Refuse a keyword argument of ``method`` that is neither one of its parameters nor a
    body field ``model`` knows: an `InvalidRequest` naming it and the closest known name."""
    for name in fields:
        if name not in model.known_fields:
            named = [p for p in inspect.signature(method).parameters if p not in ("extra_body", "fields")]
            close = _closest(name, [*named, *sorted(model.known_fields)])
            hint = f"did you mean {close}?" if close else f"its parameters: {', '.join(named)}."
            raise InvalidRequest(
                name,
                f"not a parameter of {method.__name__}(); {hint} "
                "Send body fields gatecell does not know in extra_body={...}",
            )


def validate(model: type[M], data: dict[str, Any]) -> M:
    """Validate ``data`` against a request model, raising `InvalidRequest` on the first rule broken."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise explain(exc) from None
