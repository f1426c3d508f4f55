"""The batch engine: one prompt per row, many rows in flight, every finished row in the log.

Each row is one call of the client's own endpoint methods (`conversation.for_api` picks
the method, the method validates and builds the body, routes a reasoning model to
/v1/responses and parses the reply), run as a sans-IO program by `drivers.arun`, exactly
as `AsyncGateway` runs it: the engine gets the programs from `Endpoints.programs`, with the
client's own hooks in their batch mode (`Hooks.for_batch`: the client's journal), so a row is
answered from the log, logged, priced and waited for as an interactive call is: a re-run
after an interrupt, a kernel restart or a SIGKILL sends only the rows that had not finished,
and an empty reply fails its row (`EMPTY_REPLY`, never an answer). What differs is the
driver: the lean HTTP/1.1 one (`wire.http11_driver`), whose CPU per request is a small part
of httpx's, wrapped here in the pacing:

- ``rpm``/``tpm`` schedules, and a 429 pauses the whole batch for its Retry-After (within
  `pacing.pause_for`'s bounds and the batch's patience) and halves the concurrency (which
  then creeps back up) before the same request goes again, up to `RATE_LIMIT_RETRIES`
  times; past them, or past the patience, the row fails with the 429's error. 429s are the
  engine's alone: retries of other failures follow the client's `RetryPolicy` per row.

So the engine keeps rows, pacing and progress, nothing else.

**Typed answers** (``schema=`` or ``choices=``): each row is the client's typed program
(`wire.typed_calls`), so its repair rounds go out on the row's own sender, one after the
other, each logged (with the schema and the value) and answered from the log on a re-run;
a row's usage and cost are those of all its rounds (`ResponseMeta.earlier`). When the native
field may be sent, the first row runs alone: it asks the gateway's metadata, and a refusal
of the field turns the batch to the instruction before the other rows start.

What would cost a row more than its work is left out: a finished row keeps its reply as
bytes and its usage as a tuple (a batch of 100,000 rows must not give the garbage collector
millions of objects to walk). With ``on_row``, each finished row goes to it as it finishes
(its position in the input and its `Row`), and the batch keeps only the row's outcome
(error, usage, provenance), not its reply: ``gatecell map`` writes rows as they finish.

Rows are pulled from the input as workers free up: ``concurrency`` workers, whatever the
number of rows. A row sent is committed to the log before its worker starts the next (the
journal's commit, which the engine waits for once the row is counted: `Hooks.unwaited`); the log's writer
commits whatever waits in one transaction, so rows gather while one commits. So a process
killed outright re-sends at most ``concurrency`` rows the gateway had answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gatecell.wire.apis.conversation import for_api
from gatecell.wire.calls import EMPTY_REPLY
from gatecell.wire.endpoints import Endpoints
from gatecell.wire.transport._http11_driver import Http11Driver
from gatecell.wire.transport.drivers import arun
from gatecell.wire.transport.errors import APIError, GatecellError, api_error
from gatecell.wire.transport.exchange import Program
from gatecell.wire.transport.http import Request, Response
from gatecell.wire.transport.proxies import Proxies
from gatecell.wire.transport.results import ResponseMeta

from .options import MapSettings
from .pacing import Pacing, pause_for
from .result import Batch, BatchError, Row, Tokens
from .rows import RowError, Rows, Template

__all__ = ["Engine", "RATE_LIMIT_RETRIES", "EMPTY_REPLY"]

RATE_LIMIT_RETRIES = 20  # 429s one row may wait out with the whole batch; the next fails it
_FIRST_COMPLETION_GUESS = 100  # tokens per reply assumed for tpm until replies say better


class Engine:
    """One map over rows; `run` it on an event loop, `stop` it from any thread.

    **Parameters:** ``client``: the endpoints whose programs the rows run (and whose hooks
    log them); ``template`` and ``data``: the prompt and its rows; ``options``: the map's
    `MapSettings`; ``proxies``: the proxy settings (None: direct); ``on_row``: see the module.
    """

    def __init__(
        self,
        client: Endpoints,
        template: str,
        data: Any,
        options: MapSettings,
        proxies: Proxies | None = None,
        on_row: Callable[[int, Row], object] | None = None,
    ) -> None:
        self.concurrency = options.concurrency
        self.on_row = on_row
        self.template = Template(template, images=options.images)
        self.rows = Rows(data)
        self.rows.check(self.template)  # a field the rows lack: refused before any request
        self.model = options.model
        self.api = options.api
        self.on_error = options.on_error
        self.schema = options.schema
        self.hooks = client.hooks.for_batch(options.cache)
        self.programs = client.programs(max_retries=options.max_retries, hooks=self.hooks)
        self._system = [{"role": "system", "content": options.system}] if options.system else []
        self._max_tokens = options.max_tokens
        self._sampling: dict[str, Any] = {
            "temperature": options.temperature,
            "top_p": options.top_p,
            "max_tokens": options.max_tokens,
        }
        self._typed: dict[str, Any] = {}
        self.program_for("check")  # the sampling options, validated once by the endpoint itself
        if options.schema is not None:
            self._typed = {"schema": options.schema, "repairs": options.repairs}
        self.pacing = Pacing(self.concurrency, options.rpm, options.tpm, options.patience)
        self._retry_after_cap = self.programs.options.retry.retry_after_cap
        sending = self.programs.options
        self.driver = Http11Driver(
            proxies,
            connect_timeout=sending.connect_timeout,
            request_timeout=sending.request_timeout,
            idle=self.concurrency,
        )
        self._completion_guess = float(options.max_tokens or _FIRST_COMPLETION_GUESS)
        # Progress, read by whoever shows it.
        self.done = self.failed = self.cached = self.tokens = self.requests = 0
        self.started = 0.0
        self._labels: list[Any] = []
        self._results: list[Row | None] = []
        self._stopping = False
        self._failure: Row | None = None
        self._tasks: list[asyncio.Future[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the rows ---------------------------------------------------------------------

    @property
    def total(self) -> int | None:
        return self.rows.total

    def program_for(self, prompt: str | list[Any]) -> Program[Any]:
        """The request program of one row's prompt: its text, or text and pictures in order."""
        messages: list[dict[str, Any]] = [*self._system, {"role": "user", "content": prompt}]
        method, arguments = for_api(self.api, self.model, messages, **self._sampling)
        return getattr(self.programs, method)(stream=False, **self._typed, **arguments)

    def _pull(self) -> Iterator[tuple[int, Any, Mapping[str, Any]]]:
        for position, (label, fields) in enumerate(self.rows):
            self._labels.append(label)
            self._results.append(None)
            yield position, label, fields

    async def _worker(self, rows: Iterator[tuple[int, Any, Mapping[str, Any]]]) -> None:
        for position, label, fields in rows:
            await self._row(position, label, fields)
            if self._failure is not None and self.on_error == "raise":
                self.stop()
                return

    async def _row(self, position: int, label: Any, fields: Mapping[str, Any]) -> None:
        started = time.perf_counter()
        row = Row(label, model=self.model)
        sender = _PacedSender(self)
        try:
            prompt = self.template.fill(fields, pictures=True)
            result = await arun(self.program_for(prompt), sender)
        except RowError as exc:
            row.error = str(exc)
        except GatecellError as exc:
            row.error = " ".join(str(exc).split())
        else:
            _answered(row, result)
            if self.schema is not None:
                row.schema, row.error = self.schema, result.parse_error
            elif not (row.text or "").strip():  # logged as an error: never an answer
                row.text, row.error = None, EMPTY_REPLY
        row.latency = time.perf_counter() - started
        row.attempts = row.attempts or sender.sent
        self._results[position] = row
        self._count(row, sender)
        if self.on_row is not None:  # the reply is its to keep; the batch keeps the outcome
            self.on_row(position, row)
            self._results[position] = dataclasses.replace(row, text=None, body=None)
        committing = self.hooks.unwaited()  # a row sent is in the log before the next starts
        if committing is not None:
            await committing

    def _count(self, row: Row, sender: _PacedSender) -> None:
        if row.error is not None:
            self.failed += 1
            if self._failure is None:
                self._failure = row
            return
        self.done += 1
        self.cached += row.cached
        usage = row.usage
        if usage is not None:
            self.tokens += usage.total_tokens or 0
            if not row.cached and sender.booked:  # the tpm schedule learns what rows cost
                self.pacing.correct_tokens((usage.total_tokens or 0) - sender.booked)
                self._completion_guess += 0.1 * ((usage.completion_tokens or 0) - self._completion_guess)

    # -- running ----------------------------------------------------------------------

    async def run(self) -> Batch:
        """Run every row; the `Batch` (partial if `stop` came first)."""
        self.started = time.perf_counter()
        self._loop = asyncio.get_running_loop()
        rows = self._pull()
        first = self._learns_first()
        self._tasks = [asyncio.ensure_future(self._worker(itertools.islice(rows, 1) if first else rows))]
        if self._stopping:  # stopped before it began
            self.stop()
        interrupted = False
        try:
            if first:  # the first row alone, then the others (see the module)
                await self._tasks[0]
            others = self.concurrency if first else self.concurrency - 1
            self._tasks += [asyncio.ensure_future(self._worker(rows)) for _ in range(others)]
            if self._stopping:
                self.stop()
            await asyncio.gather(*self._tasks)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            interrupted = self._failure is None or self.on_error != "raise"
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.driver.aclose()
        batch = self._batch(interrupted)
        settled = self.hooks.settled()  # the rows logged last, those from the log and a stop's too
        if settled is not None:
            await settled
        if self._failure is not None and self.on_error == "raise":
            raise BatchError(f"row {self._failure.label!r}: {self._failure.error}", batch)
        return batch

    def _learns_first(self) -> bool:
        """Whether the first row runs alone: a typed batch that may ask natively learns from
        it (the gateway's metadata, a refusal of the field) how to ask the others."""
        support = self.programs.support
        return self.schema is not None and (support.wants_metadata or support.native(self.model))

    def stop(self) -> None:
        """Stop at once: rows in flight are dropped (not logged), the rest never start."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()

    def stop_threadsafe(self) -> None:
        """`stop`, from another thread (the one that took the Ctrl-C)."""
        self._stopping = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.stop)

    def _batch(self, interrupted: bool) -> Batch:
        labels, results = self._labels, self._results
        total = self.rows.total
        if total is not None and len(results) < total:  # interrupted before the last rows were pulled
            results = results + [None] * (total - len(results))
            labels = list(self.rows.index) if self.rows.index is not None else list(range(total))
        return Batch(
            labels,
            results,
            index=self.rows.index,
            pandas=self.rows.pandas,
            interrupted=interrupted,
            seconds=time.perf_counter() - self.started,
            requests=self.requests,
            rate_limited=self.pacing.rate_limited,
            schema=self.schema,
        )


def _answered(row: Row, result: Any) -> None:
    """``row`` from its answer: the last round's text and provenance, the usage and cost of
    every round (a typed answer's repairs too); from the log when every round was."""
    meta: ResponseMeta = result.meta
    rounds = (*meta.earlier, meta)
    row.text, row.body = result.text, meta.body
    row.request_id, row.endpoint, row.attempts = meta.request_id, meta.endpoint, meta.attempts
    row.cached = all(m.cached for m in rounds)
    usage = None
    for m in rounds:
        tokens = Tokens.of(m.usage)
        if tokens is not None:
            usage = tokens if usage is None else Tokens(*(a + b for a, b in zip(usage, tokens, strict=True)))
    row.usage = usage
    paid = [m for m in rounds if not m.cached]  # what came from the log cost nothing
    if paid and all(m.cost is not None for m in paid):
        row.cost = sum(m.cost for m in paid if m.cost is not None)
        row.cost_source = "+".join(dict.fromkeys(m.cost_source for m in paid if m.cost_source))


class _PacedSender:
    """Sends the requests of one row's program (a `drivers.AsyncSend`) over the engine's
    driver, within the pacing."""

    __slots__ = ("engine", "sent", "booked", "rate_limited")

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sent = 0
        self.booked = 0.0  # tokens booked on the tpm schedule
        self.rate_limited = 0

    async def __call__(self, request: Request) -> Response:
        engine = self.engine
        pacing = engine.pacing
        tokens = 0.0
        if pacing.tokens is not None:
            tokens = len(request.body) / 4 + (engine._max_tokens or engine._completion_guess)
        while True:
            sent_at = await pacing.acquire(tokens)
            self.booked += tokens
            self.sent += 1
            engine.requests += 1
            try:
                response = await engine.driver(request)
            finally:
                pacing.release()
            status = response.status
            if status == 429:
                self.rate_limited += 1
                pause = pause_for(response.headers, self.rate_limited, engine._retry_after_cap)
                paused = pacing.rate_limited_for(pause, sent_at)
                if paused and self.rate_limited <= RATE_LIMIT_RETRIES:
                    continue
                raise self._gave_up(response, paused)
            if status < 300:
                pacing.succeeded()
            return response

    def _gave_up(self, response: Response, paused: bool) -> APIError:
        """The 429's own error, and why this row waits no more: one line."""
        engine = self.engine
        request = response.request
        error = api_error(response, engine.programs.api_key, request.method, _path(request.url))
        pacing = engine.pacing
        if paused:
            why = f"Still refused after {RATE_LIMIT_RETRIES} pauses for this row"
        else:
            waited = round(pacing.waited, 1)
            why = (
                f"The batch's 429 pauses reached its patience ({waited:g} of {pacing.patience:g} s in all: "
                "patience= or GATECELL_MAP_PATIENCE), so no row waits for one any longer"
            )
        error.args = (f"{error.args[0].rstrip('.')}. {why}",)
        return error


def _path(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path
