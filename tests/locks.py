"""Another process's write transaction on a log, held open: what a process logs meanwhile
waits for it, as it would for a kernel or a batch writing the same file."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gatecell.store.store import connect


@contextmanager
def held(path: Path) -> Iterator[Callable[[float], None]]:
    """The log at ``path`` (made if missing) locked for writing until ``release(seconds)``
    ends the transaction that many seconds later, from a thread; ``release.conn`` is the
    connection, to end it from elsewhere."""
    connect(path).close()
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    timers: list[threading.Timer] = []

    def release(seconds: float) -> None:
        timers.append(threading.Timer(seconds, conn.execute, ("COMMIT",)))
        timers[0].start()

    release.conn = conn  # type: ignore[attr-defined]
    try:
        yield release
    finally:
        for timer in timers:
            timer.join()
        if conn.in_transaction:
            conn.execute("COMMIT")
        conn.close()
