"""What a call returned is in the log: the call returns once its exchange is committed (an
`AsyncGateway` call without holding up its event loop meanwhile), however the process ends
then: killed outright (SIGKILL) right after the call returned, ``sys.exit``, an exception at
top level, the end of the script, Ctrl-C in the CLI.

Real processes on a real file. Another connection holds the log's write lock while a process
logs (and, for the clean exits, starts to exit), and lets go a second later: a call that
returned, or an exit that ended, before that would leave its entry out.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from interrupts import python
from locks import held
from store_helpers import clean_env

from gatecell import AsyncGateway, Gateway


def _rows(home: Path) -> list[tuple[str, str | None, int]]:
    with sqlite3.connect(home / "gatecell.db") as conn:
        return conn.execute("SELECT prompt, response, partial FROM exchanges ORDER BY id").fetchall()


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
    assert [prompt for prompt, *_ in _rows(home)] == ["queued"]


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
            python("-m", "gatecell", "chat", "-m", "local-chat", f"repeat after me: {words}"),
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
    [(prompt, response, partial)] = _rows(home)
    assert prompt.startswith("repeat after me: w0 w1") and partial == 1
    assert (printed + rest).decode().strip().startswith(response.strip()[:100])
    assert response.startswith("w0 w1 w2") and len(response) < len(words)


def test_a_call_returns_once_its_exchange_is_committed(local_gateway, home: Path):
    """The file is locked by another process: the call returns when the lock goes and its
    exchange is in, not before."""
    with held(home / "gatecell.db") as release, Gateway(local_gateway.base_url, local_gateway.api_key) as gw:
        release(0.5)
        reply = gw.chat("local-chat", [{"role": "user", "content": "What is 2+2?"}])
        assert [row[:2] for row in _rows(home)] == [("What is 2+2?", reply.text)]


def test_an_async_call_waits_for_its_commit_without_holding_up_its_loop(local_gateway, home: Path):
    """While an `AsyncGateway` call waits for its commit, the loop runs other tasks: here the
    very task that lets the lock go, after 20 turns of the loop."""
    with held(home / "gatecell.db") as release:
        locker = release.conn  # type: ignore[attr-defined]

        async def main() -> list[tuple[str, str | None, int]]:
            async def other_work() -> None:
                for _ in range(20):
                    await asyncio.sleep(0.005)
                locker.execute("COMMIT")  # only a loop that keeps running gets here

            async with AsyncGateway(local_gateway.base_url, local_gateway.api_key) as gw:
                task = asyncio.ensure_future(other_work())
                await gw.chat("local-chat", [{"role": "user", "content": "What is 2+2?"}])
                assert task.done()
                return _rows(home)

        assert [row[0] for row in asyncio.run(main())] == ["What is 2+2?"]
