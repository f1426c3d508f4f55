"""Paying nothing twice: after a kernel interrupt or a SIGKILL, running the same map again
sends only the rows that had not finished, counted at the server."""

from __future__ import annotations

import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from interrupts import python
from rowserver import KEY, reply_to, wait_until

from gatecell import Gateway


def test_a_sigkilled_run_resumes_sending_only_the_missing_rows(row_server, home: Path):
    server = row_server()
    rows, concurrency, killed_after = 20_000, 16, 2_000
    code = (
        "import sys\nfrom gatecell import Gateway\n"
        f"Gateway(base_url={server.url!r}, api_key={KEY!r}).map("
        f"'row {{item}}', range({rows}), concurrency={concurrency}, progress=False)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))
    try:
        wait_until(lambda: server.answered >= killed_after or child.poll() is not None, "the first answers")
        answered = server.answered  # at least this many were answered before the kill
        child.send_signal(signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    assert answered < rows  # killed mid-batch, at full speed
    with sqlite3.connect(home / "gatecell.db") as db:
        (kept,) = db.execute("select count(distinct cache_key) from exchanges where error is null").fetchone()
    # A SIGKILL loses at most the rows in flight: a worker's row waits for its commit.
    assert answered - kept <= concurrency
    sent_before = len(server.prompts)
    batch = Gateway(base_url=server.url, api_key=KEY).map(
        "row {item}", range(rows), concurrency=concurrency, progress=False
    )
    assert len(server.prompts) - sent_before == rows - kept  # exactly the rows not finished
    assert (batch.done, batch.cached) == (rows, kept)
    assert batch.text[::997] == [reply_to(f"row {i}") for i in range(0, rows, 997)]


def test_a_map_killed_at_random_five_times_resends_at_most_the_rows_in_flight(row_server, home: Path):
    """Five SIGKILLs at random points of one 2,000-row map, each run resuming the last: a
    run sends again only rows that were in flight when the one before was killed (a worker
    holds one row, sent or waiting for its commit), never more than ``concurrency``."""
    server = row_server()
    rows, concurrency = 2_000, 16
    code = (
        "from gatecell import Gateway\n"
        f"Gateway(base_url={server.url!r}, api_key={KEY!r}).map("
        f"'row {{item}}', range({rows}), concurrency={concurrency}, progress=False)\n"
    )
    chance = random.Random(23)
    resent = []
    for _ in range(5):
        seen, start = set(server.prompts), len(server.prompts)
        kill_at = start + chance.randrange(30, 300)  # requests into this run
        child = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))
        try:
            wait_until(lambda: len(server.prompts) >= kill_at or child.poll() is not None, "requests")  # noqa: B023
            child.send_signal(signal.SIGKILL)
            assert child.wait(30) == -signal.SIGKILL  # killed mid-batch
        finally:
            if child.poll() is None:
                child.kill()
        resent.append(sum(prompt in seen for prompt in server.prompts[start:]))
    seen, start = set(server.prompts), len(server.prompts)
    batch = Gateway(base_url=server.url, api_key=KEY).map(
        "row {item}", range(rows), concurrency=concurrency, progress=False
    )
    resent.append(sum(prompt in seen for prompt in server.prompts[start:]))
    assert batch.done == rows and batch.text[::199] == [reply_to(f"row {i}") for i in range(0, rows, 199)]
    assert max(resent) <= concurrency, resent
    assert len(set(server.prompts)) == rows


def _kernel(env: dict[str, str], cwd: Path):
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def _reply(kc, msg_id: str, timeout: float = 60) -> tuple[dict, str]:
    """The execute reply of ``msg_id`` and the text its cell showed (streams and results)."""
    shown = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("the cell did not finish") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        content = msg["content"]
        if msg["msg_type"] == "stream":
            shown.append(content["text"])
        elif msg["msg_type"] in ("execute_result", "display_data", "error"):
            shown.append(
                content.get("data", {}).get("text/plain", "") or "\n".join(content.get("traceback", []))
            )
        elif msg["msg_type"] == "status" and content["execution_state"] == "idle":
            break
    return kc.get_shell_msg(timeout=timeout)["content"], "".join(shown)


def _run(kc, code: str) -> str:
    reply, shown = _reply(kc, kc.execute(code))
    assert reply["status"] == "ok", shown
    return shown


def test_a_kernel_interrupt_returns_the_partial_batch_and_the_rerun_sends_the_rest(
    row_server, home: Path, tmp_path: Path
):
    """A real kernel (Jupyter's loop is running): Ctrl-C stops the batch, `%%chat --over`
    keeps the rows done in its -o variable, and the same cell again sends only the rest."""

    async def rule(prompt, srv):
        if srv.answered >= 5 and not srv.release.is_set():
            await srv.hold()

    server = row_server(rule)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    env.update(GATECELL_BASE_URL=server.url, GATECELL_API_KEY=KEY, GATECELL_HOME=str(home))
    km, kc = _kernel(env, tmp_path)
    try:
        _run(kc, "%load_ext gatecell\nrows = [f'r{i}' for i in range(20)]")
        cell = "%%chat --over rows -o part -j 2\nsay {item}"
        msg_id = kc.execute(cell)
        wait_until(lambda: server.answered == 5 and server.in_flight == 2, "two rows held at the server")
        km.interrupt_kernel()
        reply, shown = _reply(kc, msg_id)
        assert reply["status"] == "ok", shown  # the interrupt ends the batch, not the cell
        assert "Batch(5/20 done" in shown and "15 not run" in shown and "interrupted" in shown
        assert _run(kc, "print(part.done, part.not_run, part.interrupted, part.text[:6])") == (
            "5 15 True ['re: say r0', 're: say r1', 're: say r2', 're: say r3', 're: say r4', None]\n"
        )
        server.release.set()
        sent = len(server.prompts)
        assert sent == 7  # five answered, two held when the interrupt came
        shown = _run(kc, cell.replace("part", "full"))
        assert "Batch(20/20 done, 5 from the log" in shown
        assert len(server.prompts) - sent == 15  # the rows that had not finished, and no more
        assert _run(kc, "print(full.text == [f're: say r{i}' for i in range(20)])") == "True\n"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.parametrize("progress", [False, True])
def test_ctrl_c_in_a_script_returns_the_rows_done(row_server, home: Path, progress: bool):
    """The sync map in a plain process: SIGINT (Ctrl-C) in the main thread stops the engine
    thread and returns the partial Batch."""
    server = row_server(lambda prompt, srv: srv.hold() if srv.answered >= 3 else None)
    code = (
        "from gatecell import Gateway\n"
        f"b = Gateway(base_url={server.url!r}, api_key={KEY!r}).map("
        f"'row {{item}}', range(50), concurrency=2, progress={progress})\n"
        "print('RESULT', b.done, b.not_run, b.interrupted, flush=True)\n"
    )
    child = subprocess.Popen(python("-c", code), stdout=subprocess.PIPE, text=True)
    wait_until(lambda: server.answered == 3 and server.in_flight == 2, "two rows held at the server")
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    assert "RESULT 3 47 True" in out


def test_an_empty_reply_fails_its_row_and_the_rerun_sends_it_again(row_server, home: Path):
    """An empty answer is no answer: the row fails in one line and the log never answers it,
    whether the map logged it or a chat call did."""
    from gatecell.batch.engine import EMPTY_REPLY

    empty = {"row 1", "row 3", "chat"}
    server = row_server(lambda prompt, srv: (200, {}, " \n") if prompt in empty else None)
    gw = Gateway(base_url=server.url, api_key=KEY, cache=True)
    first = gw.map("row {item}", range(5), progress=False)
    assert first.errors == {1: EMPTY_REPLY, 3: EMPTY_REPLY} and first.text[1] is None
    assert gw.chat("local-chat", [{"role": "user", "content": "chat"}]).text == " \n"  # logged, no error
    sent = len(server.prompts)
    empty.clear()
    again = gw.map("row {item}", range(5), progress=False)
    assert again.errors == {} and again.cached == 3
    assert server.prompts[sent:] == ["row 1", "row 3"]  # the empty ones, sent again
    chat = gw.map("{item}", ["chat"], model="local-chat", progress=False)  # the chat call's cache key
    assert chat.text == [reply_to("chat")] and server.prompts[-1] == "chat"
