"""``map`` with ``schema=`` and ``choices=``, run for real against `RowServer`s whose model
answers each row the way real models do (clean JSON, a wrong type the repair round fixes, one
it does not, a label outside the choices), and a gateway that refuses the native field."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pandas as pd
import pytest
from pydantic import BaseModel
from rowserver import KEY
from typed_models import Review

from gatecell import AsyncGateway
from gatecell.wire.typed.structured import JSON_MARKER

LABELS = ["positive", "negative", "neutral"]


class Person(BaseModel):
    name: str
    born: int


def review_of(prompt: str, body: dict[str, Any]) -> str:
    """Row ``n``: stars ``n % 5 + 1``. Rows whose number ends in 3 say ``"five"`` first and
    are right once told; rows ending in 7 never are; the rest answer clean JSON in a fence."""
    n = int(re.search(r"review (\d+)", json.dumps(body)).group(1))  # type: ignore[union-attr]
    value: dict[str, Any] = {"sentiment": LABELS[n % 3], "product": f"thing {n}", "stars": n % 5 + 1}
    repaired = "did not validate" in prompt
    if n % 10 == 7 or (n % 10 == 3 and not repaired):
        value["stars"] = "five"
    return f"```json\n{json.dumps(value)}\n```"


def shuffled_frame(n: int) -> pd.DataFrame:
    order = [(7 * i) % n for i in range(n)]  # a permutation (n prime to 7)
    return pd.DataFrame({"text": [f"review {i}" for i in order]}, index=[f"id-{i}" for i in order])


def test_a_map_gives_typed_columns_on_the_input_index_and_names_the_failed_rows(row_server, gateway):
    server = row_server(reply=review_of)
    gw = gateway(server)
    df = shuffled_frame(20)
    batch = gw.map("Read {text}", df, schema=Review, concurrency=4, progress=False)
    fixed, never = {3, 13}, {7, 17}
    assert (batch.done, batch.failed) == (18, 2)
    assert server.answered == 20 + len(fixed) + len(never)  # one repair round each
    frame = batch.frame
    assert frame.index.equals(df.index)
    assert list(frame.columns) == ["sentiment", "product", "stars"]
    assert str(frame["stars"].dtype) == "Int64" and str(frame["product"].dtype) == "string"
    assert list(frame["sentiment"].cat.categories) == LABELS
    for label in df.index:
        n = int(label.removeprefix("id-"))
        row = frame.loc[label]
        if n in never:
            assert row.isna().all()
        else:
            assert (row["sentiment"], row["product"], row["stars"]) == (
                LABELS[n % 3],
                f"thing {n}",
                n % 5 + 1,
            )
    errors = batch.errors
    assert sorted(errors.index) == ["id-17", "id-7"]
    assert set(errors) == {"stars: Input should be a valid integer, got 'five'"}
    df[["sentiment", "product", "stars"]] = frame  # as the issue writes it
    assert df.loc["id-13", "stars"] == 4


def test_the_instruction_goes_once_per_row_and_the_repair_shows_the_answer(row_server, gateway):
    server = row_server(reply=review_of)
    batch = gateway(server).map("Read {item}", ["review 3"], schema=Review, progress=False)
    assert batch.done == 1
    first, second = server.bodies
    assert first["messages"][-1]["content"].startswith("Read review 3\n\n" + JSON_MARKER)
    assert "response_format" not in first
    assert second["messages"][-2]["role"] == "assistant" and "five" in second["messages"][-2]["content"]
    assert second["messages"][-1]["content"].startswith("Your answer did not validate: stars:")
    assert server.infos == 1  # the gateway's metadata, asked once (a 404 here)


def test_a_rerun_answers_every_round_from_the_log(row_server, gateway):
    server = row_server(reply=review_of)
    gw = gateway(server)
    first = gw.map("Read {text}", shuffled_frame(10), schema=Review, progress=False)
    sent = server.answered
    again = gw.map("Read {text}", shuffled_frame(10), schema=Review, progress=False)
    assert server.answered == sent  # repair rounds included: nothing sent again
    assert again.cached == 10 and again.done == 9 and again.failed == 1  # the failed row too
    assert again.frame.equals(first.frame)
    assert again.errors.to_dict() == first.errors.to_dict()


def test_the_log_holds_every_round_with_its_schema_and_value(row_server, gateway):
    import gatecell
    from gatecell.store import default_store

    server = row_server(reply=review_of)
    gateway(server).map("Read {item}", ["review 3", "review 4"], schema=Review, progress=False)
    default_store().flush(10)
    rows = gatecell.logs(n=0)
    assert len(rows) == 3  # row 3 took two rounds
    assert {r["schema"] for r in rows} == {"Review"}
    assert sorted(json.dumps(r["parsed"]) for r in rows) == sorted(
        [
            "null",  # row 3's first answer
            json.dumps({"sentiment": "positive", "product": "thing 3", "stars": 4}),
            json.dumps({"sentiment": "negative", "product": "thing 4", "stars": 5}),
        ]
    )
    assert all(r["error"] is None for r in rows)
    first_round = next(r for r in rows if r["parsed"] is None)
    assert "five" in first_round["response"]
    prompts = sorted(r["prompt"] for r in rows)  # the user's words; the instruction is in messages
    assert prompts[:2] == ["Read review 3", "Read review 4"]
    assert prompts[2].startswith("Your answer did not validate") and prompts[2].endswith("correcting that.")
    assert all(JSON_MARKER in json.dumps(r["messages"]) for r in rows)


def test_choices_give_a_categorical_and_a_label_outside_them_fails_its_row(row_server, gateway):
    def label(prompt: str, body: dict[str, Any]) -> str:
        n = int(re.search(r"row (\d+)", json.dumps(body)).group(1))  # type: ignore[union-attr]
        return "Mixed feelings." if n == 2 else f'"{LABELS[n % 3].upper()}"'

    server = row_server(reply=label)
    series = pd.Series([f"row {i}" for i in range(5)], index=list("abcde"), name="review")
    batch = gateway(server).map("Sentiment of: {review}", series, choices=LABELS, progress=False)
    text = batch.text
    assert str(text.dtype) == "category" and list(text.cat.categories) == LABELS
    assert text.tolist()[:2] == ["positive", "negative"] and pd.isna(text["c"])
    assert batch.errors.to_dict() == {
        "c": "'Mixed feelings.' is not one of the choices: positive, negative, neutral"
    }
    assert server.answered == 6  # row c asked twice


def test_a_list_schema_explodes_through_a_real_map(row_server, gateway):
    def people(prompt: str, body: dict[str, Any]) -> str:
        names = re.findall(r"[A-Z][a-z]+ \d{4}", json.dumps(body["messages"][0]))
        return json.dumps([{"name": n.split()[0], "born": int(n.split()[1])} for n in names])

    server = row_server(reply=people)
    df = pd.DataFrame({"text": ["Ada 1815 and Alan 1912", "nobody", "Grace 1906"]}, index=[10, 20, 30])
    batch = gateway(server).map("Who is in: {text}", df, schema=list[Person], progress=False)
    frame = batch.frame
    assert frame.index.tolist() == [10, 10, 20, 30]
    assert frame["name"].tolist()[:2] == ["Ada", "Alan"] and pd.isna(frame["name"].iloc[2])
    assert batch.to_frame(explode=False).index.tolist() == [10, 20, 30]


def test_a_refusal_of_the_native_field_turns_the_batch_to_the_instruction_on_its_first_row(
    row_server, gateway
):
    def refuse(prompt: str, server: Any) -> Any:
        if "response_format" in server.bodies[-1]:
            return 400, {}, "Unrecognized request argument supplied: response_format"
        return None

    server = row_server(refuse, reply=review_of)
    gw = gateway(server, structured="native")
    batch = gw.map(
        "Read {item}",
        [f"review {i}" for i in (1, 2, 4, 5, 6, 8)],
        schema=Review,
        concurrency=8,
        progress=False,
    )
    assert batch.done == 6
    assert server.statuses.count(400) == 1  # the first row alone, before the others started
    assert sum("response_format" in body for body in server.bodies) == 1


def test_a_gateway_whose_metadata_says_so_gets_the_native_field_on_every_row(row_server, gateway):
    info = {"data": [{"model_name": "m", "model_info": {"supports_response_schema": True}}]}
    server = row_server(reply=review_of, model_info=info)
    batch = gateway(server).map(
        "Read {item}", ["review 1", "review 2"], schema=Review, model="m", progress=False
    )
    assert batch.done == 2 and server.infos == 1
    assert all(body["response_format"]["json_schema"]["name"] == "Review" for body in server.bodies)
    assert all(JSON_MARKER not in body["messages"][-1]["content"] for body in server.bodies)


def test_the_async_map_is_typed_too(row_server):
    server = row_server(reply=review_of)

    async def run() -> Any:
        async with AsyncGateway(base_url=server.url, api_key=KEY) as gw:
            return await gw.map("Read {item}", ["review 1", "review 7"], schema=Review, progress=False)

    batch = asyncio.run(run())
    assert batch.parsed[0] == Review(sentiment="negative", product="thing 1", stars=2)
    assert batch.errors == {1: "stars: Input should be a valid integer, got 'five'"}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"schema": Review, "choices": LABELS}, "give schema= or choices=, not both"),
        ({"schema": "Review"}, "schema: must be a pydantic model class"),
        ({"choices": LABELS, "repairs": 1.5}, "repairs: must be a whole number"),
    ],
)
def test_bad_typed_options_are_refused_before_any_row(row_server, gateway, options, words):
    from gatecell.wire.transport.errors import InvalidRequest

    server = row_server()
    with pytest.raises(InvalidRequest, match=re.escape(words)):
        gateway(server).map("{item}", [1, 2], progress=False, **options)
    assert server.prompts == [] and server.infos == 0


def test_a_typed_rows_cost_is_that_of_its_rounds(row_server, gateway):
    """Each round is an exchange the gateway priced (LiteLLM's header); the row costs them all."""
    from gatecell.store import default_store

    server = row_server(lambda prompt, srv: (200, {"x-litellm-response-cost": "0.001"}), reply=review_of)
    batch = gateway(server).map("Read {item}", ["review 3", "review 4"], schema=Review, progress=False)
    assert [(r.cost, r.cost_source) for r in batch.rows] == [
        (pytest.approx(0.002), "gateway"),
        (0.001, "gateway"),
    ]
    assert batch.usage["cost"] == pytest.approx(0.003) and batch.usage["cost_source"] == "gateway"
    rows = default_store().logs(n=0)
    assert [(r["cost"], r["cost_source"]) for r in rows] == [(0.001, "gateway")] * 3  # row 3 took two rounds
