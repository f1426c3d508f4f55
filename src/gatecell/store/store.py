"""`Store`: one SQLite file, written by a background thread, read from any thread.

Why a writer thread: redaction, JSON, hashing and SQLite cost tens of microseconds, and a
write may have to wait for another process's transaction; none of it belongs on the path of
a request. `Store.record_exchange` snapshots its arguments into an entry, puts it on a queue
and returns its **ticket**; the writer takes every entry waiting and commits them in **one
transaction** (group commit): while one transaction commits, new entries gather, and the
next takes them all. There is no timer: an entry waits only for the transaction before it.

Who waits for a commit decides: the client's calls wait for theirs (`Store.wait`, or
`Store.committed` on an event loop, which never blocks the loop), so what a notebook showed
is in the file, and a second process sees it, when the call returns; a batch's workers each
wait for their last row before starting the next. A process killed outright loses only
what was still queued or in the transaction under way: SQLite's journal keeps the file whole.
`flush` waits for everything queued, as `close` and interpreter exit do.

Why per-thread readers: a SQLite connection is for one thread at a time; with WAL, readers
never wait for the writer (or for other processes' writers).

Several processes share the file: each write transaction is ``BEGIN IMMEDIATE`` with a busy
timeout, and one still locked after that is retried rather than dropped.

Faults never break the caller. A folder that cannot be written, a full disk or a file that is
not a database turns the store off (`record_exchange`, `record_job` and `lookup` become no-ops) and says
so once per process and file, in one line on stderr; entries it drops count as done, so no
one waits for them. The queries (`logs`, `usage`, ...) raise `StoreError` instead, since
their caller asked for the data.

The log is private, and what it holds is trusted (a cache hit is shown as the gateway's answer,
a conversation is sent again): its folder is 0700 and its files 0600, and a folder or file of
another user, one others may write, or a symbolic link is never used (`gatecell.wire.util.private`):
the store is off, said in one line, as for any other fault.
"""

from __future__ import annotations

import _thread
import atexit
import collections
import contextlib
import heapq
import itertools
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

from gatecell.wire.apis.names import TEXT_APIS, api_of
from gatecell.wire.transport.errors import GatecellError
from gatecell.wire.util.private import Untrusted, create_private, private_file, private_folder
from gatecell.wire.util.secret import Secret

from . import queries
from .checkpoints import Checkpointer
from .keys import gateway_address
from .prices import Price, Pricing, load_prices, usage_cost
from .records import (
    EXCHANGE_COLUMNS,
    JOB_COLUMNS,
    ExchangeEntry,
    JobEntry,
    PricesEntry,
    ToolCallEntry,
    VectorsEntry,
    exchange_row,
    iso,
    job_row,
    tool_call_row,
    usage_counts,
)
from .tables import migrate
from .vectors import clear, keep, kept

__all__ = ["Store", "StoreError", "connect"]

BUSY_TIMEOUT = 10.0  # seconds a statement waits for another process's write lock
_ATTEMPTS = 6  # write attempts of a batch that keeps finding the file locked
_BATCH = 1000  # entries per transaction at most
_LOOKUP_WAIT = 2.0  # seconds a read waits for this process's own pending writes

_ROW = f"({', '.join('?' * len(EXCHANGE_COLUMNS))})"
_INSERT = f"INSERT INTO exchanges ({', '.join(EXCHANGE_COLUMNS)}) VALUES "
# A tool call's exchange: the one logged at the time it names, on its gateway (written first).
_TOOL_CALL = (
    "INSERT INTO tool_calls (time, exchange_id, chain, round, call_id, name, arguments_json, result, error, "
    "approved, seconds, conversation, notebook) VALUES (?, (SELECT max(id) FROM exchanges WHERE time = ? "
    "AND gateway IS ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
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
Entry = ExchangeEntry | JobEntry | PricesEntry | VectorsEntry | ToolCallEntry
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
    """The log, cache and job records in one SQLite file (see `gatecell.store.tables`).

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
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()  # wakes the writer (or stops it)
        self._entries: collections.deque[Entry] = collections.deque()  # what waits to be written
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # held by whichever thread writes (see `wait`)
        self._conn: sqlite3.Connection | None = None  # the writes' connection (under `_writing`)
        self._checkpoints: Checkpointer | None = None
        self._rolled_back = False  # the last write was undone (see `_here`)
        self._thread: threading.Thread | None = None
        self._local = threading.local()
        self._queued = 0  # entries put on the queue: the last ticket given
        self._written = 0  # entries the writer is done with (committed or dropped), in order
        self._waiters: list[tuple[int, int, Any]] = []  # a heap of (ticket, order, lock or future)
        self._order = itertools.count()
        self._answers: Counter[str] = Counter()  # queued entries that could answer a key ('': not known yet)
        self._pricing: Pricing | None = None  # see `pricing`
        self._prices_path: str | None = None
        self._asked: dict[str, str] = {}  # gateway address -> when its model info was asked

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
        cost: float | None = None,
        cost_source: str | None = None,
        wake: bool = True,
    ) -> int | None:
        """Log one exchange; returns at once, with the entry's ticket for `wait` and
        `committed` (None when nothing is logged: logging off, or the store off).

        ``request`` is the body sent (JSON bytes as sent, or a dict); ``response`` the raw
        reply body (parsed JSON, or its JSON bytes as received: decoded in the writer thread),
        kept to answer again from the cache: do not change it afterwards.
        ``text``/``reasoning``/``usage`` are the reply as the caller read it (for a stream:
        once complete, or as far as it came with ``partial``). ``error`` is the error
        line of a failed exchange. ``media`` are the bytes of a media reply (kept only with
        ``log_media``). Every ``secrets`` value is masked wherever it appears, as is anything
        shaped like a key. ``at`` is the exchange's time (unix seconds, default now);
        ``cache_key``, when the caller has computed it already, saves computing it again.
        ``schema`` is a typed answer's `gatecell.wire.typed.structured.Schema`, ``parsed_json``
        the value read from it as JSON text (`Schema.logged`: made by the caller, so that no
        model instance waits for the writer). ``cost`` is what it cost in US dollars, and
        ``cost_source`` who said (`prices.SOURCES`; see `pricing`). ``wake=False`` is for a
        caller that waits for the ticket (`wait` writes it on the caller's thread when no
        other is writing; `committed` wakes the writer): the writer is not woken for it.
        """
        if not self.log_enabled or self.off is not None:
            return None
        return self._put(
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
                cost,
                cost_source,
            ),
            wake,
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
    ) -> int | None:
        """Record a job, or what is new about it: insert or update by (gateway, kind, job_id).

        Fields left None keep their recorded value; an update older than the recorded one
        (``at``) changes nothing, so two kernels polling the same job cannot go back in time.
        Returns at once with a ticket, like `record_exchange`.
        """
        if not self.log_enabled or self.off is not None:
            return None
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
        return self._put(entry)

    def record_tool_call(self, entry: ToolCallEntry) -> int | None:
        """Record one call of a tool chain (see `ToolCallEntry`); returns at once with a
        ticket, like `record_exchange`."""
        if not self.log_enabled or self.off is not None:
            return None
        return self._put(entry)

    # -- what exchanges cost ---------------------------------------------------------------

    def pricing(self) -> Pricing:
        """The prices an exchange whose answer did not say what it cost is priced by: the
        gateways' model info kept in the log, and ``GATECELL_PRICES`` (read when it changes;
        a file that cannot be read prices nothing here, and says so once: ``usage`` raises)."""
        path = os.environ.get("GATECELL_PRICES") or None
        pricing = self._pricing
        if pricing is None or path != self._prices_path:
            model_info = dict(pricing.model_info) if pricing is not None else self._model_info()
            prices = {}
            if path:
                try:
                    prices = load_prices(Path(path).expanduser())
                except GatecellError as exc:
                    _warn_once(f"prices:{path}", f"costs are not priced by GATECELL_PRICES: {exc}")
            self._pricing, self._prices_path = pricing, path = Pricing(model_info, prices), path
        return pricing

    def _model_info(self) -> dict[tuple[str, str], Price]:
        if self.off is not None:
            return {}
        try:
            conn = self._reader()
            found = queries.model_prices(conn) if conn is not None else ({}, {})
        except (sqlite3.Error, OSError):
            return {}
        self._asked.update(found[1])
        return found[0]

    def cost_of(
        self, said: float | None, gateway: str, model: str | None, usage: Any
    ) -> tuple[float | None, str | None]:
        """What an exchange cost, and who said (see `pricing`): ``said`` is the gateway's own
        figure (else its usage's ``cost``), ``usage`` the reply's usage in any shape."""
        pricing = self.pricing()
        if said is None:
            said = usage_cost(usage)
            if said is None and not (pricing.model_info or pricing.prices):  # nothing to price by
                return None, None
        address = gateway_address(gateway)
        if said is None and not pricing.knows(address, model):
            return None, None
        prompt, completion, _, _ = usage_counts(usage)
        return pricing.cost(said, address, model, prompt, completion)

    def model_info_asked(self, gateway: str) -> str | None:
        """When this gateway's model info was last asked (UTC ISO 8601), or None."""
        self.pricing()
        return self._asked.get(gateway_address(gateway))

    def record_model_prices(
        self, gateway: str, prices: Mapping[str, Price], at: float | None = None
    ) -> int | None:
        """Keep what a gateway's model info says its models cost (replacing what it said
        before), for this process's pricing at once and in the log; a ticket, as
        `record_exchange`."""
        entry = PricesEntry(time.time() if at is None else at, gateway, dict(prices))
        pricing, address = self.pricing(), gateway_address(gateway)
        for model in [key for key in pricing.model_info if key[0] == address]:
            del pricing.model_info[model]
        pricing.model_info.update({(address, model): price for model, price in prices.items()})
        self._asked[address] = iso(entry.at)
        if not self.log_enabled or self.off is not None:
            return None
        return self._put(entry)

    def record_vectors(
        self, gateway: str, model: str, dimensions: int | None, hashes: list[bytes], vectors: Any
    ) -> int | None:
        """Keep the vectors of one answer: ``vectors`` (a float32 matrix, one row per hash) for
        the texts of ``hashes`` (sha256) from ``gateway`` (the log's name for it) and ``model``
        with ``dimensions`` (None: the model's own); a ticket, as `record_exchange`. Nothing
        here is secret: hashes and numbers."""
        if not self.log_enabled or self.off is not None or not hashes:
            return None
        packed = vectors.astype("<f4", copy=False).tobytes()
        entry = VectorsEntry(time.time(), gateway, model, dimensions or 0, hashes, packed, vectors.shape[1])
        return self._put(entry)

    def vectors(
        self, gateway: str, model: str, dimensions: int | None, hashes: Sequence[bytes]
    ) -> dict[bytes, bytes]:
        """The kept vectors of these text hashes (those the store has), by hash; empty when
        the store is off or has none."""
        if self.off is not None or not hashes:
            return {}
        self._settle()
        try:
            conn = self._reader()
            return kept(conn, gateway, model, dimensions or 0, hashes) if conn is not None else {}
        except (sqlite3.Error, OSError) as exc:
            self._fail(exc)
            return {}

    def clear_vectors(self) -> int:
        """Forget every kept vector (``gatecell cache clear --embeddings``); how many."""
        self.flush()
        return self._query(clear) or 0

    def _put(self, entry: Entry, wake: bool = True) -> int:
        """Queue ``entry``; its ticket. ``wake=False`` leaves the writer asleep: whoever waits
        for the ticket writes it (`wait`), or wakes the writer (`committed`)."""
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
            self._entries.append(entry)
            if wake:
                self._queue.put(None)
            return self._queued

    # -- waiting for commits ------------------------------------------------------------------

    def wait(self, ticket: int | None, timeout: float | None = None) -> bool:
        """Block until the entry of ``ticket`` (and every one before it) is committed, or
        dropped by a fault; False if ``timeout`` seconds passed first.

        When no thread is writing, the caller writes what waits itself, on its own thread: two
        thread switches (waking the writer, being woken by it) cost a call more than its
        commit does. A ``KeyboardInterrupt`` is raised only once SQLite's call returns
        (tests/store/test_interrupts.py), so an interrupted write is undone or done whole,
        never half: what was not committed goes back to wait for the writer (`_here`)."""
        if ticket is None or self._written >= ticket:
            return True
        if self._writing.acquire(blocking=False):
            try:
                self._here(ticket)
            finally:
                self._writing.release()
        with self._lock:
            if self._written >= ticket:
                return True
            self._queue.put(None)  # what is left is the writer's (some may not have woken it)
            lock = _thread.allocate_lock()
            lock.acquire()
            heapq.heappush(self._waiters, (ticket, next(self._order), lock))
        return lock.acquire(timeout=-1 if timeout is None else timeout)

    def committed(self, ticket: int | None, timeout: float | None = None) -> Any:
        """An ``asyncio.Future`` of the running loop, done once the entry of ``ticket`` is
        committed (or dropped), or after ``timeout`` seconds: awaiting it never blocks the
        loop. The writer wakes each loop once per transaction, however many wait on it."""
        import asyncio

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if ticket is None or self._written >= ticket:
                future.set_result(None)
                return future
            self._queue.put(None)  # entries put without waking the writer: it takes them now
            heapq.heappush(self._waiters, (ticket, next(self._order), future))
        if timeout is not None:
            timer = loop.call_later(timeout, _resolve, (future,))
            future.add_done_callback(lambda _: timer.cancel())
        return future

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything logged so far is committed (or dropped by a fault); False if
        ``timeout`` seconds passed first."""
        return self.wait(self._queued, timeout)

    def _done(self, entries: list[Entry]) -> None:
        """``entries`` are done with (committed or dropped): wake whoever waits for them."""
        with self._lock:
            self._written += len(entries)
            pending = self._answers
            for entry in entries:
                answers = _answers(entry)
                if answers is not None:
                    if pending[answers] > 1:
                        pending[answers] -= 1
                    else:
                        del pending[answers]  # no longer pending
            ready = _ready(self._waiters, self._written)
        _wake(ready)

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
            ending.put(_STOP)
        thread.join(timeout)

    def _run(self, wakes: queue.SimpleQueue[Any]) -> None:
        """The writer: every entry waiting goes in the next transaction (group commit)."""
        while True:
            stop = wakes.get() is _STOP  # nothing follows the stop: close() gave this queue up
            with self._writing:
                while batch := self._take():
                    self._write(batch)
                    self._done(batch)
                if stop:
                    self._end()
                    return

    def _take(self) -> list[Entry]:
        """The entries waiting, in order, `_BATCH` at most (under `_writing`)."""
        entries = self._entries
        with self._lock:
            return [entries.popleft() for _ in range(min(len(entries), _BATCH))]

    def _here(self, ticket: int) -> None:
        """`wait`'s writes on the caller's thread (under `_writing`), up to ``ticket``. A
        locked file is left to the writer, who waits for it; so is whatever an interrupt
        (Ctrl-C) kept from being committed: SQLite's calls are never cut short (a signal is
        raised between them), and a transaction the interrupt left open is rolled back."""
        while self._written < ticket and (batch := self._take()):
            conn = self._conn
            before = conn.total_changes if conn is not None else 0
            self._rolled_back = False
            try:
                written = self._write(batch, patient=False)
            except BaseException:
                conn = self._conn
                landed = conn is not None and not self._rolled_back and not conn.in_transaction
                if landed and conn is not None and conn.total_changes > before:
                    self._done(batch)
                else:
                    if conn is not None and conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    self._entries.extendleft(reversed(batch))
                    self._queue.put(None)
                raise
            if not written:  # the file is locked: the writer waits for it, the caller for the writer
                self._entries.extendleft(reversed(batch))
                return
            self._done(batch)

    def _end(self) -> None:
        """Close the writes' connection and stop the checkpoints (under `_writing`)."""
        if self._checkpoints is not None:
            self._checkpoints.stop()
            self._checkpoints = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _write(self, entries: list[Entry], patient: bool = True) -> bool:
        """Commit ``entries`` in one transaction (under `_writing`); False only when the file
        stayed locked and ``patient`` is False (nothing written: the entries are still to
        write). A fault turns the store off, and the entries count as done."""
        exchanges, jobs, prices, vectors, calls = [], [], [], [], []
        for entry in entries:
            try:
                if isinstance(entry, ExchangeEntry):
                    exchanges.append(exchange_row(entry))
                elif isinstance(entry, JobEntry):
                    jobs.append(job_row(entry))
                elif isinstance(entry, VectorsEntry):
                    vectors.append(entry)
                elif isinstance(entry, ToolCallEntry):
                    calls.append(tool_call_row(entry))
                else:
                    prices.append(entry)
            except Exception as exc:  # one odd entry must not cost the others
                _warn_once(
                    f"entry:{self.path}", f"an exchange could not be logged ({type(exc).__name__}: {exc})"
                )
        for attempt in range(_ATTEMPTS):
            if self.off is not None or not (exchanges or jobs or prices or vectors or calls):
                break
            try:
                if self._conn is None:
                    self._conn = connect(self.path)
                    self._conn.execute("PRAGMA wal_autocheckpoint = 0")  # see Checkpointer
                self._commit(self._conn, exchanges, jobs, prices, vectors, calls)
            except sqlite3.OperationalError as exc:
                if _busy(exc) and not patient:
                    return False
                if not _busy(exc) or attempt == _ATTEMPTS - 1:
                    self._fail(exc)
                    break
                time.sleep(0.1 * (attempt + 1))
            except (sqlite3.Error, OSError) as exc:
                self._fail(exc)
                break
            except Exception as exc:  # the writes must outlive anything: callers wait on them
                self._fail(exc)
                break
            else:
                self.batches += 1
                self.rows += len(exchanges) + len(jobs) + len(calls)
                if self._checkpoints is None:
                    self._checkpoints = Checkpointer(self.path, connect)
                self._checkpoints.count(len(entries))
                break
        return True

    def _commit(
        self,
        conn: sqlite3.Connection,
        exchanges: list[tuple[Any, ...]],
        jobs: list[tuple[Any, ...]],
        prices: list[PricesEntry],
        vectors: list[VectorsEntry],
        calls: list[tuple[Any, ...]],
    ) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if exchanges:
                _insert(conn, exchanges)
            for block in vectors:
                keep(conn, block)
            if jobs:
                conn.executemany(_UPSERT, jobs)
            if calls:  # after the exchanges: a call's exchange may be in this very batch
                conn.executemany(_TOOL_CALL, calls)
            for entry in prices:  # what the gateway says now replaces what it said before
                conn.execute("DELETE FROM model_prices WHERE gateway = ?", (gateway_address(entry.gateway),))
                conn.executemany("INSERT INTO model_prices VALUES (?, ?, ?, ?, ?)", entry.rows())
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite rolls back by itself after some errors (a full disk)
                self._rolled_back = True
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
        never waits for the commits of the others. ``settle=False`` never waits: the batch
        engine looks up rows while it logs others, and a wait per row would hold it to the
        writer's pace."""
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

    def chain(self, chain_id: str) -> dict[str, Any] | None:
        """A tool chain's calls and the exchange of its last round (``gw.resume``)."""
        return self._query(queries.chain, chain_id)

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
        _ORPHANS.extend((self._local, self._conn))  # never closed here: they are the parent's
        self._setup()


_ORPHANS: list[Any] = []


def _insert(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """Insert exchanges `_ROWS_PER_INSERT` rows a statement: ``executemany`` hands the interpreter lock back
    and forth once a row, and each time the caller's thread may be kept waiting for it."""
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start : start + _ROWS_PER_INSERT]
        conn.execute(_INSERT + ", ".join([_ROW] * len(chunk)), [value for row in chunk for value in row])


def _answers(entry: Entry) -> str | None:
    """The cache key a queued entry could answer once written ('' when not known yet), or
    None when it can answer none: a job, an error, a partial reply, a cache hit, media."""
    if not isinstance(entry, ExchangeEntry) or entry.cached or entry.partial or entry.error is not None:
        return None
    if (entry.status or 0) >= 400 or api_of(entry.endpoint) not in TEXT_APIS:
        return None
    return entry.cache_key or ""


def _ready(waiters: list[tuple[int, int, Any]], upto: int) -> list[Any]:
    """Take from the heap ``waiters`` those whose ticket is at most ``upto``."""
    ready = []
    while waiters and waiters[0][0] <= upto:
        ready.append(heapq.heappop(waiters)[2])
    return ready


def _wake(ready: list[Any]) -> None:
    """Release the locks of sync waiters; wake each event loop once for its futures."""
    loops: dict[Any, list[Any]] = {}
    for waker in ready:
        if type(waker) is _LOCK:
            waker.release()
        else:
            loops.setdefault(waker.get_loop(), []).append(waker)
    for loop, futures in loops.items():
        with contextlib.suppress(RuntimeError):  # a loop closed meanwhile: no one waits there
            loop.call_soon_threadsafe(_resolve, futures)


def _resolve(futures: Sequence[Any]) -> None:
    """In the waiters' loop: their commits are done (a future given up meanwhile is skipped)."""
    for future in futures:
        if not future.done():
            future.set_result(None)


_LOCK = _thread.LockType


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
