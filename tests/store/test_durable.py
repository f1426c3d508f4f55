"""What a call returned is in the log, however the process ends: killed outright (SIGKILL)
right after the call returned, ``sys.exit``, an exception at top level, Ctrl-C in the CLI.

Real processes on a real file. For the clean exits, another connection holds the log's
write lock while the process logs and starts to exit, and lets go a second later: what is
still queued then is only there because the exit waited for it (atexit's flush).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from store_helpers import CLI, clean_env

from gatecell.store import Store


def _rows(home: Path) -> list[tuple[str, str | None, int]]:
    with sqlite3.connect(home / "gatecell.db") as conn:
        return conn.execute("SELECT prompt, response, partial FROM exchanges ORDER BY id").fetchall()


@contextmanager
def held(path: Path) -> Iterator[Callable[[float], None]]:
    """Another process's write transaction on the log (made if missing), held until
    ``release(seconds)`` ends it that many seconds later, from a thread."""
    store = Store(path)  # the file and its tables, as a first use makes them
    store.record_exchange("/v1/chat/completions", "m", {"messages": [{"role": "user", "content": "first"}]})
    assert store.flush(30)
    store.close()
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    timers: list[threading.Timer] = []

    def release(seconds: float) -> None:
        timers.append(threading.Timer(seconds, conn.execute, ("COMMIT",)))
        timers[0].start()

    try:
        yield release
    finally:
        for timer in timers:
            timer.join()
        if conn.in_transaction:
            conn.execute("COMMIT")
        conn.close()


ASK = "'local-chat', [{'role': 'user', 'content': 'What is 2+2?'}]"
CALL = {
    "Gateway": f"reply = Gateway().chat({ASK})\n",
    "AsyncGateway": f"import asyncio\nreply = asyncio.run(AsyncGateway().chat({ASK}))\n",
}


@pytest.mark.parametrize("client", list(CALL))
def test_a_process_killed_right_after_a_call_returns_keeps_its_exchange(client, local_gateway, tmp_path):
    home = tmp_path / "home"
    env = clean_env(
        GATECELL_HOME=str(home),
        GATECELL_BASE_URL=local_gateway.base_url,
        GATECELL_API_KEY=local_gateway.api_key.reveal(),
    )
    code = (
        "import sys, time\nfrom gatecell import AsyncGateway, Gateway\n"
        + CALL[client]
        + "print('shown:', reply.text, flush=True)\ntime.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        shown = child.stdout.readline()
        child.send_signal(signal.SIGKILL)  # the moment the reply is on the screen
        assert child.wait(30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    assert shown == "shown: 2+2 = 4\n"
    assert _rows(home) == [("What is 2+2?", "2+2 = 4", 0)]


EXITS = {
    "sys.exit": "sys.exit(3)",
    "an exception": "raise RuntimeError('at top level')",
    "the end of the script": "pass",
}


@pytest.mark.parametrize("end", list(EXITS))
def test_a_clean_exit_commits_what_is_still_queued(end, tmp_path):
    home = tmp_path / "home"
    script = textwrap.dedent(
        f"""
        import sys
        from gatecell import store
        store.default_store().record_exchange(
            "/v1/chat/completions", "m", {{"messages": [{{"role": "user", "content": "queued"}}]}}, text="ok"
        )
        print("queued", flush=True)
        {EXITS[end]}
        """
    )
    with held(home / "gatecell.db") as release:
        child = subprocess.Popen(
            [sys.executable, "-c", script],
            env=clean_env(GATECELL_HOME=str(home)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline() == "queued\n"
        release(1.0)  # the process is exiting by now, and its entry cannot be written yet
        _, stderr = child.communicate(timeout=60)
    assert child.returncode == {"sys.exit": 3, "an exception": 1, "the end of the script": 0}[end]
    assert [prompt for prompt, *_ in _rows(home)] == ["first", "queued"]


def test_ctrl_c_in_the_cli_keeps_the_partial_reply(local_gateway, tmp_path):
    home = tmp_path / "home"
    words = " ".join(f"w{i}" for i in range(20_000))  # paced by the gateway: a stream of 40 s
    env = clean_env(
        GATECELL_HOME=str(home),
        GATECELL_BASE_URL=local_gateway.base_url,
        GATECELL_API_KEY=local_gateway.api_key.reveal(),
    )
    with held(home / "gatecell.db") as release:
        child = subprocess.Popen(
            [*CLI, "chat", "-m", "local-chat", f"repeat after me: {words}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert child.stdout is not None
        printed = child.stdout.read(200)  # the stream is under way
        child.send_signal(signal.SIGINT)
        release(1.0)
        started = time.monotonic()
        rest, _ = child.communicate(timeout=60)
    assert child.returncode == 130 and time.monotonic() - started < 30
    [(prompt, response, partial)] = _rows(home)[1:]
    assert prompt.startswith("repeat after me: w0 w1") and partial == 1
    assert (printed + rest).decode().strip().startswith(response.strip()[:100])
    assert response.startswith("w0 w1 w2") and len(response) < len(words)
