"""The checkpoints of the log's writer: the WAL copied into the database file, off the commits.

SQLite checkpoints at the commit that takes the WAL past 1,000 pages, and that commit then
waits for the copy and two disk syncs: milliseconds, against a tenth of one for a commit, and
a call waits for its commit (`gatecell.store.store`). So the writer's connection never
checkpoints (``wal_autocheckpoint = 0``), and `Checkpointer` does it from a thread and
connection of its own, beside the commits that follow (WAL lets it).
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["Checkpointer", "TRANSACTIONS", "ROWS"]

TRANSACTIONS = 500  # transactions between two checkpoints at most
ROWS = 10_000  # or rows


class Checkpointer:
    """A passive checkpoint every `TRANSACTIONS` transactions or `ROWS` rows the writer
    counts, in a thread of its own (started on the first), opened with ``connect``. Best
    effort: one that fails is left to the next, or to SQLite as the last connection closes."""

    def __init__(self, path: Path, connect: Callable[[Path], sqlite3.Connection]) -> None:
        self.path = path
        self._connect = connect
        self._transactions = self._rows = 0
        self._due: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def count(self, rows: int) -> None:
        """One more transaction of ``rows`` entries (in the writer thread)."""
        self._transactions += 1
        self._rows += rows
        if self._transactions < TRANSACTIONS and self._rows < ROWS:
            return
        self._transactions = self._rows = 0
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gatecell-checkpoint", daemon=True)
            self._thread.start()
        self._due.put(True)

    def stop(self) -> None:
        if self._thread is not None:
            self._due.put(False)
            self._thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while self._due.get():
                try:
                    conn = conn or self._connect(self.path)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except (sqlite3.Error, OSError):
                    pass
        finally:
            if conn is not None:
                conn.close()
