"""``%%chat --schema NAME`` and ``--choices``, in a real IPython shell: against the local
gateway's stand-in, and against a fault server whose model never writes a valid number."""

from __future__ import annotations

import json

MODEL = """
from typing import Literal
from pydantic import BaseModel

class Review(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    product: str
    stars: int
"""
REVIEW = "Read this review: I love my Acme kettle, five stars, wonderful."


def test_a_schema_named_in_the_notebook_gives_a_value(run, ipshell):
    run(MODEL)
    result, captured = run(f"%%chat --schema Review -o r\n{REVIEW}")
    assert result.success, result.error_in_exec
    r = ipshell.user_ns["r"]
    assert type(r.parsed).__name__ == "Review" and r.parse_error is None
    assert (r.parsed.sentiment, r.parsed.stars) == ("positive", 5)
    shown = captured.outputs[-1].data
    assert json.loads(shown["text/plain"].strip().strip("`").removeprefix("json")) == r.parsed.model_dump()
    assert "<pre" in shown["text/html"] and "stars" in shown["text/html"]  # a highlighted JSON block
    assert json.loads(r) == r.parsed.model_dump()  # the value is the answer's text as well


def test_choices_on_the_line(run, ipshell):
    result, captured = run(f"%%chat --choices positive,negative,neutral -o label\n{REVIEW}")
    assert result.success, result.error_in_exec
    assert ipshell.user_ns["label"].parsed == "positive"
    assert captured.outputs[-1].data["text/plain"].strip() == "positive"


def test_a_name_that_is_no_schema_is_one_line_and_sends_nothing(run, gc, ipshell, fault_server):
    gc.session.config.base_url = fault_server.base_url
    ipshell.user_ns["not_a_schema"] = 42
    before = len(fault_server.requests)
    for line, words in [
        ("--schema Missing", "no 'Missing' in the notebook"),
        ("--schema not_a_schema", "--schema not_a_schema: must be a pydantic model class"),
        ("--schema Review --choices a,b", "--schema or --choices, not both"),
        ("--choices ,", "--choices: give the labels"),
    ]:
        run(MODEL)
        result, captured = run(f"%%chat {line}\n{REVIEW}")
        assert not result.success
        assert words in str(result.error_in_exec), line
        assert "\n" not in str(result.error_in_exec)
    assert len(fault_server.requests) == before


def test_an_answer_that_never_validates_says_why_and_keeps_the_text(
    run, gc, ipshell, fault_server, monkeypatch
):
    gc.session.config.base_url = fault_server.base_url
    monkeypatch.setattr(fault_server, "mode", "stars_in_words")
    before = len(fault_server.requests)
    run(MODEL)
    result, captured = run(f"%%chat --schema Review -m fault-chat -o r\n{REVIEW}")
    assert result.success, result.error_in_exec
    r = ipshell.user_ns["r"]
    assert r.parsed is None and r.parse_error == "stars: Input should be a valid integer, got 'five'"
    assert json.loads(r)["stars"] == "five"
    html = captured.outputs[-1].data["text/html"]
    assert "did not validate: stars: Input should be a valid integer" in html
    sent = [body for method, _, body in fault_server.requests[before:] if method == "POST"]
    assert len(sent) == 2  # the answer, and one repair round
    assert sent[1]["messages"][-1]["content"].startswith("Your answer did not validate: stars:")


def test_over_a_frame_with_a_schema_gives_typed_columns(run, ipshell):
    run(MODEL)
    run(
        "import pandas as pd\n"
        "df = pd.DataFrame({'review': ['I love the Acme kettle, 5 stars', "
        "'The Zeta lamp broke, awful, 1 star']}, index=['a', 'b'])"
    )
    result, _ = run("%%chat --over df --schema Review -o batch\nRead this review: {review}")
    assert result.success, result.error_in_exec
    frame = ipshell.user_ns["batch"].frame
    assert frame.index.tolist() == ["a", "b"]
    assert frame["sentiment"].tolist() == ["positive", "negative"]
    assert str(frame["stars"].dtype) == "Int64" and frame["stars"].tolist() == [5, 1]


def test_labels_and_a_json_schema_dict_named_in_the_notebook(run, ipshell):
    run("moods = ['positive', 'negative', 'neutral']")
    run(
        "ticket = {'title': 'Ticket', 'type': 'object', 'properties': {'customer': {'type': 'string'}, "
        "'stars': {'type': 'integer'}}, 'required': ['customer', 'stars']}"
    )
    result, _ = run(f"%%chat --schema moods -o label\n{REVIEW}")
    assert result.success, result.error_in_exec
    assert ipshell.user_ns["label"].parsed == "positive"
    result, _ = run("%%chat --schema ticket -o t\nRead this: Ada Lovelace gave the Acme kettle 5 stars.")
    assert result.success, result.error_in_exec
    assert ipshell.user_ns["t"].parsed == {"customer": "Ada Lovelace", "stars": 5}
