"""How each text API speaks of tools (WIRE-NOTES "Tools"): the request fields that offer
them, the calls in an answer (whole, or assembled from a stream's events), and the turns that
carry the results into the next request.

- chat completions: ``tools`` of ``{"type": "function", "function": {...}}``; calls in
  ``message.tool_calls`` (arguments as JSON text; in a stream, pieces by ``index``,
  interleaved, id and name on a call's first piece); results as ``role: tool`` messages;
- messages: ``tools`` with ``input_schema``; ``tool_use`` blocks (a stream sends the input as
  ``input_json_delta`` pieces per block index); results as ``tool_result`` blocks in a user turn;
- generate-content: ``functionDeclarations`` (OpenAPI subset); ``functionCall`` parts (a
  stream sends each whole); results as ``functionResponse`` parts;
- responses: flat ``tools``; ``function_call`` items (arguments by ``output_index`` in a
  stream); results as ``function_call_output`` items.

Everything here is data in, data out: no I/O, no running.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gatecell.wire.apis.spec import ChatCompletion
from gatecell.wire.transport.results import Reply
from gatecell.wire.typed.structured import openapi

from .functions import Tool

__all__ = ["Requested", "Answer", "offer", "answer_of", "follow_up", "TURNS"]

# Where each API keeps its turns.
TURNS = {"chat": "messages", "messages": "messages", "generate-content": "contents", "responses": "input"}


@dataclass
class Requested:
    """One call as the model asked for it: ``arguments`` is JSON text (chat, responses, and
    any stream's pieces joined) or the object itself (messages, generate-content)."""

    id: str
    name: str
    arguments: str | dict[str, Any]
    made_up: bool = False  # the model gave no id (generate-content often does not): not repeated


@dataclass
class Answer:
    """One round's answer read for tools: its text, the calls in the model's order, and the
    model's turn as the next request must repeat it."""

    text: str
    calls: list[Requested] = field(default_factory=list)
    turn: list[dict[str, Any]] = field(default_factory=list)


def offer(api: str, tools: Iterable[Tool], parallel: bool) -> dict[str, Any]:
    """The body fields offering ``tools`` on ``api``; ``parallel=False`` asks for one call at a time."""
    tools = list(tools)
    if api == "chat":
        fields: dict[str, Any] = {
            "tools": [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        }
        return fields if parallel else {**fields, "parallel_tool_calls": False}
    if api == "messages":
        fields = {
            "tools": [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
            ]
        }
        return (
            fields
            if parallel
            else {**fields, "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}
        )
    if api == "generate-content":
        declarations = [
            {"name": t.name, "description": t.description, "parameters": openapi(t.parameters)} for t in tools
        ]
        return {"tools": [{"functionDeclarations": declarations}]}
    fields = {
        "tools": [
            {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
            for t in tools
        ]
    }
    return fields if parallel else {**fields, "parallel_tool_calls": False}


# -- reading the calls ------------------------------------------------------------------------


def answer_of(api: str, result: Any) -> Answer:
    """The `Answer` of a whole result (`ChatCompletion`, `Reply`) or of a stream read to its
    end (its events; a chat stream keeps those carrying tool calls)."""
    if isinstance(result, ChatCompletion):
        return _chat_whole(result)
    if isinstance(result, Reply):
        return _WHOLE[api](result.raw if isinstance(result.raw, dict) else {})
    events = result.raw_events
    if api == "chat" and events and str(events[0].get("type", "")).startswith("response."):
        # a reasoning model's chat, routed to /v1/responses: its events, the turn in chat's shape
        answer = _responses_stream(events, result.text)
        return Answer(answer.text, answer.calls, [_chat_turn(answer.text, answer.calls)])
    return _STREAMED[api](events, result.text)


def _chat_whole(result: ChatCompletion) -> Answer:
    message = result.choices[0].message if result.choices else None
    extra = (message.model_extra or {}) if message is not None else {}
    text = result.text
    calls: list[Requested] = []
    raw_calls = [c for c in extra.get("tool_calls") or () if isinstance(c, dict)]
    for i, call in enumerate(raw_calls):
        function = call.get("function") or {}
        calls.append(_requested(call.get("id"), function.get("name"), function.get("arguments"), i, "call"))
    return Answer(text, calls, [_chat_turn(text, calls)])


def _chat_turn(text: str, calls: list[Requested]) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        turn["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _text(c.arguments)}}
            for c in calls
        ]
    return turn


def _messages_whole(raw: dict[str, Any]) -> Answer:
    blocks = [b for b in raw.get("content") or () if isinstance(b, dict)]
    text = "".join(b.get("text") or "" for b in blocks if b.get("type") == "text")
    calls = [
        _requested(b.get("id"), b.get("name"), b.get("input"), i, "toolu")
        for i, b in enumerate(b for b in blocks if b.get("type") == "tool_use")
    ]
    return Answer(text, calls, [{"role": "assistant", "content": blocks}] if blocks else [])


def _generate_whole(raw: dict[str, Any]) -> Answer:
    candidate = (raw.get("candidates") or [{}])[0] or {}
    content = candidate.get("content") or {}
    parts = [p for p in content.get("parts") or () if isinstance(p, dict)]
    return _generate_parts(parts)


def _generate_parts(parts: list[dict[str, Any]]) -> Answer:
    text = "".join(p.get("text") or "" for p in parts if not p.get("thought"))
    calls = []
    for i, part in enumerate(p["functionCall"] for p in parts if isinstance(p.get("functionCall"), dict)):
        calls.append(_requested(part.get("id"), part.get("name"), part.get("args") or {}, i, "fc"))
    return Answer(text, calls, [{"role": "model", "parts": parts}] if parts else [])


def _responses_whole(raw: dict[str, Any]) -> Answer:
    return _responses_items([i for i in raw.get("output") or () if isinstance(i, dict)])


def _responses_items(items: list[dict[str, Any]]) -> Answer:
    text = "".join(
        part.get("text") or ""
        for item in items
        if item.get("type") == "message"
        for part in item.get("content") or ()
        if isinstance(part, dict) and part.get("type") == "output_text"
    )
    calls = [
        _requested(item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments"), i, "call")
        for i, item in enumerate(i for i in items if i.get("type") == "function_call")
    ]
    return Answer(text, calls, items)


def _chat_stream(events: list[Any], text: str) -> Answer:
    """Chat chunks' ``delta.tool_calls`` pieces joined by ``index``: the id and name from a
    call's first piece, the arguments in the order their pieces came."""
    pieces: dict[int, dict[str, Any]] = {}
    for event in events:
        for choice in event.get("choices") or ():
            for piece in (choice.get("delta") or {}).get("tool_calls") or ():
                index = piece.get("index", len(pieces))
                call = pieces.setdefault(index, {"id": None, "name": None, "arguments": []})
                function = piece.get("function") or {}
                call["id"] = call["id"] or piece.get("id")
                call["name"] = call["name"] or function.get("name")
                if function.get("arguments"):
                    call["arguments"].append(function["arguments"])
    calls = [
        _requested(c["id"], c["name"], "".join(c["arguments"]), i, "call")
        for i, c in enumerate(pieces[k] for k in sorted(pieces))
    ]
    return Answer(text, calls, [_chat_turn(text, calls)])


def _messages_stream(events: list[Any], text: str) -> Answer:
    """Blocks by index: text from ``text_delta``, a tool_use's input from its
    ``input_json_delta`` pieces (an input that is not JSON stays text, for the loop to report)."""
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, list[str]] = {}
    for event in events:
        kind = event.get("type")
        index = event.get("index", 0)
        if kind == "content_block_start":
            blocks[index] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            if delta.get("type") == "text_delta":
                block["text"] = (block.get("text") or "") + (delta.get("text") or "")
            elif delta.get("type") == "input_json_delta":
                inputs.setdefault(index, []).append(delta.get("partial_json") or "")
    calls: list[Requested] = []
    turn = []
    for index in sorted(blocks):
        block = blocks[index]
        if block.get("type") == "tool_use":
            given: str | dict[str, Any] = "".join(inputs.get(index, ())) or block.get("input") or {}
            call = _requested(block.get("id"), block.get("name"), given, len(calls), "toolu")
            calls.append(call)
            block = {**block, "input": _object(given)}
        elif block.get("type") != "text":
            continue  # thinking blocks need their signatures: not repeated
        turn.append(block)
    return Answer(text, calls, [{"role": "assistant", "content": turn}] if turn else [])


def _generate_stream(events: list[Any], text: str) -> Answer:
    parts: list[dict[str, Any]] = []
    for event in events:
        candidate = (event.get("candidates") or [{}])[0] or {}
        for part in (candidate.get("content") or {}).get("parts") or ():
            if isinstance(part, dict) and (
                "functionCall" in part or (part.get("text") and not part.get("thought"))
            ):
                parts.append(part)
    joined = [{"text": text}] if text else []
    answer = _generate_parts(parts)
    answer.turn = [{"role": "model", "parts": joined + [p for p in parts if "functionCall" in p]}]
    answer.text = text
    return answer


def _responses_stream(events: list[Any], text: str) -> Answer:
    """Items by ``output_index``: an item's ``done`` form when it came, else the added item
    with its argument pieces joined."""
    items: dict[int, dict[str, Any]] = {}
    pieces: dict[int, list[str]] = {}
    done: set[int] = set()
    for event in events:
        kind = event.get("type")
        index = event.get("output_index", 0)
        if kind == "response.output_item.added" and isinstance(event.get("item"), dict):
            items.setdefault(index, dict(event["item"]))
        elif kind == "response.function_call_arguments.delta":
            pieces.setdefault(index, []).append(event.get("delta") or "")
        elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            items[index] = dict(event["item"])
            done.add(index)
    for index, item in items.items():
        if index not in done and item.get("type") == "function_call":
            item["arguments"] = "".join(pieces.get(index, ())) or item.get("arguments") or ""
        if index not in done and item.get("type") == "message":
            item["content"] = [{"type": "output_text", "text": text}]
    answer = _responses_items([items[k] for k in sorted(items)])
    answer.text = text
    return answer


_WHOLE = {"messages": _messages_whole, "generate-content": _generate_whole, "responses": _responses_whole}
_STREAMED = {
    "chat": _chat_stream,
    "messages": _messages_stream,
    "generate-content": _generate_stream,
    "responses": _responses_stream,
}


def _requested(id: Any, name: Any, arguments: Any, i: int, prefix: str) -> Requested:
    """A call with an id of its own when the model gave none (generate-content often does not)."""
    given = (
        arguments
        if isinstance(arguments, (str, dict))
        else ""
        if arguments is None
        else json.dumps(arguments)
    )
    return Requested(str(id) if id else f"{prefix}_{i}", str(name or ""), given, made_up=not id)


def _text(arguments: str | dict[str, Any]) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _object(arguments: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# -- the next request -----------------------------------------------------------------------


def follow_up(
    api: str, data: dict[str, Any], answer: Answer, results: list[tuple[Requested, str, bool]]
) -> dict[str, Any]:
    """``data`` (a copy) with the model's turn and one result per call after its turns, in
    the model's order; each result is ``(call, text, failed)``."""
    key = TURNS[api]
    turns = data.get(key) or []
    if isinstance(turns, str):  # a responses input given as one string
        turns = [{"role": "user", "content": turns}]
    said: list[dict[str, Any]]
    if api == "chat":
        said = [{"role": "tool", "tool_call_id": c.id, "content": text} for c, text, _ in results]
    elif api == "messages":
        blocks = []
        for c, text, failed in results:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": c.id, "content": text}
            if failed:
                block["is_error"] = True
            blocks.append(block)
        said = [{"role": "user", "content": blocks}]
    elif api == "generate-content":
        parts: list[dict[str, Any]] = []
        for c, text, failed in results:
            response: dict[str, Any] = {"name": c.name, "response": {"error" if failed else "result": text}}
            if not c.made_up:
                response["id"] = c.id
            parts.append({"functionResponse": response})
        said = [{"role": "user", "parts": parts}]
    else:
        said = [{"type": "function_call_output", "call_id": c.id, "output": text} for c, text, _ in results]
    return {**data, key: [*turns, *answer.turn, *said]}
