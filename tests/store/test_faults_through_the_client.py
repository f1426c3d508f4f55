"""Faults of the store, through the client: a read-only folder, a full disk, a corrupt file.
Every call still succeeds (logging is only ever a side effect), and one line on stderr says,
once, that logging is off and why. Each runs in a process of its own, as a user's does,
against the session's local gateway."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import textwrap
from pathlib import Path

import pytest
from store_helpers import clean_env, run_child

NOBODY = 65534

# The client's code paths, imported before a child drops privileges (the interpreter lives
# under /root, which nobody may read). The calls: plain, streamed, and with the cache.
CALLS = """
    import json, os, sys
    import gatecell.gateway, gatecell.journal, gatecell.connect
    import gatecell.store, gatecell.store.records, gatecell.store.queries, gatecell.store.report
    import httpx, httpcore, h11, idna, encodings.idna
    from gatecell import Gateway, store
    {before}
    gw = Gateway(cache=True)
    said = []
    for i in range({n}):
        said.append(gw.chat("local-chat", [{{"role": "user", "content": f"what is {{i}}+1?"}}]).text)
        count = [{{"role": "user", "content": f"count to {{i % 5 + 1}}"}}]
        said.append("".join(gw.chat("local-chat", count, stream=True)))
    st = store.default_store(log=True)
    st.flush(30)
    print(json.dumps({{"said": said, "off": st.off}}))
"""


def _run(home: Path, local_gateway, before: str = "", n: int = 3) -> subprocess.CompletedProcess[str]:
    env = clean_env(
        GATECELL_HOME=str(home),
        GATECELL_BASE_URL=local_gateway.base_url,
        GATECELL_API_KEY=local_gateway.api_key.reveal(),
    )
    script = textwrap.dedent(CALLS).format(before=textwrap.dedent(before).strip(), n=n)
    return run_child(script, env)


def _answers(n: int) -> list[str]:
    return [
        text
        for i in range(n)
        for text in (f"{i}+1 = {i + 1}", ", ".join(map(str, range(1, i % 5 + 2))) + ".")
    ]


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("gatecell: logging is off")]
    assert len(lines) == 1 and len(stderr.splitlines()) == 1, stderr
    return lines[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_a_read_only_folder(locked_folder: Path, local_gateway):
    out = _run(locked_folder, local_gateway, f"os.setgid({NOBODY}); os.setuid({NOBODY})")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["said"] == _answers(3) and result["off"]
    line = _one_line(out.stderr)
    assert line.startswith(f"gatecell: logging is off: cannot use {locked_folder / 'gatecell.db'}: ")
    assert line.endswith(f"({locked_folder} is not writable)")
    assert not list(locked_folder.iterdir())


def test_a_full_disk(tmp_path: Path, local_gateway):
    before = """
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG): a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (400_000, 400_000))
        g = Gateway()
        big = "repeat after me: " + "lorem ipsum " * 20000  # 240 kB a prompt: the log is soon full
        for i in range(10):
            assert g.chat("local-chat", [{"role": "user", "content": big}]).text
    """
    out = _run(tmp_path, local_gateway, before)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["said"] == _answers(3) and result["off"]
    assert "disk" in _one_line(out.stderr)
    with sqlite3.connect(tmp_path / "gatecell.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_corrupt_file(tmp_path: Path, local_gateway):
    garbage = b"this is not a database, just bytes\n" * 300
    (tmp_path / "gatecell.db").write_bytes(garbage)
    out = _run(tmp_path, local_gateway)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["said"] == _answers(3) and result["off"]
    assert "is not a usable SQLite database" in _one_line(out.stderr)
    assert (tmp_path / "gatecell.db").read_bytes() == garbage
