"""How a typed answer is asked for: natively, in the field each API has for it, or in words.

- `request_fields` is the API's native form (WIRE-NOTES "Structured output"): chat
  ``response_format``, responses ``text.format``, generate-content ``generationConfig``
  (in the OpenAPI subset Gemini takes), messages a forced tool. The schema sent there has an
  object at its root, as OpenAI's strict mode and Anthropic's tools require (`Schema.wire`).
- `instruction` asks the same in words, for a gateway that takes no such field. It begins
  with fixed sentences (`JSON_MARKER`, `CHOICES_MARKER`) that the local gateway's stand-in
  recognises through `instructed`, so the two cannot drift apart.
- `Support` decides which of the two a model gets: the client's say (``structured=``), the
  gateway's metadata (LiteLLM ``/model/info``), and refusals remembered per model.
- `repair_message` is the turn that asks again after an answer that did not validate.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from gatecell.wire.transport.errors import APIError, InvalidRequest
from gatecell.wire.typed.structured.schema import Schema

__all__ = [
    "MODES",
    "JSON_MARKER",
    "CHOICES_MARKER",
    "Support",
    "Instruction",
    "request_fields",
    "merged",
    "instruction",
    "instructed",
    "repair_message",
]

# The instruction's fixed sentences: `instruction` writes them, `instructed` finds them.
JSON_MARKER = "Answer with JSON only"
CHOICES_MARKER = "Answer with exactly one of these labels"
_JSON_LEAD = (
    f"{JSON_MARKER}: no code fence, no text before or after it. It must validate against this JSON Schema:"
)
_CHOICES_LEAD = f"{CHOICES_MARKER}, and nothing else:"


# -- natively ----------------------------------------------------------------------------


def request_fields(api: str, schema: Schema) -> dict[str, Any]:
    """The body fields asking ``api`` (``chat``, ``responses``, ``generate-content``,
    ``messages``) for `schema` natively; add them with `merged`."""
    if api in ("chat", "responses"):
        spec: dict[str, Any] = {"name": schema.name, "schema": schema.wire, "strict": schema.strict}
        if schema.description:
            spec["description"] = schema.description
        if api == "chat":
            return {"response_format": {"type": "json_schema", "json_schema": spec}}
        return {"text": {"format": {"type": "json_schema", **spec}}}
    if api == "generate-content":
        return {
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseSchema": schema.openapi,
            }
        }
    if api == "messages":
        tool = {
            "name": schema.name,
            "description": schema.description or f"Give the answer as {schema.name}.",
            "input_schema": schema.wire,
        }
        return {"tools": [tool], "tool_choice": {"type": "tool", "name": schema.name}}
    raise InvalidRequest("api", f"must be one of chat, messages, generate-content, responses; got {api!r}")


def merged(arguments: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """`arguments` with `fields` added; a field both hold as objects (``generationConfig``
    with the sampling options in it) is merged, the new keys winning."""
    out = dict(arguments)
    for key, value in fields.items():
        if isinstance(out.get(key), Mapping) and isinstance(value, Mapping):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


# -- native or instruction ---------------------------------------------------------------

MODES = ("auto", "native", "instruction")
# A gateway's 4xx naming a native field: it does not take typed answers that way.
_REFUSAL = re.compile(
    r"response_format|json_schema|text\.format|response_?(?:json_?)?schema|response_?mime_?type"
    r"|generation_?config|tool_choice|\btools\b|structured output",
    re.IGNORECASE,
)


class Support:
    """Which models take a schema in the API's native field, and which get the instruction.

    ``mode`` ``"native"`` sends the field to every model, ``"instruction"`` to none, and
    ``"auto"`` (the default) to the models the gateway's metadata says take it (`learn`:
    LiteLLM's ``GET /model/info``, ``supports_response_schema``; ``asked`` tells whether the
    metadata was asked for, which a client does once, whatever comes of it). Whatever the
    mode, a model whose gateway refused the field (`is_refusal`, then `refused`) gets the
    instruction from then on, as `routing.Router` remembers reasoning models.

    **Parameters:**

    * **mode** - ``"auto"``, ``"native"`` or ``"instruction"``.
    """

    def __init__(self, mode: str = "auto") -> None:
        if mode not in MODES:
            raise InvalidRequest("structured", f"must be one of {', '.join(MODES)}; got {mode!r}")
        self.mode = mode
        self.asked = False  # whether the gateway's metadata was asked for
        self._known: dict[str, bool] = {}  # model -> takes the native field, from the metadata
        self._refused: set[str] = set()  # models whose gateway refused it

    @property
    def wants_metadata(self) -> bool:
        """Whether the metadata would decide something and was not asked for yet."""
        return self.mode == "auto" and not self.asked

    def native(self, model: str) -> bool:
        """Whether to ask `model` in the native field."""
        if self.mode == "instruction" or model in self._refused:
            return False
        return self.mode == "native" or self._known.get(model, False)

    def learn(self, model_info: Any) -> None:
        """Take what LiteLLM's ``/model/info`` body says: ``data[].model_name`` and its
        ``model_info.supports_response_schema``. A name served by several deployments takes
        the field only if all of them say so; an entry that does not say is left unknown."""
        entries = model_info.get("data") if isinstance(model_info, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            name = entry.get("model_name") if isinstance(entry, dict) else None
            info = entry.get("model_info") if isinstance(entry, dict) else None
            says = info.get("supports_response_schema") if isinstance(info, dict) else None
            if isinstance(name, str) and isinstance(says, bool):
                self._known[name] = self._known.get(name, True) and says

    def refused(self, model: str) -> None:
        """Remember that `model`'s gateway refused the native field."""
        self._refused.add(model)

    @staticmethod
    def is_refusal(error: APIError) -> bool:
        """A 4xx naming the native field (``response_format``, ``responseSchema``, ``tools``...)."""
        return error.status in (400, 404, 415, 422) and bool(_REFUSAL.search(error.message or ""))


# -- the instruction -------------------------------------------------------------------


class Instruction(NamedTuple):
    """An instruction found in a prompt: the text before it, and what it asks for."""

    prompt: str
    json_schema: dict[str, Any] | None  # None when it asks for one of `labels`
    labels: tuple[str, ...]


@functools.lru_cache(maxsize=128)
def instruction(schema: Schema) -> str:
    """The words asking for `schema` when the gateway takes no native field: the JSON
    Schema to validate against, or the labels to pick one of. Added after the prompt.
    Made once per schema (a batch asks every row with the same words)."""
    if schema.kind == "choices":
        labels = ", ".join(json.dumps(label, ensure_ascii=False) for label in schema.labels)
        return f"{_CHOICES_LEAD} {labels}"
    return f"{_JSON_LEAD}\n{schema.json_text}"


def instructed(text: str) -> Instruction | None:
    """The `instruction` in `text` (the last one), or None when it holds none."""
    at_json, at_choices = text.rfind(_JSON_LEAD), text.rfind(_CHOICES_LEAD)
    if at_json < 0 and at_choices < 0:
        return None
    if at_json > at_choices:
        start = at_json + len(_JSON_LEAD)
        start += len(text[start:]) - len(text[start:].lstrip())
        try:
            found, _ = json.JSONDecoder().raw_decode(text, start)
        except (ValueError, RecursionError):
            return None
        return Instruction(text[:at_json].rstrip(), found, ()) if isinstance(found, dict) else None
    line = text[at_choices + len(_CHOICES_LEAD) :].split("\n", 1)[0]
    try:
        labels = json.loads(f"[{line}]")
    except (ValueError, RecursionError):
        return None
    if not labels or not all(isinstance(label, str) for label in labels):
        return None
    return Instruction(text[:at_choices].rstrip(), None, tuple(labels))


def repair_message(answer: str, error: str, schema: Schema | None = None) -> str:
    """The user turn of the repair round: what was wrong, the answer it was wrong in, and
    (with `schema`) the instruction again."""
    shown = answer.strip()
    if len(shown) > 4000:
        shown = shown[:4000] + " …"
    lines = [
        f"Your answer did not validate: {error}.",
        f"Your answer was:\n{shown}" if shown else "Your answer was empty.",
        "Answer again, correcting that.",
    ]
    if schema is not None:
        lines.append(instruction(schema))
    return "\n\n".join(lines)
