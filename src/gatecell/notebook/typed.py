"""``%%chat --schema NAME`` and ``--choices A,B,C``: a typed answer asked from a cell.

NAME is looked up in the notebook's namespace (``Review``, or ``models.Review``): a pydantic
model class, a ``TypedDict``, a JSON Schema dict, an ``Enum`` or a list of labels, made a
`gatecell.wire.typed.structured.Schema` before anything is sent, so a name that is missing or
is no schema is one line and no request. The answer is read whole (no stream), shown as
the value it validated to (JSON, through the safe renderer), or as the answer with the
reason it did not; the value of ``-o VAR`` keeps it in ``.parsed`` (``.parse_error``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError

__all__ = ["typed_options", "shown_typed"]


def typed_options(name: str, ns: argparse.Namespace, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """``{"schema": Schema}`` for what ``--schema NAME`` or ``--choices A,B,C`` ask (none:
    ``{}``), for the client's and ``map``'s keyword arguments; a `UsageError` for a name or
    value that will not do."""
    from gatecell.wire.transport.errors import InvalidRequest
    from gatecell.wire.typed.structured import Schema

    schema, choices = getattr(ns, "schema", None), getattr(ns, "choices", None)
    if schema is None and choices is None:
        return {}
    if schema is not None and choices is not None:
        raise UsageError(f"%{name}: --schema or --choices, not both")
    if choices is not None:
        labels = [label.strip() for label in choices.split(",") if label.strip()]
        if not labels:
            raise UsageError(f"%{name} --choices: give the labels, separated by commas: --choices yes,no")
        return {"schema": Schema.of(labels)}
    assert schema is not None
    value = _looked_up(schema, namespace)
    if value is None:
        raise UsageError(
            f"%{name} --schema: no {schema!r} in the notebook (define a pydantic model class, a TypedDict, "
            "a JSON Schema dict, an Enum or a list of labels by that name first)"
        )
    try:
        return {"schema": Schema.of(value)}
    except InvalidRequest as exc:
        raise UsageError(f"%{name} --schema {schema}: {exc.message}") from None


def _looked_up(dotted: str, namespace: Mapping[str, Any]) -> Any:
    """``a.b.c`` in the namespace (attributes after the first name), or None."""
    first, *rest = dotted.split(".")
    if not all(part.isidentifier() for part in (first, *rest)) or first not in namespace:
        return None
    value = namespace[first]
    for part in rest:
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def shown_typed(reply: Any, text: str, schema: Any) -> tuple[str, str | None]:
    """What a typed reply shows: the value as JSON (a label as it is), or the answer
    fenced with the reason it did not validate as the note under it."""
    from gatecell.wire.util._text import fence

    parsed, problem = getattr(reply, "parsed", None), getattr(reply, "parse_error", None)
    if problem is not None or parsed is None:
        return fence(text, "text") if text.strip() else "", f"did not validate: {problem}"
    if schema.kind == "choices":
        return str(schema.label(parsed)), None
    return fence(json.dumps(json.loads(schema.dump(parsed)), indent=2, ensure_ascii=False), "json"), None
