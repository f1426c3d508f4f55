"""Answers with tool calls (`backends.tool_calls`), in each API's shape, whole or streamed as
real models stream them: chat arguments in pieces by ``index``, the pieces of several calls
interleaved; messages ``input_json_delta`` pieces per block; responses
``function_call_arguments.delta`` pieces per ``output_index``; generate-content each call
whole (WIRE-NOTES "Tools")."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response

from gatecell.wire.transport._sse import DONE, encode

from ..backends import chatbot
from .common import event_stream, json_response, paced

__all__ = ["chat", "messages", "generate_content", "responses"]

Calls = list[tuple[str, dict[str, Any]]]


def _pieces(calls: Calls) -> list[tuple[int, str]]:
    """(call index, piece of its JSON arguments), the calls' pieces taken in turn."""
    split = [chatbot.tokenize(json.dumps(arguments, ensure_ascii=False)) for _, arguments in calls]
    out = []
    for step in range(max(len(s) for s in split)):
        out += [(i, pieces[step]) for i, pieces in enumerate(split) if step < len(pieces)]
    return out


def _ids(prefix: str, calls: Calls) -> list[str]:
    return [f"{prefix}_{secrets.token_hex(12)}" for _ in calls]


def _interleaved(calls: Calls, pace: float) -> AsyncIterator[tuple[int, str]]:
    return paced(_pieces(calls), pace)


def chat(calls: Calls, head: dict[str, Any], stream: bool, pace: float) -> Response:
    ids = _ids("call", calls)
    whole: list[dict[str, Any]] = [
        {"id": i, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for i, (name, arguments) in zip(ids, calls, strict=True)
    ]
    if not stream:
        message = {"role": "assistant", "content": None, "tool_calls": whole, "refusal": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls"}
        return json_response({**head, "object": "chat.completion", "choices": [choice]})

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return encode({**head, "object": "chat.completion.chunk", "choices": [choice]})

    async def events() -> AsyncIterator[bytes]:
        yield chunk({"role": "assistant", "content": None})
        for index, call in enumerate(whole):
            first = {"index": index, "id": call["id"], "type": "function"}
            yield chunk(
                {"tool_calls": [{**first, "function": {"name": call["function"]["name"], "arguments": ""}}]}
            )
        async for index, piece in _interleaved(calls, pace):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, "tool_calls")
        yield DONE

    return event_stream(events())


def messages(calls: Calls, model: str, stream: bool, pace: float) -> Response:
    blocks = [
        {"type": "tool_use", "id": i, "name": name, "input": arguments}
        for i, (name, arguments) in zip(_ids("toolu", calls), calls, strict=True)
    ]
    message = {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": len(_pieces(calls))},
    }
    if not stream:
        return json_response(message)

    def ev(data: dict[str, Any]) -> bytes:
        return encode(data, data["type"])

    async def events() -> AsyncIterator[bytes]:
        yield ev({"type": "message_start", "message": {**message, "content": [], "stop_reason": None}})
        for index, block in enumerate(blocks):
            yield ev({"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}})
        async for index, piece in _interleaved(calls, pace):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield ev({"type": "content_block_delta", "index": index, "delta": delta})
        for index in range(len(blocks)):
            yield ev({"type": "content_block_stop", "index": index})
        ending = {"stop_reason": "tool_use", "stop_sequence": None}
        yield ev({"type": "message_delta", "delta": ending, "usage": message["usage"]})
        yield ev({"type": "message_stop"})

    return event_stream(events())


def generate_content(calls: Calls, model: str, method: str, sse: bool) -> Response:
    parts = [{"functionCall": {"name": name, "args": arguments}} for name, arguments in calls]

    def reply(parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if last:
            candidate["finishReason"] = "STOP"
        return {"candidates": [candidate], "modelVersion": model}

    if method == "generateContent":
        return json_response(reply(parts, True))
    if not sse:
        return json_response([reply(parts, True)])

    async def events() -> AsyncIterator[bytes]:
        for i, part in enumerate(parts):
            yield encode(reply([part], i == len(parts) - 1))

    return event_stream(events())


def responses(calls: Calls, shell: dict[str, Any], stream: bool, pace: float) -> Response:
    items = [
        {
            "id": f"fc_{secrets.token_hex(12)}",
            "type": "function_call",
            "status": "completed",
            "call_id": call_id,
            "name": name,
            "arguments": json.dumps(arguments),
        }
        for call_id, (name, arguments) in zip(_ids("call", calls), calls, strict=True)
    ]
    final = {**shell, "status": "completed", "output": items, "created_at": int(time.time())}
    if not stream:
        return json_response(final)
    seq = 0

    def ev(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        seq += 1
        return encode({"type": kind, "sequence_number": seq - 1, **fields}, kind)

    async def events() -> AsyncIterator[bytes]:
        yield ev("response.created", response=shell)
        for index, item in enumerate(items):
            yield ev(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
        async for index, piece in _interleaved(calls, pace):
            yield ev(
                "response.function_call_arguments.delta",
                output_index=index,
                item_id=items[index]["id"],
                delta=piece,
            )
        for index, item in enumerate(items):
            yield ev(
                "response.function_call_arguments.done",
                output_index=index,
                item_id=item["id"],
                arguments=item["arguments"],
            )
            yield ev("response.output_item.done", output_index=index, item=item)
        yield ev("response.completed", response=final)

    return event_stream(events())
