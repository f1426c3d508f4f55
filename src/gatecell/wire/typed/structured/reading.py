"""Reading an answer as real models write it: clean JSON, JSON in a code fence or with a
sentence around it, a label in quotes or with a full stop, a messages reply's forced tool
call. A failure is one line naming the first problem (``stars: Input should be a valid
integer, got 'five'``), for the row's error and for `asking.repair_message`, redacted as
every error line is (a model that echoes a key into a typed field does not put it in
``parse_error``, a batch's errors or the cell). The cost is linear in the answer, whatever
the answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from gatecell.wire.transport.errors import echo
from gatecell.wire.typed.structured.schema import WRAP, Schema
from gatecell.wire.util.secret import redact

__all__ = ["parse", "parse_reply", "answer_text"]

_MAX_CANDIDATES = 16  # JSON texts tried in one answer
_OPENERS = {"object": "{", "list": "["}  # how a clean answer of each kind begins


def parse(text: str | None, schema: Schema) -> tuple[Any, str | None]:
    """``(value, None)`` for an answer that holds a valid value, else ``(None, one line)``
    (redacted: module docstring).

    The JSON may be the whole answer, inside a code fence, or a balanced object or array
    with text around it; each is tried (the first that validates wins, else the first
    problem found is named). A JSON value the answer ends inside (a cut-off reply) fails.
    Choices match a label case- and space-insensitively, also quoted or with a full stop.
    """
    value, problem = _parse(text, schema)
    return value, None if problem is None else redact(problem)


def _parse(text: str | None, schema: Schema) -> tuple[Any, str | None]:
    if text is None or not text.strip():
        return None, "the answer is empty"
    if schema.kind == "choices":
        return _choose(text, schema)
    whole = text.strip()
    if whole[:1] == _OPENERS.get(schema.kind):  # clean JSON, as most answers are
        value = schema.check_json(whole)
        if value is not None:
            return value, None
    problem: str | None = None
    syntax: str | None = None
    cut = False
    tried = 0
    for candidate in _json_candidates(text):
        if candidate is None:
            cut = True
            continue
        tried += 1
        if tried > _MAX_CANDIDATES:
            break
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError) as exc:
            if syntax is None and candidate[:1] in "{[":
                syntax = f"the JSON does not parse: {str(exc)[:120]}"
            continue
        value, error = schema.check(_unwrap(value, schema))
        if error is None:
            return value, None
        problem = problem or error
    if problem is not None:
        return None, problem
    if cut:
        return None, "the JSON is cut off: the answer ends inside it"
    return None, syntax or "no JSON value in the answer"


def parse_reply(body: Any, text: str | None, schema: Schema) -> tuple[Any, str | None]:
    """`parse` for a whole reply: a messages reply's forced tool call (``tool_use``, named
    after the schema) is the value itself; a chat refusal is named; else `text` is parsed."""
    call = _tool_call(body, schema)
    if call is not None:
        value, problem = schema.check(_unwrap(call.get("input"), schema))
        return value, None if problem is None else redact(problem)
    if isinstance(body, dict):
        choices = body.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            refusal = message.get("refusal") if isinstance(message, dict) else None
            if isinstance(refusal, str) and refusal.strip():
                return None, f"the model refused: {echo(refusal.strip(), 200)}"
    return parse(text, schema)


def answer_text(body: Any, text: str | None, schema: Schema) -> str:
    """What the model answered, as the repair round shows it back: the forced tool call's
    input as JSON, else the reply's text."""
    call = _tool_call(body, schema)
    if call is not None:
        return json.dumps(call.get("input"), ensure_ascii=False)
    return text or ""


def _tool_call(body: Any, schema: Schema) -> dict[str, Any] | None:
    """A messages reply's ``tool_use`` block named after the schema, if it holds one."""
    content = body.get("content") if isinstance(body, dict) and body.get("type") == "message" else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == schema.name:
            return block
    return None


def _unwrap(value: Any, schema: Schema) -> Any:
    """The value out of its native wrapping (``{"items": [...]}``...), when it is wrapped."""
    key = WRAP.get(schema.kind)
    if key is not None and isinstance(value, dict) and len(value) == 1 and key in value:
        return value[key]
    return value


def _json_candidates(text: str) -> Iterator[str | None]:
    """The texts that may be the answer's JSON, in order: the whole answer, each fenced
    block, each balanced top-level object or array; None marks one the answer ends inside.
    Every step moves forward, so the whole walk is linear in the answer."""
    whole = text.strip()
    if whole[:1] in '{["' or whole[:1].isdigit() or whole in ("true", "false", "null"):
        yield whole
    yield from _fenced(text)
    i = 0
    following = {"{": text.find("{"), "[": text.find("[")}
    while True:
        for opener, at in following.items():
            if 0 <= at < i:  # searched again only once passed: every search moves forward
                following[opener] = text.find(opener, i)
        starts = [at for at in following.values() if at >= 0]
        if not starts:
            return
        start = min(starts)
        end = _closing(text, start)
        if end is None:  # the answer ends inside it
            yield None
            return
        if end < 0:  # a bracket that does not match: not JSON; go on after it
            i = -end
            continue
        yield text[start:end]
        i = end


def _fenced(text: str) -> Iterator[str]:
    """The bodies of the ``` code blocks, the info string (``json``) dropped."""
    i = 0
    while True:
        open_at = text.find("```", i)
        if open_at < 0:
            return
        body_at = text.find("\n", open_at)
        if body_at < 0:
            return
        close_at = text.find("```", body_at)
        if close_at < 0:
            return
        yield text[body_at + 1 : close_at].strip()
        i = close_at + 3


_CLOSERS = {"{": "}", "[": "]"}


def _closing(text: str, start: int) -> int | None:
    """The end of the balanced value opening at `start`; None when the text ends first, or
    minus the position after a bracket that does not match."""
    expected: list[str] = []
    i, n = start, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in _CLOSERS:
            expected.append(_CLOSERS[ch])
        elif ch in "}]":
            if expected.pop() != ch:
                return -(i + 1)
            if not expected:
                return i + 1
        i += 1
    return None


def _label_candidates(text: str) -> Iterator[str]:
    """The answer as given, out of a code fence, and out of JSON (a string, or an object
    with one string value, such as the native ``{"label": ...}``)."""
    whole = text.strip()
    yield whole
    inner = next(_fenced(whole), whole) if whole.startswith("```") else whole
    if inner != whole:
        yield inner
    if inner[:1] in '{"':
        try:
            value = json.loads(inner)
        except (ValueError, RecursionError):
            return
        if isinstance(value, dict) and len(value) == 1:
            value = next(iter(value.values()))
        if isinstance(value, str):
            yield value


def _choose(text: str, schema: Schema) -> tuple[Any, str | None]:
    """The choice an answer names: case and spaces ignored, quotes, a fence, a full stop
    or a one-key JSON object around it allowed; anything else fails (named for the whole
    answer, the first candidate)."""
    problem: str | None = None
    for candidate in _label_candidates(text):
        value, error = schema.check(candidate)
        if error is None:
            return value, None
        problem = problem or error
    return None, problem
