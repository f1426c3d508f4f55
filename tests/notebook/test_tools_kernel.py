"""``%%chat --tools`` in a real kernel, with functions defined in an earlier cell: the call
is asked about on the kernel's input (as a frontend shows it) and runs once approved; each
call is a display updated in place when it ends."""

from __future__ import annotations

import json
import queue
import time

from kernels import displays, execute, kernel_env, running, stream_text

TOOLS = '''
ran = []

def order_status(order_id: str) -> dict:
    """Where an order is now, by its id."""
    ran.append(order_id)
    return {"order": order_id, "city": "Lyon"}
'''


def _until_idle(kc, msg_id: str, timeout: float = 60) -> list[dict]:
    messages = []
    deadline = time.monotonic() + timeout
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages


def test_a_call_is_asked_about_on_the_kernels_input_and_runs_once_approved(tmp_path):
    with running(tmp_path, GATECELL_HOME=str(tmp_path / "home")) as kc:
        reply, _ = execute(kc, TOOLS)
        assert reply["content"]["status"] == "ok"
        msg_id = kc.execute(
            "%%chat --tools order_status -o r\nWhere are orders A-1 and B-22?", allow_stdin=True
        )
        prompts = []
        for answer in ("y", "n"):
            try:
                request = kc.get_stdin_msg(timeout=60)
            except queue.Empty:
                raise AssertionError("the kernel did not ask") from None
            prompts.append(request["content"]["prompt"])
            kc.input(answer)
        messages = _until_idle(kc, msg_id)
        assert prompts == [
            "run order_status(order_id='A-1')? [y/N] ",
            "run order_status(order_id='B-22')? [y/N] ",
        ]
        lines = [m["content"]["data"].get("text/plain", "") for m in displays(messages)]
        assert any(line.startswith("→ order_status(order_id='A-1')  ✓ ") for line in lines), lines
        assert "→ order_status(order_id='B-22')  ✗ the user denied this call" in lines
        _, messages = execute(kc, "import json; print(json.dumps([ran, [c.error for c in r.tool_calls]]))")
        ran, errors = json.loads(stream_text(messages, "stdout"))
        assert ran == ["A-1"] and errors == [None, "the user denied this call"]


def test_a_frontend_that_cannot_ask_denies_and_says_so(tmp_path):
    with running(tmp_path, GATECELL_HOME=str(tmp_path / "home")) as kc:
        execute(kc, TOOLS)
        msg_id = kc.execute("%%chat --tools order_status\nWhere is order A-1?", allow_stdin=False)
        messages = _until_idle(kc, msg_id)
        assert "this frontend cannot ask, so it is denied (--yes allows every call)" in stream_text(
            messages, "stdout"
        )
        _, messages = execute(kc, "print(ran)")
        assert stream_text(messages, "stdout").strip() == "[]"


CHAIN = '''
import time
from gatecell import Gateway

def order_status(order_id: str) -> str:
    """Where an order is now, by its id."""
    with open("calls.txt", "a") as f:
        f.write(order_id + "\\n")
    if order_id == "B-22":
        time.sleep(120)  # killed here
    return f"order {order_id} is in Lyon"

def weather(city: str, days: int = 1) -> str:
    """The weather in a city."""
    with open("calls.txt", "a") as f:
        f.write(city + "\\n")
    return "sun"

ASK = [{"role": "user", "content": "Where are orders A-1 and B-22, and will it rain in Paris?"}]
r = Gateway().chat("local-chat", ASK, tools=[order_status, weather], parallel=False)
'''


def test_a_kernel_killed_mid_chain_is_resumed_without_running_the_finished_calls(
    tmp_path, home, local_gateway
):
    from jupyter_client import KernelManager

    from gatecell.gateway import Gateway

    km = KernelManager(kernel_name="python3")
    env = kernel_env(
        GATECELL_HOME=str(home),
        GATECELL_BASE_URL=local_gateway.base_url,
        GATECELL_API_KEY=local_gateway.api_key.reveal(),
    )
    km.start_kernel(env=env, cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        kc.execute(CHAIN)
        calls = tmp_path / "calls.txt"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (calls.exists() and "B-22" in calls.read_text()):
            time.sleep(0.1)
        assert calls.read_text() == "A-1\nB-22\n"
        while time.monotonic() < deadline and not _chains(home):  # A-1's row is in the log
            time.sleep(0.1)
        km.shutdown_kernel(now=True)  # SIGKILL, mid-call
    finally:
        kc.stop_channels()
        km.cleanup_resources()
    ran: list[str] = []

    def order_status(order_id: str) -> str:
        """Where an order is now, by its id."""
        return ran.append(order_id) or f"order {order_id} is in Lyon"

    def weather(city: str, days: int = 1) -> str:
        """The weather in a city."""
        return ran.append(city) or "sun"

    with Gateway(local_gateway.base_url, local_gateway.api_key, log=True) as gw:
        (chain,) = {row[0] for row in _chains(home)}
        r = gw.resume(chain, tools=[order_status, weather])
    assert ran == ["B-22", "Paris"]  # A-1 finished in the killed kernel: its result came from the log
    assert [(c.name, c.arguments, c.error) for c in r.tool_calls] == [
        ("order_status", {"order_id": "A-1"}, None),
        ("order_status", {"order_id": "B-22"}, None),
        ("weather", {"city": "Paris", "days": 1}, None),
    ]
    assert r.text.startswith(
        "Here is what the tools told me: order A-1 is in Lyon; order B-22 is in Lyon; sun"
    )


def _chains(home):
    import sqlite3

    if not (home / "gatecell.db").exists():
        return []
    conn = sqlite3.connect(home / "gatecell.db")
    try:
        return conn.execute("SELECT chain FROM tool_calls").fetchall()
    except sqlite3.OperationalError:  # not made yet
        return []
    finally:
        conn.close()
