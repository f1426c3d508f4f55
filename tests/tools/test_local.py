"""The local gateway takes tools offline, deterministically: on every text API a prompt that
names a tool or fits its parameters is answered with calls (streamed in pieces, several
calls interleaved), and the results with a sentence quoting them."""

from __future__ import annotations

import json

import httpx
import pytest

from gatecell.gateway import Gateway

APIS = [
    ("chat", "local-chat"),
    ("messages", "local-chat"),
    ("generate-content", "local-chat"),
    ("responses", "local-reasoner"),
]
ASK = "Where are orders A-1 and B-22, and will it rain in Paris in 3 days?"  # names no tool: both fit


def order_status(order_id: str) -> dict:
    """Where an order is now, by its id."""
    return {"order": order_id, "city": "Lyon"}


def weather(city: str, days: int = 1) -> str:
    """The weather in a city for the next days."""
    return f"sun in {city} for {days} days"


@pytest.fixture
def gw(local_gateway):
    with Gateway(local_gateway.base_url, local_gateway.api_key, log=False) as client:
        yield client


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(("api", "model"), APIS)
def test_the_stand_in_calls_the_tools_the_prompt_asks_for_then_quotes_them(gw, api, model, stream) -> None:
    r = gw.converse(
        api, model, [{"role": "user", "content": ASK}], stream=stream, tools=[order_status, weather]
    )
    assert [(c.name, c.arguments, c.error) for c in r.tool_calls] == [
        ("order_status", {"order_id": "A-1"}, None),
        ("order_status", {"order_id": "B-22"}, None),
        ("weather", {"city": "Paris", "days": 3}, None),
    ]
    assert r.tool_calls.rounds == 2
    assert '{"order": "A-1", "city": "Lyon"}' in r.text and "sun in Paris for 3 days" in r.text
    again = gw.converse(
        api, model, [{"role": "user", "content": ASK}], stream=stream, tools=[order_status, weather]
    )
    assert again.text == r.text  # deterministic


def test_a_streamed_call_arrives_in_pieces_interleaved_by_index(local_gateway) -> None:
    tools = [
        {"type": "function", "function": {"name": t.__name__, "parameters": p}}
        for t, p in [
            (
                order_status,
                {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
            ),
        ]
    ]
    body = {
        "model": "local-chat",
        "stream": True,
        "tools": tools,
        "messages": [{"role": "user", "content": ASK}],
    }
    headers = {"authorization": f"Bearer {local_gateway.api_key.reveal()}"}
    answer = httpx.post(
        f"{local_gateway.base_url}/v1/chat/completions", json=body, headers=headers, timeout=30
    )
    chunks = [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: {")]
    pieces = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"][0]["delta"].get("tool_calls")
    ]
    firsts = [p for p in pieces if "id" in p]
    assert [(p["index"], p["function"]["name"], p["function"]["arguments"]) for p in firsts] == [
        (0, "order_status", ""),
        (1, "order_status", ""),
    ]
    rest = [(p["index"], p["function"]["arguments"]) for p in pieces if "id" not in p]
    assert [i for i, _ in rest] == [0, 1, 0, 1]  # two pieces each, taken in turn
    assert "".join(a for i, a in rest if i == 1) == '{"order_id": "B-22"}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(("api", "model"), APIS)
def test_no_call_when_the_prompt_does_not_ask_or_tool_choice_says_none(gw, api, model) -> None:
    r = gw.converse(api, model, [{"role": "user", "content": "what is 2 + 3?"}], tools=[order_status])
    assert r.tool_calls == [] and "5" in r.text
    choice = {
        "chat": {"tool_choice": "none"},
        "messages": {"tool_choice": {"type": "none"}},
        "generate-content": {"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}},
        "responses": {"tool_choice": "none"},
    }[api]
    method = {
        "chat": gw.chat,
        "messages": gw.messages,
        "generate-content": gw.generate_content,
        "responses": gw.responses,
    }[api]
    turns = (
        [{"role": "user", "parts": [{"text": ASK}]}]
        if api == "generate-content"
        else [{"role": "user", "content": ASK}]
    )
    r = method(model, turns, tools=[order_status], **choice)
    assert r.tool_calls == [] and r.text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_on_a_reasoning_model_runs_its_chain_on_responses(gw, stream) -> None:
    r = gw.chat(
        "local-reasoner",
        [{"role": "user", "content": "Where is order A-1?"}],
        stream=stream,
        tools=[order_status],
    )
    assert [(c.name, c.arguments, c.error) for c in r.tool_calls] == [
        ("order_status", {"order_id": "A-1"}, None)
    ]
    assert r.text == 'Here is what the tools told me: {"order": "A-1", "city": "Lyon"}.'
    assert r.meta.endpoint == "/v1/responses"


def test_a_tool_the_prompt_names_is_called_alone(gw) -> None:
    r = gw.chat(
        "local-chat",
        [{"role": "user", "content": "Use weather for 'A-1' please."}],
        tools=[order_status, weather],
    )
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("weather", {"city": "A-1", "days": 1})]
