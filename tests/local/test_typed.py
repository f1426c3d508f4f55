"""The local stand-in answers a schema: natively on each API (through the official SDKs and
gatecell's client) and by instruction, with JSON that validates, filled from the prompt."""

from __future__ import annotations

import datetime
import enum
import json
from typing import Literal

import anthropic
import pytest
import typing_extensions
from google import genai
from google.genai import types
from pydantic import BaseModel
from typed_models import Person, Review

from gatecell.gateway import Gateway
from gatecell.local.backends import Refused, chatbot, typed
from gatecell.wire.transport.errors import BadRequestError
from gatecell.wire.typed.structured import Schema, instruction, parse, parse_reply, request_fields


class Mood(enum.Enum):
    HAPPY = "happy"
    ANGRY = "angry"


class Address(typing_extensions.TypedDict):
    city: str
    zip: str


class Ticket(BaseModel):
    """A support ticket, read from an e-mail."""

    customer: str
    email: str
    opened: datetime.date
    urgent: bool
    refund_requested: bool
    amount: float
    mood: Mood
    address: Address
    summary: str
    people: list[Person]


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


GOOD = "Read this review: I love my new Acme Widget, it works great! Five stars."
BAD = "Read this review: The Zephyr Kettle arrived broken. Terrible, I want a refund. 1/5"
PEOPLE = (
    "Ada Lovelace was born in 1815 and wrote to ada@example.org. Charles Babbage was born in 1791. "
    "They met in London."
)
EMAIL = (
    "From Grace Hopper (grace@navy.example): my order of March 3, 2024 arrived broken and I want a "
    "refund of $1,249.50 now. Ship the new one to Arlington, 22201. Ada Lovelace saw it too."
)

SCHEMAS = {
    "model": Review,
    "list of models": list[Person],
    "typeddict": Address,
    "nested, with enum, dates and lists": Ticket,
    "recursive": Tree,
    "choices": ["positive", "negative", "neutral"],
    "enum choices": Mood,
    "literal choices": Literal["low", "high"],
    "json schema dict": {
        "title": "Line",
        "type": "object",
        "properties": {
            "item name": {"type": "string", "maxLength": 12},
            "qty": {"type": "integer", "minimum": 1, "maximum": 9},
            "unit": {"$ref": "#/$defs/Unit"},
            "when": {"type": ["string", "null"], "format": "date-time"},
            "codes": {"type": "array", "items": {"type": "integer"}, "minItems": 2},
            "kind": {"const": "line"},
        },
        "required": ["item name", "qty", "unit", "when", "codes", "kind"],
        "additionalProperties": False,
        "$defs": {"Unit": {"type": "string", "enum": ["kg", "piece"]}},
    },
    "json schema array": {
        "type": "array",
        "items": {"type": "object", "properties": {"n": {"type": "number"}}},
    },
    "a plain value": int,
}


@pytest.fixture
def gw(local_gateway):
    with Gateway(local_gateway.base_url, local_gateway.api_key) as gw:
        yield gw


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# -- every kind of schema validates, natively and by instruction --------------------------------


@pytest.mark.parametrize("kind", SCHEMAS)
@pytest.mark.parametrize("prompt", [GOOD, BAD, PEOPLE, EMAIL, "x"])
def test_every_schema_kind_is_answered_with_a_valid_value(gw, kind, prompt):
    schema = Schema.of(SCHEMAS[kind])
    by_instruction = gw.chat("local-chat", _user(f"{prompt}\n\n{instruction(schema)}"))
    value, error = parse(by_instruction.text, schema)
    assert error is None, f"{by_instruction.text!r}: {error}"
    native = gw.chat("local-chat", _user(prompt), extra_body=request_fields("chat", schema))
    assert parse(native.text, schema) == (value, None)  # the same value: the same prompt, filled alike


def test_the_answer_is_filled_from_the_prompt(gw):
    schema = Schema.of(Review)
    good = parse(gw.chat("local-chat", _user(f"{GOOD}\n\n{instruction(schema)}")).text, schema)[0]
    assert good == Review(sentiment="positive", product="Acme Widget", stars=5)
    bad = parse(gw.chat("local-chat", _user(f"{BAD}\n\n{instruction(schema)}")).text, schema)[0]
    assert bad == Review(sentiment="negative", product="Zephyr Kettle", stars=1)

    people = Schema.of(list[Person])
    found = parse(gw.chat("local-chat", _user(f"{PEOPLE}\n\n{instruction(people)}")).text, people)[0]
    assert [p.name for p in found][:2] == ["Ada Lovelace", "Charles Babbage"]
    assert found[0] == Person(name="Ada Lovelace", born=1815, email="ada@example.org")
    assert found[1] == Person(name="Charles Babbage", born=1791, email=None)


def test_a_nested_schema_is_filled_from_an_email():
    ticket = Ticket.model_validate(typed.fill(Schema.of(Ticket).wire, EMAIL))
    assert ticket.customer == "Grace Hopper"
    assert ticket.email == "grace@navy.example"
    assert ticket.opened == datetime.date(2024, 3, 3)
    assert ticket.refund_requested is True and ticket.urgent is False
    assert ticket.amount == 1249.5
    assert ticket.people[0].name == "Grace Hopper"


def test_a_complaint_is_negative_with_a_low_score(gw):
    """Complaint words and negations, in the typed answer as in the CLI (both ask the gateway)."""
    rated = Schema.of(
        {
            "type": "object",
            "properties": {
                "sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]},
                "score": {"type": "integer", "minimum": 1, "maximum": 5},
            },
            "required": ["sentiment", "score"],
        }
    )
    for text, expected in [
        ("Broke after two days. Total waste of money.", {"sentiment": "negative", "score": 1}),
        ("Not bad at all, no problems.", {"sentiment": "positive", "score": 5}),
    ]:
        reply = gw.chat("local-chat", _user(f"Rate this review: {text}\n\n{instruction(rated)}"))
        assert parse(reply.text, rated) == (expected, None)


def test_choices_pick_by_the_lexicon_then_by_the_words_then_the_first(gw):
    sentiment = Schema.of(["positive", "negative", "neutral"])
    for text, label in [(GOOD, "positive"), (BAD, "negative"), ("It arrived on Tuesday.", "neutral")]:
        reply = gw.chat("local-chat", _user(f"Sentiment of: {text}\n\n{instruction(sentiment)}"))
        assert reply.text == label
    topic = Schema.of(["billing", "shipping", "other"])
    reply = gw.chat("local-chat", _user(f"Topic of: where is my shipping box?\n\n{instruction(topic)}"))
    assert reply.text == "shipping"
    reply = gw.chat("local-chat", _user(f"Topic of: hello\n\n{instruction(topic)}"))
    assert reply.text == "billing"


def test_the_answer_is_the_same_for_the_same_prompt(gw):
    fields = request_fields("chat", Schema.of(Ticket))
    first = gw.chat("local-chat", _user(EMAIL), extra_body=fields).text
    assert gw.chat("local-chat", _user(EMAIL), extra_body=fields).text == first
    other = gw.chat("local-chat", _user(EMAIL.replace("Grace Hopper", "Alan Turing")), extra_body=fields)
    assert json.loads(other.text)["customer"] == "Alan Turing"


def test_the_instruction_in_the_system_prompt_works_too(gw):
    schema = Schema.of(Review)
    messages = [{"role": "system", "content": instruction(schema)}, *_user(GOOD)]
    assert parse(gw.chat("local-chat", messages).text, schema)[0].product == "Acme Widget"


def test_json_mode_without_a_schema_answers_a_json_object(gw):
    reply = gw.chat(
        "local-chat", _user("What is 2+2?"), extra_body={"response_format": {"type": "json_object"}}
    )
    assert json.loads(reply.text) == {"answer": "2+2 = 4"}
    schema = Schema.of(Review)
    with_instruction = gw.chat(
        "local-chat",
        _user(f"{GOOD}\n\n{instruction(schema)}"),
        extra_body={"response_format": {"type": "json_object"}},
    )
    assert parse(with_instruction.text, schema)[1] is None


def test_a_cut_answer_is_cut_json(gw):
    reply = gw.chat(
        "local-chat", _user(GOOD), max_tokens=3, extra_body=request_fields("chat", Schema.of(Review))
    )
    assert reply.choices[0].finish_reason == "length"
    assert parse(reply.text, Schema.of(Review)) == (None, "the JSON is cut off: the answer ends inside it")


def test_a_streamed_answer_joins_into_the_json(gw):
    schema = Schema.of(list[Person])
    stream = gw.chat("local-chat", _user(PEOPLE), stream=True, extra_body=request_fields("chat", schema))
    pieces = list(stream)
    assert len(pieces) > 3
    assert parse("".join(pieces), schema)[1] is None


@pytest.mark.parametrize(
    "response_format, words",
    [
        ("json", "response_format must be an object"),
        ({"type": "xml"}, "response_format.type must be text, json_object or json_schema"),
        ({"type": "json_schema"}, "response_format.json_schema.schema must be a JSON Schema object"),
        (
            {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/$defs/Nope"}}},
            "points at nothing",
        ),
        (
            {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "array", "minItems": 10**6}},
            },
            "asks for more than",
        ),
    ],
)
def test_a_malformed_format_is_a_400_naming_it(gw, response_format, words):
    with pytest.raises(BadRequestError) as caught:
        gw.chat("local-chat", _user("hi"), extra_body={"response_format": response_format})
    assert words in str(caught.value)


def test_a_schema_nested_too_deep_is_refused():
    node: dict = {"type": "string"}
    for _ in range(chatbot.MAX_DEPTH + 2):
        node = {"type": "object", "properties": {"x": node}}
    with pytest.raises(Refused, match="levels deep"):
        typed.fill(node, "text")


# -- each native API through gatecell's client ---------------------------------------------------


def test_responses_text_format(gw):
    schema = Schema.of(Review)
    reply = gw.responses("local-reasoner", GOOD, extra_body=request_fields("responses", schema))
    assert parse(reply.text, schema) == (Review(sentiment="positive", product="Acme Widget", stars=5), None)
    assert reply.raw["text"]["format"]["name"] == "Review"
    assert "JSON" in reply.reasoning


def test_chat_on_a_reasoning_model_asks_responses_in_its_form(local_gateway):
    schema = Schema.of(Review)
    with Gateway(local_gateway.base_url, local_gateway.api_key) as fresh:  # learns from the refusal
        reply = fresh.chat("local-reasoner", _user(BAD), extra_body=request_fields("chat", schema))
    assert parse(reply.text, schema) == (Review(sentiment="negative", product="Zephyr Kettle", stars=1), None)


def test_generate_content_response_schema(gw):
    schema = Schema.of(list[Person])
    reply = gw.generate_content("local-chat", PEOPLE, extra_body=request_fields("generate-content", schema))
    value, error = parse(reply.text, schema)
    assert error is None and value[0].name == "Ada Lovelace"


def test_generate_content_enum_mime_type(gw):
    config = {"responseMimeType": "text/x.enum", "responseSchema": {"type": "STRING", "enum": ["up", "down"]}}
    reply = gw.generate_content(
        "local-chat", "Terrible, broken, awful.", extra_body={"generationConfig": config}
    )
    assert reply.text == "up"  # no sentiment labels: the first


def test_messages_forced_tool(gw):
    schema = Schema.of(Review)
    reply = gw.messages("local-chat", _user(BAD), extra_body=request_fields("messages", schema))
    (block,) = reply.raw["content"]
    assert block["type"] == "tool_use" and block["name"] == "Review"
    assert reply.raw["stop_reason"] == "tool_use"
    assert parse_reply(reply.raw, reply.text, schema) == (
        Review(sentiment="negative", product="Zephyr Kettle", stars=1),
        None,
    )


def test_messages_tool_choice_naming_no_tool_is_a_400(gw):
    with pytest.raises(BadRequestError, match="which tools does not define"):
        gw.messages(
            "local-chat",
            _user("hi"),
            extra_body={"tools": [], "tool_choice": {"type": "tool", "name": "Review"}},
        )


# -- the official SDKs ---------------------------------------------------------------------------


def test_openai_sdk_parses_a_pydantic_model(client):
    parse_method = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
    completion = parse_method(model="local-chat", messages=_user(GOOD), response_format=Review)
    assert completion.choices[0].message.parsed == Review(
        sentiment="positive", product="Acme Widget", stars=5
    )


def test_openai_sdk_parses_a_nested_model(client):
    parse_method = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
    completion = parse_method(model="local-chat", messages=_user(EMAIL), response_format=Ticket)
    ticket = completion.choices[0].message.parsed
    assert isinstance(ticket, Ticket) and ticket.customer == "Grace Hopper"


def test_openai_sdk_responses_parse(client):
    response = client.responses.parse(model="local-reasoner", input=BAD, text_format=Review)
    assert response.output_parsed == Review(sentiment="negative", product="Zephyr Kettle", stars=1)


def test_anthropic_sdk_forced_tool_and_its_stream(local_gateway):
    tool = {"name": "record_review", "description": "Record it.", "input_schema": Review.model_json_schema()}
    with anthropic.Anthropic(
        base_url=local_gateway.base_url, api_key=local_gateway.api_key.reveal(), max_retries=0
    ) as claude:
        message = claude.messages.create(
            model="local-chat",
            max_tokens=500,
            tools=[tool],
            tool_choice={"type": "tool", "name": "record_review"},
            messages=_user(GOOD),
        )
        (block,) = message.content
        assert block.type == "tool_use" and message.stop_reason == "tool_use"
        assert Review.model_validate(block.input).product == "Acme Widget"
        with claude.messages.stream(
            model="local-chat",
            max_tokens=500,
            tools=[tool],
            tool_choice={"type": "any"},
            messages=_user(GOOD),
        ) as stream:
            final = stream.get_final_message()
        assert final.content[0].input == block.input


def test_google_sdk_response_schema(local_gateway):
    gemini = genai.Client(
        api_key=local_gateway.api_key.reveal(),
        http_options=types.HttpOptions(base_url=local_gateway.base_url),
    )
    config = types.GenerateContentConfig(response_mime_type="application/json", response_schema=Review)
    reply = gemini.models.generate_content(model="local-chat", contents=BAD, config=config)
    assert reply.parsed == Review(sentiment="negative", product="Zephyr Kettle", stars=1)
