"""Typed answers through the clients, against the fault server's typed models: the replies
real models send, the repair rounds, a gateway that refuses the native field, one whose
``/model/info`` says it takes it, and what reaches the log and the cache."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from fault_server import REVIEW
from typed_models import Person, Review

from gatecell.wire.transport.errors import InvalidRequest
from gatecell.wire.typed.structured import JSON_MARKER, Schema, instruction

ASK = [{"role": "user", "content": "Read this review: the Acme kettle is great, five stars."}]
LABELS = ["positive", "negative", "neutral"]
WANT = Review(**REVIEW)
APIS = ["chat", "messages", "generate-content", "responses"]


def sent(fault, gw, path_part: str = "") -> list[dict]:
    """The JSON bodies the server got from ``gw``, in order (those whose path holds ``path_part``)."""
    return [r.json() for r in fault.seen(gw.token) if r.method == "POST" and path_part in r.path]


def last_user_text(body: dict) -> str:
    turn = [m for m in body["messages"] if m["role"] == "user"][-1]
    content = turn["content"]
    return content if isinstance(content, str) else content[-1]["text"]


@pytest.mark.parametrize("scenario", ["typed-clean", "typed-fenced", "typed-prose"])
def test_an_answer_is_found_however_it_is_wrapped(make, fault, scenario):
    gw = make(scenario)
    reply = gw.chat("m", ASK, schema=Review)
    assert reply.parsed == WANT and reply.parse_error is None
    assert len(sent(fault, gw)) == 1  # no repair round for a good answer


def test_the_schema_goes_in_words_after_the_prompt_where_nothing_says_the_model_takes_it(make, fault):
    gw = make("typed-clean")
    gw.chat("m", ASK, schema=Review)
    (body,) = sent(fault, gw)
    assert "response_format" not in body
    text = last_user_text(body)
    assert text.startswith(ASK[0]["content"] + "\n\n" + JSON_MARKER)
    assert text.endswith(Schema.of(Review).json_text)
    info = [r for r in fault.seen(gw.token) if r.path == "/model/info"]
    assert [r.method for r in info] == ["GET"]  # asked once, a 404: nothing learnt


def test_a_wrong_type_is_repaired_in_a_second_round(make, fault):
    gw = make("typed-fixable")
    reply = gw.chat("m", ASK, schema=Review)
    assert reply.parsed == WANT and reply.parse_error is None
    first, second = sent(fault, gw)
    turns = second["messages"]
    assert turns[:-2] == first["messages"]  # the conversation as sent, then the answer and the repair
    assert turns[-2] == {"role": "assistant", "content": json.dumps({**REVIEW, "stars": "five"})}
    repair = turns[-1]["content"]
    assert repair.startswith("Your answer did not validate: stars: Input should be a valid integer")
    assert repair.endswith(instruction(Schema.of(Review)))  # by instruction: asked again in full


def test_an_answer_that_never_validates_fails_alone_with_its_first_problem(make, fault):
    gw = make("typed-stubborn")
    reply = gw.chat("m", ASK, schema=Review)
    assert reply.parsed is None
    assert reply.parse_error == "stars: Input should be a valid integer, got 'five'"
    assert len(sent(fault, gw)) == 2  # one repair round by default
    assert reply.choices[0].message.content == json.dumps({**REVIEW, "stars": "five"})  # the text kept


@pytest.mark.parametrize("repairs", [0, 3])
def test_repairs_sets_the_rounds(make, fault, repairs):
    gw = make("typed-stubborn")
    assert gw.chat("m", ASK, schema=Review, repairs=repairs).parse_error is not None
    assert len(sent(fault, gw)) == 1 + repairs


@pytest.mark.parametrize(
    ("scenario", "error"),
    [
        ("typed-truncated", "the JSON is cut off: the answer ends inside it"),
        ("typed-empty", "the answer is empty"),
    ],
)
def test_a_cut_or_empty_answer_is_named(make, fault, scenario, error):
    gw = make(scenario)
    reply = gw.chat("m", ASK, schema=Review)
    assert (reply.parsed, reply.parse_error) == (None, error)
    bodies = sent(fault, gw)
    assert len(bodies) == 2
    if scenario == "typed-empty":  # no empty assistant turn (some APIs refuse one): the repair alone
        assert [m["role"] for m in bodies[1]["messages"]] == ["user", "user"]


def test_choices_match_a_label_written_loosely_and_name_one_that_is_none_of_them(make, fault):
    good = make("typed-label")
    reply = good.chat("m", ASK, choices=LABELS)
    assert (reply.parsed, reply.parse_error) == ("positive", None)
    wrong = make("typed-offlabel")
    reply = wrong.chat("m", ASK, choices=LABELS)
    assert reply.parsed is None
    assert reply.parse_error == "'Mixed.' is not one of the choices: positive, negative, neutral"
    assert len(sent(fault, wrong)) == 2
    assert "exactly one of these labels" in last_user_text(sent(fault, wrong)[0])


@pytest.mark.parametrize("api", APIS)
def test_a_gateway_that_refuses_the_native_field_is_asked_by_instruction_and_remembered(
    make, fault, api, caplog
):
    gw = make("typed-refuses-native", structured="native")
    with caplog.at_level(logging.INFO, logger="gatecell"):
        reply = gw.converse(api, "m", ASK, schema=Review)
    assert reply.parsed == WANT
    assert fault.counts[(gw.token, "refused")] == 1
    assert any("does not take a schema" in r.getMessage() for r in caplog.records)
    again = gw.converse(api, "m", ASK, schema=Review)  # remembered: straight to the instruction
    assert again.parsed == WANT
    assert fault.counts[(gw.token, "refused")] == 1
    assert fault.counts[(gw.token, "answered")] == 2


def test_a_gateway_whose_model_info_says_so_gets_the_native_field(make, fault):
    gw = make("typed-takes-native")
    first = gw.chat("m", ASK, schema=Review)
    second = gw.chat("m", ASK, choices=LABELS)
    old = gw.chat("old", ASK, schema=Review)  # its entry says no: the instruction
    assert first.parsed == WANT
    assert second.parse_error.endswith("is not one of the choices: positive, negative, neutral")
    assert old.parsed == WANT
    bodies = sent(fault, gw)
    native = bodies[0]["response_format"]
    assert native["type"] == "json_schema" and native["json_schema"]["name"] == "Review"
    assert native["json_schema"]["strict"] is True
    assert JSON_MARKER not in last_user_text(bodies[0])
    assert bodies[1]["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"] == LABELS
    assert "response_format" not in bodies[-1] and JSON_MARKER in last_user_text(bodies[-1])
    assert [r.path for r in fault.seen(gw.token)].count("/model/info") == 1  # once per client


@pytest.mark.parametrize("api", ["messages", "generate-content", "responses"])
def test_each_api_is_asked_natively_in_its_own_field(make, fault, api):
    gw = make("typed-takes-native")
    reply = gw.converse(api, "m", ASK, schema=Review)
    assert reply.parsed == WANT and reply.parse_error is None
    (body,) = sent(fault, gw)
    if api == "messages":
        assert body["tool_choice"] == {"type": "tool", "name": "Review"}
        assert reply.raw["content"][0]["type"] == "tool_use"  # the value came as the tool's input
    elif api == "generate-content":
        assert body["generationConfig"]["responseMimeType"] == "application/json"
    else:
        assert body["text"]["format"]["name"] == "Review"


def test_a_messages_tool_input_that_does_not_validate_is_shown_back_as_json(make, fault):
    gw = make("typed-stubborn", structured="native")
    reply = gw.messages("m", ASK, schema=Review)
    assert reply.parse_error == "stars: Input should be a valid integer, got 'five'"
    first, second = sent(fault, gw, "/v1/messages")
    assert second["messages"][-2] == {"role": "assistant", "content": json.dumps({**REVIEW, "stars": "five"})}
    assert not second["messages"][-1]["content"].endswith("}")  # natively: no instruction repeated


def test_the_async_client_runs_the_same_rounds(make, fault):
    gw = make("typed-fixable", asynchronous=True)

    async def ask():
        async with gw:
            return await gw.chat("m", ASK, schema=Review)

    reply = asyncio.run(ask())
    assert reply.parsed == WANT
    assert len(sent(fault, gw)) == 2


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"schema": Review, "choices": LABELS}, "choices: give schema= or choices=, not both"),
        ({"schema": Review, "stream": True}, "stream: a typed answer"),
        ({"choices": LABELS, "repairs": -1}, "repairs: must be a whole number >= 0"),
        ({"schema": 42}, "schema: must be a pydantic model class"),
        ({"choices": {"a": 1}}, "choices: must be a list of labels"),
        ({"choices": []}, "choices: must hold at least one label"),
    ],
)
def test_bad_typed_arguments_are_one_line_before_any_request(make, fault, arguments, words):
    gw = make("typed-clean")
    with pytest.raises(InvalidRequest) as info:
        gw.chat("m", ASK, **arguments)
    assert str(info.value).startswith(words) and "\n" not in str(info.value)
    assert fault.seen(gw.token) == []


def test_the_log_keeps_the_schema_and_the_value(make, fault, home):
    import gatecell
    from gatecell.store import default_store

    make("typed-clean").chat("m", ASK, schema=Review)
    make("typed-stubborn").chat("m", ASK, schema=Review, repairs=0)
    default_store().flush(10)
    stubborn, clean = gatecell.logs(n=2)
    assert clean["schema"] == "Review" and clean["parsed"] == REVIEW
    assert stubborn["schema"] == "Review" and stubborn["parsed"] is None
    assert stubborn["error"] is None  # the exchange went well: its answer just did not validate


@pytest.mark.parametrize("structured", ["instruction", "native"])
def test_the_schema_is_part_of_the_cache_key(make, fault, home, structured):
    gw = make("typed-clean", cache=True, structured=structured)
    assert gw.chat("m", ASK, schema=Review).parsed == WANT
    again = gw.chat("m", ASK, schema=Review)
    assert again.parsed == WANT and again.meta.cached  # the value read from the cached answer too
    assert len(sent(fault, gw)) == 1
    other = gw.chat("m", ASK, schema=list[Person], repairs=0)  # the same prompt, another schema: sent
    assert not other.meta.cached
    plain = gw.chat("m", ASK)  # and without one
    assert not plain.meta.cached and plain.parsed is None and plain.parse_error is None
    assert len(sent(fault, gw)) == 3


def test_gatecell_logs_shows_the_value(make, fault, home):
    import os
    import subprocess
    import sys

    from gatecell.store import default_store

    make("typed-fenced").chat("m", ASK, schema=Review)
    default_store().flush(10)
    run = [sys.executable, "-m", "gatecell", "logs", "-n", "1"]
    env = {**os.environ, "GATECELL_HOME": str(home)}
    line = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, env=env).stdout)
    assert (line["schema"], line["parsed"]) == ("Review", REVIEW)
    text = subprocess.run(run, capture_output=True, text=True, env=env).stdout
    assert f"### Parsed as Review\n\n{json.dumps(REVIEW)}" in text


def test_a_parsed_value_in_a_gateway_body_is_not_taken_for_the_clients(make, fault):
    from gatecell.wire.apis.spec import ChatCompletion

    body = {"choices": [{"message": {"content": "hi"}}], "parsed": {"stars": 1}, "parse_error": "made up"}
    completion = ChatCompletion.model_validate(body)
    assert (completion.parsed, completion.parse_error) == (None, None)
    assert "parsed" not in completion.model_dump() and "parsed" not in repr(completion)


def test_the_instruction_joins_the_last_text_part_of_a_turn_of_parts(make, fault):
    picture = {"type": "image_url", "image_url": {"url": "https://example.com/kettle.png"}}
    gw = make("typed-clean")
    gw.chat(
        "m",
        [{"role": "user", "content": [{"type": "text", "text": "Read this review"}, picture]}],
        schema=Review,
    )
    (body,) = sent(fault, gw)
    text, image = body["messages"][0]["content"]
    assert text["text"].startswith("Read this review\n\n" + JSON_MARKER) and image == picture
    only_a_picture = make("typed-clean")
    only_a_picture.chat("m", [{"role": "user", "content": [picture]}], schema=Review)
    (body,) = sent(fault, only_a_picture)
    assert body["messages"][0]["content"][0] == picture  # no text part: one is added after it
    assert body["messages"][0]["content"][1]["text"].startswith(JSON_MARKER)
    responses = make("typed-clean")
    responses.responses(
        "m", [{"role": "user", "content": [{"type": "input_text", "text": "Read"}]}], schema=Review
    )
    (body,) = sent(fault, responses)
    part = body["input"][0]["content"][0]
    assert part["type"] == "input_text" and part["text"].startswith("Read\n\n" + JSON_MARKER)
