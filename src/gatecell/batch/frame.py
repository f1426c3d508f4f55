"""Typed answers as typed columns: one column per field of the schema, aligned to the input.

`frame` is what `Batch.frame` gives. A column's dtype follows its field's JSON Schema, so a
column of answers is one pandas can compute with, and a row whose answer never validated
is a missing value in every column, never a made-up one:

- integer: ``Int64`` (nullable); number: ``float64``; boolean: ``boolean``
- an ``enum`` (a ``Literal``, an ``Enum``, choices): ``category``, the labels as the
  categories, in their order
- a string of format ``date-time`` or ``date``: ``datetime64`` (in UTC when the values
  carry time zones); any other string: ``string``
- anything else (nested objects, lists) and a column pandas refuses a dtype: ``object``

A ``list[Item]`` schema gives one row per item with its input row's index repeated (an
empty or failed list is one row of missing values, as ``DataFrame.explode`` does);
``explode=False`` keeps one row per input row, the lists in an ``items`` column. pandas is
imported when a frame is made, never before.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from gatecell.wire.typed.structured import Schema

__all__ = ["frame"]


def frame(values: Sequence[Any], index: Any, schema: Schema, *, explode: bool = True) -> Any:
    """A DataFrame of `values` (one per input row, None where a row failed) on `index`."""
    import pandas as pd

    index = pd.Index(index)
    if schema.kind == "list":
        if not explode:
            return pd.DataFrame({"items": _objects(list(values))}, index=index)
        items: list[Any] = []
        positions: list[int] = []
        for position, value in enumerate(values):
            group = value if isinstance(value, list) and value else [None]
            items.extend(group)
            positions.extend([position] * len(group))
        values, index = items, index.take(positions)
    rows = [_fields(value, schema) for value in values]
    data = {name: _column([row.get(name) for row in rows], node) for name, node in schema.columns}
    return pd.DataFrame(data, index=index)


def _fields(value: Any, schema: Schema) -> Mapping[str, Any]:
    """One row's fields by column name (a model's by their aliases); empty for a failed row."""
    if value is None:
        return {}
    if schema.kind == "choices":
        return {"label": schema.label(value)}
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        return {field.alias or name: getattr(value, name) for name, field in fields.items()}
    if isinstance(value, Mapping) and schema.columns[0][0] != "value":
        return value
    return {"value": value}


def _column(values: list[Any], node: dict[str, Any]) -> Any:
    import pandas as pd

    values = [v.value if isinstance(v, enum.Enum) else v for v in values]
    kind = node.get("type")
    labels = node.get("enum")
    try:
        if isinstance(labels, list) and labels and all(isinstance(v, (str, int, float)) for v in labels):
            return pd.Categorical(values, categories=list(dict.fromkeys(labels)))
        if kind == "integer":
            return pd.array(values, dtype="Int64")
        if kind == "number":
            return pd.array([float("nan") if v is None else v for v in values], dtype="float64")
        if kind == "boolean":
            return pd.array(values, dtype="boolean")
        if kind == "string" and node.get("format") in ("date-time", "date"):
            return _datetimes(values)
        if kind == "string":
            return pd.array(values, dtype="string")
    except (TypeError, ValueError, OverflowError):  # values pandas will not hold in that dtype
        pass
    return _objects(values)


def _datetimes(values: list[Any]) -> Any:
    """Naive datetimes as they are; values with time zones (or mixed) in UTC."""
    import pandas as pd

    try:
        return pd.to_datetime(values).array
    except (TypeError, ValueError):
        return pd.to_datetime(values, utc=True).array


def _objects(values: list[Any]) -> Any:
    import numpy as np

    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column
