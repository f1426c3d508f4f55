"""The native conversation formats for ``local-chat`` (WIRE-NOTES): messages and generate-content.

Typed answers (`backends.typed`): a messages request that forces a tool (``tool_choice``) is
answered with that tool's call, its ``input`` filled to the tool's schema (streamed as
``input_json_delta`` events); a generate-content request with ``responseMimeType``
application/json (and a ``responseSchema``) with JSON text. Offered ``tools`` are called when
the prompt asks for them (`backends.tool_calls`, `tool_replies`)."""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gatecell.wire.apis.spec import GenerateContentRequest, MessagesRequest
from gatecell.wire.transport._sse import encode

from ..backends import chatbot, tool_calls, typed, vision
from ..errors import Fail, shown
from ..registry import MESSAGES
from . import tool_replies
from .common import (
    compose,
    event_stream,
    json_response,
    model_endpoint,
    pace_of,
    paced,
    read_json,
    remote,
    requested,
    runtime,
    served,
    validated,
)

_STOP = {"stop": "end_turn", "length": "max_tokens"}
_FINISH = {"stop": "STOP", "length": "MAX_TOKENS"}


# -- POST /v1/messages -------------------------------------------------------------------


@model_endpoint(MessagesRequest, MESSAGES)
async def messages(request: Request, req: MessagesRequest, data: dict) -> Response:
    rt = runtime(request)
    tool = requested(typed.forced_tool, data)
    plan = None if tool else requested(functools.partial(tool_calls.plan, "messages"), data)
    if plan is not None and plan.calls:
        return tool_replies.messages(plan.calls, req.model, bool(req.stream), pace_of(request, rt))
    wanted = typed.Wanted(tool[1]) if tool else None
    answer = await compose(request, _messages_answer, req, data.get("system") or "", wanted)
    if plan is not None and plan.said:  # the tools' results, quoted
        answer = chatbot.cut(plan.said, [], "", req.max_tokens)
    block: dict[str, Any] = {"type": "text", "text": answer.text}
    stop = _STOP[answer.finish_reason]
    if tool is not None:
        block = {"type": "tool_use", "id": f"toolu_{secrets.token_hex(12)}", "name": tool[0], "input": {}}
        if answer.finish_reason == "stop":
            block["input"], stop = json.loads(answer.text), "tool_use"
    message = {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": answer.prompt_tokens, "output_tokens": answer.completion_tokens},
    }
    if not req.stream:
        return json_response(message)
    return event_stream(_message_events(message, answer, pace_of(request, rt)))


def _messages_answer(req: MessagesRequest, system: Any, wanted: typed.Wanted | None) -> chatbot.Generated:
    turns, attached = vision.turns_of([(m.role, m.content) for m in req.messages])
    return typed.answer(turns, chatbot.text_of(system), req.max_tokens, wanted, attached)


async def _message_events(message: dict, answer: chatbot.Generated, pace: float) -> AsyncIterator[bytes]:
    def ev(data: dict) -> bytes:
        return encode(data, data["type"])

    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 0}}
    block = message["content"][0]
    yield ev({"type": "message_start", "message": start})
    if block["type"] == "tool_use":  # the call's input arrives as pieces of its JSON text
        opened, delta = {**block, "input": {}}, {"type": "input_json_delta", "partial_json": ""}
        key = "partial_json"
    else:
        opened, delta, key = {"type": "text", "text": ""}, {"type": "text_delta", "text": ""}, "text"
    yield ev({"type": "content_block_start", "index": 0, "content_block": opened})
    yield ev({"type": "ping"})
    async for token in paced(answer.tokens, pace):
        yield ev({"type": "content_block_delta", "index": 0, "delta": {**delta, key: token}})
    yield ev({"type": "content_block_stop", "index": 0})
    ending = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield ev({"type": "message_delta", "delta": ending, "usage": {"output_tokens": answer.completion_tokens}})
    yield ev({"type": "message_stop"})


# -- POST /v1beta/models/<model>:generateContent | :streamGenerateContent -----------------


async def generate(request: Request) -> Response:
    rt = runtime(request)
    model, _, method = request.path_params["target"].rpartition(":")
    model = model.removeprefix("models/")
    if method not in ("generateContent", "streamGenerateContent") or not model:
        raise Fail(404, f"unknown method {shown(request.path_params['target'])}; use <model>:generateContent")
    upstream = remote(rt, model)
    if upstream is not None:
        return await upstream.forward(request)
    body, data = await read_json(request)
    req = await validated(GenerateContentRequest, body, data)
    served(model, f"/v1beta/models/{model}:generateContent")
    system = data.get("systemInstruction") or data.get("system_instruction") or ""
    plan = requested(functools.partial(tool_calls.plan, "generate-content"), data)
    if plan is not None and plan.calls:
        return tool_replies.generate_content(
            plan.calls, model, method, request.query_params.get("alt") == "sse"
        )
    wanted = requested(typed.by_generate, data)
    answer = await compose(request, _content_answer, req, system, _max_output_tokens(data), wanted)
    if plan is not None and plan.said:  # the tools' results, quoted
        answer = chatbot.cut(plan.said, [], "", _max_output_tokens(data))
    usage = {
        "promptTokenCount": answer.prompt_tokens,
        "candidatesTokenCount": answer.completion_tokens,
        "totalTokenCount": answer.prompt_tokens + answer.completion_tokens,
    }
    response_id = secrets.token_hex(12)

    def reply(text: str, finish: str | None) -> dict:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
        if finish:
            candidate["finishReason"] = _FINISH[finish]
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": response_id,
        }

    if method == "generateContent":
        return json_response(reply(answer.text, answer.finish_reason))
    if request.query_params.get("alt") != "sse":  # the non-SSE streaming form is one JSON array
        return json_response([reply(answer.text, answer.finish_reason)])
    return event_stream(_content_events(reply, answer, pace_of(request, rt)))


def _content_answer(
    req: GenerateContentRequest, system: Any, max_tokens: int | None, wanted: typed.Wanted | None
) -> chatbot.Generated:
    turns, attached = vision.turns_of(
        [
            ("assistant" if c.role == "model" else "user", [p.model_dump(exclude_none=True) for p in c.parts])
            for c in req.contents
        ]
    )
    return typed.answer(turns, chatbot.text_of(system), max_tokens, wanted, attached)


async def _content_events(reply: Any, answer: chatbot.Generated, pace: float) -> AsyncIterator[bytes]:
    last = len(answer.tokens) - 1
    i = 0
    async for token in paced(answer.tokens, pace):
        yield encode(reply(token, answer.finish_reason if i == last else None))
        i += 1
    if last < 0:
        yield encode(reply("", answer.finish_reason))


def _max_output_tokens(data: dict) -> int | None:
    config = data.get("generationConfig") or data.get("generation_config") or {}
    value = config.get("maxOutputTokens") if isinstance(config, dict) else None
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise Fail(400, f"generationConfig.maxOutputTokens must be a positive integer, got {shown(value)}")
    return value
