"""``%%chat --tools`` in a real kernel, with functions defined in an earlier cell: the call
is asked about on the kernel's input (as a frontend shows it) and runs once approved; each
call is a display updated in place when it ends."""

from __future__ import annotations

import json
import queue
import time

from kernels import displays, execute, running, stream_text

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
