"""`gatecell.wire.typed.structured`: schemas of every kind, their native and strict forms, the
instruction, and replies parsed the way real models write them (in memory, sans-IO)."""

from __future__ import annotations

import datetime
import enum
import json
import typing
from typing import Literal

import pytest
import typing_extensions
from pydantic import BaseModel
from typed_models import Person, Review

from gatecell.wire.apis import spec
from gatecell.wire.apis.conversation import to_responses
from gatecell.wire.transport.errors import APIError, InvalidRequest
from gatecell.wire.typed.structured import (
    CHOICES_MARKER,
    JSON_MARKER,
    Schema,
    Support,
    instructed,
    instruction,
    merged,
    parse,
    parse_reply,
    repair_message,
    request_fields,
)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Node(BaseModel):
    label: str
    children: list[Node] = []


class PlainTD(
    typing.TypedDict
):  # typing's, as users write it (pydantic wants typing_extensions' before 3.12)
    city: str
    population: int


class PartialTD(typing_extensions.TypedDict, total=False):
    city: str
    population: int


GOOD = {"sentiment": "positive", "product": "Acme Widget", "stars": 5}
GOOD_JSON = json.dumps(GOOD)
WANT = Review(**GOOD)

# Replies as real models send them: (reply, the value, or the one-line error).
REVIEW_REPLIES = [
    ("clean JSON", GOOD_JSON, WANT),
    ("clean JSON, spaces around", f"\n  {GOOD_JSON}  \n", WANT),
    ("fenced json", f"```json\n{GOOD_JSON}\n```", WANT),
    ("fenced, no language", f"```\n{GOOD_JSON}\n```", WANT),
    ("sentence before", f"Here is the JSON you asked for: {GOOD_JSON}", WANT),
    ("sentence after", f"{GOOD_JSON}\nLet me know if you need anything else!", WANT),
    (
        "prose and a fence",
        f"Sure! Here it is:\n\n```json\n{json.dumps(GOOD, indent=2)}\n```\nHope it helps.",
        WANT,
    ),
    ("brackets in the prose first", f"Result [see below]: {GOOD_JSON}", WANT),
    ("the schema echoed, then the answer", f'Schema: {{"type": "object"}}. Answer: {GOOD_JSON}', WANT),
    ("a string holding braces", json.dumps({**GOOD, "product": "Widget {v2} [beta]"}), None),
    ("truncated", GOOD_JSON[:-9], "the JSON is cut off: the answer ends inside it"),
    ("truncated in a fence", f"```json\n{GOOD_JSON[:30]}", "the JSON is cut off: the answer ends inside it"),
    (
        "wrong type",
        json.dumps({**GOOD, "stars": "five"}),
        "stars: Input should be a valid integer, got 'five'",
    ),
    ("a number as a string is taken", json.dumps({**GOOD, "stars": "5"}), WANT),
    ("missing field", json.dumps({"sentiment": "positive", "product": "X"}), "stars: Field required"),
    (
        "label outside the Literal",
        json.dumps({**GOOD, "sentiment": "great"}),
        "sentiment: Input should be 'positive', 'negative' or 'neutral', got 'great'",
    ),
    (
        "two problems",
        json.dumps({"sentiment": "great", "product": "X"}),
        "sentiment: Input should be 'positive', 'negative' or 'neutral', got 'great' (and 1 more problem)",
    ),
    ("empty", "", "the answer is empty"),
    ("blank", " \n\t ", "the answer is empty"),
    ("prose only", "The review is positive and gives five stars.", "no JSON value in the answer"),
    ("malformed JSON", "{'sentiment': 'positive'}", "the JSON does not parse: "),
    ("an array where an object goes", f"[{GOOD_JSON}]", "the answer: Input should be a valid dictionary"),
]


@pytest.mark.parametrize("case, reply, want", REVIEW_REPLIES, ids=[c[0] for c in REVIEW_REPLIES])
def test_replies_to_an_object_schema(case, reply, want):
    value, error = parse(reply, Schema.of(Review))
    if isinstance(want, str):
        assert value is None
        assert error.startswith(want)
        assert "\n" not in error
    else:
        assert error is None
        assert value == (want if want is not None else Review.model_validate_json(reply))


LIST_REPLIES = [
    ("bare array", '[{"name": "Ada Lovelace", "born": 1815}, {"name": "Charles Babbage"}]', 2),
    ("wrapped as sent natively", '{"items": [{"name": "Ada Lovelace"}]}', 1),
    ("fenced array after a sentence", 'Two people:\n```json\n[{"name": "A"}, {"name": "B"}]\n```', 2),
    ("empty list", "[]", 0),
    ("second item wrong", '[{"name": "A"}, {"name": "B", "born": "long ago"}]', "[1].born: Input should be"),
    ("truncated list", '[{"name": "A"}, {"name": "B"', "the JSON is cut off"),
]


@pytest.mark.parametrize("case, reply, want", LIST_REPLIES, ids=[c[0] for c in LIST_REPLIES])
def test_replies_to_a_list_of_objects(case, reply, want):
    value, error = parse(reply, Schema.of(list[Person]))
    if isinstance(want, str):
        assert value is None and error.startswith(want), error
    else:
        assert error is None and len(value) == want and all(isinstance(v, Person) for v in value)


CHOICE_REPLIES = [
    ("exact", "positive", "positive"),
    ("other case", "Positive", "positive"),
    ("shouting", "NEGATIVE!", "negative"),
    ("spaces and a full stop", "  neutral.  \n", "neutral"),
    ("quoted", '"negative"', "negative"),
    ("single quotes", "'positive'", "positive"),
    ("bold", "**Positive**", "positive"),
    ("backticks", "`neutral`", "neutral"),
    ("in a fence", "```\npositive\n```", "positive"),
    ("native wrapping", '{"label": "negative"}', "negative"),
    ("one-key object", '{"sentiment": "Neutral"}', "neutral"),
    ("outside the choices", "great", "'great' is not one of the choices: positive, negative, neutral"),
    ("two labels", "positive or negative", "'positive or negative' is not one of the choices"),
    ("a sentence", "The sentiment is positive.", "'The sentiment is positive.' is not one of the choices"),
    ("empty", "", "the answer is empty"),
]


@pytest.mark.parametrize("case, reply, want", CHOICE_REPLIES, ids=[c[0] for c in CHOICE_REPLIES])
def test_replies_to_choices(case, reply, want):
    value, error = parse(reply, Schema.of(["positive", "negative", "neutral"]))
    if error is None:
        assert value == want
    else:
        assert value is None and error.startswith(want), error


def test_choices_compare_spaces_and_case_inside_labels():
    schema = Schema.of(["very good", "not good"])
    assert parse("Very   Good", schema) == ("very good", None)


def test_choices_from_an_enum_and_a_literal_give_their_own_values():
    assert parse("Blue", Schema.of(Color)) == (Color.BLUE, None)
    stars = Schema.of(Literal[1, 2, 3])
    assert stars.labels == ("1", "2", "3")
    assert parse(" 2. ", stars) == (2, None)
    assert stars.label(2) == "2"


def test_a_json_schema_enum_is_choices():
    schema = Schema.of({"title": "Mood", "type": "string", "enum": ["up", "down"]})
    assert (schema.kind, schema.name, schema.labels) == ("choices", "Mood", ("up", "down"))
    assert parse("Down", schema) == ("down", None)


# -- every kind of schema ------------------------------------------------------------------


def test_a_model_class():
    schema = Schema.of(Review)
    assert (schema.name, schema.kind, schema.description) == ("Review", "object", "A product review, read.")
    assert schema.json_schema == Review.model_json_schema()
    assert [name for name, _ in schema.columns] == ["sentiment", "product", "stars"]


@pytest.mark.parametrize("typed_dict", [PlainTD, PartialTD])
def test_a_typeddict_of_either_module(typed_dict):
    schema = Schema.of(typed_dict)
    assert (schema.name, schema.kind) == (typed_dict.__name__, "object")
    assert parse('{"city": "Oslo", "population": "709000"}', schema) == (
        {"city": "Oslo", "population": 709000},
        None,
    )
    value, error = parse('{"city": "Oslo"}', schema)
    assert (error is None) == (typed_dict is PartialTD)


def test_a_json_schema_dict_gives_plain_json_and_checks_what_it_says():
    schema = Schema.of(
        {
            "title": "Invoice line",
            "type": "object",
            "properties": {
                "first name": {"type": "string", "minLength": 1},
                "amount": {"type": "number", "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "vendor": {"$ref": "#/$defs/Vendor"},
                "note": {"type": ["string", "null"]},
            },
            "required": ["first name", "amount"],
            "additionalProperties": False,
            "$defs": {"Vendor": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        }
    )
    assert (schema.name, schema.kind) == ("Invoice_line", "object")
    reply = json.dumps(
        {"first name": "Ada", "amount": 12, "when": "2024-03-01T10:00:00Z", "vendor": {"id": 7}, "note": None}
    )
    value, error = parse(reply, schema)
    assert error is None
    assert value == {
        "first name": "Ada",
        "amount": 12.0,
        "when": "2024-03-01T10:00:00Z",
        "vendor": {"id": 7},
        "note": None,
    }
    assert parse('{"first name": "", "amount": 1}', schema)[1].startswith(
        "first name: String should have at least 1 character"
    )
    assert parse('{"first name": "A", "amount": -1}', schema)[1].startswith(
        "amount: Input should be greater than or equal to 0"
    )
    assert parse('{"first name": "A", "amount": 1, "tags": ["a", "b", "c"]}', schema)[1].startswith(
        "tags: List"
    )
    assert parse('{"first name": "A", "amount": 1, "vendor": {"id": "x"}}', schema)[1].startswith(
        "vendor.id: "
    )
    assert parse('{"first name": "A", "amount": 1, "extra": 1}', schema)[1].startswith(
        "extra: Extra inputs are not permitted"
    )


def test_a_json_schema_array_is_a_list():
    schema = Schema.of(
        {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    )
    assert schema.kind == "list"
    assert parse('{"items": [{"n": 1}]}', schema) == ([{"n": 1}], None)
    assert schema.columns == [("n", {"type": "integer"})]


def test_a_recursive_schema_is_usable():
    schema = Schema.of(Node)
    value, error = parse('{"label": "a", "children": [{"label": "b", "children": []}]}', schema)
    assert error is None and value.children[0].label == "b"
    recursive = Schema.of(
        {
            "$defs": {
                "N": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}},
                }
            },
            "$ref": "#/$defs/N",
        }
    )
    assert recursive.kind == "object"
    assert parse('{"kids": [{"kids": []}]}', recursive) == ({"kids": [{"kids": []}]}, None)


def test_a_list_of_items_is_named_after_them():
    assert (Schema.of(list[Person]).name, Schema.of(list[Person]).kind) == ("Person_list", "list")
    assert Schema.of(list[PlainTD]).kind == "list"


def test_a_plain_value():
    schema = Schema.of(int)
    assert schema.kind == "value"
    assert parse("42", schema) == (42, None)
    assert parse('{"value": 42}', schema) == (42, None)


@pytest.mark.parametrize(
    "spec, words",
    [
        (3, "must be a pydantic model class"),
        ("Review", "must be a pydantic model class"),
        ([], "choices: must hold at least one label"),
        (["yes", "Yes "], "two labels are the same"),
        ([None, "x"], "each label must be a non-empty string"),
        ({"type": "bogus"}, "unknown type 'bogus'"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}, "points at nothing"),
        ({"$ref": "https://example.com/s.json"}, "only local $refs"),
        ({"type": "object", "properties": {"a": 5}}, "a subschema must be an object"),
        ({"enum": ["a", 1]}, "an enum of choices must hold strings only"),
    ],
)
def test_what_is_not_a_schema_is_one_line_before_any_request(spec, words):
    with pytest.raises(InvalidRequest) as caught:
        Schema.of(spec)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_value_dumps_to_json_for_the_log():
    assert json.loads(Schema.of(Review).dump(WANT)) == GOOD
    assert Schema.of(Color).dump(Color.BLUE) == '"blue"'
    people = Schema.of(list[Person])
    assert json.loads(people.dump([Person(name="Ada")])) == [{"name": "Ada", "born": None, "email": None}]
    plain = Schema.of({"type": "object", "properties": {"when": {"type": "string"}}})
    assert plain.dump(parse('{"when": "2024-01-01"}', plain)[0]) == '{"when":"2024-01-01"}'


def test_a_schema_is_taken_as_it_is():
    schema = Schema.of(Review)
    assert Schema.of(schema) is schema


# -- strict mode -----------------------------------------------------------------------


class WithOptional(BaseModel):
    title: str
    note: str | None = None
    count: int = 3


class WithMapping(BaseModel):
    counts: dict[str, int]


def _deep(levels: int) -> dict:
    node: dict = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"x": node}}
    return node


@pytest.mark.parametrize(
    "spec, strict",
    [
        (Review, True),
        (WithOptional, True),
        (list[Person], True),
        (Node, True),
        (["a", "b"], True),
        (WithMapping, False),
        ({"type": "object", "properties": {"s": {"type": "string", "minLength": 2}}}, False),
        ({"type": "object"}, False),
        ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True}, False),
        (_deep(9), True),
        (_deep(12), False),
    ],
)
def test_strict_when_the_schema_keeps_to_strict_modes_rules(spec, strict):
    assert Schema.of(spec).strict is strict


def test_the_wire_form_is_tightened_and_the_schema_left_alone():
    schema = Schema.of(WithOptional)
    wire = schema.wire
    assert wire["additionalProperties"] is False
    assert wire["required"] == ["title", "note", "count"]
    assert "default" not in json.dumps(wire)
    assert schema.json_schema == WithOptional.model_json_schema()  # not changed in place
    assert WithOptional.model_json_schema()["required"] == ["title"]


def test_non_objects_travel_wrapped_with_their_definitions_at_the_root():
    wire = Schema.of(list[Person]).wire
    assert wire["type"] == "object" and wire["required"] == ["items"]
    assert wire["properties"]["items"]["items"] == {"$ref": "#/$defs/Person"}
    assert "Person" in wire["$defs"]
    assert Schema.of(Color).wire["properties"]["label"]["enum"] == ["red", "blue"]


# -- native fields -----------------------------------------------------------------------


def test_chat_asks_with_response_format():
    schema = Schema.of(Review)
    fields = request_fields("chat", schema)
    assert fields == {
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "Review",
                "schema": schema.wire,
                "strict": True,
                "description": "A product review, read.",
            },
        }
    }
    loose = request_fields("chat", Schema.of(WithMapping))["response_format"]["json_schema"]
    assert loose["strict"] is False


def test_responses_ask_with_text_format():
    schema = Schema.of(list[Person])
    fmt = request_fields("responses", schema)["text"]["format"]
    assert fmt == {"type": "json_schema", "name": "Person_list", "schema": schema.wire, "strict": True}


def _nodes(node):
    """Every subschema of an OpenAPI schema (not the property names)."""
    yield node
    for sub in (node.get("properties") or {}).values():
        yield from _nodes(sub)
    for sub in [node["items"]] if "items" in node else []:
        yield from _nodes(sub)


class Event(BaseModel):
    """Something that happened."""

    title: str
    when: datetime.datetime
    color: Color
    people: list[Person]
    rating: float | None = None


def test_generate_content_asks_in_the_openapi_subset():
    config = request_fields("generate-content", Schema.of(Event))["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    schema = config["responseSchema"]
    keys = {key for node in _nodes(schema) for key in node}
    assert not keys & {"$defs", "$ref", "title", "additionalProperties", "default", "anyOf"}
    assert schema["type"] == "OBJECT"
    assert schema["propertyOrdering"] == ["title", "when", "color", "people", "rating"]
    properties = schema["properties"]
    assert properties["when"] == {"type": "STRING", "format": "date-time"}
    assert properties["color"] == {"type": "STRING", "enum": ["red", "blue"]}
    assert properties["people"]["items"]["properties"]["born"] == {"type": "INTEGER", "nullable": True}
    assert properties["rating"] == {"type": "NUMBER", "nullable": True}
    assert schema["description"] == "Something that happened."


def test_generate_content_leaves_a_recursive_reference_out():
    schema = request_fields("generate-content", Schema.of(Node))["generationConfig"]["responseSchema"]
    assert schema["properties"]["label"] == {"type": "STRING"}
    children = schema["properties"]["children"]["items"]
    assert "children" not in children["properties"]  # the second level would recurse for ever


def test_messages_ask_with_a_forced_tool():
    schema = Schema.of(["yes", "no"])
    fields = request_fields("messages", schema)
    (tool,) = fields["tools"]
    assert tool["name"] == "choice" and tool["input_schema"] == schema.wire
    assert fields["tool_choice"] == {"type": "tool", "name": "choice"}


def test_names_fit_what_the_apis_allow():
    schema = Schema.of({"title": "a weird name! " * 10, "type": "object", "properties": {}})
    assert len(schema.name) == 64 and set(schema.name) <= set("abcdefghijklmnopqrstuvwxyz_weirdnam")


@pytest.mark.parametrize(
    "api, model",
    [
        ("chat", spec.ChatRequest),
        ("responses", spec.ResponsesRequest),
        ("generate-content", spec.GenerateContentRequest),
        ("messages", spec.MessagesRequest),
    ],
)
def test_the_native_fields_are_known_to_the_request_models(api, model):
    assert set(request_fields(api, Schema.of(Review))) <= model.known_fields


@pytest.mark.parametrize("spec", [Review, list[Person], ["yes", "no"]])
def test_a_chat_request_sent_to_responses_asks_there_in_its_own_form(spec):
    schema = Schema.of(spec)
    chat = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], **request_fields("chat", schema)}
    body = to_responses(chat)
    assert "response_format" not in body
    assert body["text"] == request_fields("responses", schema)["text"]
    json_mode = to_responses({**chat, "response_format": {"type": "json_object"}})
    assert json_mode["text"] == {"format": {"type": "json_object"}}
    assert "text" not in to_responses({**chat, "response_format": {"type": "text"}})


def test_an_unknown_api_is_refused():
    with pytest.raises(InvalidRequest, match="api: must be one of"):
        request_fields("embeddings", Schema.of(Review))


def test_merged_keeps_the_sampling_options_of_generate_content():
    arguments = {"model": "m", "generationConfig": {"temperature": 0.2}}
    out = merged(arguments, request_fields("generate-content", Schema.of(Review)))
    assert out["generationConfig"]["temperature"] == 0.2
    assert out["generationConfig"]["responseMimeType"] == "application/json"
    assert arguments == {"model": "m", "generationConfig": {"temperature": 0.2}}


# -- native or instruction ---------------------------------------------------------------

MODEL_INFO = {
    "data": [
        {"model_name": "gpt-4o", "model_info": {"supports_response_schema": True, "mode": "chat"}},
        {"model_name": "old-model", "model_info": {"supports_response_schema": False}},
        {"model_name": "split", "model_info": {"supports_response_schema": True}},
        {"model_name": "split", "model_info": {"supports_response_schema": False}},
        {"model_name": "unsaid", "model_info": {"mode": "chat"}},
        {"model_name": "odd", "model_info": {"supports_response_schema": "yes"}},
        "not an entry",
    ]
}


def test_auto_asks_natively_the_models_the_metadata_names():
    support = Support()
    assert not support.native("gpt-4o")  # nothing learnt yet
    support.learn(MODEL_INFO)
    assert support.native("gpt-4o")
    assert not any(support.native(m) for m in ("old-model", "split", "unsaid", "odd", "other"))
    support.learn({"error": "not found"})  # a gateway without /model/info: nothing changes
    assert support.native("gpt-4o")


def test_the_modes_and_a_remembered_refusal():
    native, instruction_only = Support("native"), Support("instruction")
    instruction_only.learn(MODEL_INFO)
    assert native.native("anything") and not instruction_only.native("gpt-4o")
    native.refused("anything")
    assert not native.native("anything") and native.native("other")
    with pytest.raises(InvalidRequest, match="structured: must be one of auto, native, instruction"):
        Support("json")


REFUSALS = [
    ("Invalid parameter: 'response_format' of type 'json_schema' is not supported", 400, True),
    ('Invalid JSON payload received. Unknown name "responseSchema"', 400, True),
    ("Unrecognized request argument supplied: response_format", 422, True),
    ("tools: this model does not support tools", 400, True),
    ("max_tokens must be at least 1", 400, False),
    ("response_format upstream timed out", 503, False),
]


@pytest.mark.parametrize("message, status, refusal", REFUSALS)
def test_a_refusal_names_the_native_field(message, status, refusal):
    assert Support.is_refusal(APIError(message, status=status)) is refusal


# -- the instruction ---------------------------------------------------------------------


def test_the_instruction_carries_the_json_schema_and_is_found_again():
    schema = Schema.of(Review)
    words = instruction(schema)
    assert words.startswith(JSON_MARKER) and "JSON Schema" in words
    found = instructed(f"Read this review: I love it\n\n{words}")
    assert found is not None
    assert found.prompt == "Read this review: I love it"
    assert found.json_schema == schema.json_schema and found.labels == ()


def test_a_list_instruction_shows_the_array_schema():
    found = instructed("text\n\n" + instruction(Schema.of(list[Person])))
    assert found.json_schema["type"] == "array"


def test_the_choices_instruction_lists_the_labels():
    labels = ["yes, really", 'say "no"', "ça va"]
    words = instruction(Schema.of(labels))
    assert words.startswith(CHOICES_MARKER) and "exactly one of" in words
    found = instructed(f"Is it good?\n\n{words}")
    assert found is not None and found.labels == tuple(labels) and found.json_schema is None
    assert found.prompt == "Is it good?"


@pytest.mark.parametrize(
    "text",
    [
        "Answer with JSON only please",
        f"{instruction(Schema.of(Review))[:-5]}",  # the schema cut short
        instruction(Schema.of(["a"])).replace('"a"', "a"),  # labels not quoted
        "",
    ],
)
def test_text_without_a_whole_instruction_is_not_taken_for_one(text):
    assert instructed(text) is None


def test_repair_message_names_the_problem_and_shows_the_answer():
    schema = Schema.of(Review)
    answer = json.dumps({**GOOD, "stars": "five"})
    error = parse(answer, schema)[1]
    message = repair_message(answer, error, schema)
    assert f"Your answer did not validate: {error}." in message
    assert answer in message
    assert message.endswith(instruction(schema))
    assert "Your answer was empty." in repair_message("", "the answer is empty")


# -- whole replies -----------------------------------------------------------------------


def test_a_messages_tool_call_is_the_value():
    schema = Schema.of(list[Person])
    body = {
        "type": "message",
        "content": [
            {"type": "text", "text": "Calling the tool."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Person_list",
                "input": {"items": [{"name": "Ada"}]},
            },
        ],
    }
    assert parse_reply(body, "Calling the tool.", schema) == ([Person(name="Ada")], None)
    choice = Schema.of(["yes", "no"])
    call = {"type": "message", "content": [{"type": "tool_use", "name": "choice", "input": {"label": "No"}}]}
    assert parse_reply(call, "", choice) == ("no", None)


def test_a_chat_refusal_is_named():
    body = {"choices": [{"message": {"content": None, "refusal": "I can't help with that."}}]}
    assert parse_reply(body, None, Schema.of(Review)) == (
        None,
        'the model refused: "I can\'t help with that."',
    )


def test_other_replies_parse_their_text():
    body = {"choices": [{"message": {"content": GOOD_JSON}}]}
    assert parse_reply(body, GOOD_JSON, Schema.of(Review)) == (WANT, None)


def test_a_rule_of_the_whole_answer_is_named_in_its_own_words():
    from pydantic import field_validator, model_validator

    class Ticket(BaseModel):
        topic: str
        amount: float | None = None

        @field_validator("topic")
        @classmethod
        def _known(cls, topic: str) -> str:
            if topic == "spam":
                raise ValueError("not a topic we answer")
            return topic

        @model_validator(mode="after")
        def _billing_states_the_amount(self) -> Ticket:
            if self.topic == "billing" and self.amount is None:
                raise ValueError("a billing ticket needs the amount")
            return self

    schema = Schema.of(Ticket)
    assert parse('{"topic": "billing"}', schema) == (None, "the answer: a billing ticket needs the amount")
    assert parse('{"topic": "spam"}', schema) == (None, "topic: not a topic we answer, got 'spam'")
