"""Typed answers, sans-IO: a schema in; the API's own field, or an instruction, out; the
reply's value found, validated, and its first problem named in one line.

A `Schema` is made once per call or batch (`Schema.of`) from what the user has at hand: a
pydantic model class, a ``TypedDict``, a JSON Schema dict, ``list[...]`` of those, or
choices (a list of labels, an ``Enum`` class, a ``Literal[...]``). Everything after that is
a pure function, so that the client, the batch engine, the magics and the local gateway
share one reading of it:

- `schema`: the `Schema` value: how a value is checked and written for the log.
- `asking`: how to ask for it: natively (`request_fields`; a list travels as
  ``{"items": [...]}``, choices as ``{"label": ...}``, another value as ``{"value": ...}``,
  since the native forms want an object at the root), or in words (`instruction`), which of
  the two a model gets (`Support`), and the repair round's turn (`repair_message`).
- `reading`: the answer read as real models write it (`parse`, `parse_reply`).
- `json_schema`: the JSON Schema documents underneath (references, strict mode, Gemini's
  OpenAPI subset, a Python type for a schema given as a dict).

Nothing here sends, logs or imports pandas: `gatecell.wire.typed.typed_calls` runs the rounds of a
typed call, and `gatecell.batch.frame` turns the values into columns.
"""

from __future__ import annotations

from gatecell.wire.typed.structured.asking import (
    CHOICES_MARKER,
    JSON_MARKER,
    MODES,
    Instruction,
    Support,
    instructed,
    instruction,
    merged,
    repair_message,
    request_fields,
)
from gatecell.wire.typed.structured.json_schema import openapi
from gatecell.wire.typed.structured.reading import answer_text, parse, parse_reply
from gatecell.wire.typed.structured.schema import WRAP, Schema

__all__ = [
    "Schema",
    "Support",
    "MODES",
    "WRAP",
    "Instruction",
    "JSON_MARKER",
    "CHOICES_MARKER",
    "request_fields",
    "merged",
    "instruction",
    "instructed",
    "parse",
    "parse_reply",
    "answer_text",
    "repair_message",
    "openapi",
]
