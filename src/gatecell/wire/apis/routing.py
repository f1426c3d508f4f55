"""Which models must go to /v1/responses, and how their reply looks as a chat completion (sans-IO).

SPEC 1 and 4 note 3 say reasoning models must be called through /v1/responses, but no
list of them exists. So the client learns it three ways: from the model list when the
gateway says which endpoints a model supports (``supported_endpoints``, new-api's
``supported_endpoint_types``, LiteLLM's ``mode``: see `results.Model`), from configurable
name patterns, and from the gateway's own refusal on chat completions (then it retries once
and remembers).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from fnmatch import fnmatchcase
from re import Pattern
from typing import Any, Union

from gatecell.wire.apis.spec import usage_of
from gatecell.wire.transport.errors import APIError
from gatecell.wire.transport.results import Model, reply_reasoning, reply_text

__all__ = ["Router", "DEFAULT_PATTERNS", "responses_only", "to_chat"]

# Models known to be served by the responses endpoint only. Globs, matched case-insensitively.
DEFAULT_PATTERNS: tuple[str, ...] = (
    "o1-pro*",
    "o3-pro*",
    "gpt-5-pro*",
    "*-deep-research*",
    "codex-mini*",
    "gpt-5*-codex*",
)

_REFUSAL = re.compile(
    r"v1/responses|responses (api|endpoint)|only supported (in|by|on|with) .*responses", re.IGNORECASE
)
_CHAT = "/v1/chat/completions"
_RESPONSES = "/v1/responses"

PatternLike = Union[str, Pattern[str]]  # noqa: UP007 - a runtime alias on 3.10


def responses_only(endpoints: Iterable[str]) -> bool | None:
    """From a `Model`'s ``endpoints`` (SPEC 4 paths, whatever the gateway called them):
    True, False or unknown."""
    paths = {e.rstrip("/").lower() for e in endpoints if isinstance(e, str)}
    if _CHAT in paths:
        return False
    if _RESPONSES in paths:
        return True
    return None


class Router:
    """Decides chat completions or responses for a model name."""

    def __init__(self, patterns: Iterable[PatternLike] | None = None) -> None:
        self.patterns: tuple[PatternLike, ...] = DEFAULT_PATTERNS if patterns is None else tuple(patterns)
        self._known: dict[str, bool] = {}  # model -> needs responses, learned from the gateway
        self._matched: dict[str, bool] = {}  # model -> what the patterns say (asked per request)

    def wants_responses(self, model: str) -> bool:
        known = self._known.get(model)
        if known is None:
            known = self._matched.get(model)
        if known is None:
            name = model.lower()
            known = any(
                p.search(model) if isinstance(p, re.Pattern) else fnmatchcase(name, p.lower())
                for p in self.patterns
            )
            self._matched[model] = known
        return known

    def learn(self, models: Iterable[Model]) -> None:
        """Take what a model list says about endpoints: a model the gateway lists for
        responses and not for chat completions goes to /v1/responses, whatever its name."""
        for model in models:
            verdict = responses_only(model.endpoints) if model.endpoints else None
            if verdict is not None:
                self._known[model.id] = verdict

    def remember(self, model: str) -> None:
        self._known[model] = True

    @staticmethod
    def is_refusal(error: APIError) -> bool:
        """The gateway saying, on chat completions, that the model belongs to /v1/responses."""
        return error.status in (400, 404, 422) and bool(_REFUSAL.search(error.message or ""))


def to_chat(body: Any, model: str) -> dict[str, Any]:
    """A responses reply as a chat completion dict (SPEC 2.3), for `gw.chat` on a reasoning model."""
    body = body if isinstance(body, dict) else {}
    message: dict[str, Any] = {"role": "assistant", "content": reply_text(body) or ""}
    reasoning = reply_reasoning(body)
    if reasoning:
        message["reasoning_content"] = reasoning
    calls = [
        {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""},
        }
        for item in body.get("output") or ()
        if isinstance(item, dict) and item.get("type") == "function_call"
    ]
    if calls:  # a tool chain's calls (gatecell.tools), as chat has them
        message["tool_calls"] = calls
    return {
        "id": body.get("id") or "",
        "object": "chat.completion",
        "created": int(body.get("created_at") or time.time()),
        "model": body.get("model") or model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "length"
                if body.get("status") == "incomplete"
                else "tool_calls"
                if calls
                else "stop",
            }
        ],
        "usage": usage_of(body.get("usage")),
    }
