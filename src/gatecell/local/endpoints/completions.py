"""POST /v1/chat/completions (SPEC 2.1-2.4, 6) for ``local-chat``; other models go upstream.

A ``response_format`` (json_schema, json_object) is answered with JSON (`backends.typed`);
``tools`` with calls when the prompt asks for them (`backends.tool_calls`)."""

from __future__ import annotations

import functools
import secrets
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response

from gatecell.wire.apis.spec import ChatRequest
from gatecell.wire.transport._sse import DONE, encode

from ..backends import chatbot, tool_calls, typed, vision
from ..registry import CHAT
from . import tool_replies
from .common import (
    compose,
    event_stream,
    json_response,
    model_endpoint,
    now,
    pace_of,
    paced,
    requested,
    runtime,
)


@model_endpoint(ChatRequest, CHAT)
async def completions(request: Request, req: ChatRequest, data: dict) -> Response:
    rt = runtime(request)
    plan = requested(functools.partial(tool_calls.plan, "chat"), data)
    head = {"id": f"chatcmpl-{secrets.token_hex(12)}", "created": now(), "model": req.model}
    if plan is not None and plan.calls:
        return tool_replies.chat(plan.calls, head, bool(req.stream), pace_of(request, rt))
    answer = await compose(request, _answer, req, requested(typed.by_chat, data))
    if plan is not None and plan.said:  # the tools' results, quoted
        answer = chatbot.cut(plan.said, [], "", req.max_tokens)
    usage = {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }
    if not req.stream:
        message = {"role": "assistant", "content": answer.text, "refusal": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": answer.finish_reason}
        return json_response({**head, "object": "chat.completion", "choices": [choice], "usage": usage})
    options = data.get("stream_options")
    with_usage = isinstance(options, dict) and options.get("include_usage") is True
    return event_stream(_chunks(head, answer, usage if with_usage else None, pace_of(request, rt)))


def _answer(req: ChatRequest, wanted: typed.Wanted | None) -> chatbot.Generated:
    turns, attached = vision.turns_of([(m.role, m.content) for m in req.messages])
    return typed.answer(turns, None, req.max_tokens, wanted, attached)


async def _chunks(
    head: dict, answer: chatbot.Generated, usage: dict | None, pace: float
) -> AsyncIterator[bytes]:
    head = {**head, "object": "chat.completion.chunk"}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return encode(
            {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        )

    yield chunk({"role": "assistant", "content": ""})
    async for token in paced(answer.tokens, pace):
        yield chunk({"content": token})
    yield chunk({}, answer.finish_reason)
    if usage is not None:
        yield encode({**head, "choices": [], "usage": usage})
    yield DONE
