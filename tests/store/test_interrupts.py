"""A call's log entry is committed on the caller's own thread when no other is writing
(`Store.wait`), so a Ctrl-C may come in the middle of it. Python raises a signal's
``KeyboardInterrupt`` between the interpreter's steps, never inside a C call: SQLite's call
runs whole. What the store does about the steps between its calls is held here: an entry an
interrupt kept from its commit is written later, once; one committed is not written again;
a locked file is left to the writer thread."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from locks import held
from store_helpers import chat_body

from gatecell.store import Store

pytestmark = pytest.mark.usefixtures("ctrl_c")  # these tests interrupt their own process

ROWS = 2_000_000  # a statement that runs well past the signal


def test_a_sigint_raises_only_once_sqlites_call_has_returned(tmp_path: Path):
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    sent: list[float] = []

    def interrupt() -> None:
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.05, interrupt)
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        conn.execute(
            f"INSERT INTO t WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {ROWS}) "
            "SELECT i FROM c"
        )
        time.sleep(5)  # the interrupt is raised at the latest here, once the insert returned
    timer.join()
    assert sent and sent[0] - started < time.monotonic() - started  # it came while the statement ran
    assert conn.total_changes == ROWS  # and the statement ran whole
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == ROWS


def _entries(store: Store) -> list[str]:
    with sqlite3.connect(store.path) as conn:
        return [row[0] for row in conn.execute("SELECT prompt FROM exchanges ORDER BY id")]


def _log(store: Store, prompt: str) -> int:
    ticket = store.record_exchange("/v1/chat/completions", "m", chat_body(prompt), text="hi", wake=False)
    assert ticket is not None
    return ticket


def _interrupted(store: Store, monkeypatch: pytest.MonkeyPatch, commit: Any) -> int:
    """Log "second" after "first" and wait for it with ``commit`` in place of the store's
    own, which raises `KeyboardInterrupt`; the ticket, the store's commit back in place."""
    _log(store, "first")
    assert store.flush(10) and _entries(store) == ["first"]  # the connection is open
    original = Store._commit

    def in_the_main_thread(self, *args: Any) -> None:  # where a Ctrl-C lands; the writer's are its own
        (commit if threading.current_thread() is threading.main_thread() else original)(self, *args)

    monkeypatch.setattr(Store, "_commit", in_the_main_thread)
    ticket = _log(store, "second")
    with pytest.raises(KeyboardInterrupt):
        store.wait(ticket, 10)
    monkeypatch.setattr(Store, "_commit", original)
    return ticket


def test_an_interrupt_before_the_commit_leaves_the_entry_for_the_writer(store: Store, monkeypatch):
    def interrupted(self, conn, *rows):  # Ctrl-C between the insert and the COMMIT
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO exchanges (time, endpoint) VALUES (?, ?)", [("x", "/half")])
        raise KeyboardInterrupt

    ticket = _interrupted(store, monkeypatch, interrupted)
    assert store.wait(ticket, 10)  # the writer (woken on the way out) or this wait writes it
    assert _entries(store) == ["first", "second"]  # nothing half done, nothing twice


def test_an_interrupt_after_the_commit_does_not_write_the_entry_again(store: Store, monkeypatch):
    commit = Store._commit

    def interrupted(self, conn, *rows):  # Ctrl-C just after the COMMIT returned
        commit(self, conn, *rows)
        raise KeyboardInterrupt

    ticket = _interrupted(store, monkeypatch, interrupted)
    assert store.wait(ticket, 0)  # done already
    assert store.flush(10) and _entries(store) == ["first", "second"]


def test_a_locked_log_is_left_to_the_writer_and_the_entry_lands_when_it_is_free(store: Store):
    _log(store, "first")
    assert store.flush(10)
    with held(store.path) as release:
        ticket = _log(store, "second")
        release(0.5)
        assert store.wait(ticket, 30)  # the caller's try found it locked; the writer waited
    assert _entries(store) == ["first", "second"] and store.off is None


def test_the_caller_writes_its_own_entry_when_the_writer_is_idle(store: Store):
    _log(store, "first")
    assert store.flush(10)
    names: list[str] = []
    original = store._write

    def write(entries, patient=True):
        names.append(threading.current_thread().name)
        return original(entries, patient)

    store._write = write  # type: ignore[method-assign]
    for prompt in ("second", "third"):
        assert store.wait(_log(store, prompt), 10)
    assert names == [threading.current_thread().name] * 2  # no thread switch, no writer woken
    assert _entries(store) == ["first", "second", "third"]
