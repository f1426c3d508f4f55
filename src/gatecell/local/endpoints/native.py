"""The native conversation formats for ``local-chat`` (WIRE-NOTES): messages and generate-content."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gatecell.wire.schemas import GenerateContentRequest, MessagesRequest
from gatecell.wire.sse import encode

from ..backends import chatbot, vision
from ..errors import Fail, shown
from ..registry import MESSAGES
from .common import (
    compose,
    event_stream,
    json_response,
    model_endpoint,
    pace_of,
    paced,
    read_json,
    remote,
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
    answer = await compose(_messages_answer, req, data.get("system") or "")
    message = {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": [{"type": "text", "text": answer.text}],
        "stop_reason": _STOP[answer.finish_reason],
        "stop_sequence": None,
        "usage": {"input_tokens": answer.prompt_tokens, "output_tokens": answer.completion_tokens},
    }
    if not req.stream:
        return json_response(message)
    return event_stream(_message_events(message, answer, pace_of(request, rt)))


def _messages_answer(req: MessagesRequest, system: Any) -> chatbot.Answer:
    turns, attached = vision.turns_of([(m.role, m.content) for m in req.messages])
    return chatbot.answer(turns, chatbot.text_of(system), req.max_tokens, attached)


async def _message_events(message: dict, answer: chatbot.Answer, pace: float) -> AsyncIterator[bytes]:
    def ev(data: dict) -> bytes:
        return encode(data, data["type"])

    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 0}}
    yield ev({"type": "message_start", "message": start})
    yield ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    yield ev({"type": "ping"})
    async for token in paced(answer.tokens, pace):
        yield ev({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": token}})
    yield ev({"type": "content_block_stop", "index": 0})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield ev({"type": "message_delta", "delta": delta, "usage": {"output_tokens": answer.completion_tokens}})
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
    answer = await compose(_content_answer, req, system, _max_output_tokens(data))
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


def _content_answer(req: GenerateContentRequest, system: Any, max_tokens: int | None) -> chatbot.Answer:
    turns, attached = vision.turns_of(
        [
            ("assistant" if c.role == "model" else "user", [p.model_dump(exclude_none=True) for p in c.parts])
            for c in req.contents
        ]
    )
    return chatbot.answer(turns, chatbot.text_of(system), max_tokens, attached)


async def _content_events(reply: Any, answer: chatbot.Answer, pace: float) -> AsyncIterator[bytes]:
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
