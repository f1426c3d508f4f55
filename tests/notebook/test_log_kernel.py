"""The store in real kernels (jupyter_client), as a notebook uses it: the magics logged and
read back, the cache on a re-run, a conversation and a job that outlive the kernel, the log
switched off, faults, two kernels at once, a kernel killed mid-stream; and what a notebook
showed is in the log however its kernel ends: killed outright (SIGKILL, as the out-of-memory
killer does) right after a cell showed a job id, shut down or restarted from the front end.

Each test gives its kernels a GATECELL_HOME of its own (a temporary folder) and reads what
they logged from the file, as ``gatecell logs`` would.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from locks import held

from gatecell.store import Store

CLI = [sys.executable, "-m", "gatecell"]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_", "JPY_"))}
    return {**env, "GATECELL_HOME": str(home), "GATECELL_LOCAL_JOB_SECONDS": "0.3", **extra}


@pytest.fixture
def kernel(tmp_path):
    """``kernel(home, **env)`` starts a kernel logging into ``home`` (its cwd: ``tmp_path``)."""
    from jupyter_client import KernelManager

    started = []

    def start(home: Path, **env: str):
        km = KernelManager(kernel_name="python3")
        km.start_kernel(env=_env(home, **env), cwd=str(tmp_path))
        started.append(km)
        return km

    yield start
    for km in started:
        if km.is_alive():
            km.shutdown_kernel(now=True)


def exchanges(home: Path, count: int = 0) -> list[dict]:
    """Every exchange in the log, oldest first, once it holds at least ``count`` (a call
    returns once its exchange is committed; a kernel shut down commits what was queued)."""
    store = Store(home / "gatecell.db", log=False)
    deadline = time.monotonic() + 30
    try:
        while True:
            rows = list(reversed(store.logs(n=0))) if store.path.exists() else []
            if len(rows) >= count or time.monotonic() > deadline:
                return rows
            time.sleep(0.05)
    finally:
        store.close()


def run(kernel_cells, km, *cells: str) -> list[dict]:
    out = kernel_cells(km.connection_file, *cells)
    for cell, got in zip(cells, out, strict=True):
        assert got["ok"], (cell, got["stderr"])
    return out


def test_magics_are_logged_and_read_back_in_the_notebook(kernel, kernel_cells, tmp_path):
    home = tmp_path / "home"
    km = kernel(home, JPY_SESSION_NAME="work/trip.ipynb")  # as Jupyter Server starts a notebook's kernel
    out = run(
        kernel_cells,
        km,
        "%load_ext gatecell",
        "%%chat -c trip\nWhat is 2+2?",
        "%%chat -c trip\ncount to 3",
        "%image a lighthouse",
        "%gatecell log -n 5",
        "%gatecell usage",
        "%config Gatecell.prices = {'local-chat': {'input': 1000, 'output': 2000}}",
        "%gatecell usage",
        "%gatecell export trip",
        "%gatecell export trip turns.jsonl",
    )
    log_text, usage_text, priced = out[4]["text"], out[5]["text"], out[7]["text"]
    assert "What is 2+2?" in log_text and "2+2 = 4" in log_text and "count to 3" in log_text
    assert "trip" in log_text and "local-image" in log_text
    assert "text/html" in out[4]["displays"][-1]["data"]  # a table, through the safe renderer
    assert "cost ($)" not in usage_text and "local-chat" in usage_text
    (chat_row,) = [line for line in priced.splitlines() if "local-chat" in line]
    assert "cost ($)" in priced and chat_row.split()[-1] not in ("unknown", "0.0000")
    assert "local-image" in [line.split()[1] for line in priced.splitlines() if "local-image" in line]
    assert "unknown" in [line for line in priced.splitlines() if "local-image" in line][0]
    assert "wrote the 2 exchanges of conversation 'trip' to trip.md" in out[8]["stdout"]
    markdown = (tmp_path / "trip.md").read_text()
    assert markdown.startswith("# Conversation trip") and "count to 3" in markdown and "1, 2, 3." in markdown
    lines = [json.loads(line) for line in (tmp_path / "turns.jsonl").read_text().splitlines()]
    assert [line["prompt"] for line in lines] == ["What is 2+2?", "count to 3"]
    rows = exchanges(home, 3)
    assert [(r["api"], r["conversation"], r["notebook"], r["gateway"]) for r in rows] == [
        ("chat", "trip", "work/trip.ipynb", "local"),
        ("chat", "trip", "work/trip.ipynb", "local"),
        ("image", None, "work/trip.ipynb", "local"),
    ]
    assert rows[2]["media"]["type"] == "image/png" and rows[2]["prompt"] == "a lighthouse"


def test_a_rerun_is_answered_from_the_cache(kernel, kernel_cells, tmp_path):
    home = tmp_path / "home"
    km = kernel(home)
    out = run(
        kernel_cells,
        km,
        "%load_ext gatecell",
        "%%chat --cache --footer\nWhat is 3+4?",
        "%%chat --cache --footer --new\nWhat is 3+4?",  # "Run All" again: the same request
        "%config Gatecell.cache = True",
        "%%reason --footer\nWhat is 5+5?",
        "%%reason --footer\nWhat is 5+5?",
    )
    first, again, reason, reason_again = (out[i]["displays"][-1] for i in (1, 2, 4, 5))
    assert "cached" not in first["metadata"]["gatecell"] and "cached" not in reason["metadata"]["gatecell"]
    assert again["metadata"]["gatecell"]["cached"] is True and reason_again["metadata"]["gatecell"]["cached"]
    assert again["data"]["text/plain"].startswith("3+4 = 7")
    assert again["data"]["text/plain"].endswith(" · cached")  # the footer says so
    assert "cached" not in first["data"]["text/plain"]
    assert [r["cached"] for r in exchanges(home, 4)] == [False, True, False, True]


def test_a_conversation_and_a_job_outlive_the_kernel(kernel, kernel_cells, tmp_path):
    """The kernel restarts (a new process, a new embedded gateway on a new port): the job
    submitted with --no-wait is collected by its id alone, the conversation restored."""
    home = tmp_path / "home"
    first = kernel(home)
    out = run(
        kernel_cells,
        first,
        "%load_ext gatecell",
        "%%chat -c trip\nWhat is 2+2?",
        "%%chat -c trip\ncount to 3",
        "%video --no-wait waves on a beach",
    )
    job_id = out[3]["stdout"].split()[2]
    assert job_id.startswith("video_")
    first.shutdown_kernel(now=False)
    second = kernel(home)
    out = run(
        kernel_cells,
        second,
        "%load_ext gatecell",
        "%gatecell jobs",
        f"%gatecell job {job_id}",
        "%gatecell restore trip",
        "%gatecell history trip",
        "%%chat -c trip\nWhat is 6*7?",
    )
    assert job_id in out[1]["text"] and "waves on a beach" in out[1]["text"]
    assert any("<video" in d["data"].get("text/html", "") for d in out[2]["displays"])  # collected
    assert "restored conversation 'trip': 2 turns" in out[3]["stdout"]
    assert "count to 3" in out[4]["text"] and "1, 2, 3." in out[4]["text"]
    rows = exchanges(home, 4)  # two chats and a video before the restart, a chat after
    assert rows[-1]["messages"] == [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "2+2 = 4"},
        {"role": "user", "content": "count to 3"},
        {"role": "assistant", "content": "1, 2, 3."},
        {"role": "user", "content": "What is 6*7?"},
    ]
    jobs = subprocess.run(
        [*CLI, "jobs", "--json"], env=_env(home), capture_output=True, text=True, timeout=60
    )
    (job,) = [json.loads(line) for line in jobs.stdout.splitlines()]
    assert (job["job_id"], job["kind"], job["state"], job["gateway"]) == (
        job_id,
        "video",
        "succeeded",
        "local",
    )


def test_the_log_can_be_switched_off(kernel, kernel_cells, tmp_path):
    home = tmp_path / "home"
    run(
        kernel_cells,
        kernel(home),
        "%load_ext gatecell",
        "%chat what is 1+1?",
        "%config Gatecell.log = False",
        "%chat what is 2+2?",
        "%config Gatecell.log = True",
        "%chat what is 3+3?",
    )
    assert [r["prompt"] for r in exchanges(home, 2)] == ["what is 1+1?", "what is 3+3?"]
    off = tmp_path / "off"
    run(kernel_cells, kernel(off, GATECELL_LOG="0"), "%load_ext gatecell", "%chat what is 4+4?")
    assert not (off / "gatecell.db").exists()


@pytest.mark.parametrize("fault", ["corrupt", "unusable"])
def test_a_broken_log_leaves_the_magics_working_and_says_so_once(kernel, kernel_cells, tmp_path, fault):
    if fault == "corrupt":
        home = tmp_path / "home"
        home.mkdir()
        (home / "gatecell.db").write_bytes(b"not a database\n" * 300)
    else:  # a folder that cannot be made: a path through a file (even root cannot write there)
        (tmp_path / "file").write_text("")
        home = tmp_path / "file" / "home"
    out = run(
        kernel_cells,
        kernel(home),
        "%load_ext gatecell",
        "%%chat\nWhat is 2+2?",
        "%%chat --cache\ncount to 3",
        "%video waves",
    )
    assert out[1]["displays"][-1]["data"]["text/plain"] == "2+2 = 4"
    assert out[2]["displays"][-1]["data"]["text/plain"] == "1, 2, 3."
    assert any("<video" in d["data"].get("text/html", "") for d in out[3]["displays"])
    said = [line for got in out for line in got["stderr"].splitlines() if "logging is off" in line]
    assert len(said) == 1 and said[0].startswith("gatecell: logging is off: ")
    assert str(home / "gatecell.db") in said[0]
    if fault == "corrupt":
        assert "not a usable SQLite database" in said[0]
        assert (home / "gatecell.db").read_bytes() == b"not a database\n" * 300  # left alone


def test_two_kernels_logging_1000_exchanges_each_give_2000_rows(
    kernel, kernel_cells, tmp_path, local_gateway
):
    home = tmp_path / "home"
    env = {"GATECELL_BASE_URL": local_gateway.base_url, "GATECELL_API_KEY": local_gateway.api_key.reveal()}
    kms = [kernel(home, **env) for _ in range(2)]
    code = (
        "from gatecell import Gateway\n"
        "gw = Gateway()\n"
        "for i in range({n}):\n"
        "    gw.chat('local-chat', [{{'role': 'user', 'content': f'kernel {k} says {{i}}'}}])\n"
    )
    clients = []
    for km in kms:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        clients.append(kc)
    ids = [kc.execute(code.format(n=1000, k=k)) for k, kc in enumerate(clients)]  # both at once
    for km, kc, msg_id in zip(kms, clients, ids, strict=True):
        reply = kc.get_shell_msg(timeout=300)
        while reply["parent_header"].get("msg_id") != msg_id:  # a late kernel_info reply of wait_for_ready
            reply = kc.get_shell_msg(timeout=300)
        assert reply["content"]["status"] == "ok", reply
        kc.stop_channels()
        km.shutdown_kernel(now=False)  # the exit flushes what is still queued
    rows = exchanges(home, 2000)
    assert len(rows) == 2000
    for k in range(2):
        assert sorted(
            int(r["prompt"].split()[-1]) for r in rows if r["prompt"].startswith(f"kernel {k} ")
        ) == list(range(1000))


def test_a_kernel_killed_mid_stream_leaves_a_sound_log(kernel, tmp_path, local_gateway):
    home = tmp_path / "home"
    env = {"GATECELL_BASE_URL": local_gateway.base_url, "GATECELL_API_KEY": local_gateway.api_key.reveal()}
    km = kernel(home, **env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    words = " ".join(f"w{i}" for i in range(20_000))  # paced by the gateway: a stream of 40 s
    code = (
        "from gatecell import Gateway, store\n"
        "gw = Gateway()\n"
        "for i in range(50):\n"
        "    gw.chat('local-chat', [{'role': 'user', 'content': f'before {i}'}])\n"
        "assert store.default_store(log=True).flush(30)\n"
        f"prompt = [{{'role': 'user', 'content': 'repeat after me: {words}'}}]\n"
        "stream = gw.chat('local-chat', prompt, stream=True)\n"
        "for n, fragment in enumerate(stream):\n"
        "    if n == 200:\n"
        "        print('streaming', flush=True)\n"
    )
    kc.execute(code)
    deadline = time.monotonic() + 120
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("the stream never started") from None
        if msg["msg_type"] == "stream" and "streaming" in msg["content"]["text"]:
            break
    os.kill(km.provisioner.process.pid, signal.SIGKILL)
    km.provisioner.process.wait(30)
    kc.stop_channels()
    with sqlite3.connect(home / "gatecell.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        prompts = [row[0] for row in conn.execute("SELECT prompt FROM exchanges ORDER BY id")]
    assert prompts == [f"before {i}" for i in range(50)]  # the stream never ended: never logged
    cli = subprocess.run([*CLI, "logs", "-n", "1", "--json"], env=_env(home), capture_output=True, text=True)
    assert cli.returncode == 0 and json.loads(cli.stdout)["prompt"] == "before 49"


def test_a_job_id_shown_right_before_the_kernel_is_killed_is_listed_and_collected(
    kernel, kernel_cells, tmp_path
):
    home = tmp_path / "home"
    first = kernel(home)
    run(kernel_cells, first, "%load_ext gatecell")
    kc = first.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        msg_id = kc.execute("%%video --no-wait\nwaves on a beach")
        while True:  # the reply: the cell returned, the job id is on the screen; kill at once
            reply = kc.get_shell_msg(timeout=120)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        os.kill(first.provisioner.process.pid, signal.SIGKILL)
        first.provisioner.process.wait(30)
        assert reply["content"]["status"] == "ok", reply["content"]
        shown = ""
        while True:
            try:
                msg = kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                shown += msg["content"]["text"]
    finally:
        kc.stop_channels()
    job_id = re.search(r"video job (video_\w+) submitted", shown)[1]  # type: ignore[index]
    second = kernel(home)
    out = run(kernel_cells, second, "%load_ext gatecell", "%gatecell jobs", f"%gatecell job {job_id}")
    assert job_id in out[1]["text"] and "waves on a beach" in out[1]["text"]
    assert any("<video" in d["data"].get("text/html", "") for d in out[2]["displays"])  # collected


QUEUE = (
    "from gatecell import store\n"
    "store.default_store().record_exchange('/v1/chat/completions', 'm', "
    "{{'model': 'm', 'messages': [{{'role': 'user', 'content': {prompt!r}}}]}}, text='ok')\n"
)


def _prompts(home: Path) -> list[str]:
    with sqlite3.connect(home / "gatecell.db") as conn:
        return [row[0] for row in conn.execute("SELECT prompt FROM exchanges ORDER BY id")]


def test_shutdown_and_restart_from_the_front_end_lose_nothing(kernel, kernel_cells, tmp_path):
    """``restart_kernel(now=False)`` and ``shutdown_kernel(now=False)`` are what JupyterLab's
    Restart and Shut Down send: a shutdown request, which ipykernel answers by leaving its
    loop and exiting (atexit runs), with a kill only after 5 s. An entry still queued (the
    file locked by another process) is committed on the way out."""
    home = tmp_path / "home"
    km = kernel(home)
    run(kernel_cells, km, QUEUE.format(prompt="first"), "store.default_store().flush()")
    for name, end in (("restart", km.restart_kernel), ("shutdown", km.shutdown_kernel)):
        with held(home / "gatecell.db") as release:
            run(kernel_cells, km, QUEUE.format(prompt=f"before the {name}"))
            release(1.0)  # while the kernel is on its way out
            end(now=False)
        if name == "restart":  # the new kernel answers before another client asks it anything
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=60)
            kc.stop_channels()
    assert _prompts(home) == ["first", "before the restart", "before the shutdown"]
