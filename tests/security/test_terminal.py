"""Issue 20, item 9: what a gateway or a model sends never drives the terminal.

The real ``gatecell`` command, in a child process, against a hostile gateway on loopback
whose reply, model ids and error message hold terminal control sequences: a window title
(``ESC ] 0``), a screen clear (``ESC [ 2J``), a clipboard write (``ESC ] 52``), an 8-bit CSI
(U+009B), a bare carriage return and backspaces that would overwrite what was printed. Then
``gatecell logs``, ``usage`` and ``jobs`` print the log those exchanges (and a job) left. No
output holds a control character but tab and newline; each shows escaped, as text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import hostile_gateway as evil
import pytest

from gatecell.store import Store

ESCAPES = "\x1b]0;pwned-title\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07\x9b31m\rOVERWRITTEN\x08\x08\u202e"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SHOWN = "\\u001b]0;pwned-title\\u0007\\u001b[2J\\u001b]52;c;cHduZWQ=\\u0007\\u009b31m\\u000dOVERWRITTEN"


@pytest.fixture
def gateway():
    models = [*evil.MODELS, {"id": f"escapes{ESCAPES}", "object": "model", "owned_by": ESCAPES}]
    server = evil.start(
        reply=f"# Title\r\nfirst line\r\n{ESCAPES} end\n", models=models, error=f"no{ESCAPES}"
    )
    yield server
    server.shutdown()
    server.server_close()


def gatecell(*args: str, base_url: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    env.update(GATECELL_BASE_URL=base_url, GATECELL_API_KEY=evil.KEY, GATECELL_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "gatecell", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_no_control_sequence_reaches_the_terminal(gateway, tmp_path):
    home = tmp_path / "home"
    run = lambda *args: gatecell(*args, base_url=gateway.base_url, home=home)  # noqa: E731
    streamed = run("chat", "-m", "hostile-chat", "hi")
    whole = run("chat", "--no-stream", "-m", "hostile-chat", "hi again")
    models = run("models")
    failed = run("chat", "-m", "hostile-error", "hi")
    for done in (streamed, whole, models):
        assert done.returncode == 0, done.stderr
    assert failed.returncode == 1 and failed.stderr.startswith(
        "gatecell: 400 from POST /v1/chat/completions: no"
    )
    for done in (streamed, whole):
        assert done.stdout == f"# Title\nfirst line\n{SHOWN}\\u0008\\u0008\\u202e end\n\n"
    assert f"escapes{SHOWN}" in models.stdout
    assert "no\\u001b]0;pwned-title\\u0007\\u001b[2J\\u001b]52;c;cHduZWQ=\\u0007\\u009b31m" in failed.stderr

    store = Store(home / "gatecell.db")  # a job, and a model name, as a gateway could have named them
    store.record_job("video", f"job{ESCAPES}", gateway=gateway.base_url, prompt=f"p{ESCAPES}", state=ESCAPES)
    store.record_exchange(
        "/v1/chat/completions", f"m{ESCAPES}", {"model": "m"}, text="x", usage={"total_tokens": 3}
    )
    assert store.flush(30)
    store.close()
    logs, as_json = run("logs", "-n", "0"), run("logs", "--json", "-n", "0")
    usage, jobs, jobs_json = run("usage"), run("jobs"), run("jobs", "--json")
    for done in (logs, as_json, usage, jobs, jobs_json):
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("\\u001b]0;pwned-title") >= 1, done.args
    assert (
        "first line" in logs.stdout
        and [json.loads(line)["response"] for line in as_json.stdout.splitlines()][0]
    )
    assert json.loads(jobs_json.stdout.splitlines()[0])["state"] == ESCAPES  # JSON keeps the text, escaped

    for done in (streamed, whole, models, failed, logs, as_json, usage, jobs, jobs_json):
        for stream in (done.stdout, done.stderr):
            assert not CONTROL.search(stream), (done.args, CONTROL.search(stream))
