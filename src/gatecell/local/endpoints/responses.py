"""POST /v1/responses for ``local-reasoner`` (WIRE-NOTES "Responses"), streaming or not.

A ``text.format`` (json_schema, json_object) is answered with JSON (`backends.typed`) and
echoed in the response's ``text``, as real gateways do; offered ``tools`` are called when the
prompt asks for them (`backends.tool_calls`)."""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gatecell.wire.apis.spec import ResponsesRequest
from gatecell.wire.transport._sse import encode

from ..backends import chatbot, tool_calls, typed, vision
from ..backends.reasoning import EFFORTS, Thought, think
from ..errors import Fail, shown
from ..registry import RESPONSES
from . import tool_replies
from .common import compose, event_stream, json_response, model_endpoint, pace_of, paced, requested, runtime


@model_endpoint(ResponsesRequest, RESPONSES)
async def responses(request: Request, req: ResponsesRequest, data: dict) -> Response:
    rt = runtime(request)
    effort = req.reasoning.effort if req.reasoning else None
    if effort is not None and effort not in EFFORTS:
        raise Fail(
            400,
            f"reasoning.effort must be one of {', '.join(EFFORTS)}; got {shown(effort)}",
            param="reasoning.effort",
        )
    limit = data.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise Fail(
            400,
            f"max_output_tokens must be a positive integer, got {shown(limit)}",
            param="max_output_tokens",
        )
    instructions = data.get("instructions") if isinstance(data.get("instructions"), str) else None
    shell = _shell(req.model, effort or "medium", instructions)
    plan = requested(functools.partial(tool_calls.plan, "responses"), data)
    if plan is not None and plan.calls:
        return tool_replies.responses(plan.calls, shell, bool(req.stream), pace_of(request, rt))
    wanted = requested(typed.by_responses, data)
    thought = await compose(request, _think, req.input, effort, instructions, limit, wanted)
    if plan is not None and plan.said:  # the tools' results, quoted
        thought = Thought("", chatbot.cut(plan.said, [], "", limit), 0)
    if wanted is not None:
        shell["text"] = data["text"]
    if not req.stream:
        return json_response(_finished(shell, thought))
    return event_stream(_events(shell, thought, pace_of(request, rt)))


def _think(
    input: str | list[Any],
    effort: str | None,
    instructions: str | None,
    limit: int | None,
    wanted: typed.Wanted | None,
) -> Thought:
    turns, attached = vision.turns_of(_messages(input))
    return think(turns, effort, instructions, limit, wanted, attached)


def _messages(input: str | list[Any]) -> list[tuple[str, Any]]:
    """The input as (role, content) pairs: a string is one user turn; a message item keeps
    its content (text or parts); another item (a tool output...) counts as its text."""
    if isinstance(input, str):
        return [("user", input)]
    messages: list[tuple[str, Any]] = []
    for item in input:
        if isinstance(item, dict) and item.get("role") in ("user", "assistant", "system", "developer"):
            role = "system" if item["role"] == "developer" else item["role"]
            content = item.get("content", "")
            messages.append((role, content if isinstance(content, list) else chatbot.text_of(content)))
        elif isinstance(item, (str, dict)):
            messages.append(("user", chatbot.text_of(item)))
    return messages


def _shell(model: str, effort: str, instructions: str | None) -> dict[str, Any]:
    return {
        "id": f"resp_{secrets.token_hex(12)}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": model,
        "output": [],
        "usage": None,
        "reasoning": {"effort": effort, "summary": "auto"},
        "instructions": instructions,
        "error": None,
        "incomplete_details": None,
        "metadata": {},
        "parallel_tool_calls": False,
        "temperature": None,
        "top_p": None,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
    }


def _items(thought: Thought) -> tuple[dict, dict]:
    reasoning = {
        "id": f"rs_{secrets.token_hex(12)}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": thought.summary}] if thought.summary else [],
    }
    message = {
        "id": f"msg_{secrets.token_hex(12)}",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": thought.answer.text, "annotations": []}],
    }
    return reasoning, message


def _finished(shell: dict, thought: Thought, items: tuple[dict, dict] | None = None) -> dict:
    answer = thought.answer
    cut = answer.finish_reason == "length"
    output = answer.completion_tokens + thought.reasoning_tokens
    return {
        **shell,
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "output": list(items or _items(thought)),
        "usage": {
            "input_tokens": answer.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": thought.reasoning_tokens},
            "total_tokens": answer.prompt_tokens + output,
        },
    }


async def _events(shell: dict, thought: Thought, pace: float) -> AsyncIterator[bytes]:
    seq = 0

    def ev(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        seq += 1
        return encode({"type": kind, "sequence_number": seq - 1, **fields}, kind)

    reasoning, message = _items(thought)
    yield ev("response.created", response=shell)
    yield ev("response.in_progress", response=shell)
    yield ev("response.output_item.added", output_index=0, item={**reasoning, "summary": []})
    if thought.summary:
        ids = {"item_id": reasoning["id"], "output_index": 0, "summary_index": 0}
        yield ev("response.reasoning_summary_part.added", **ids, part={"type": "summary_text", "text": ""})
        async for token in paced(chatbot.tokenize(thought.summary), pace):
            yield ev("response.reasoning_summary_text.delta", **ids, delta=token)
        yield ev("response.reasoning_summary_text.done", **ids, text=thought.summary)
        yield ev("response.reasoning_summary_part.done", **ids, part=reasoning["summary"][0])
    yield ev("response.output_item.done", output_index=0, item=reasoning)
    yield ev(
        "response.output_item.added", output_index=1, item={**message, "status": "in_progress", "content": []}
    )
    ids = {"item_id": message["id"], "output_index": 1, "content_index": 0}
    yield ev(
        "response.content_part.added", **ids, part={"type": "output_text", "text": "", "annotations": []}
    )
    async for token in paced(thought.answer.tokens, pace):
        yield ev("response.output_text.delta", **ids, delta=token, logprobs=[])
    yield ev("response.output_text.done", **ids, text=thought.answer.text, logprobs=[])
    yield ev("response.content_part.done", **ids, part=message["content"][0])
    yield ev("response.output_item.done", output_index=1, item=message)
    final = _finished(shell, thought, (reasoning, message))
    yield ev(
        "response.completed" if final["status"] == "completed" else "response.incomplete", response=final
    )
