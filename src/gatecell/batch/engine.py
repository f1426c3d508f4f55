"""The batch engine: one prompt per row, many rows in flight, every finished row in the log.

Each row is one call of the client's own endpoint methods (`conversation.for_api` picks
the method, the method validates and builds the body, routes a reasoning model to
/v1/responses and parses the reply), run as a sans-IO program by `drivers.arun`, exactly
as `AsyncGateway` runs it: the engine gets the programs from `Endpoints.programs`. Only the
sender differs: `_RowSender` carries each `http.Request` over the lean HTTP/1.1 pool of
`wire.http11` instead of httpx, whose pool costs more CPU per request than everything else a
row does. On that one path it also:

- answers from the log: a request the log holds an answer for (same cache key as any
  other entry point: `store.cache_key`) is not sent, so a re-run after an interrupt, a
  kernel restart or a SIGKILL sends only the rows that had not finished. An empty reply is
  no answer: its row fails (`EMPTY_REPLY`, logged as an error, which the log never answers
  with), and an empty one the log holds from elsewhere (a chat call) is not taken;
- paces (`pacing`): ``rpm``/``tpm`` schedules, and a 429 pauses the whole batch for its
  Retry-After (within `pacing.pause_for`'s bounds and the batch's patience) and halves the
  concurrency (which then creeps back up) before the same request goes again, up to
  `RATE_LIMIT_RETRIES` times; past them, or past the patience, the row fails with the 429's
  error. 429s are the engine's alone: retries of other failures follow the client's
  `RetryPolicy` per row.

**Typed answers** (``schema=`` or ``choices=``): each row is the client's typed program
(`wire.typed_calls`), so its repair rounds go out on the row's own sender, one after the
other, and every answer (fresh, or from the log: a typed row's logged answer is handed back
to the program as the gateway's would be) is read the same way. When the native field may
be sent, the first row runs alone: it asks the gateway's metadata, and a refusal of the
field turns the batch to the instruction before the other rows start. Every round is
logged, with the schema and the value, so a re-run answers each round from the log.

What would cost a row more than its work is left out: a request's line and headers are
written once per kind of request (`Engine.head`), one watch enforces the request timeout of
every request in flight, the cache key is made only when the log has answers to
look up, and a finished row keeps its reply as bytes and its usage as a tuple (a batch of
100,000 rows must not give the garbage collector millions of objects to walk).

With ``on_row``, each finished row goes to it as it finishes (its position in the input and
its `Row`), and the batch keeps only the row's outcome (error, usage, provenance), not its
reply: ``gatecell map`` writes rows as they finish and holds no reply to the end.

Rows are pulled from the input as workers free up: ``concurrency`` workers, whatever the
number of rows. A finished row goes to the store's writer thread at once, and its worker
starts the next row only once the row is committed (`Store.committed`: the writer wakes the
loop once per transaction). The writer commits whatever waits in one transaction (group
commit), so rows gather while one commits and the next takes them all: as fast as the disk
allows, with no timer. So a process killed outright re-sends at most ``concurrency`` rows
the gateway had answered: each worker holds one row, in flight or waiting for its commit
(the rows of the transaction under way among them). Each row is priced as it is logged
(`gatecell.store.prices.Pricing`: what the gateway said, else its model info's or the user's
prices).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from gatecell.wire.conversation import for_api
from gatecell.wire.drivers import arun
from gatecell.wire.endpoints import Endpoints
from gatecell.wire.errors import APIError, GatecellError, api_error
from gatecell.wire.exchange import Program
from gatecell.wire.http import BodyTooLarge, Headers, Request, Response, TransportError
from gatecell.wire.http11 import BROKEN, Pool, ProxyError, with_body
from gatecell.wire.proxies import Proxies
from gatecell.wire.results import reply_text, response_cost
from gatecell.wire.schemas import usage_of
from gatecell.wire.structured import parse

from .options import Options
from .pacing import Pacing, pause_for
from .result import Batch, BatchError, Row, Tokens
from .rows import RowError, Rows, Template

__all__ = ["Engine", "RATE_LIMIT_RETRIES", "EMPTY_REPLY"]

RATE_LIMIT_RETRIES = 20  # 429s one row may wait out with the whole batch; the next fails it
_LAST_COMMIT_WAIT = 10.0  # seconds the end of a batch waits for its last rows' commit
_FIRST_COMPLETION_GUESS = 100  # tokens per reply assumed for tpm until replies say better
_DROPPED_HEADERS = frozenset(("host", "content-length", "transfer-encoding"))
_JSON = {"content-type": "application/json"}
EMPTY_REPLY = "empty reply: no text came back (not kept as an answer: a new run sends this row again)"


class _Cached(Exception):
    """The log has the answer: the row's program stops before sending."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer


class Engine:
    """One map over rows; `run` it on an event loop, `stop` it from any thread."""

    def __init__(
        self,
        client: Endpoints[Any, Any, Any, Any, Any, Any, Any, Any],
        gateway: str,
        template: str,
        data: Any,
        options: Options,
        store: Any = None,
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
        self.cache = options.cache
        self.schema = options.schema
        self.programs = client.programs(max_retries=options.max_retries)
        # The log's name for the gateway, as the client's journal gives it (the local gateway is
        # ``local`` whatever its port), so rows and interactive calls share one cache.
        self.gateway = gateway
        self.proxies = proxies  # None: every request goes direct
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
        self.store = store
        self._timeout: float = self.programs.options.request_timeout
        self._connect_timeout: float = self.programs.options.connect_timeout
        self._pools: dict[str, Pool] = {}
        self._heads: dict[tuple[str, str, int], bytes] = {}
        self._deadlines: dict[asyncio.Task[Any], float] = {}  # requests in flight, by their worker
        self._expired: set[asyncio.Task[Any]] = set()
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
        self._ticket: int | None = None  # of the last exchange handed to the writer
        from gatecell.store.keys import gateway_address

        self._pricing = store.pricing() if store is not None else None  # what rows cost, when known
        self._address = gateway_address(gateway)
        # The keys the log can answer, read once (None: too many, ask per row): most rows of a
        # batch are not in the log, and a set says so without a query.
        self._answerable = store.answer_keys() if store is not None and self.cache else None

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
        sender = _RowSender(self)
        usage: Any = None  # as the reply gave it, for the log
        value: Any = None  # a typed answer's, for the log (the row reads it again when asked)
        failure: str | None = None  # the exchange's own error, for the log
        try:
            prompt = self.template.fill(fields, pictures=True)
            result = await arun(self.program_for(prompt), sender)
        except RowError as exc:
            row.error = str(exc)
        except _Cached as hit:
            answer = hit.answer
            usage = answer.usage
            row.text, row.cached, row.body = answer.text, True, answer.response
            row.usage, row.request_id, row.endpoint = (
                Tokens.of(usage_of(usage)),
                answer.request_id,
                answer.endpoint,
            )
            if self.schema is not None:  # a streamed answer in the log: its text is all there is
                row.schema = self.schema
                value, row.error = parse(answer.text, self.schema)
        except GatecellError as exc:
            row.error = failure = " ".join(str(exc).split())
        else:
            meta = result.meta
            usage = meta.usage
            row.text, row.body = result.text, sender.raw
            row.usage, row.request_id, row.endpoint = Tokens.of(usage), meta.request_id, meta.endpoint
            row.attempts = meta.attempts
            if self.schema is not None:
                row.schema, value, row.error = self.schema, result.parsed, result.parse_error
                row.cached = sender.sent == 0  # every round answered from the log
                if sender.earlier:
                    row.usage = _added(row.usage, sender.earlier)
            if value is None and not (row.text or "").strip():  # logged as an error: never an answer
                row.text, row.error = None, EMPTY_REPLY
                failure = EMPTY_REPLY
        row.latency = time.perf_counter() - started
        row.attempts = row.attempts or sender.sent
        self._results[position] = row
        self._count(row, sender)
        ticket = self._log(row, sender, usage, failure, value)
        if self.on_row is not None:  # the reply is its to keep; the batch keeps the outcome
            self.on_row(position, row)
            self._results[position] = dataclasses.replace(row, text=None, body=None)
        if ticket is not None and sender.sent:  # a row sent is in the log before the next
            await self.store.committed(ticket)

    def _count(self, row: Row, sender: _RowSender) -> None:
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

    def _log(self, row: Row, sender: _RowSender, usage: Any, failure: str | None, value: Any) -> int | None:
        """Price the row, and hand its exchanges to the log at once; the last one's ticket
        (None: not logged). ``failure`` is the exchange's own error (an answer that did not
        validate is no failed exchange: it answers a re-run)."""
        store = self.store
        earlier_rounds = sender.earlier or []  # a typed row's rounds before a repair
        rounds = [(None, None) if e.hit else self._price(e.cost, _usage(e.reply)) for e in earlier_rounds]
        last = (None, None) if row.cached or sender.hit else self._price(sender.cost, usage)
        paid = [r for r, e in zip(rounds, earlier_rounds, strict=True) if not e.hit]
        paid += [] if row.cached or sender.hit else [last]  # what came from the log cost nothing
        if paid and all(cost is not None for cost, _ in paid):
            row.cost = sum(cost for cost, _ in paid if cost is not None)
            row.cost_source = "+".join(dict.fromkeys(source for _, source in paid if source))
        if store is None or sender.body is None:
            return None
        typed: dict[str, Any] = {}
        if self.schema is not None:  # the value as JSON now: no model instance waits for the writer
            typed = {"schema": self.schema, "parsed_json": self.schema.logged(value)}
        for earlier, (cost, source) in zip(earlier_rounds, rounds, strict=True):
            reply = earlier.reply  # the rounds before a repair: answers that did not validate
            store.record_exchange(
                earlier.path,
                self.model,
                earlier.body,
                response=earlier.raw.decode("utf-8", "replace"),
                text=reply_text(reply),
                usage=_usage(reply),
                status=earlier.status,
                request_id=earlier.request_id,
                gateway=self.gateway,
                cached=earlier.hit,
                cache_key=earlier.key,
                secrets=(self.programs.api_key,),
                schema=self.schema,
                cost=cost,
                cost_source=source,
            )
        ticket = store.record_exchange(
            sender.path or row.endpoint or "",
            self.model,
            sender.body,
            response=sender.raw.decode("utf-8", "replace") if sender.raw is not None else row.body,
            text=row.text,
            usage=usage,
            latency=row.latency,
            status=sender.status,
            error=failure,
            request_id=row.request_id,
            gateway=self.gateway,
            cached=sender.hit if self.schema is not None else row.cached,
            cache_key=sender.key,
            secrets=(self.programs.api_key,),
            cost=last[0],
            cost_source=last[1],
            **typed,
        )
        if ticket is not None:
            self._ticket = ticket
        return ticket

    def _price(self, said: float | None, usage: Any) -> tuple[float | None, str | None]:
        """What one exchange of a row cost, and who said (see `gatecell.store.prices`)."""
        if self._pricing is None:
            return None, None
        tokens = Tokens.of(usage_of(usage)) if usage is not None and not isinstance(usage, Tokens) else usage
        return self._pricing.cost(
            said,
            self._address,
            self.model,
            tokens.prompt_tokens if tokens else None,
            tokens.completion_tokens if tokens else None,
        )

    async def _watch(self) -> None:
        """Cut the requests past the request timeout. One timer for the batch rather than one
        per request (a timer each is several microseconds of a row's few tens): a request gets
        its whole answer within the timeout, give or take the watch's half second."""
        while True:
            await asyncio.sleep(0.5)
            now = time.monotonic()
            for task, deadline in list(self._deadlines.items()):
                if deadline < now and task not in self._expired:
                    self._expired.add(task)
                    task.cancel()

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
        watching = asyncio.ensure_future(self._watch())
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
            watching.cancel()
            for pool in self._pools.values():
                await pool.aclose()
        batch = self._batch(interrupted)
        if self.store is not None:  # the rows logged last, cached ones and those of a stop too
            await self.store.committed(self._ticket, _LAST_COMMIT_WAIT)
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

    # -- the wire ---------------------------------------------------------------------

    def head(self, pool: Pool, request: Request) -> bytes:
        """The request's line and headers on the wire, written once per kind of request (its
        method, URL and headers, which the programs share between requests of a kind)."""
        kind = (request.method, request.url, id(request.headers))
        head = self._heads.get(kind)
        if head is None:
            parts = urlsplit(request.url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            fields = [
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in request.headers.items()
                if name not in _DROPPED_HEADERS
            ]
            head = pool.request_head(request.method, target.encode("latin-1"), fields)
            if len(self._heads) < 1024:  # the kinds a batch uses are few; a redirect's are not kept
                self._heads[kind] = head
        return head

    def pool(self, url: str) -> Pool:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = Pool(
                origin + "/",
                connect_timeout=self._connect_timeout,
                answer_timeout=None,
                idle=self.concurrency,
                proxy=self.proxies.for_url(url) if self.proxies is not None else None,
            )
        return pool


class _Round:
    """An answered request of a typed row that a repair round followed (for the log)."""

    __slots__ = ("body", "path", "raw", "status", "key", "hit", "request_id", "cost")

    def __init__(self, sender: _RowSender, request_id: str | None) -> None:
        self.body, self.path, self.raw = sender.body, sender.path or "", sender.raw or b""
        self.status, self.key, self.hit, self.request_id = sender.status, sender.key, sender.hit, request_id
        self.cost = sender.cost

    @property
    def reply(self) -> Any:
        try:
            return json.loads(self.raw)
        except ValueError:
            return None


class _RowSender:
    """Sends the requests of one row's program (a `drivers.AsyncSend`)."""

    __slots__ = (
        *("engine", "key", "body", "path", "raw", "status", "sent", "booked", "rate_limited"),
        *("hit", "request_id", "earlier", "cost"),
    )

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.key: str | None = None
        self.body: bytes | None = None  # of the last request
        self.path: str | None = None
        self.raw: bytes | None = None  # the last answer's body
        self.status: int | None = None
        self.cost: float | None = None  # what the gateway said the last answer cost
        self.sent = 0
        self.booked = 0.0  # tokens booked on the tpm schedule
        self.rate_limited = 0
        self.hit = False  # the last answer came from the log (typed rows)
        self.request_id: str | None = None  # of the last answer from the log
        self.earlier: list[_Round] | None = None  # a typed row's answers before its last round

    async def __call__(self, request: Request) -> Response:
        engine = self.engine
        body = request.body
        if self.raw is not None and self.status is not None and self.status < 300 and body != self.body:
            # a new round after an answer (a typed row's repair): that answer is logged too
            (self.earlier if self.earlier is not None else self._earlier()).append(
                _Round(self, self.request_id)
            )
            self.hit, self.request_id = False, None
        self.body, self.path = body, urlsplit(request.url).path
        known = engine._answerable
        if engine.cache and engine.store is not None and known != set() and request.method == "POST":
            from gatecell.store import cache_key

            key = cache_key(self.path, engine.model, body, engine.gateway)  # else the writer makes it
            if key != self.key:
                self.key = key
                answer = engine.store.lookup(key, settle=False) if known is None or key in known else None
                if answer is not None and engine.schema is not None and answer.response is not None:
                    return self._replayed(request, answer)  # its program reads it (a tool call, too)
                if answer is not None and (answer.text or "").strip():  # an empty one answers nothing
                    raise _Cached(answer)
        if not request.url.startswith(("http://", "https://")):
            raise TransportError(
                f"cannot send to {request.url[:80]!r}: not an http(s) URL", kind="UnsupportedProtocol"
            )
        pool = engine.pool(request.url)
        raw = with_body(request.method, engine.head(pool, request), body)
        pacing = engine.pacing
        tokens = 0.0
        if pacing.tokens is not None:
            tokens = len(body) / 4 + (engine._max_tokens or engine._completion_guess)
        while True:
            sent_at = await pacing.acquire(tokens)
            self.booked += tokens
            self.sent += 1
            engine.requests += 1
            try:
                status, head, content = await self._exchange(pool, request, raw)
            finally:
                pacing.release()
            headers = Headers.from_raw(head)
            self.status, self.raw, self.cost = status, content, response_cost(headers)
            if status == 429:
                self.rate_limited += 1
                pause = pause_for(headers, self.rate_limited, engine._retry_after_cap)
                paused = pacing.rate_limited_for(pause, sent_at)
                if paused and self.rate_limited <= RATE_LIMIT_RETRIES:
                    continue
                raise self._gave_up(Response(status, headers, request, content=content), paused)
            if status < 300:
                pacing.succeeded()
            return Response(status, headers, request, content=content)

    def _earlier(self) -> list[_Round]:
        self.earlier = []
        return self.earlier

    def _replayed(self, request: Request, answer: Any) -> Response:
        """A typed row's logged answer, handed to its program as the gateway's: the program
        reads it, and goes on to a repair round when it does not validate."""
        self.hit, self.request_id, self.cost = True, answer.request_id, None
        self.status, self.raw = 200, json.dumps(answer.response).encode()
        headers = {**_JSON, "x-request-id": answer.request_id} if answer.request_id else _JSON
        return Response(200, Headers(headers), request, content=self.raw)

    def _gave_up(self, response: Response, paused: bool) -> APIError:
        """The 429's own error, and why this row waits no more: one line."""
        engine = self.engine
        request = response.request
        error = api_error(response, engine.programs.api_key, request.method, self.path or "")
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

    async def _exchange(
        self, pool: Pool, request: Request, raw: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One request over the pool, its whole answer read within the request timeout and
        the size cap; failures as the `TransportError` the programs know."""
        engine = self.engine
        answer = None
        task = asyncio.current_task()
        assert task is not None
        engine._deadlines[task] = time.monotonic() + engine._timeout  # see `_watch`
        try:
            answer = await pool.send(request.method, raw)
            content = await answer.body(request.max_bytes)
        except asyncio.CancelledError:
            if task not in engine._expired:
                raise
            engine._expired.discard(task)
            if hasattr(task, "uncancel"):  # 3.11+: the cancel was ours, and is over
                task.uncancel()
            raise TransportError(
                f"ReadTimeout: no whole answer within {engine._timeout:g} s", timeout=True, kind="ReadTimeout"
            ) from None
        except asyncio.TimeoutError:  # opening the connection took too long
            raise TransportError(
                f"ConnectTimeout: no connection within {engine._connect_timeout:g} s",
                timeout=True,
                kind="ConnectTimeout",
            ) from None
        except OverflowError:
            raise BodyTooLarge(request.max_bytes) from None
        except ProxyError as exc:  # it names the proxy, its password masked
            raise TransportError(f"ProxyError: {exc}", kind="ProxyError") from None
        except ConnectionRefusedError as exc:
            raise TransportError(f"ConnectError: {exc}", kind="ConnectError") from None
        except BROKEN as exc:
            raise TransportError(
                f"RemoteProtocolError: {type(exc).__name__}: {exc}", kind="RemoteProtocolError"
            ) from None
        finally:
            del engine._deadlines[task]
            if answer is not None:
                answer.release()
        return answer.status, answer.headers, content


def _usage(reply: Any) -> Any:
    """The usage object of a reply body, whatever the API."""
    return (reply.get("usage") or reply.get("usageMetadata")) if isinstance(reply, dict) else None


def _added(usage: Tokens | None, earlier: list[_Round]) -> Tokens | None:
    """A typed row's tokens: its last answer's and those of the rounds before it."""
    total = usage
    for round_ in earlier:
        tokens = Tokens.of(usage_of(_usage(round_.reply)))
        if tokens is not None:
            total = tokens if total is None else Tokens(*(a + b for a, b in zip(total, tokens, strict=True)))
    return total
