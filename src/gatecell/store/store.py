"""`Store`: one SQLite file, written by a background thread, read from any thread.

Why a writer thread: a commit costs a disk sync (WAL, ``synchronous=NORMAL``: at checkpoints)
and redaction, JSON and hashing cost tens of microseconds; none of it belongs on the path of
a request. `Store.record_exchange` snapshots its arguments into an entry and puts it on a queue; the
writer takes every entry waiting and commits them in **one transaction per batch**. It
flushes on `Store.flush`, at `close`, and at interpreter exit. A process killed outright
loses only what was still queued: SQLite's journal keeps the file whole.

Why per-thread readers: a SQLite connection is for one thread at a time; with WAL, readers
never wait for the writer (or for other processes' writers).

Several processes share the file: each write transaction is ``BEGIN IMMEDIATE`` with a busy
timeout, and one still locked after that is retried rather than dropped.

Faults never break the caller. A folder that cannot be written, a full disk or a file that is
not a database turns the store off (`record_exchange`, `record_job` and `lookup` become no-ops) and says
so once per process and file, in one line on stderr. The queries (`logs`, `usage`, ...) raise
`StoreError` instead, since their caller asked for the data.

The log is private, and what it holds is trusted (a cache hit is shown as the gateway's answer,
a conversation is sent again): its folder is 0700 and its files 0600, and a folder or file of
another user, one others may write, or a symbolic link is never used (`gatecell.wire.private`):
the store is off, said in one line, as for any other fault.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import sqlite3
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gatecell.wire.apis import CACHEABLE, api_of
from gatecell.wire.errors import GatecellError
from gatecell.wire.private import Untrusted, create_private, private_file, private_folder
from gatecell.wire.secret import Secret

from . import queries
from .prices import Price, load_prices
from .records import EXCHANGE_COLUMNS, JOB_COLUMNS, ExchangeEntry, JobEntry, exchange_row, job_row
from .schema import migrate

__all__ = ["Store", "StoreError", "connect"]

BUSY_TIMEOUT = 10.0  # seconds a statement waits for another process's write lock
_ATTEMPTS = 6  # write attempts of a batch that keeps finding the file locked
_BATCH = 1000  # entries per transaction at most
_LOOKUP_WAIT = 2.0  # seconds a read waits for this process's own pending writes
_LINGER = 0.05  # seconds the writer waits for more entries before it commits a batch

_ROW = f"({', '.join('?' * len(EXCHANGE_COLUMNS))})"
_INSERT = f"INSERT INTO exchanges ({', '.join(EXCHANGE_COLUMNS)}) VALUES "
_ROWS_PER_INSERT = 999 // len(EXCHANGE_COLUMNS)  # within the 999 variables of the oldest SQLite
_UPSERT = (
    f"INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({', '.join('?' * len(JOB_COLUMNS))}) "
    "ON CONFLICT (gateway, kind, job_id) DO UPDATE SET "
    + ", ".join(
        f"{c} = coalesce(excluded.{c}, jobs.{c})"
        for c in ("model", "prompt", "state", "progress", "error", "notebook", "body_json")
    )
    + ", updated = excluded.updated WHERE excluded.updated >= jobs.updated"  # an older update loses
)


class StoreError(GatecellError):
    """The log could not be read (a file that is not a database, a folder that cannot be read)."""


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the store at ``path`` (made if missing, 0600 in a 0700 folder): WAL,
    busy timeout, ``synchronous=NORMAL``, schema brought forward. Autocommit mode:
    transactions are explicit. `Untrusted` when the folder or a file is not this user's alone
    (SQLite makes its ``-wal`` and ``-shm`` files with the database's mode)."""
    private_folder(path.parent)
    create_private(path)
    for suffix in ("-wal", "-shm", "-journal"):
        private_file(f"{path}{suffix}")
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
    try:
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _reason(path: Path, exc: BaseException) -> str:
    """Why the store stopped, in words a user can act on."""
    if isinstance(exc, Untrusted):
        return f"cannot use {path}: {exc}; set GATECELL_HOME to a folder of your own"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
        return f"{path} is not a usable SQLite database ({text}); move it away to start a new log"
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_IOERR_WRITE":  # Python 3.11+ names the error
        text += " (a write failed: is the disk full?)"
    elif path.parent.is_dir() and not os.access(path.parent, os.W_OK):
        text += f" ({path.parent} is not writable)"
    return f"cannot use {path}: {text}"


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(key: str, message: str) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    with contextlib.suppress(Exception):  # a closed stderr must not break the caller either
        sys.stderr.write(f"gatecell: {message}\n")
        sys.stderr.flush()


_STOP = object()
_STORES: weakref.WeakSet[Store] = weakref.WeakSet()


def _snapshot(request: Any) -> Any:
    """What the writer may read later: the caller may go on changing its own dict and lists."""
    if isinstance(request, Mapping):
        return {
            k: [dict(m) if isinstance(m, dict) else m for m in v] if isinstance(v, list) else v
            for k, v in request.items()
        }
    if isinstance(request, (bytearray, memoryview)):
        return bytes(request)
    return request


class Store:
    """The log, cache and job records in one SQLite file (see `gatecell.store.schema`).

    ``log=False`` keeps reads and lookups but writes nothing; ``log_media`` keeps the bytes
    of media replies (otherwise type, size and sha256 only).
    """

    def __init__(self, path: str | os.PathLike[str], *, log: bool = True, log_media: bool = False) -> None:
        self.path = Path(path)
        self.log_enabled = log
        self.log_media = log_media
        self.off: str | None = None  # why the store stopped working, once it has
        self.batches = 0  # transactions the writer committed
        self.rows = 0  # entries those transactions held
        self._setup()
        _STORES.add(self)

    def _setup(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._local = threading.local()
        self._queued = 0  # entries put on the queue
        self._written = 0  # entries the writer is done with
        self._answers: Counter[str] = Counter()  # queued entries that could answer a key ('': not known yet)
        self._urgent = threading.Event()  # a flush or close waits: the writer commits at once

    def __repr__(self) -> str:
        state = f"off: {self.off}" if self.off else ("logging" if self.log_enabled else "not logging")
        return f"Store({str(self.path)!r}, {state})"

    # -- writing ----------------------------------------------------------------------------

    def record_exchange(
        self,
        endpoint: str,
        model: str | None,
        request: Mapping[str, Any] | bytes | str | None = None,
        *,
        response: Any = None,
        text: str | None = None,
        reasoning: str | None = None,
        usage: Any = None,
        latency: float | None = None,
        status: int | None = None,
        error: str | None = None,
        request_id: str | None = None,
        api: str | None = None,
        prompt: str | None = None,
        conversation: str | None = None,
        notebook: str | None = None,
        gateway: str | None = None,
        cached: bool = False,
        partial: bool = False,
        cache_key: str | None = None,
        media: bytes | None = None,
        media_type: str | None = None,
        log_media: bool | None = None,
        secrets: Sequence[Secret | str | None] = (),
        at: float | None = None,
        schema: Any = None,
        parsed_json: str | None = None,
    ) -> None:
        """Log one exchange; returns at once (the writer thread commits it).

        ``request`` is the body sent (JSON bytes as sent, or a dict); ``response`` the raw
        reply body (parsed JSON, or its JSON bytes as received: decoded in the writer thread),
        kept to answer again from the cache: do not change it afterwards.
        ``text``/``reasoning``/``usage`` are the reply as the caller read it (for a stream:
        once complete, or as far as it came with ``partial``). ``error`` is the error
        line of a failed exchange. ``media`` are the bytes of a media reply (kept only with
        ``log_media``). Every ``secrets`` value is masked wherever it appears, as is anything
        shaped like a key. ``at`` is the exchange's time (unix seconds, default now);
        ``cache_key``, when the caller has computed it already, saves computing it again.
        ``schema`` is a typed answer's `gatecell.wire.structured.Schema`, ``parsed_json``
        the value read from it as JSON text (`Schema.logged`: made by the caller, so that no
        model instance waits for the writer).
        """
        if not self.log_enabled or self.off is not None:
            return
        self._put(
            ExchangeEntry(
                time.time() if at is None else at,
                endpoint,
                model,
                _snapshot(request),
                response,
                text,
                reasoning,
                usage,
                latency,
                status,
                error,
                request_id,
                api,
                prompt,
                conversation,
                notebook,
                gateway,
                cached,
                partial,
                cache_key,
                media,
                media_type,
                self.log_media if log_media is None else log_media,
                secrets,
                schema,
                parsed_json,
            )
        )

    def record_job(
        self,
        kind: str,
        job_id: str,
        *,
        gateway: str | None = None,
        model: str | None = None,
        prompt: str | None = None,
        state: str | None = None,
        progress: float | None = None,
        error: str | None = None,
        notebook: str | None = None,
        body: Any = None,
        secrets: Sequence[Secret | str | None] = (),
        at: float | None = None,
    ) -> None:
        """Record a job, or what is new about it: insert or update by (gateway, kind, job_id).

        Fields left None keep their recorded value; an update older than the recorded one
        (``at``) changes nothing, so two kernels polling the same job cannot go back in time.
        Returns at once, like `record_exchange`.
        """
        if not self.log_enabled or self.off is not None:
            return
        entry = JobEntry(
            time.time() if at is None else at,
            gateway,
            kind,
            str(job_id),
            model,
            prompt,
            state,
            progress,
            error,
            notebook,
            body,
            secrets,
        )
        self._put(entry)

    def _put(self, entry: ExchangeEntry | JobEntry) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, args=(self._queue,), name="gatecell-store", daemon=True
                )
                self._thread.start()
            self._queued += 1
            answers = _answers(entry)
            if answers is not None:
                self._answers[answers] += 1
            self._queue.put(entry)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything logged so far is committed (or dropped by a fault); False if
        ``timeout`` seconds passed first."""
        with self._lock:
            if self._thread is None:
                return True
            done = threading.Event()
            self._urgent.set()
            self._queue.put(done)
        return done.wait(timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Flush, then end the writer thread and close its connection. Logging again
        starts a new writer."""
        with self._lock:
            thread, ending = self._thread, self._queue
            if thread is None:
                return
            # A writer started later gets a queue of its own: each thread owns its queue and
            # connection, so an old one finishing never shares either with a new one.
            self._thread, self._queue = None, queue.SimpleQueue()
            self._urgent.set()
            ending.put(_STOP)
        thread.join(timeout)

    def _gather(self, entries: queue.SimpleQueue[Any]) -> list[Any]:
        """The next batch: the first entry, and what comes within `_LINGER` of it. Requests
        come one by one, and a transaction (or a wake-up of this thread at each `put`) per
        entry would cost more than the row; a flush or a close ends the wait at once."""
        batch = [entries.get()]
        if isinstance(batch[0], (ExchangeEntry, JobEntry)):
            self._urgent.wait(_LINGER)
            self._urgent.clear()
        with contextlib.suppress(queue.Empty):
            while len(batch) < _BATCH:
                batch.append(entries.get_nowait())
        return batch

    def _run(self, entries_queue: queue.SimpleQueue[Any]) -> None:
        conn: sqlite3.Connection | None = None
        while True:
            batch = self._gather(entries_queue)
            entries = [item for item in batch if isinstance(item, (ExchangeEntry, JobEntry))]
            if entries:
                try:
                    conn = self._write(entries, conn)
                except Exception as exc:  # the writer must outlive anything: flush() waits on it
                    self._fail(exc)
                with self._lock:
                    self._written += len(entries)
                    for entry in entries:
                        answers = _answers(entry)
                        if answers is not None:
                            self._answers[answers] -= 1
                    self._answers = +self._answers  # drop the keys no longer pending
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if _STOP in batch:
                if conn is not None:
                    conn.close()
                return

    def _write(
        self, entries: list[ExchangeEntry | JobEntry], conn: sqlite3.Connection | None
    ) -> sqlite3.Connection | None:
        """Commit ``entries`` in one transaction on ``conn`` (opened if None); return it."""
        exchanges, jobs = [], []
        for entry in entries:
            try:
                if isinstance(entry, ExchangeEntry):
                    exchanges.append(exchange_row(entry))
                else:
                    jobs.append(job_row(entry))
            except Exception as exc:  # one odd entry must not cost the others
                _warn_once(
                    f"entry:{self.path}", f"an exchange could not be logged ({type(exc).__name__}: {exc})"
                )
        for attempt in range(_ATTEMPTS):
            if self.off is not None or not (exchanges or jobs):
                break
            try:
                if conn is None:
                    conn = connect(self.path)
                self._commit(conn, exchanges, jobs)
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or attempt == _ATTEMPTS - 1:
                    self._fail(exc)
                    break
                time.sleep(0.1 * (attempt + 1))
            except (sqlite3.Error, OSError) as exc:
                self._fail(exc)
                break
            else:
                self.batches += 1
                self.rows += len(exchanges) + len(jobs)
                break
        return conn

    @staticmethod
    def _commit(
        conn: sqlite3.Connection, exchanges: list[tuple[Any, ...]], jobs: list[tuple[Any, ...]]
    ) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if exchanges:
                _insert(conn, exchanges)
            if jobs:
                conn.executemany(_UPSERT, jobs)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite rolls back by itself after some errors (a full disk)
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    def _fail(self, exc: BaseException) -> None:
        """Turn the store off, and say so once."""
        if self.off is None:
            self.off = _reason(self.path, exc)
            _warn_once(str(self.path), f"logging is off: {self.off}")

    # -- reading ----------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection | None:
        """This thread's connection; None while the file does not exist."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if not self.path.exists():
                return None
            conn = connect(self.path)
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def _settle(self) -> None:
        """Let this process's own pending writes land first, so a read sees them."""
        if self._written < self._queued:
            self.flush(_LOOKUP_WAIT)

    def lookup(self, key: str, *, settle: bool = True) -> queries.CachedReply | None:
        """The cached answer for ``key`` (see `gatecell.store.keys.cache_key`): the newest
        exchange with that key that completed without error, was not partial and was not
        itself a cache hit. None when there is none, or when the store is off.

        It waits for this process's pending writes only when one of them could be that
        answer (its key is this one, or not known yet): a run of cache hits, each logged,
        never waits for the commits of the one before. ``settle=False`` never waits: the
        batch engine looks up rows while it logs others, and a wait per row would hold it to
        the writer's pace."""
        if self.off is not None:
            return None
        if settle:
            with self._lock:
                pending = self._answers[key] or self._answers[""]
            if pending:
                self.flush(_LOOKUP_WAIT)
        try:
            conn = self._reader()
            return queries.answer(conn, key) if conn is not None else None
        except (sqlite3.Error, OSError) as exc:
            self._fail(exc)
            return None

    def answer_keys(self, limit: int = 500_000) -> set[str] | None:
        """Every cache key `lookup` could answer now, when there are at most ``limit`` (else
        None, as when the store is off): a batch checks its rows against them in memory and
        asks `lookup` only for those that are there."""
        if self.off is not None:
            return None
        self._settle()
        try:
            conn = self._reader()
            return queries.answer_keys(conn, limit) if conn is not None else set()
        except (sqlite3.Error, OSError) as exc:
            self._fail(exc)
            return None

    def _query(self, run: Any, *args: Any) -> Any:
        self._settle()
        try:
            conn = self._reader()
            return run(conn, *args) if conn is not None else None
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot read the log: {_reason(self.path, exc)}") from None

    def logs(
        self,
        n: int | None = 20,
        q: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
    ) -> list[dict[str, Any]]:
        """The newest ``n`` exchanges (``n`` None or 0: all), newest first; ``q`` words all
        in the prompt or reply, ``model`` and ``conversation`` exact."""
        return self._query(queries.exchanges, n, q, model, conversation) or []

    def conversation(self, name: str) -> list[dict[str, Any]]:
        """The turns of a named conversation, oldest first (for ``%gatecell restore``)."""
        return self._query(queries.conversation, name) or []

    def usage(
        self, since: str | None = None, prices: dict[str, Price] | None = None
    ) -> list[queries.UsageRow]:
        """Requests and tokens per model per UTC day; costs from ``prices``, else from
        ``GATECELL_PRICES`` when set."""
        if prices is None:
            from .config import settings

            path = settings().prices
            prices = load_prices(path) if path else {}
        return self._query(queries.usage, since, prices) or []

    def jobs(self, limit: int | None = 20, kind: str | None = None) -> list[queries.StoredJob]:
        """The most recently updated jobs, newest first."""
        return self._query(queries.jobs, limit, kind) or []

    def job(
        self, job_id: str, kind: str | None = None, gateway: str | None = None
    ) -> queries.StoredJob | None:
        """The job with this id (of this ``gateway`` when given, else of any): a new kernel
        can pick it up by its id alone."""
        return self._query(queries.job, job_id, kind, gateway)

    # -- process life -------------------------------------------------------------------------

    def _forget_after_fork(self) -> None:
        """In a forked child: the writer thread did not come along, and the parent's
        connections and queued entries are the parent's business. Start afresh."""
        _ORPHANS.append(self._local)  # its connections are never closed here: they are the parent's
        self._setup()


_ORPHANS: list[Any] = []


def _insert(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """Insert exchanges `_ROWS_PER_INSERT` rows a statement: ``executemany`` hands the interpreter lock back
    and forth once a row, and each time the caller's thread may be kept waiting for it."""
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start : start + _ROWS_PER_INSERT]
        conn.execute(_INSERT + ", ".join([_ROW] * len(chunk)), [value for row in chunk for value in row])


def _answers(entry: ExchangeEntry | JobEntry) -> str | None:
    """The cache key a queued entry could answer once written ('' when not known yet), or
    None when it can answer none: a job, an error, a partial reply, a cache hit, media."""
    if not isinstance(entry, ExchangeEntry) or entry.cached or entry.partial or entry.error is not None:
        return None
    if (entry.status or 0) >= 400 or api_of(entry.endpoint) not in CACHEABLE:
        return None
    return entry.cache_key or ""


def _close_all() -> None:
    for store in list(_STORES):
        store.close()


def _after_fork() -> None:
    global _warned_lock
    _warned_lock = threading.Lock()  # another thread may have held it at the fork
    for store in list(_STORES):
        store._forget_after_fork()


atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
