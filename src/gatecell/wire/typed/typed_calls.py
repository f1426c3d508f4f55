"""A call that asks for a typed answer (``schema=`` or ``choices=``): the first policy of
`rounds` (`TypedAnswer`), around the endpoint's own call: every client runs it, and so does
the batch engine, row by row.

The rounds of one typed call:

1. **Native or instruction.** `structured.Support` decides per model. In ``auto`` mode it
   learns from the gateway's metadata (LiteLLM's ``GET /model/info``), asked once per client,
   lazily, by the first typed call, without retries: a 404 or any other failure teaches
   nothing and is not asked again. Natively, the API's own field is merged into the body
   (`structured.request_fields`); otherwise the instruction is added to the last user turn
   (to its text when it is a string, else to its last text part).
2. **A refusal of the native field** (a 4xx `Support.is_refusal` recognises) is remembered
   for the model, said at INFO, and the same call is sent once more by instruction.
3. **The answer is read** by the endpoint's call itself (`read_answer`, run where the result
   is parsed, with the schema the call was given, so the log and the cache see the value):
   ``.parsed`` and ``.parse_error``.
4. **Repair rounds** (``repairs``, 1 by default): an answer that did not validate is sent
   back as the assistant's turn with `structured.repair_message` after it, and the new
   answer is read the same way. Each round is a call of its own (logged, cached), so a
   re-run answers every round from the log.

A failed parse never raises: the result carries the one-line reason in ``.parse_error``.
Streams do not mix with typed answers: the value needs the whole answer.
"""

from __future__ import annotations

import enum
import functools
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import typing_extensions

from gatecell.wire.apis.dialects import Dialect, dialect
from gatecell.wire.apis.spec import ChatCompletion
from gatecell.wire.transport.errors import APIError, GatecellError, InvalidRequest, echo
from gatecell.wire.transport.exchange import Program, logger
from gatecell.wire.transport.results import Reply
from gatecell.wire.typed.rounds import Ask, Done, Step
from gatecell.wire.typed.structured import (
    Schema,
    Support,
    answer_text,
    instruction,
    merged,
    parse_reply,
    repair_message,
)
from gatecell.wire.typed.structured import request_fields as native_fields

__all__ = ["Typed", "TypedAnswer", "typed_request", "read_answer", "with_instruction", "with_repair"]


@dataclass(frozen=True)
class Typed:
    """What a typed call asks for: the `Schema`, and how many repair rounds it may take."""

    schema: Schema
    repairs: int = 1


def typed_request(schema: Any, choices: Any, repairs: Any, stream: bool) -> Typed | None:
    """The `Typed` of a call's arguments, or None when it asks for none; a bad combination
    or value is an `InvalidRequest` in one line, before anything is sent."""
    if not isinstance(repairs, int) or isinstance(repairs, bool) or repairs < 0:
        raise InvalidRequest("repairs", f"must be a whole number >= 0; got {echo(repairs)}")
    if schema is None and choices is None:
        return None
    if schema is not None and choices is not None:
        raise InvalidRequest("choices", "give schema= or choices=, not both")
    if stream:
        raise InvalidRequest(
            "stream", "a typed answer (schema= or choices=) is read whole: leave stream=False"
        )
    if choices is not None and not _are_choices(choices):
        raise InvalidRequest(
            "choices", f"must be a list of labels, an Enum class or a Literal[...]; got {echo(choices)}"
        )
    return Typed(Schema.of(schema if schema is not None else choices), repairs)


def _are_choices(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        or (isinstance(value, type) and issubclass(value, enum.Enum))
        or typing.get_origin(value) in (typing.Literal, typing_extensions.Literal)
    )


# -- the conversation, edited per API -------------------------------------------------------


def with_instruction(api: str, data: dict[str, Any], text: str) -> dict[str, Any]:
    """``data`` with ``text`` after the last user turn's text (a copy; ``data`` is kept)."""
    speaks = dialect(api)
    key = speaks.turns
    turns = data.get(key)
    if isinstance(turns, str):  # a responses input given as one string
        return {**data, key: f"{turns}\n\n{text}"}
    turns = list(turns or ())
    for i in range(len(turns) - 1, -1, -1):
        turn = turns[i]
        if isinstance(turn, dict) and turn.get("role", "user") == "user":
            turns[i] = _added(speaks, turn, text)
            break
    else:
        turns.append(speaks.turn("user", text))
    return {**data, key: turns}


def _added(speaks: Dialect, turn: dict[str, Any], text: str) -> dict[str, Any]:
    field = speaks.content
    content = turn.get(field)
    if isinstance(content, str):
        return {**turn, field: f"{content}\n\n{text}"}
    parts = list(content or ())
    for i in range(len(parts) - 1, -1, -1):
        part = parts[i]
        if speaks.is_text_part(part):
            parts[i] = {**part, "text": f"{part['text']}\n\n{text}"}
            break
    else:
        parts.append(speaks.text(text))
    return {**turn, field: parts}


def with_repair(api: str, data: dict[str, Any], answer: str, repair: str) -> dict[str, Any]:
    """``data`` with the assistant's ``answer`` (left out when it is empty, which some APIs
    refuse as a turn) and the user's ``repair`` turn after its turns."""
    speaks = dialect(api)
    key = speaks.turns
    turns = data[key]
    if isinstance(turns, str):
        turns = [{"role": "user", "content": turns}]
    said = [speaks.turn("assistant", answer)] if answer.strip() else []
    return {**data, key: [*turns, *said, speaks.turn("user", repair)]}


# -- the policy -----------------------------------------------------------------------------


class TypedAnswer:
    """The rounds of one typed call (see the module), as a `rounds.Policy`.

    **Parameters:** ``api`` and ``model``; ``data``: the body as the caller made it;
    ``typed``: what to ask for; ``support``: which models take the native field (learnt and
    remembered here); ``metadata``: the program asking the gateway's model metadata (None
    when it has none); ``validate``: makes a body the endpoint's request, or refuses it in
    one line (the metadata is asked only for a body that passes).
    """

    def __init__(
        self,
        api: str,
        model: str,
        data: dict[str, Any],
        typed: Typed,
        support: Support,
        metadata: Callable[[], Program[Any]],
        validate: Callable[[dict[str, Any]], Any],
    ) -> None:
        self.api, self.model, self.data, self.schema = api, model, data, typed.schema
        self.support, self.metadata, self.validate = support, metadata, validate
        self.repairs = typed.repairs
        self.native = False
        self.body = data
        self.answers = 0

    def start(self) -> Program[Step]:
        support = self.support
        if support.wants_metadata:
            self.validate(self.data)  # bad input is refused before any request, this one included
            support.asked = True  # before asking: calls running meanwhile do not ask again
            support.learn((yield from self.metadata()))
        self.native = support.native(self.model)
        return self._ask(_asking(self.api, self.data, self.schema, self.native))

    def failed(self, error: GatecellError) -> Program[Step]:
        """A refusal of the native field, by the first round: the same call by instruction."""
        support = self.support
        if (
            self.answers
            or not self.native
            or not isinstance(error, APIError)
            or not support.is_refusal(error)
        ):
            raise error
        support.refused(self.model)
        logger.info(
            "model %s does not take a schema in the %s request itself (%s); asking by instruction",
            self.model,
            self.api,
            error.message,
        )
        self.native = False
        return self._ask(_asking(self.api, self.data, self.schema, self.native))
        yield  # a program, though it asks nothing

    def answered(self, answer: Any) -> Program[Step]:
        """An answer that did not validate is shown its problem, while repairs are left."""
        self.answers += 1
        problem = answer.parse_error
        if problem is None or self.answers > self.repairs:
            return Done(answer)
        schema = self.schema
        text = answer_text(answer.raw if isinstance(answer, Reply) else None, answer.text, schema)
        asked_again = repair_message(text, problem, None if self.native else schema)
        return self._ask(with_repair(self.api, self.body, text, asked_again))
        yield  # a program, though it asks nothing

    def _ask(self, body: dict[str, Any]) -> Ask:
        self.body = body
        return Ask(body)


def _asking(api: str, data: dict[str, Any], schema: Schema, native: bool) -> dict[str, Any]:
    if native:
        return merged(data, _native(api, schema))
    return with_instruction(api, data, instruction(schema))


@functools.lru_cache(maxsize=128)
def _native(api: str, schema: Schema) -> dict[str, Any]:
    """Made once per schema: a batch asks with the same fields on every row."""
    return native_fields(api, schema)


def read_answer(result: Any, schema: Schema) -> None:
    """Set ``result.parsed`` and ``.parse_error`` (a `ChatCompletion` or a `Reply`): the
    value `structured.parse_reply` finds in the answer, or the reason it found none."""
    if isinstance(result, ChatCompletion):
        message = result.choices[0].message if result.choices else None
        refusal = (message.model_extra or {}).get("refusal") if message is not None else None
        body = {"choices": [{"message": {"refusal": refusal}}]} if refusal else None
        value, problem = parse_reply(body, result.text, schema)
        result.parsed = value
        if problem is not None:  # (None is the default: a pydantic assignment saved per answer)
            result.parse_error = problem
    elif isinstance(result, Reply):
        result.parsed, result.parse_error = parse_reply(result.raw, result.text, schema)
