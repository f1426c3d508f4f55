"""The tool loop against a model that calls tools as real ones do, on the four text APIs,
whole and streamed: what went back (ids, roles, order, arguments exactly as assembled),
concurrency, every kind of failure as one line the model reads, the round limit, a denial."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from tool_server import KEY

from gatecell.tools import ToolCall
from gatecell.wire.transport.errors import InvalidRequest

APIS = ["chat", "messages", "generate-content", "responses"]
ASK = [{"role": "user", "content": "Where is order A-1027?"}]


def order_status(order_id: str) -> dict:
    """Where an order is now, by its id (e.g. 'A-1027')."""
    return {"order": order_id, "city": "Lyon"}


def weather(city: str, days: int = 1) -> str:
    """The weather in a city for the next days."""
    return f"sun in {city} for {days} days"


def went_back(
    api: str, body: dict[str, Any]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[str]]:
    """Of a follow-up request: the model's calls as it was sent them again ``(id, name,
    arguments)``, the results ``(id, text, failed)``, in order, and the roles of its turns."""
    if api == "chat":
        turns = body["messages"]
        said = [t for t in turns if t.get("tool_calls")][-1]["tool_calls"]
        calls = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in said]
        results = [(t["tool_call_id"], t["content"], None) for t in turns if t["role"] == "tool"]
        return calls, results, [t["role"] for t in turns]
    if api == "messages":
        turns = body["messages"]
        blocks = turns[-2]["content"]
        calls = [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
        results = [(b["tool_use_id"], b["content"], b.get("is_error", False)) for b in turns[-1]["content"]]
        return calls, results, [t["role"] for t in turns]
    if api == "generate-content":
        turns = body["contents"]
        calls = [
            (p["functionCall"].get("id"), p["functionCall"]["name"], p["functionCall"]["args"])
            for p in turns[-2]["parts"]
            if "functionCall" in p
        ]
        results = []
        for p in turns[-1]["parts"]:
            response = p["functionResponse"]
            ((kind, text),) = response["response"].items()
            results.append((response.get("id"), text, kind == "error"))
        return calls, results, [t["role"] for t in turns]
    items = body["input"]
    calls = [(i["call_id"], i["name"], i["arguments"]) for i in items if i.get("type") == "function_call"]
    results = [(i["call_id"], i["output"], None) for i in items if i.get("type") == "function_call_output"]
    return calls, results, [i.get("role") or i["type"] for i in items]


def ask(gw: Any, api: str, stream: bool, **options: Any) -> Any:
    return gw.converse(api, "m", ASK, stream=stream, **{"tools": [order_status, weather], **options})


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_one_call_goes_back_with_its_id_and_the_model_answers(make, api: str, stream: bool) -> None:
    gw = make("one")
    r = ask(gw, api, stream)
    result = json.dumps({"order": "A-1027", "city": "Lyon"})
    assert r.text == f"Results: {result}"
    (call,) = r.tool_calls
    assert (call.name, call.arguments, call.result, call.error, call.round) == (
        "order_status",
        {"order_id": "A-1027"},
        {"order": "A-1027", "city": "Lyon"},
        None,
        1,
    )
    assert r.tool_calls.stopped is None and r.tool_calls.rounds == 2
    assert len(gw.received) == 2
    first, second = gw.received
    offered = first["tools"]
    assert "order_status" in json.dumps(offered) and "weather" in json.dumps(offered)
    calls, results, roles = went_back(api, second)
    arguments = (
        {"order_id": "A-1027"} if api in ("messages", "generate-content") else '{"order_id": "A-1027"}'
    )
    model_id = {
        "chat": "call_1_0",
        "messages": "toolu_1_0",
        "generate-content": None,
        "responses": "call_1_0",
    }[api]
    assert calls == [(model_id, "order_status", arguments)]
    assert results == [(model_id, result, {"messages": False, "generate-content": False}.get(api))]
    assert call.id == (model_id or "fc_0")
    assert (
        roles
        == {
            "chat": ["user", "assistant", "tool"],
            "messages": ["user", "assistant", "user"],
            "generate-content": ["user", "model", "user"],
            "responses": ["user", "function_call", "function_call_output"],
        }[api]
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_parallel_calls_run_together_and_go_back_in_the_models_order(make, api: str, stream: bool) -> None:
    together = threading.Barrier(3, timeout=10)  # passes only if the three calls run at once

    def order_status(order_id: str) -> dict:
        together.wait()
        return {"order": order_id, "city": "Lyon"}

    def weather(city: str, days: int = 1) -> str:
        together.wait()
        return f"sun in {city} for {days} days"

    gw = make("parallel")
    r = gw.converse(api, "m", ASK, stream=stream, tools=[order_status, weather])
    assert [(c.name, c.arguments, c.error) for c in r.tool_calls] == [
        ("order_status", {"order_id": "A-1"}, None),
        ("weather", {"city": "Paris", "days": 2}, None),
        ("order_status", {"order_id": "B-22"}, None),
    ]
    calls, results, _ = went_back(api, gw.received[1])
    ids = [c[0] for c in calls]
    if api == "generate-content":
        assert ids == [None, None, None]
    else:
        assert ids == [f"{ids[0][:-1]}{i}" for i in range(3)] and [r[0] for r in results] == ids
    if api in ("chat", "responses"):  # the arguments as the model sent them, pieces joined exactly
        assert [c[2] for c in calls] == [
            '{"order_id": "A-1"}',
            '{"city": "Paris", "days": 2}',
            '{"order_id": "B-22"}',
        ]
    assert [r[1] for r in results] == [
        '{"order": "A-1", "city": "Lyon"}',
        "sun in Paris for 2 days",
        '{"order": "B-22", "city": "Lyon"}',
    ]


@pytest.mark.parametrize("api", APIS)
def test_parallel_false_asks_for_one_call_at_a_time_and_runs_them_in_turn(make, api: str) -> None:
    running, most = [0], [0]
    lock = threading.Lock()

    def order_status(order_id: str) -> str:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return order_id

    gw = make("parallel")
    r = gw.converse(api, "m", ASK, tools=[order_status, weather], parallel=False)
    assert [c.error for c in r.tool_calls] == [None, None, None] and most[0] == 1
    first = gw.received[0]
    if api in ("chat", "responses"):
        assert first["parallel_tool_calls"] is False
    elif api == "messages":
        assert first["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_bad_arguments_and_unknown_names_go_back_as_one_line(make, api: str, stream: bool) -> None:
    gw = make("bad_json")
    r = ask(gw, api, stream)
    (call,) = r.tool_calls
    _, results, _ = went_back(api, gw.received[1])
    assert results[0][1] == call.error == call.output
    if api == "generate-content" or (api == "messages" and not stream):  # objects: a wrong type
        assert call.error.startswith("invalid arguments for order_status: ")
    else:
        assert call.error.startswith("the arguments are not JSON (")
        assert call.error.endswith("""'{"order_id": "A-1027"'""")
    assert results[0][2] in (True, None) and r.text.startswith("Results: ")

    gw = make("unknown")
    r = ask(gw, api, stream)
    line = "unknown tool 'rm_rf': the tools offered are order_status, weather"
    assert r.tool_calls[0].error == line and went_back(api, gw.received[1])[1][0][1] == line


@pytest.mark.parametrize("api", APIS)
def test_a_raise_and_a_timeout_go_back_as_one_line_without_a_traceback(make, api: str) -> None:
    def order_status(order_id: str) -> str:
        raise LookupError(f"no order {order_id} in /home/ada/orders.csv\nsecond line")

    def weather(city: str, days: int = 1) -> str:
        time.sleep(3)
        return "late"

    gw = make("parallel")
    r = gw.converse(api, "m", ASK, tools=[order_status, weather], tool_timeout=0.2)
    errors = [c.error for c in r.tool_calls]
    assert errors == [
        "LookupError: no order A-1 in /home/ada/orders.csv",
        "TimeoutError: no result within 0.2 s",
        "LookupError: no order B-22 in /home/ada/orders.csv",
    ]
    _, results, _ = went_back(api, gw.received[1])
    assert [r[1] for r in results] == errors
    assert "Traceback" not in json.dumps(gw.received[1])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_the_round_limit_ends_with_one_line_and_keeps_everything(make, api: str, stream: bool) -> None:
    gw = make("forever")
    r = ask(gw, api, stream, max_rounds=3)
    assert len(gw.received) == 3
    assert [(c.arguments, c.round) for c in r.tool_calls] == [
        ({"order_id": "A-1"}, 1),
        ({"order_id": "A-2"}, 2),
    ]
    assert (
        r.tool_calls.stopped == "stopped after 3 rounds (max_rounds): the model still asked for order_status"
    )


@pytest.mark.parametrize("api", APIS)
def test_a_denied_call_is_reported_as_denied_and_the_next_call_runs(make, api: str) -> None:
    ran: list[str] = []
    asked: list[str] = []

    def cancel_order(order_id: str) -> str:
        ran.append(order_id)
        return "cancelled"

    def approve(call: ToolCall) -> bool:
        asked.append(call.line())
        return call.name != "cancel_order"

    gw = make("denial")
    r = gw.converse(api, "m", ASK, tools=[order_status, cancel_order], approve=approve)
    assert ran == [] and asked == ["cancel_order(order_id='A-1027')", "order_status(order_id='A-1027')"]
    assert [(c.name, c.approved, c.error) for c in r.tool_calls] == [
        ("cancel_order", False, "the user denied this call"),
        ("order_status", True, None),
    ]
    _, results, _ = went_back(api, gw.received[1])
    assert results[0][1] == "the user denied this call" and results[0][2] in (True, None)
    assert len(gw.received) == 3 and r.text.startswith("Results: ")


def test_a_secret_in_a_result_is_masked_before_it_is_sent_or_shown(make) -> None:
    def order_status(order_id: str) -> str:
        return f"order {order_id}; the courier's key is {KEY}"

    gw = make("one")
    r = gw.chat("m", ASK, tools=[order_status])
    assert KEY not in json.dumps(gw.received) and KEY not in r.tool_calls[0].output
    assert r.tool_calls[0].output.startswith("order A-1027; the courier's key is ")


def test_results_are_capped(make) -> None:
    gw = make("one")
    r = gw.chat("m", ASK, tools=[lambda_free_long], tool_result_chars=100)
    assert r.tool_calls[0].output == "x" * 100 + "… (5,000 characters)"


def lambda_free_long(order_id: str) -> str:
    return "x" * 5000


lambda_free_long.__name__ = "order_status"


def test_stream_text_and_calls_are_told_as_they_happen(make) -> None:
    seen: list[Any] = []
    gw = make("one")
    r = gw.chat(
        "m",
        ASK,
        stream=True,
        tools=[order_status],
        on_event=lambda e: seen.append(e if isinstance(e, str) else (e.name, e.output)),
    )
    pieces = [e for e in seen if isinstance(e, str)]
    told = [e for e in seen if isinstance(e, tuple)]
    assert "".join(pieces) == r.text and len(pieces) > 1
    assert told == [("order_status", ""), ("order_status", '{"order": "A-1027", "city": "Lyon"}')]


def test_the_plain_path_is_unchanged_without_tools(make) -> None:
    gw = make("one")
    r = gw.chat("m", ASK)
    assert "tools" not in gw.received[0] and r.tool_calls == []
    wire_tools = [
        {"type": "function", "function": {"name": "order_status", "parameters": {"type": "object"}}}
    ]
    gw = make("one")
    r = gw.chat("m", ASK, tools=wire_tools)  # the API's own shape: passed through, no loop
    assert gw.received[0]["tools"] == wire_tools and len(gw.received) == 1
    assert r.choices[0].message.model_extra["tool_calls"][0]["id"] == "call_1_0"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_async_awaits_coroutines_and_runs_sync_tools_in_threads(make, api: str, stream: bool) -> None:
    async def main() -> Any:
        both = asyncio.Event()
        started: list[str] = []
        loop = asyncio.get_running_loop()

        async def order_status(order_id: str) -> dict:
            started.append(order_id)
            if len(started) == 2:
                both.set()
            await asyncio.wait_for(both.wait(), 10)  # both async calls are running at once
            return {"order": order_id, "city": "Lyon"}

        def weather(city: str, days: int = 1) -> str:
            assert threading.current_thread() is not threading.main_thread()
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(10)  # the loop is free
            return f"sun in {city} for {days} days"

        gw = make("parallel", asynchronous=True)
        try:
            return await gw.converse(api, "m", ASK, stream=stream, tools=[order_status, weather]), gw
        finally:
            await gw.aclose()

    r, gw = asyncio.run(main())
    assert [(c.name, c.error) for c in r.tool_calls] == [
        ("order_status", None),
        ("weather", None),
        ("order_status", None),
    ]
    _, results, _ = went_back(api, gw.received[1])
    assert [r[1] for r in results] == [
        '{"order": "A-1", "city": "Lyon"}',
        "sun in Paris for 2 days",
        '{"order": "B-22", "city": "Lyon"}',
    ]


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_while_calls_run_ends_the_chain_and_keeps_what_was_done(make) -> None:
    import _thread

    def order_status(order_id: str) -> str:
        if order_id == "B-22":
            time.sleep(2)
        return f"order {order_id}"

    def weather(city: str, days: int = 1) -> str:
        _thread.interrupt_main()  # as Ctrl-C (or a kernel interrupt) would, while the main thread waits
        time.sleep(2)
        return "sun"

    gw = make("parallel")
    r = gw.chat("m", ASK, tools=[order_status, weather], parallel=False)  # one at a time: A-1 ends first
    assert [(c.output, c.error) for c in r.tool_calls] == [
        ("order A-1", None),
        ("interrupted (Ctrl-C) before it finished", "interrupted (Ctrl-C) before it finished"),
        ("interrupted (Ctrl-C) before it finished", "interrupted (Ctrl-C) before it finished"),
    ]
    assert r.tool_calls.stopped == "stopped by Ctrl-C in round 1; the rounds before are kept"
    assert len(gw.received) == 1  # nothing more was asked of the model


def test_an_async_approve_on_the_sync_client_is_refused_not_taken_for_yes(make) -> None:
    ran: list[str] = []

    def order_status(order_id: str) -> str:
        ran.append(order_id)
        return "ok"

    async def approve(call: ToolCall) -> bool:
        return False

    gw = make("one")
    with pytest.raises(
        InvalidRequest, match="approve: a coroutine function approves calls on AsyncGateway only"
    ):
        gw.chat("m", ASK, tools=[order_status], approve=approve)
    assert ran == []
