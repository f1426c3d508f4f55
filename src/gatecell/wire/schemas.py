"""Pydantic models of SPEC section 2, shared by the client and the local gateway.

Request models carry SPEC's rules (2.1, 2.5, 8) so that both sides refuse the same bad
input with the same words. They allow extra fields: SPEC leaves much "not shown", and a
caller may pass what a real gateway accepts (``stream_options``, ``response_format``...).
Response models cover what SPEC shows (2.3); everything else is left to the raw body.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from .errors import InvalidRequest

__all__ = [
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
    "ChatChunk",
    "ChunkChoice",
    "Delta",
    "RANGES",
    "validate",
    "explain",
]

Role = Literal["system", "user", "assistant"]
M = TypeVar("M", bound=BaseModel)

# SPEC 8: the bounds a request must keep; also used by magics and widgets for their sliders.
RANGES: dict[str, tuple[float, float]] = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)}

_SIZE = r"^[1-9][0-9]*x[1-9][0-9]*$"


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")


def _non_empty(value: str) -> str:
    """Strings SPEC treats as content (prompt, input) must hold something."""
    if not value.strip():
        raise ValueError("must not be empty")
    return value


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Role
    content: str


class ChatRequest(_Request):
    """SPEC 2.1."""

    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    top_p: float | None = Field(default=None, ge=0, le=1)


class NativeMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "assistant"]
    content: Any  # a string in SPEC 2.5; block lists are common in the wild


class MessagesRequest(_Request):
    """SPEC 2.5, native messages."""

    model: str = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    messages: list[NativeMessage] = Field(min_length=1)
    stream: bool = False


class Part(BaseModel):
    model_config = ConfigDict(extra="allow")
    text: str | None = None


class Content(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str | None = None
    parts: list[Part] = Field(min_length=1)


class GenerateContentRequest(_Request):
    """SPEC 2.5, native generate-content (the model name travels in the path)."""

    contents: list[Content] = Field(min_length=1)


class ImageRequest(_Request):
    model: str = Field(min_length=1)
    prompt: str
    size: str | None = Field(default=None, pattern=_SIZE)

    _prompt = field_validator("prompt")(_non_empty)


class ImagineRequest(_Request):
    prompt: str

    _prompt = field_validator("prompt")(_non_empty)


class VideoRequest(_Request):
    model: str = Field(min_length=1)
    prompt: str

    _prompt = field_validator("prompt")(_non_empty)


class MusicRequest(_Request):
    prompt: str
    style: str | None = None

    _prompt = field_validator("prompt")(_non_empty)


class SpeechRequest(_Request):
    model: str = Field(min_length=1)
    voice: str = Field(min_length=1)
    input: str

    _input = field_validator("input")(_non_empty)


class Reasoning(BaseModel):
    model_config = ConfigDict(extra="allow")
    effort: str | None = None


class ResponsesRequest(_Request):
    model: str = Field(min_length=1)
    input: str | list[Any]
    reasoning: Reasoning | None = None
    stream: bool = False

    @field_validator("input")
    @classmethod
    def _input(cls, value: str | list[Any]) -> str | list[Any]:
        if not value or (isinstance(value, str) and not value.strip()):
            raise ValueError("must not be empty")
        return value


# -- responses SPEC shows (2.3, 2.4) ---------------------------------------------------


class Usage(BaseModel):
    model_config = ConfigDict(extra="allow")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


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
    """SPEC 2.3. Extra fields a gateway sends (``system_fingerprint``...) are kept."""

    model_config = ConfigDict(extra="allow")
    id: str = ""
    object: str = "chat.completion"
    created: int = 0
    model: str = ""
    choices: list[Choice] = Field(default_factory=list)
    usage: Usage | None = None
    _meta: Any = PrivateAttr(default=None)

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


class Delta(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    model_config = ConfigDict(extra="allow")
    index: int = 0
    delta: Delta
    finish_reason: str | None = None


class ChatChunk(BaseModel):
    """SPEC 2.4."""

    model_config = ConfigDict(extra="allow")
    id: str
    object: str = "chat.completion.chunk"
    created: int = 0
    model: str = ""
    choices: list[ChunkChoice]
    usage: Usage | None = None


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
        return InvalidRequest(loc, f"must be between {lo:g} and {hi:g}, got {got!r}")
    if kind == "string_pattern_mismatch" and field == "size":
        return InvalidRequest(loc, f"must look like WIDTHxHEIGHT (e.g. 1024x1024), got {got!r}")
    if kind == "literal_error" and loc.endswith("role"):
        return InvalidRequest(loc, f"must be one of system, user, assistant; got {got!r}")
    if kind == "missing":
        return InvalidRequest(loc, "is required")
    if kind == "too_short":
        return InvalidRequest(loc, "must not be empty")
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return InvalidRequest(
        loc, f"{msg[0].lower()}{msg[1:]}" + ("" if kind == "value_error" else f", got {got!r}")
    )


def validate(model: type[M], data: dict[str, Any]) -> M:
    """Validate ``data`` against a request model, raising `InvalidRequest` on the first rule broken."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise explain(exc) from None
