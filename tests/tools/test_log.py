"""Every call of a chain is a row in the log beside the exchange that asked for it: name,
arguments, result (redacted, capped), error, approval, seconds."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid

import pytest
from tool_server import KEY

from gatecell.gateway import AsyncGateway, Gateway


def order_status(order_id: str) -> str:
    """Where an order is."""
    if order_id == "B-22":
        raise LookupError("no such order")
    return f"order {order_id} is in Lyon; courier key {KEY}"


def weather(city: str, days: int = 1) -> str:
    """The weather."""
    return "sun"


def rows(home) -> list[dict]:
    conn = sqlite3.connect(home / "gatecell.db")
    conn.row_factory = sqlite3.Row
    try:
        found = conn.execute(
            "SELECT t.*, e.endpoint, e.response_json, e.messages_json FROM tool_calls t "
            "LEFT JOIN exchanges e ON e.id = t.exchange_id ORDER BY t.round, t.call_id"
        )
        return [dict(r) for r in found]
    finally:
        conn.close()


def test_each_call_is_a_row_beside_the_exchange_that_asked(home, tool_server) -> None:
    with Gateway(tool_server.base("parallel", uuid.uuid4().hex), KEY, log=True) as gw:
        r = gw.chat(
            "m",
            [{"role": "user", "content": "where?"}],
            tools=[order_status, weather],
            approve=lambda c: c.name != "weather",
        )
        gw.journal.store.flush()
    logged = rows(home)
    assert [(t["name"], json.loads(t["arguments_json"]), t["round"], t["approved"]) for t in logged] == [
        ("order_status", {"order_id": "A-1"}, 1, 1),
        ("weather", {"city": "Paris", "days": 2}, 1, 0),
        ("order_status", {"order_id": "B-22"}, 1, 1),
    ]
    assert {t["chain"] for t in logged} == {r.tool_calls.chain}
    first, denied, failed = logged
    assert first["result"].startswith("order A-1 is in Lyon; courier key ") and KEY not in first["result"]
    assert first["error"] is None and first["seconds"] >= 0
    assert denied["error"] == "the user denied this call" and denied["result"] is None
    assert failed["error"] == "LookupError: no such order"
    # the exchange that asked: round 1's, whose answer holds these very calls
    assert {t["exchange_id"] for t in logged} != {None}
    asked = json.loads(first["response_json"])["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in asked] == [t["call_id"] for t in logged]
    assert KEY not in json.dumps(logged)


def test_async_chains_log_too(home, tool_server) -> None:
    async def main() -> None:
        async with AsyncGateway(tool_server.base("one", uuid.uuid4().hex), KEY, log=True) as gw:
            await gw.messages("m", [{"role": "user", "content": "where?"}], tools=[order_status])
            gw.journal.store.flush()

    asyncio.run(main())
    (logged,) = rows(home)
    assert (logged["name"], logged["call_id"], logged["endpoint"]) == (
        "order_status",
        "toolu_1_0",
        "/v1/messages",
    )


def test_nothing_is_logged_with_the_log_off(home, tool_server) -> None:
    with Gateway(tool_server.base("one", uuid.uuid4().hex), KEY, log=False) as gw:
        r = gw.chat("m", [{"role": "user", "content": "where?"}], tools=[order_status])
    assert r.tool_calls[0].error is None and not (home / "gatecell.db").exists()


def test_gatecell_logs_shows_the_calls_under_their_exchange(home, tool_server) -> None:
    import os
    import subprocess
    import sys

    with Gateway(tool_server.base("denial", uuid.uuid4().hex), KEY, log=True) as gw:
        gw.chat(
            "m",
            [{"role": "user", "content": "cancel?"}],
            tools=[order_status, cancel_order],
            approve=lambda c: c.name == "order_status",
        )
        gw.journal.store.flush()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    env["GATECELL_HOME"] = str(home)
    shown = subprocess.run(
        [sys.executable, "-m", "gatecell", "logs", "-n", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "- cancel_order(order_id='A-1027')  ✗ the user denied this call" in shown.stdout
    assert "- order_status(order_id='A-1027')  ✓ order A-1027 is in Lyon; courier key " in shown.stdout
    assert KEY not in shown.stdout
    lines = subprocess.run(
        [sys.executable, "-m", "gatecell", "logs", "-n", "3", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    calls = [c for line in lines.stdout.splitlines() for c in json.loads(line)["tool_calls"]]
    assert [(c["name"], c["approved"]) for c in calls] == [("cancel_order", False), ("order_status", True)]


def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    return "cancelled"


@pytest.mark.usefixtures("ctrl_c")
def test_a_chain_cut_by_ctrl_c_resumes_without_running_the_finished_calls_again(home, tool_server) -> None:
    import _thread

    ran: list[str] = []

    def order_status(order_id: str) -> str:
        """Where an order is."""
        ran.append(order_id)
        return f"order {order_id} is in Lyon"

    def weather(city: str, days: int = 1) -> str:
        """The weather."""
        ran.append(city)
        if len(ran) == 2:  # the first time: Ctrl-C while it runs
            _thread.interrupt_main()
            time.sleep(1)
        return "sun"

    base = tool_server.base("parallel", uuid.uuid4().hex)
    with Gateway(base, KEY, log=True) as gw:
        cut = gw.chat(
            "m", [{"role": "user", "content": "where?"}], tools=[order_status, weather], parallel=False
        )
        assert cut.tool_calls.stopped and [c.error is None for c in cut.tool_calls] == [True, False, False]
        ran.clear()
        r = gw.resume(cut.tool_calls.chain, tools=[order_status, weather], parallel=False)
    assert ran == ["Paris", "B-22"]  # A-1 finished before: its result came from the log
    received = tool_server.received[("parallel", base.rsplit("/", 1)[1])]
    assert len(received) == 2
    follow_up = received[1]["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in follow_up] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_1_0"),
        ("tool", "call_1_1"),
        ("tool", "call_1_2"),
    ]
    assert [m["content"] for m in follow_up[2:]] == ["order A-1 is in Lyon", "sun", "order B-22 is in Lyon"]
    assert r.text == "Results: order A-1 is in Lyon | sun | order B-22 is in Lyon"
    assert [(c.name, c.error) for c in r.tool_calls] == [
        ("order_status", None),
        ("weather", None),
        ("order_status", None),
    ]


def test_a_chain_the_log_does_not_have_is_one_line(home, tool_server) -> None:
    from gatecell.wire.transport.errors import InvalidRequest

    with Gateway(tool_server.base("one", uuid.uuid4().hex), KEY, log=True) as gw:
        with pytest.raises(InvalidRequest, match="chain: no tool chain 'nope' in the log"):
            gw.resume("nope", tools=[order_status])


def test_each_call_is_logged_once_even_when_refused_before_it_runs(home, tool_server) -> None:
    with Gateway(tool_server.base("unknown", uuid.uuid4().hex), KEY, log=True) as gw:
        seen: list[tuple[str, str | None]] = []
        gw.chat(
            "m",
            [{"role": "user", "content": "x"}],
            tools=[order_status],
            on_event=lambda e: seen.append((e.name, e.error)),
        )
        gw.journal.store.flush()
    assert [(t["name"], t["error"]) for t in rows(home)] == [
        ("rm_rf", "unknown tool 'rm_rf': the tools offered are order_status")
    ]
    assert seen == [("rm_rf", "unknown tool 'rm_rf': the tools offered are order_status")]
