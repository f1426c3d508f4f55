"""A conversation (system prompt + turns) with sampling options, as a call on each text API.

The one converter from "what was said" to the request of chat completions, native
messages, native generate-content or responses: `Gateway.converse` (and through it the
magics) and the chat → responses fallback of `Gateway.chat` use it, so the formats cannot
drift apart. It is sans-IO: it returns the endpoint method's name and its arguments.

**Content beyond a plain string** (WIRE-NOTES). A turn's ``content`` is SPEC's plain string,
sent as it is, or a list of items: strings, `Attachment` values, other pictures (a figure,
an array... anything `attachments.attachment_of` recognises) and part dicts already in the
API's own shape, which pass untouched. `parts` makes one API's parts of such a list, with
that API's `dialects.Dialect`:

- chat: ``text``; a picture as ``image_url`` (a data URL, or its URL); a PDF as ``file``
  (``file_data``; chat takes no file by URL);
- messages: ``text``; ``image`` and ``document`` blocks (a base64 or a url source);
- generate-content: ``{"text"}``; ``inline_data`` (``file_data`` for a URL);
- responses: ``input_text``, ``input_image``, ``input_file`` (``file_data`` or ``file_url``).

A text file goes in as a text part. `neutral` reads any API's parts back (the chat →
responses fallback, a conversation restored from the log), and `content_summary` says what
a content holds without its bytes (type, size, sha256), for the log and the provenance.

**Every text that leaves is redacted** (`redacted`, `outgoing`): the endpoints put each
request's conversation (its turns, system prompt, instructions) through the one redaction
(`gatecell.wire.util.secret.redact_data`) before it is validated and sent, on every round of a
typed call, whatever built it: a cell, a map's row, a file's or a PDF's text, a file name,
a panel's message, a tool's result. The log redacts what it keeps the same way, and the
magics redact the prompt before ``--show-prompt`` shows it, so the three agree. Bytes (data
URLs, base64 sources, inline data) go as they are.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

from gatecell.wire.apis.attachments import Attachment, attachment_of, of_bytes, of_url
from gatecell.wire.apis.dialects import Dialect, dialect
from gatecell.wire.apis.names import TEXT_APIS
from gatecell.wire.transport.errors import InvalidRequest, echo
from gatecell.wire.util.secret import redact_data, suspect

__all__ = [
    "TEXT_APIS",
    "split",
    "for_api",
    "to_responses",
    "parts",
    "with_parts",
    "neutral",
    "content_summary",
    "content_text",
    "redacted",
    "outgoing",
]


Item = Any  # str | Attachment | dict | a value attachment_of recognises


# -- content parts -----------------------------------------------------------------------------


def parts(api: str, content: Any) -> Any:
    """One turn's ``content`` for ``api``: a string as it is (SPEC's form); a list of items
    (or one lone picture) as that API's part dicts (module docstring). A value that is
    neither text, a picture nor a file is an `InvalidRequest`."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, dict):  # one part, already formed
        return [content]
    items = content if isinstance(content, (list, tuple)) else [content]
    speaks = dialect(api)
    return [_part(speaks, _item(item, i)) for i, item in enumerate(items)]


def _item(item: Item, i: int) -> Any:
    if isinstance(item, (str, dict)):
        return item
    found = item if isinstance(item, Attachment) else attachment_of(item)
    if found is None:
        raise InvalidRequest(
            f"content.{i}",
            f"{_article(type(item).__name__)} is neither text, a picture nor a file: "
            "put text in as a str, pictures as a figure, an image, an array, bytes or a path",
        )
    return found


def _article(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def with_parts(api: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each ``content`` (``parts`` for generate-content's contents) made
    ``api``'s parts; the very list when every content is a plain string (nothing to do)."""
    key = dialect(api).content
    if all(not isinstance(m, dict) or isinstance(m.get(key), str) for m in messages):
        return messages
    out = []
    for message in messages:
        value = message.get(key) if isinstance(message, dict) else None
        if value is None or isinstance(value, str):
            out.append(message)
        else:
            out.append({**message, key: parts(api, value)})
    return out


def _part(speaks: Dialect, item: str | dict[str, Any] | Attachment) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    if isinstance(item, str):
        return speaks.text(item)
    if item.kind == "text":
        return speaks.text(item.text or "")
    return speaks.attachment(item)


# -- what leaves: redacted ------------------------------------------------------------------------

# The fields of a request body that carry the conversation, on each text API.
_SAID = ("messages", "contents", "input", "system", "instructions", "systemInstruction")


_URL_FIELDS = frozenset(("url", "image_url", "file_data"))  # where a part may carry a data URL


def _payload(part: dict[str, Any], key: str) -> bool:
    """Bytes in base64 (a data URL where a part takes a URL, a base64 source, inline data):
    never text to redact. A text field is text whatever it begins with, and a messages text
    document's ``data`` is text."""
    value = part[key]
    if not isinstance(value, str):
        return False
    if key in _URL_FIELDS:
        return value.startswith("data:")
    return key == "data" and part.get("type") != "text"


def redacted(content: Any, *secrets: Any) -> Any:
    """A prompt or a content as it may leave: every text in it (strings, text parts, an
    `Attachment`'s text and name) through the one redaction, bytes as they are; the very
    object when nothing changes."""
    if isinstance(content, Attachment):
        return content.redacted(*secrets)
    if isinstance(content, (list, tuple)) and any(isinstance(item, Attachment) for item in content):
        return [redacted(item, *secrets) for item in content]
    return redact_data(content, *secrets, keep=_payload)


def _words(value: Any, out: list[str]) -> list[str]:
    """``out`` with the strings `redacted` looks at in JSON-like data: keys and texts, not
    bytes (a list filled in place: a map makes one per row, and generators cost more)."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            out.append(key)
            if isinstance(item, str):
                if not _payload(value, key):
                    out.append(item)
            else:
                _words(item, out)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _words(item, out)
    return out


def outgoing(body: dict[str, Any], *secrets: Any) -> dict[str, Any]:
    """A text endpoint's request body with its conversation `redacted` (module docstring).
    One look at all its words first: a conversation with nothing to mask, as most are, costs
    one search (`secret.suspect`), not one per string (a map sends one body per row)."""
    said = [key for key in _SAID if key in body]
    words: list[str] = []
    for key in said:
        _words(body[key], words)
    if not suspect("\0".join(words), *secrets):
        return body
    found = {key: redacted(body[key], *secrets) for key in said}
    changed = {key: value for key, value in found.items() if value is not body[key]}
    return {**body, **changed} if changed else body


# -- reading parts back -------------------------------------------------------------------------

_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)(?P<params>(?:;[\w.+-]+=[^;,]*)*);base64,", re.I)


def _decoded(data: Any, where: str) -> bytes:
    """Base64 as the APIs take it: the standard alphabet, or the URL-safe one (the Google
    SDK sends that), checked strictly."""
    if not isinstance(data, str) or not data:
        raise InvalidRequest(where, "must be a non-empty base64 string")
    try:
        if "-" in data or "_" in data:
            return base64.b64decode(data, altchars=b"-_", validate=True)
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(where, "is not valid base64") from None


def _from_url(url: Any, where: str, name: str | None = None) -> Attachment:
    """An attachment of a ``data:`` URL (decoded) or of an ``http(s)`` URL (kept as a URL)."""
    if not isinstance(url, str):
        raise InvalidRequest(where, "must be a URL string")
    found = _DATA_URL.match(url)
    if found:
        return of_bytes(_decoded(url[found.end() :], where), found.group("type").lower(), name=name)
    if url.startswith("data:"):
        raise InvalidRequest(where, "a data URL must look like data:<type>/<subtype>;base64,<data>")
    if re.match(r"https?://\S+$", url, re.I):
        return of_url(url)  # kept as a URL, never fetched; nothing here ever reads a path
    raise InvalidRequest(where, f"must be an http(s) URL or a data: URL, got {url[:60]!r}")


def neutral(part: Any, where: str = "content") -> Any:
    """A part of any API's shape (or of `content_summary`'s) read back as a str (text), an
    `Attachment` (picture or file: data decoded, a URL kept) or, for a part that is neither
    (a tool call, a thinking block...), the dict itself. A malformed data part (a bad data
    URL, bad base64) is an `InvalidRequest` naming ``where``."""
    if isinstance(part, str) or not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind in ("text", "input_text", "output_text") or (kind is None and isinstance(part.get("text"), str)):
        text = part.get("text")
        return text if isinstance(text, str) else part
    if kind == "attachment":  # what the log keeps of a part when it keeps no bytes
        return _placeholder(part)
    if kind == "image_url":
        image = part.get("image_url")
        return _from_url(image.get("url") if isinstance(image, dict) else image, f"{where}.image_url.url")
    if kind == "input_image":
        return _from_url(part.get("image_url"), f"{where}.image_url") if "image_url" in part else part
    if kind == "file":
        file = part.get("file")
        if isinstance(file, dict) and "file_data" in file:
            return _from_url(file["file_data"], f"{where}.file.file_data", file.get("filename"))
        return part
    if kind == "input_file":
        if "file_data" in part:
            return _from_url(part["file_data"], f"{where}.file_data", part.get("filename"))
        return _from_url(part["file_url"], f"{where}.file_url") if "file_url" in part else part
    if kind in ("image", "document"):
        return _source(part.get("source"), f"{where}.source")
    inline = part.get("inline_data", part.get("inlineData"))
    if kind is None and isinstance(inline, dict):
        mime = inline.get("mime_type", inline.get("mimeType"))
        return of_bytes(_decoded(inline.get("data"), f"{where}.inline_data.data"), mime)
    linked = part.get("file_data", part.get("fileData"))
    if kind is None and isinstance(linked, dict):
        uri = linked.get("file_uri", linked.get("fileUri"))
        return _from_url(uri, f"{where}.file_data.file_uri")
    return part


def _source(source: Any, where: str) -> Any:
    """A messages block's ``source``: base64 data, a URL, or plain text (a text document)."""
    if not isinstance(source, dict):
        raise InvalidRequest(where, "must be an object with a type (base64, url or text)")
    kind = source.get("type")
    if kind == "base64":
        return of_bytes(_decoded(source.get("data"), f"{where}.data"), source.get("media_type"))
    if kind == "url":
        return _from_url(source.get("url"), f"{where}.url")
    if kind == "text" and isinstance(source.get("data"), str):
        return source["data"]
    raise InvalidRequest(where, f"type must be base64, url or text, got {kind!r}")


def _placeholder(summary: dict[str, Any]) -> str:
    """What a conversation restored from the log says in place of a part whose bytes the log
    did not keep."""
    what = summary.get("description") or summary.get("media_type") or summary.get("kind") or "a file"
    digest = summary.get("sha256")
    tail = f", sha256 {digest[:12]}…" if isinstance(digest, str) else ""
    return f"[{summary.get('kind', 'attachment')} sent here: {what}{tail}; the log kept no bytes]"


# -- what a content holds ---------------------------------------------------------------------

# Part types (and generate-content keys) that can carry bytes; every other part is text or
# a reference, kept as it is.
_CARRIERS = frozenset({"image_url", "file", "input_image", "input_file", "image", "document", "input_audio"})


def _carries(part: Any) -> bool:
    if not isinstance(part, dict):
        return True  # a picture object, an Attachment: summarised
    return part.get("type") in _CARRIERS or any(k in part for k in ("inline_data", "inlineData"))


def content_summary(content: Any) -> Any:
    """``content`` without its bytes, for the log and the provenance: a string as it is; a
    list with every picture or file as ``{"type": "attachment", "kind", "media_type", "size",
    "sha256", ...}`` (`Attachment.summary`), a string item as a text part, and every other
    part (text, a picture by URL, a tool call) as it is. A part it cannot read keeps its
    shape with its long strings replaced by their length and sha256. A list that carries no
    bytes is returned as it is."""
    if isinstance(content, str) or content is None:
        return content
    items = content if isinstance(content, (list, tuple)) else [content]
    if not any(_carries(part) for part in items):
        return content
    out: list[Any] = []
    for i, part in enumerate(items):
        if isinstance(part, str):
            out.append({"type": "text", "text": part})
            continue
        if not _carries(part):
            out.append(part)
            continue
        try:
            found = _item(neutral(part, f"content.{i}"), i)
        except InvalidRequest:
            found = None
        if found is not None and not isinstance(found, (str, dict)) and found.data is not None:
            out.append({"type": "attachment", **found.summary()})
        elif isinstance(part, dict):
            out.append(_without_data(part))
        else:  # a picture given by URL
            out.append({"type": "attachment", **found.summary()} if found is not None else part)
    return out


def _without_data(part: dict[str, Any]) -> dict[str, Any]:
    """A part whose bytes `neutral` does not read (audio, a malformed part): its long strings
    replaced by their length and sha256."""
    out: dict[str, Any] = {}
    for key, value in part.items():
        if isinstance(value, str) and len(value) > 1024:
            digest = hashlib.sha256(value.encode()).hexdigest()
            out[key] = f"<{len(value):,} characters, sha256 {digest[:12]}…>"
        elif isinstance(value, dict):
            out[key] = _without_data(value)
        else:
            out[key] = value
    return out


def content_text(content: Any) -> str:
    """A content as text for a person (a transcript, a conversation's history, the
    provenance): its text, each picture or file in it as ``[image: PNG 640x480, 24 KB]``."""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for item in content if isinstance(content, (list, tuple)) else [content]:
        try:
            found = neutral(item) if isinstance(item, dict) else item
        except InvalidRequest:
            found = {"type": "unreadable part"}
        if isinstance(found, str):
            piece = found
        elif isinstance(found, dict):
            piece = f"[{found.get('type', 'part')}]"
        else:
            attachment = _item(found, 0)
            piece = f"[{attachment.kind}: {attachment.description}]"
        if (
            pieces
            and piece
            and not (pieces[-1][-1:].isspace() or piece[:1].isspace() or piece[0] in ".,;:!?)")
        ):
            pieces.append(" ")
        pieces.append(piece)
    return "".join(pieces)


# -- the conversation on each API --------------------------------------------------------------


def split(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The system messages joined into one prompt (or None), and the other turns."""
    system = [m["content"] for m in messages if m["role"] == "system"]
    turns = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
    return ("\n\n".join(system) if system else None), turns


def _responses_fields(messages: list[dict[str, Any]], max_tokens: int | None) -> dict[str, Any]:
    """System prompt as ``instructions``; a lone user turn of plain text as the ``input``
    string (SPEC 2.5), anything else as a list of turns."""
    system, turns = split(messages)
    lone = len(turns) == 1 and turns[0]["role"] == "user" and isinstance(turns[0]["content"], str)
    fields: dict[str, Any] = {"input": turns[0]["content"] if lone else with_parts("responses", turns)}
    if system is not None:
        fields["instructions"] = system
    if max_tokens is not None:
        fields["max_output_tokens"] = max_tokens
    return fields


def _flat(tool: Any) -> Any:
    """A chat tool (or tool choice) ``{"type": "function", "function": {...}}`` as responses
    has it: the function's fields beside ``type``."""
    if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
        return {"type": "function", **tool["function"]}
    return tool


def _tool_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat turns with tool calls and results as responses input items (WIRE-NOTES "Tools")."""
    items: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.get("tool_call_id"), "output": m["content"]}
            )
            continue
        if m.get("content") is not None:
            items += with_parts("responses", [{"role": m["role"], "content": m["content"]}])
        for call in m.get("tool_calls") or ():
            function = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments") or "",
                }
            )
    return items


def for_api(
    api: str,
    model: str,
    messages: list[dict[str, Any]],
    *,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    effort: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """``(method, arguments)``: the `Gateway` method that carries the conversation on ``api``,
    and the keyword arguments to call it with (all but ``stream``). Turns whose content is
    a list become that API's parts (`parts`)."""
    sampling = {k: v for k, v in (("temperature", temperature), ("top_p", top_p)) if v is not None}
    if api == "chat":
        chat: dict[str, Any] = {
            "model": model,
            "messages": with_parts("chat", messages),
            "max_tokens": max_tokens,
            **sampling,
        }
        if effort is not None:
            chat["reasoning_effort"] = effort
        return "chat", chat
    if api == "responses":
        return "responses", {
            "model": model,
            "effort": effort,
            **_responses_fields(messages, max_tokens),
            **sampling,
        }
    system, turns = split(messages)
    if api == "messages":
        native: dict[str, Any] = {
            "model": model,
            "messages": with_parts("messages", turns),
            "max_tokens": max_tokens or 1024,
            **sampling,
        }
        if system is not None:
            native["system"] = system
        return "messages", native
    if api == "generate-content":
        contents = [
            {
                "role": "model" if t["role"] == "assistant" else "user",
                "parts": [{"text": t["content"]}]
                if isinstance(t["content"], str)
                else parts("generate-content", t["content"]),
            }
            for t in turns
        ]
        gc: dict[str, Any] = {"model": model, "contents": contents}
        config = {"temperature": temperature, "topP": top_p, "maxOutputTokens": max_tokens}
        if any(v is not None for v in config.values()):
            gc["generationConfig"] = {k: v for k, v in config.items() if v is not None}
        if system is not None:
            gc["systemInstruction"] = {"parts": [{"text": system}]}
        return "generate_content", gc
    raise InvalidRequest("api", f"must be one of {', '.join(TEXT_APIS)}; got {echo(api)}")


def to_responses(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat request body as a responses body, for a reasoning model (SPEC 4 note 3):
    fields the two share pass as they are; ``response_format`` becomes ``text.format``;
    ``stream_options`` has no counterpart; chat's content parts become responses' (`neutral`,
    then `parts`)."""
    body = {
        k: v
        for k, v in chat.items()
        if k not in ("messages", "max_tokens", "reasoning_effort", "stream_options", "response_format")
    }
    messages = [
        m
        if isinstance(m.get("content"), (str, type(None)))
        else {**m, "content": [neutral(p) for p in m["content"]]}
        for m in chat["messages"]
    ]
    said = [m for m in messages if m["role"] != "tool" and not m.get("tool_calls")]
    body.update(_responses_fields(said, chat.get("max_tokens")))
    if len(said) < len(messages):  # a tool chain's turns (gatecell.tools), as responses items
        body["input"] = _tool_items(messages)
    if isinstance(body.get("tools"), list):
        body["tools"] = [_flat(tool) for tool in body["tools"]]
    if isinstance(body.get("tool_choice"), dict):
        body["tool_choice"] = _flat(body["tool_choice"])
    if chat.get("reasoning_effort"):
        body["reasoning"] = {"effort": chat["reasoning_effort"]}
    wanted = chat.get("response_format")
    if isinstance(wanted, dict) and wanted.get("type") in ("json_schema", "json_object"):
        spec = wanted.get("json_schema") if wanted["type"] == "json_schema" else None
        body["text"] = {"format": {"type": wanted["type"], **(spec if isinstance(spec, dict) else {})}}
    return body
