"""Faults and processes: a read-only folder, a full disk, a corrupt file, two processes at
once, a process killed mid-write, exit and fork. Each runs in processes of its own, since
what is checked (one warning per process, exit, SIGKILL) is about whole processes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from store_helpers import clean_env, run_child, run_cli

from gatecell.store import Store
from gatecell.store.tables import index_new

NOBODY = 65534

# Everything the store's code paths import, imported before a child drops privileges: the
# interpreter lives under /root, which nobody may read.
PRELUDE = """
    import json, os, sys, time
    import gatecell.store, gatecell.store.records, gatecell.store.queries, gatecell.store.prices
    from gatecell.store import Store, StoreError, cache_key
    path = os.environ["STORE_PATH"]
    def body(i):
        return json.dumps({"model": "m", "messages": [{"role": "user", "content": f"prompt {i}"}]}).encode()
"""


def child(script: str, path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return run_child(
        textwrap.dedent(PRELUDE) + textwrap.dedent(script), clean_env(STORE_PATH=str(path), **env)
    )


def integrity(path: Path) -> tuple[str, int]:
    """``PRAGMA integrity_check`` (the FTS5 index checked too, once a search has brought it up
    to date) and the number of exchanges."""
    with sqlite3.connect(path, isolation_level=None) as conn:
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        assert index_new(conn)
        conn.execute("INSERT INTO exchanges_fts (exchanges_fts) VALUES ('integrity-check')")
        return check, conn.execute("SELECT count(*) FROM exchanges").fetchone()[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
@pytest.mark.parametrize("existing", [False, True], ids=["empty-folder", "existing-log"])
def test_a_read_only_folder_turns_logging_off_with_one_line(locked_folder: Path, existing: bool):
    path = locked_folder / "gatecell.db"
    if existing:  # a log of nobody's, written before the folder became read-only
        os.chown(locked_folder, os.getuid(), os.getgid())
        s = Store(path)
        s.record_exchange("/v1/chat/completions", "m", {"model": "m"}, text="root wrote this")
        assert s.flush(30)
        s.close()
        for made in [locked_folder, *locked_folder.iterdir()]:
            os.chown(made, NOBODY, NOBODY)
        locked_folder.chmod(0o500)
    before = sorted(p.name for p in locked_folder.iterdir())
    content = path.read_bytes() if existing else None
    out = child(
        f"""
        os.setgid({NOBODY}); os.setuid({NOBODY})
        s = Store(path)
        for i in range(20):
            s.record_exchange("/v1/chat/completions", "m", body(i), text="reply")
            s.record_job("video", f"j{{i}}", prompt="waves")
        hit = s.lookup(cache_key("/v1/chat/completions", "m", body(0), None))
        s.record_exchange("/v1/chat/completions", "m", body(99), text="after")
        assert s.flush(30)
        print(json.dumps({{"hit": hit is None, "off": s.off}}))
        """,
        path,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["hit"] is True and result["off"]
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"gatecell: logging is off: cannot use {path}: ")
    assert lines[0].endswith(f"({locked_folder} is not writable)")
    assert sorted(p.name for p in locked_folder.iterdir()) == before  # nothing made, nothing removed
    if existing:
        assert path.read_bytes() == content


def test_a_full_disk_turns_logging_off_and_keeps_what_was_committed(tmp_path: Path):
    path = tmp_path / "gatecell.db"
    out = child(
        """
        import resource, signal
        s = Store(path)
        s.record_exchange("/v1/chat/completions", "m", body(-1), text="before the limit")
        assert s.flush(30)
        # The file size limit makes every write past it fail (EFBIG), as a full disk does.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 200_000, size + 200_000))
        for i in range(300):
            s.record_exchange("/v1/chat/completions", "m", body(i), text=f"{i} " + "lorem ipsum " * 2000)
            assert s.flush(30)
            if s.off:
                break
        print(json.dumps({"off": s.off, "tried": i + 1}))
        """,
        path,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["off"] and result["tried"] < 300
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"gatecell: logging is off: cannot use {path}: ")
    assert "disk" in lines[0]  # "database or disk is full", or "disk I/O error (... is the disk full?)"
    check, rows = integrity(path)
    assert check == "ok"
    with sqlite3.connect(path) as conn:
        prompts = [r[0] for r in conn.execute("SELECT prompt FROM exchanges ORDER BY id")]
    assert 2 <= rows < result["tried"] + 1
    assert prompts == [f"prompt {i}" for i in range(-1, rows - 1)]  # what was committed, in order


def test_a_corrupt_file_turns_logging_off_and_is_left_alone(tmp_path: Path):
    path = tmp_path / "gatecell.db"
    garbage = b"this is not a database, just bytes\n" * 300
    path.write_bytes(garbage)
    out = child(
        """
        s = Store(path)
        s.record_exchange("/v1/chat/completions", "m", body(1), text="reply")
        s.record_job("video", "j1", prompt="waves")
        hit = s.lookup("0" * 64)
        s.record_exchange("/v1/chat/completions", "m", body(2), text="reply")
        assert s.flush(30)
        try:
            s.logs()
        except StoreError as exc:
            print(f"query: {exc}")
        print(json.dumps({"hit": hit, "off": s.off}))
        """,
        path,
    )
    assert out.returncode == 0, out.stderr
    query, result = out.stdout.splitlines()
    assert json.loads(result)["hit"] is None
    assert query.startswith("query: cannot read the log: ") and "not a usable SQLite database" in query
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0] == (
        f"gatecell: logging is off: {path} is not a usable SQLite database (file is not a database); "
        "move it away to start a new log"
    )
    assert path.read_bytes() == garbage
    cli = run_cli("logs", home=tmp_path)
    assert cli.returncode == 1 and len(cli.stderr.splitlines()) == 1
    assert cli.stderr.startswith("gatecell: cannot read the log: ") and "Traceback" not in cli.stderr


WRITER = """
    import threading
    s = Store(path)
    name = sys.argv[1] if len(sys.argv) > 1 else os.environ["WRITER"]
    sys.stdin.readline()  # start together
    def work(t):
        for i in range(250):
            usage = {"total_tokens": i}
            s.record_exchange("/v1/chat/completions", "m", body(f"{name}-{t}-{i}"), text="reply", usage=usage)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert s.flush(120)
    print(json.dumps({"batches": s.batches, "rows": s.rows, "off": s.off}))
"""


def test_two_processes_writing_1000_exchanges_each_give_2000_rows(tmp_path: Path):
    path = tmp_path / "gatecell.db"  # new: both processes also race to make and migrate it
    script = textwrap.dedent(PRELUDE) + textwrap.dedent(WRITER)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            env=clean_env(STORE_PATH=str(path), WRITER=name),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("A", "B")
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0 and stderr == "", stderr
        results.append(json.loads(stdout))
    assert all(r["rows"] == 1000 and r["off"] is None for r in results)
    assert all(r["batches"] < 1000 for r in results)  # batched, not a transaction per row
    check, rows = integrity(path)
    assert (check, rows) == ("ok", 2000)
    with sqlite3.connect(path) as conn:
        prompts = {r[0] for r in conn.execute("SELECT prompt FROM exchanges")}
    expected = {f"prompt {w}-{t}-{i}" for w in "AB" for t in range(4) for i in range(250)}
    assert prompts == expected


def test_a_process_killed_mid_write_leaves_a_sound_file_with_what_it_committed(tmp_path: Path):
    path = tmp_path / "gatecell.db"
    script = textwrap.dedent(PRELUDE) + textwrap.dedent(
        """
        s = Store(path)
        i = 0
        while True:  # the writer commits without pause until the kill
            for _ in range(50):
                s.record_exchange("/v1/chat/completions", "m", body(i), text="reply " * 200)
                i += 1
            s.flush()
            print(i, flush=True)  # all of these are committed
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=clean_env(STORE_PATH=str(path)), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    committed = 0
    try:
        while committed < 1000:
            line = proc.stdout.readline()
            assert line, "the writer stopped before it was killed"
            committed = int(line)
        os.kill(proc.pid, signal.SIGKILL)  # its writer is committing the next entries meanwhile
    finally:
        proc.kill()
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    check, rows = integrity(path)
    assert check == "ok"
    assert rows >= committed
    s = Store(path)  # and it goes on being used
    s.record_exchange("/v1/chat/completions", "m", {"model": "m"}, text="after the kill")
    assert s.flush(30) and s.off is None
    assert s.logs(n=1)[0]["response"] == "after the kill"
    s.close()


def test_what_was_logged_is_committed_at_exit_without_a_flush(tmp_path: Path):
    path = tmp_path / "gatecell.db"
    out = child(
        """
        s = Store(path)
        for i in range(300):
            s.record_exchange("/v1/chat/completions", "m", body(i), text="reply")
        """,
        path,
    )
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert integrity(path) == ("ok", 300)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_logs_through_a_writer_of_its_own(tmp_path: Path):
    path = tmp_path / "gatecell.db"
    out = child(
        """
        s = Store(path)
        # the writer is running
        s.record_exchange("/v1/chat/completions", "m", body("parent-0"), text="before fork")
        pid = os.fork()
        if pid == 0:
            for i in range(5):
                s.record_exchange("/v1/chat/completions", "m", body(f"child-{i}"), text="from the child")
            ok = s.flush(30)
            os._exit(0 if ok and s.off is None else 1)
        for i in range(1, 6):
            s.record_exchange("/v1/chat/completions", "m", body(f"parent-{i}"), text="from the parent")
        _, status = os.waitpid(pid, 0)
        assert s.flush(30)
        print(os.waitstatus_to_exitcode(status))
        """,
        path,
    )
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.strip() == "0"
    with sqlite3.connect(path) as conn:
        prompts = sorted(r[0] for r in conn.execute("SELECT prompt FROM exchanges"))
    assert prompts == sorted(
        [f"prompt parent-{i}" for i in range(6)] + [f"prompt child-{i}" for i in range(5)]
    )
