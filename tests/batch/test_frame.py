"""Typed answers as typed columns: `Batch.frame`, `Batch.text` with choices, `Batch.parsed`
(real pandas; the values come from `structured.parse`, as the engine would give them)."""

from __future__ import annotations

import datetime
import enum
import json
import subprocess
import sys
from typing import Literal

import pandas as pd
import pytest
from pydantic import BaseModel, Field

from gatecell.batch.result import Batch, Row
from gatecell.wire.transport.errors import InvalidRequest
from gatecell.wire.typed.structured import Schema, parse


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


class Order(BaseModel):
    customer: str
    quantity: int
    price: float
    paid: bool
    status: Literal["new", "shipped", "returned"]
    size: Size
    placed: datetime.datetime
    due: datetime.date | None = None
    tags: list[str] = []
    ref_code: str = Field(alias="ref-code")


class Person(BaseModel):
    name: str
    age: int | None = None


ORDER = {
    "customer": "Ada",
    "quantity": 3,
    "price": 12.5,
    "paid": True,
    "status": "shipped",
    "size": "large",
    "placed": "2024-03-01T10:00:00",
    "due": "2024-03-09",
    "tags": ["gift"],
    "ref-code": "A-1",
}


def _batch(replies: dict, schema, pandas_index=None) -> Batch:
    """A batch whose rows were answered with `replies` (label -> reply text), parsed as the
    engine parses them: a reply that does not validate is a failed row."""
    rows = []
    for label, reply in replies.items():
        _, error = parse(reply, schema)
        rows.append(Row(label, text=reply, error=error, schema=schema))
    return Batch(
        list(replies),
        rows,
        index=pandas_index,
        pandas=pandas_index is not None,
        schema=schema,
    )


def test_one_typed_column_per_field_aligned_to_a_shuffled_string_index():
    schema = Schema.of(Order)
    index = pd.Index(["r7", "r2", "r9"], name="order_id")
    other = {**ORDER, "customer": "Grace", "quantity": "2", "paid": False, "status": "new", "size": "small"}
    replies = {
        "r7": json.dumps(ORDER),
        "r2": json.dumps({**ORDER, "quantity": "many"}),
        "r9": f"```json\n{json.dumps({**other, 'due': None})}\n```",
    }
    batch = _batch(replies, schema, index)
    frame = batch.frame

    assert list(frame.index) == ["r7", "r2", "r9"] and frame.index.name == "order_id"
    assert list(frame.columns) == [
        "customer",
        "quantity",
        "price",
        "paid",
        "status",
        "size",
        "placed",
        "due",
        "tags",
        "ref-code",
    ]
    dtypes = frame.dtypes
    assert dtypes["quantity"] == "Int64"
    assert dtypes["price"] == "float64"
    assert dtypes["paid"] == "boolean"
    assert dtypes["customer"] == "string" and dtypes["ref-code"] == "string"
    assert list(frame["status"].cat.categories) == ["new", "shipped", "returned"]
    assert list(frame["size"].cat.categories) == ["small", "large"]
    assert pd.api.types.is_datetime64_dtype(dtypes["placed"])
    assert pd.api.types.is_datetime64_dtype(dtypes["due"])
    assert dtypes["tags"] == "object"

    assert frame.loc["r7", "quantity"] == 3 and frame.loc["r9", "quantity"] == 2
    assert frame.loc["r7", "size"] == "large" and frame.loc["r9", "status"] == "new"
    assert frame.loc["r7", "placed"] == pd.Timestamp("2024-03-01 10:00")
    assert frame.loc["r7", "ref-code"] == "A-1"
    assert pd.isna(frame.loc["r9", "due"])

    # The failed row: missing in every column, and named in errors.
    assert frame.loc["r2"].isna().all()
    assert batch.errors.to_dict() == {"r2": "quantity: Input should be a valid integer, got 'many'"}
    assert batch.failed == 1 and batch.done == 2

    # Assigning to the input frame lines up by index, whatever its order.
    df = pd.DataFrame({"text": ["c", "a", "b"]}, index=pd.Index(["r9", "r7", "r2"], name="order_id"))
    df[["quantity", "status"]] = frame[["quantity", "status"]]
    assert df["quantity"].tolist() == [2, 3, pd.NA]


def test_time_zones_are_kept_in_utc():
    schema = Schema.of(Order)
    replies = {
        0: json.dumps({**ORDER, "placed": "2024-03-01T10:00:00+02:00"}),
        1: json.dumps({**ORDER, "placed": "2024-03-01T10:00:00Z"}),
    }
    placed = _batch(replies, schema).frame["placed"]
    assert str(placed.dt.tz) == "UTC"
    assert placed.tolist() == [
        pd.Timestamp("2024-03-01 08:00", tz="UTC"),
        pd.Timestamp("2024-03-01 10:00", tz="UTC"),
    ]


def test_a_json_schema_dict_gives_typed_columns_too():
    schema = Schema.of(
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "x": {"type": "number"},
                "when": {"type": "string", "format": "date"},
                "kind": {"type": "string", "enum": ["a", "b"]},
                "meta": {"type": "object", "properties": {"k": {"type": "string"}}},
            },
        }
    )
    batch = _batch(
        {0: '{"n": 1, "x": 2, "when": "2024-01-02", "kind": "b", "meta": {"k": "v"}}', 1: "{}"}, schema
    )
    frame = batch.frame
    assert frame.dtypes.to_dict() == {
        "n": "Int64",
        "x": "float64",
        "when": frame.dtypes["when"],
        "kind": pd.CategoricalDtype(["a", "b"]),
        "meta": object,
    }
    assert pd.api.types.is_datetime64_dtype(frame.dtypes["when"])
    assert frame.loc[0, "meta"] == {"k": "v"}
    assert frame.loc[1].isna().all()  # answered with {}: every field absent, none made up


def test_a_list_of_items_explodes_with_the_input_index_repeated():
    schema = Schema.of(list[Person])
    index = pd.Index(["b", "a", "c", "d"])
    replies = {
        "b": '[{"name": "Ada", "age": 36}, {"name": "Charles"}]',
        "a": '{"items": [{"name": "Grace", "age": 85}]}',
        "c": "[]",
        "d": '[{"name": "Alan", "age": "forty"}]',
    }
    batch = _batch(replies, schema, index)
    frame = batch.frame
    assert list(frame.index) == ["b", "b", "a", "c", "d"]
    assert frame["name"].tolist() == ["Ada", "Charles", "Grace", pd.NA, pd.NA]
    assert frame["age"].tolist() == [36, pd.NA, 85, pd.NA, pd.NA]
    assert frame.dtypes["age"] == "Int64"
    assert list(batch.errors.index) == ["d"]

    kept = batch.to_frame(explode=False)
    assert list(kept.index) == ["b", "a", "c", "d"] and list(kept.columns) == ["items"]
    assert [len(v) if v is not None else None for v in kept["items"]] == [2, 1, 0, None]


def test_choices_give_labels_as_text_and_a_categorical():
    schema = Schema.of(["positive", "negative", "neutral"])
    index = pd.Index(["x", "y", "z"])
    batch = _batch({"x": "Positive.", "y": "I'm not sure", "z": '"neutral"'}, schema, index)
    text = batch.text
    assert text["x"] == "positive" and pd.isna(text["y"]) and text["z"] == "neutral"
    assert list(text.cat.categories) == ["positive", "negative", "neutral"]
    table = batch.to_pandas()
    assert isinstance(table["text"].dtype, pd.CategoricalDtype)
    assert table.loc["x", "text"] == "positive"
    assert table.loc["y", "error"] == '"I\'m not sure" is not one of the choices: positive, negative, neutral'
    assert batch.frame["label"].tolist()[0] == "positive"


def test_enum_choices_show_their_labels():
    class Mood(enum.Enum):
        UP = "up"
        DOWN = "down"

    batch = _batch({0: "DOWN", 1: "up"}, Schema.of(Mood))
    assert batch.parsed == [Mood.DOWN, Mood.UP]
    assert batch.text == ["down", "up"]
    assert list(batch.frame["label"]) == ["down", "up"]


def test_parsed_holds_the_validated_values():
    batch = _batch({0: json.dumps(ORDER), 1: "nope"}, Schema.of(Order))
    first, second = batch.parsed
    assert isinstance(first, Order) and first.quantity == 3 and second is None


def test_a_batch_without_a_schema_has_no_frame_but_the_same_text():
    batch = Batch([0, 1], [Row(0, text="hello"), None])
    assert batch.text == ["hello", None]
    assert batch.parsed == [None, None]
    with pytest.raises(InvalidRequest, match="ran without schema= or choices="):
        batch.to_frame()


def test_an_interrupted_batch_has_missing_rows_in_the_frame():
    schema = Schema.of(Person)
    batch = Batch([0, 1], [Row(0, text='{"name": "Ada"}', schema=schema), None], schema=schema)
    assert batch.frame["name"].tolist() == ["Ada", pd.NA]


def test_importing_the_typed_parts_does_not_import_pandas():
    code = (
        "import sys, gatecell.batch.result, gatecell.batch.frame, gatecell.wire.typed.structured; "
        "print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
