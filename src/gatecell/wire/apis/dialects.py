"""Each text API's details, one `Dialect` object per API (WIRE-NOTES): where its turns are
and what they look like, how it carries text, pictures and files, where an answer keeps its
usage, and an answer of its shape made from text (what the log rebuilds from a streamed
reply). The modules that speak the APIs ask the dialect (`conversation` for content parts,
`typed_calls` for the turns it adds, the journal for a rebuilt answer) rather than keep a
table of their own; `apis.TEXT_APIS` is the one list of these APIs.

The structured-output fields of each API are `structured.request_fields`'s, and reading an
answer's text is `results.reply_text`'s (a reply is recognised by its shape, whatever path
it came from).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gatecell.wire.apis.attachments import Attachment
from gatecell.wire.apis.names import TEXT_APIS
from gatecell.wire.transport.errors import InvalidRequest, echo

__all__ = ["Dialect", "dialect", "DIALECTS"]


def _chat_attachment(item: Attachment) -> dict[str, Any]:
    if item.kind == "image":
        return {"type": "image_url", "image_url": {"url": item.data_url(), "detail": "auto"}}
    if item.url is not None:
        raise InvalidRequest(
            "content", f"chat completions take a file as its bytes, not a URL ({item.url}): pass a path"
        )
    return {"type": "file", "file": {"filename": item.name or "document.pdf", "file_data": item.data_url()}}


def _messages_attachment(item: Attachment) -> dict[str, Any]:
    block = "image" if item.kind == "image" else "document"
    if item.url is not None:
        return {"type": block, "source": {"type": "url", "url": item.url}}
    media_type = item.media_type or "application/octet-stream"
    return {"type": block, "source": {"type": "base64", "media_type": media_type, "data": item.base64()}}


def _generate_content_attachment(item: Attachment) -> dict[str, Any]:
    if item.url is not None:
        if item.media_type is None:
            raise InvalidRequest(
                "content",
                f"generate-content needs the type of {item.url}, and its name does not say it "
                "(.png, .jpg, .pdf...): pass a path or the picture itself",
            )
        return {"file_data": {"mime_type": item.media_type, "file_uri": item.url}}
    return {"inline_data": {"mime_type": item.media_type, "data": item.base64()}}


def _responses_attachment(item: Attachment) -> dict[str, Any]:
    if item.kind == "image":
        return {"type": "input_image", "image_url": item.data_url()}
    if item.url is not None:
        return {"type": "input_file", "file_url": item.url}
    return {"type": "input_file", "filename": item.name or "document.pdf", "file_data": item.data_url()}


Answer = Callable[[str, Any, Any, str, str], dict[str, Any]]  # text, reasoning, usage, model, id


def _chat_answer(text: str, reasoning: Any, usage: Any, model: str, rid: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": None}],
        "usage": usage,
    }


def _messages_answer(text: str, reasoning: Any, usage: Any, model: str, rid: str) -> dict[str, Any]:
    blocks = [{"type": "thinking", "thinking": reasoning}] if reasoning else []
    content = [*blocks, {"type": "text", "text": text}]
    return {
        "id": rid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "usage": usage,
    }


def _generate_content_answer(text: str, reasoning: Any, usage: Any, model: str, rid: str) -> dict[str, Any]:
    parts = [{"text": reasoning, "thought": True}] if reasoning else []
    candidate = {"content": {"role": "model", "parts": [*parts, {"text": text}]}, "index": 0}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}


def _responses_answer(text: str, reasoning: Any, usage: Any, model: str, rid: str) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": reasoning}] if reasoning else []
    output: list[dict[str, Any]] = [{"type": "reasoning", "summary": summary}] if reasoning else []
    output.append(
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    )
    return {
        "id": rid,
        "object": "response",
        "status": "completed",
        "model": model,
        "output": output,
        "usage": usage,
    }


@dataclass(frozen=True)
class Dialect:
    """One text API's details (see the module).

    **Parameters:** ``name`` (as `apis.TEXT_APIS` spells it); ``turns``: the body field of
    its conversation; ``content``: a turn's field holding what was said; ``text_type``: the
    ``type`` of a text part (None: a part is a bare ``{"text": ...}``); ``assistant``: the
    role of the model's turns; ``usage``: an answer's field of its token usage;
    ``attachment``: a picture or a file as one of its parts; ``answer``: an answer body of
    its shape from ``(text, reasoning, usage, model, request_id)``.
    """

    name: str
    turns: str
    content: str
    text_type: str | None
    assistant: str
    usage: str
    attachment: Callable[[Attachment], dict[str, Any]]
    answer: Answer

    def text(self, text: str) -> dict[str, Any]:
        """A text part."""
        return {"type": self.text_type, "text": text} if self.text_type else {"text": text}

    def turn(self, role: str, text: str) -> dict[str, Any]:
        """One turn of plain text, ``role`` as chat names it (``user``, ``assistant``)."""
        if self.content == "parts":
            return {"role": self.assistant if role == "assistant" else role, "parts": [self.text(text)]}
        return {"role": role, "content": text}

    def is_text_part(self, part: Any) -> bool:
        return (
            isinstance(part, dict)
            and isinstance(part.get("text"), str)
            and part.get("type") == self.text_type
        )


DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        Dialect("chat", "messages", "content", "text", "assistant", "usage", _chat_attachment, _chat_answer),
        Dialect(
            "messages",
            "messages",
            "content",
            "text",
            "assistant",
            "usage",
            _messages_attachment,
            _messages_answer,
        ),
        Dialect(
            "generate-content",
            "contents",
            "parts",
            None,
            "model",
            "usageMetadata",
            _generate_content_attachment,
            _generate_content_answer,
        ),
        Dialect(
            "responses",
            "input",
            "content",
            "input_text",
            "assistant",
            "usage",
            _responses_attachment,
            _responses_answer,
        ),
    )
}
assert tuple(DIALECTS) == TEXT_APIS


def dialect(api: str) -> Dialect:
    """The dialect of the text API ``api``; an `InvalidRequest` naming them for another."""
    found = DIALECTS.get(api)
    if found is None:
        raise InvalidRequest("api", f"must be one of {', '.join(TEXT_APIS)}; got {echo(api)}")
    return found
