"""The offline reasoning model ``local-reasoner``: the chat stand-in plus a visible "thought".

Reasoning models answer on /v1/responses with a reasoning summary and a count of reasoning
tokens billed separately. This stand-in writes a short, deterministic summary of how the chat
rules handled the question, and scales its reasoning-token count with the requested effort,
so clients can show both the summary and the usage split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .chatbot import Generated, Turn, count_tokens
from .typed import Wanted, answer

__all__ = ["EFFORTS", "Thought", "think"]

# Reasoning tokens spent per summary token, by effort.
EFFORTS = {"none": 0, "minimal": 1, "low": 2, "medium": 4, "high": 8, "xhigh": 16}


@dataclass(frozen=True)
class Thought:
    summary: str
    answer: Generated
    reasoning_tokens: int


def think(
    turns: list[Turn],
    effort: str | None = None,
    instructions: str | None = None,
    max_tokens: int | None = None,
    wanted: Wanted | None = None,
    attached: Sequence[Sequence[Any]] = (),
) -> Thought:
    """Generated `turns` (with the pictures and documents ``attached`` to them; typed when
    `wanted` or the prompt asks: see `typed.answer`) and explain the route taken; `effort`
    must be a key of EFFORTS (default medium)."""
    effort = effort or "medium"
    reply = answer(turns, instructions, max_tokens, wanted, attached, "local-reasoner")
    question = next((text for role, text in reversed(turns) if role == "user"), "")
    words = len(question.split())
    steps = [f"Read the question ({words} word{'s' if words != 1 else ''})."]
    if reply.text[:1] in ("{", "["):
        steps.append("It asks for JSON, so I filled the schema from what the prompt says.")
    elif any(attached):
        steps.append("It came with pictures or documents, so I measured them.")
    elif "=" in reply.text and any(ch.isdigit() for ch in reply.text):
        steps.append("It is arithmetic, so I evaluated the expression exactly.")
    else:
        steps.append("It is not a calculation I can check, so I describe what I received.")
    if instructions:
        steps.append("Applied the instructions I was given.")
    steps.append(f"Effort {effort}: {EFFORTS[effort]} reasoning tokens per summary token.")
    summary = " ".join(steps) if EFFORTS[effort] else ""
    return Thought(summary, reply, count_tokens(summary) * EFFORTS[effort])
