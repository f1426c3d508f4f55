"""Stream decoders, sans-IO: the bytes of one stream in, text fragments out.

One decoder per stream dialect (chat chunks, native messages, generate-content,
responses), plus `BodyDecoder` for a gateway that answers a stream request with a plain
JSON body. `feed` runs once per network read on the hot path, so the chat decoder works
on plain dicts (no pydantic per chunk) and keeps its per-event work to a few lookups.
A decoder also enforces the idle timeout (a read that brings only keep-alive comments
does not count as progress) and the cap on one event (``max_event``, the client's
``max_response_bytes``).
"""

from __future__ import annotations

import json
import time
from json import loads
from typing import Any

from gatecell.wire.transport._sse import Event, EventTooLarge, SSEParser
from gatecell.wire.transport.errors import (
    StreamError,
    StreamTimeoutError,
    StreamTooLargeError,
    error_message,
    too_large,
)
from gatecell.wire.transport.exchange import logger
from gatecell.wire.transport.results import reply_finish, reply_reasoning, reply_text
from gatecell.wire.util.secret import Secret, redact

__all__ = [
    "Decoder",
    "ChatDecoder",
    "MessagesDecoder",
    "GenerateContentDecoder",
    "ResponsesDecoder",
    "BodyDecoder",
]

_monotonic = time.monotonic
# json.loads minus its two whitespace scans: chunks start with "{" (the tolerant path
# in `Decoder.load` catches the rest).
_raw_decode = json.JSONDecoder().raw_decode


class Decoder:
    """Base of the SSE dialects: collects text, reasoning, ids, usage and the end state."""

    ends_at_eof = False  # True where the dialect has no end marker of its own

    def __init__(
        self,
        idle_timeout: float | None = None,
        path: str | None = None,
        key: Secret | None = None,
        max_event: int | None = None,
    ) -> None:
        self.parser = SSEParser(max_event)
        self.max_event = max_event
        self.parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.raw_events: list[Any] = []
        self.id: str | None = None
        self.model: str | None = None
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.path = path
        self._key = key  # to mask it in error events that echo it
        self._idle = idle_timeout
        self._last = _monotonic()
        self._pending = 0

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def feed(self, raw: bytes) -> list[str]:
        """Parse one read; return the text fragments it completed."""
        try:
            events = self.parser.feed_raw(raw)
        except EventTooLarge:
            raise self.error(too_large(self.max_event or 0, "one event"), StreamTooLargeError) from None
        if events:
            self._last = _monotonic()
            self._pending = 0
            return self.on_events(events)
        pending = self.parser.pending
        if pending > self._pending:  # half an event is progress too
            self._pending = pending
            self._last = _monotonic()
        elif self._idle is not None and _monotonic() - self._last > self._idle:
            raise self.error(f"no event for {self._idle:g} s (keep-alives do not count)", StreamTimeoutError)
        return []

    def finish(self) -> list[str]:
        """End of the bytes: flush the parser, and complain if the stream stopped early."""
        out = self.on_events(self.parser.close())  # type: ignore[arg-type]
        if not (self.done or self.finish_reason or self.ends_at_eof):
            raise self.error("the stream ended before it finished")
        return out

    def on_events(self, events: list[str | Event]) -> list[str]:
        out: list[str] = []
        for event in events:
            data, name = (event, "message") if type(event) is str else (event.data, event.event)  # type: ignore[union-attr]
            if data == "[DONE]":
                self.done = True
                continue
            obj = self.load(data)
            if obj is not None:
                self.raw_events.append(obj)
                self.on_event(name, obj, out)
        self.parts += out
        return out

    def on_event(self, name: str, obj: dict[str, Any], out: list[str]) -> None:
        raise NotImplementedError

    def load(self, data: str) -> dict[str, Any] | None:
        try:
            obj = loads(data)
        except ValueError:
            obj = None
        if type(obj) is not dict:
            logger.warning("skipped a stream event that is not a JSON object: %.80r", data)
            return None
        return obj

    def error(self, message: str, cls: type[StreamError] = StreamError, obj: Any = None) -> StreamError:
        if obj is not None:
            obj = loads(redact(json.dumps(obj), self._key))
        found = error_message(obj) if obj is not None else None
        if found:
            message, code, kind = found
        else:
            code = kind = None
        message = " ".join(redact(message, self._key).split())
        return cls(message, partial_text=self.text, path=self.path, code=code, type=kind, body=obj)


class ChatDecoder(Decoder):
    """Chat-completion chunks (SPEC 2.4, 6): ``data: {chunk}`` lines, then ``data: [DONE]``."""

    def on_events(self, events: list[str | Event]) -> list[str]:
        out: list[str] = []
        add = out.append
        for event in events:
            data = event if type(event) is str else event.data  # type: ignore[union-attr]
            try:
                obj = _raw_decode(data)[0]
            except ValueError:
                obj = None
            if type(obj) is not dict:
                if data == "[DONE]":
                    self.done = True
                    continue
                obj = self.load(data)  # the tolerant way, which logs a skip
                if obj is None:
                    continue
            choices = obj.get("choices")
            if choices:
                choice = choices[0]
                delta = choice.get("delta")
                if delta:
                    text = delta.get("content")
                    if text:
                        add(text)
                    if len(delta) > 1 or not text:  # more than text, or no text at all
                        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                        if reasoning:
                            self.reasoning_parts.append(reasoning)
                        if "tool_calls" in delta:  # kept for the tool loop (`gatecell.tools.dialects`)
                            self.raw_events.append(obj)
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
            elif obj.get("error") or getattr(event, "event", None) == "error":
                self.parts += out
                raise self.error("error event in the stream", obj=obj)
            if obj.get("usage"):
                self.usage = obj["usage"]
            if self.id is None:
                self.id = obj.get("id")
                self.model = obj.get("model")
        self.parts += out
        return out


class MessagesDecoder(Decoder):
    """Native messages events: message_start, content_block_delta, message_delta, message_stop."""

    def on_event(self, name: str, obj: dict[str, Any], out: list[str]) -> None:
        kind = obj.get("type") or name
        if kind == "content_block_delta":
            delta = obj.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                out.append(delta["text"])
            elif delta.get("type") == "thinking_delta" and delta.get("thinking"):
                self.reasoning_parts.append(delta["thinking"])
        elif kind == "message_start":
            message = obj.get("message") or {}
            self.id, self.model = message.get("id"), message.get("model")
            self.usage = message.get("usage")
        elif kind == "message_delta":
            self.finish_reason = (obj.get("delta") or {}).get("stop_reason") or self.finish_reason
            self.usage = {**(self.usage or {}), **(obj.get("usage") or {})}
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.parts += out
            raise self.error("error event in the stream", obj=obj)


class GenerateContentDecoder(Decoder):
    """Native generate-content: each event is a whole response holding the next text."""

    ends_at_eof = True

    def on_event(self, name: str, obj: dict[str, Any], out: list[str]) -> None:
        if obj.get("error"):
            self.parts += out
            raise self.error("error event in the stream", obj=obj)
        text = reply_text(obj)
        if text:
            out.append(text)
        thought = reply_reasoning(obj)
        if thought:
            self.reasoning_parts.append(thought)
        candidates = obj.get("candidates") or [{}]
        self.finish_reason = (candidates[0] or {}).get("finishReason") or self.finish_reason
        self.usage = obj.get("usageMetadata") or self.usage
        self.id = obj.get("responseId") or self.id
        self.model = obj.get("modelVersion") or self.model


class ResponsesDecoder(Decoder):
    """Responses events: response.output_text.delta ... response.completed. The reasoning
    summary comes as ``reasoning_summary_text`` deltas, or, from some gateways, only inside
    the response that ``response.completed`` carries: taken from there when no delta came."""

    def on_event(self, name: str, obj: dict[str, Any], out: list[str]) -> None:
        kind = obj.get("type") or name
        if kind == "response.output_text.delta":
            if obj.get("delta"):
                out.append(obj["delta"])
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            self.reasoning_parts.append(obj.get("delta") or "")
        elif kind in (
            "response.created",
            "response.in_progress",
            "response.completed",
            "response.incomplete",
        ):
            response = obj.get("response") or {}
            self.id, self.model = response.get("id") or self.id, response.get("model") or self.model
            if kind == "response.completed":
                self.done, self.finish_reason = True, "stop"
                self.usage = response.get("usage")
            elif kind == "response.incomplete":
                self.done, self.finish_reason = True, "length"
            if self.done and not self.reasoning_parts:  # a summary sent only with the whole response
                summary = reply_reasoning(response)
                if summary:
                    self.reasoning_parts.append(summary)
        elif kind in ("error", "response.failed"):
            self.parts += out
            response = obj.get("response")
            raise self.error(
                "error event in the stream",
                obj=response if isinstance(response, dict) and response.get("error") else obj,
            )


class BodyDecoder(Decoder):
    """A plain JSON body where a stream was asked for: one fragment, the reply's text."""

    def __init__(self, body: Any, path: str | None = None) -> None:
        super().__init__(None, path)
        self.body = body
        self.raw_events = [body]

    def feed(self, raw: bytes) -> list[str]:
        return []

    def finish(self) -> list[str]:
        body = self.body
        text = body if isinstance(body, str) else reply_text(body) or ""  # a text body is its own text
        self.parts = [text] if text else []
        thought = reply_reasoning(body)
        self.reasoning_parts = [thought] if thought else []
        if isinstance(body, dict):
            self.id, self.model = body.get("id"), body.get("model") or body.get("modelVersion")
            self.usage = body.get("usage") or body.get("usageMetadata")
            self.finish_reason = reply_finish(body)
        self.done = True
        return list(self.parts)
