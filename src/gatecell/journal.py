"""The client's side of the store: each call's outcome logged, jobs recorded, the cache
looked up and replayed (see ``docs/store.md``); and what a call is part of.

`Journal` is the `Hooks` of `gatecell.gateway`'s clients: the wire asks it as each call
starts and tells it how the call ended, and knows nothing of SQLite. The store is loaded on
a client's first call that logs or asks the cache, never at import: ``import gatecell`` and
``Gateway()`` load no SQLite. Everything here runs on the caller's path, so it only gathers
references (`gatecell.store.Store.record_exchange` returns in about a microsecond; the JSON,
redaction, hashing and SQLite happen in the store's writer thread).

**What is shown is committed.** `Journal.ended` hands the wire the commit of what it logged
(a `Commit`), and the call returns only once it is done (a stream once its iteration ends):
a reply or a job id a notebook showed is in the file, for a second process too, even if the
kernel is killed right after. A sync call blocks on it; an async one awaits it (the writer
wakes the event loop; the loop is never blocked). The wait is capped (`COMMIT_WAIT`): a log
another process keeps locked longer does not hold the call, and the entry lands after.

**What a call is part of** (`CallContext`) is how the notebook layer tells the journal which
conversation and which notebook a request belongs to, and asks for the cache: a
`contextvars` variable, set around a call (``with call_context(...)``) and read when the call
starts, so concurrent cells, panels and tasks each see their own. Threads start with an
empty context: whoever starts one copies the context it needs
(`contextvars.copy_context().run`), as the panels do. The notebook's path comes from there,
else from ``JPY_SESSION_NAME``, which Jupyter Server sets for the kernels it starts.

**Which gateway.** The log names a gateway by its root address, except the local gateway
(the one embedded in this process, or ``gatecell lab``'s), which is ``local``: its port and
key change at every start, and its jobs (kept on disk, owned through a stable key) and the
answers it gave stay valid across restarts. The key itself is never written: it is handed
to the store as a secret to mask.

**The cache** answers the text APIs only (`apis.TEXT_APIS`): a request identical to a
logged one gets the logged reply, parsed by the very code that parses a gateway's answer,
so a cached reply has the types of a fresh one (a `ChatCompletion`, a `Reply`, a stream
with one fragment). A reply logged from a stream kept no body; it is rebuilt in the
endpoint's own shape (WIRE-NOTES) from its text, reasoning and usage.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gatecell.wire.apis.dialects import dialect
from gatecell.wire.apis.embeddings import Embeddings
from gatecell.wire.apis.names import TEXT_APIS, api_of
from gatecell.wire.apis.spec import ChatCompletion
from gatecell.wire.apis.streams import Stream
from gatecell.wire.calls import EMPTY_REPLY, Hooks, Outcome
from gatecell.wire.transport.errors import InvalidRequest
from gatecell.wire.transport.exchange import Call
from gatecell.wire.transport.http import Headers, Request, Response
from gatecell.wire.transport.results import Audio, ImageResult, Job, Reply, ResponseMeta
from gatecell.wire.util.secret import Secret

if TYPE_CHECKING:
    from gatecell import store

__all__ = [
    "Journal",
    "BatchJournal",
    "EmbedJournal",
    "Commit",
    "COMMIT_WAIT",
    "MODEL_INFO_MAX_AGE",
    "LOCAL",
    "CallContext",
    "call_context",
    "current",
    "notebook_of",
    "ENV_NOTEBOOK",
]

LOCAL = "local"
COMMIT_WAIT = 10.0  # seconds a call waits at most for its log entry's commit
MODEL_INFO_MAX_AGE = 7 * 86400  # seconds a gateway's model info (its prices) is kept before it is asked again
ENV_NOTEBOOK = "JPY_SESSION_NAME"
_JSON_HEADERS = Headers({"content-type": "application/json"})


@dataclass(frozen=True)
class CallContext:
    conversation: str | None = None  # the conversation's name (``%%chat -c NAME``)
    notebook: str | None = None  # the notebook's path, when the caller knows it
    cache: bool | None = None  # answer from the log for this call (None: the client's setting)


_EMPTY = CallContext()
_current: ContextVar[CallContext] = ContextVar("gatecell_call_context", default=_EMPTY)
# When the last exchange this context logged started: the one a tool call's row points to.
_asked_at: ContextVar[float | None] = ContextVar("gatecell_asked_at", default=None)
_unwaited: ContextVar[Commit | None] = ContextVar("gatecell_unwaited_commit", default=None)


def current() -> CallContext:
    return _current.get()


@contextmanager
def call_context(**fields: str | bool | None) -> Iterator[CallContext]:
    """Calls made inside the block carry these fields (the others as around it)."""
    context = replace(_current.get(), **fields)  # type: ignore[arg-type]
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def notebook_of(context: CallContext) -> str | None:
    """The notebook a call came from: the context's, else Jupyter Server's session name."""
    return context.notebook or os.environ.get(ENV_NOTEBOOK) or None


class Commit:
    """The commit of a call's log entries (the `Pending` the wire waits for): ``wait()``
    blocks until the store's writer committed ``ticket`` and all before it; awaiting it
    does the same on an event loop without blocking it."""

    __slots__ = ("store", "ticket")

    def __init__(self, store: store.Store, ticket: int) -> None:
        self.store = store
        self.ticket = ticket

    def wait(self) -> None:
        self.store.wait(self.ticket, COMMIT_WAIT)

    def __await__(self) -> Generator[Any, None, None]:
        return self.store.committed(self.ticket, COMMIT_WAIT).__await__()

    def __repr__(self) -> str:
        return f"Commit({self.ticket})"


@dataclass(frozen=True)
class _Note:
    """What the journal notes as a call starts, for when it ends."""

    context: CallContext
    at: float
    cache_key: str | None


class Journal(Hooks):
    """One client's log and cache, as its `Hooks`.

    Every exchange it logs is waited for by its call, so the store's writer is not woken
    for it: a sync call commits it on its own thread when the writer is idle (`Store.wait`).

    **Parameters:** ``gateway``: the log's name for the client's gateway (`LOCAL`, or its
    root address); ``key``: the client's key, a function since the client may change it (it
    is masked in everything written); ``log``, ``cache``, ``log_media``: functions telling
    whether to log, to answer from the log, to keep media bytes (the client's switches,
    which may change at any time).
    """

    def __init__(
        self,
        gateway: str,
        key: Callable[[], Secret | None],
        log: Callable[[], bool],
        cache: Callable[[], bool],
        log_media: Callable[[], bool],
    ) -> None:
        self.gateway = gateway
        self._key = key
        self._log = log
        self._cache = cache
        self._log_media = log_media
        self._store: store.Store | None = None

    _wake = False  # (see the class) a batch's journal wakes the writer: its rows from the log go unwaited

    @property
    def store(self) -> store.Store:
        """The store, opened on first use (it loads SQLite)."""
        if self._store is None:
            from gatecell.store import default_store

            self._store = default_store(log=True)  # the client decides whether to write
        return self._store

    # -- the cache ----------------------------------------------------------------------

    def started(self, call: Call) -> tuple[_Note, tuple[Response, ResponseMeta] | None]:
        context, at = _current.get(), time.time()
        asked = self._cache() if context.cache is None else context.cache
        if not (asked and call.method == "POST" and api_of(call.path) in TEXT_APIS):
            return _Note(context, at, None), None
        from gatecell.store import cache_key

        key = cache_key(call.path, call.model, call.body, self.gateway)
        answer = self.store.lookup(key)
        note = _Note(context, at, key)
        return note, (None if answer is None else _replayed(call, answer))

    # -- what answers cost --------------------------------------------------------------

    def wants_model_info(self) -> bool:
        """Whether this gateway's model info is worth asking: the log has none younger than
        `MODEL_INFO_MAX_AGE`."""
        if not self._log():
            return False
        from gatecell.store.records import iso

        asked = self.store.model_info_asked(self.gateway)
        return asked is None or asked < iso(time.time() - MODEL_INFO_MAX_AGE)

    def model_info(self, body: Any) -> None:
        """Keep the prices of the gateway's model info (none, if it gave none)."""
        from gatecell.store.prices import model_info_prices

        self.store.record_model_prices(self.gateway, model_info_prices(body))

    # -- jobs ---------------------------------------------------------------------------

    def job_kind(self, job_id: str) -> str:
        """The kind of a job this client's gateway ran, from the log: a job is picked up by
        its id alone, in any kernel."""
        found = self.store.job(job_id, gateway=self.gateway)
        if found is not None:
            return found.kind
        elsewhere = self.store.job(job_id)
        if elsewhere is not None:
            raise InvalidRequest(
                "id",
                f"job {job_id!r} went to {elsewhere.gateway or 'another gateway'}, not to this client's "
                f"({self.gateway}): poll it with a client of that gateway",
            )
        raise InvalidRequest(
            "kind", f"job {job_id!r} is not in the log: say its kind, e.g. job({job_id!r}, kind='video')"
        )

    # -- the log ------------------------------------------------------------------------

    def tool_call(self, call: Any, chain: str) -> None:
        """Log one call of a tool chain (a `gatecell.tools.ToolCall`: its result as sent,
        redacted and capped already) beside the exchange whose answer asked for it: the last
        one this context logged."""
        if not self._log():
            return
        from gatecell.store.records import ToolCallEntry

        context = _current.get()
        entry = ToolCallEntry(
            time.time(),
            _asked_at.get(),
            self.gateway,
            chain,
            call.round,
            call.id,
            call.name,
            call.arguments,
            call.output if call.error is None else None,
            call.error,
            call.approved,
            call.seconds,
            context.conversation,
            notebook_of(context),
            (self._key(),),
        )
        self.store.record_tool_call(entry)

    def ended(self, outcome: Outcome) -> Commit | None:
        """Log one outcome: an exchange, a job's news, or both (a submit); the `Commit` to
        wait for (None when nothing was logged)."""
        if not self._log():
            return None
        call, result, meta, error = outcome.call, outcome.result, outcome.meta, outcome.error
        failure = str(error) if error is not None else self._failure(result)
        note: _Note = outcome.note or _Note(_EMPTY, time.time(), None)
        context = note.context
        secrets = (self._key(),)
        ticket = None
        if isinstance(result, Job):
            ticket = self._job(call, result, context, secrets, note.at)
        if not call.logged:
            return None if ticket is None else Commit(self.store, ticket)
        text = reasoning = media = media_type = response = None
        usage: Any = None
        latency = meta.latency if meta is not None else None
        if isinstance(result, Stream):
            text, reasoning, usage = result.text, result.reasoning, result.raw_usage
            latency = time.time() - note.at  # a stream's time runs to its end, not to its headers
        elif isinstance(result, ChatCompletion):
            message = result.choices[0].message if result.choices else None
            extra = (message.model_extra or {}) if message is not None else {}
            text, usage = result.text, result.usage
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
            response = outcome.body
        elif isinstance(result, Reply):
            text, reasoning, usage, response = result.text, result.reasoning, result.usage, outcome.body
        elif isinstance(result, Embeddings):
            usage = result.usage  # its vectors are kept in their own table (`keep_vectors`), not here
        elif isinstance(result, Audio):
            media, media_type = result.data, result.mime
        elif isinstance(result, ImageResult):
            shown = next((image for image in result.images if image.loaded), None)
            if shown is not None:
                media, media_type = shown.data, shown.mime
            response = outcome.body
        elif result is not None:
            response = outcome.body
        cost = cost_source = None
        if meta is not None and not meta.cached:  # a reply from the log cost nothing
            cost, cost_source = self.store.cost_of(meta.cost, self.gateway, call.model, usage)
            meta.priced(cost, cost_source)  # the footer shows it
        schema = outcome.schema
        typed = schema is not None and isinstance(result, (ChatCompletion, Reply))
        logged = self.store.record_exchange(
            call.path,
            call.model,
            call.body,
            response=response,
            text=text,
            reasoning=reasoning if isinstance(reasoning, str) else None,
            usage=usage,
            latency=latency,
            status=meta.status if meta is not None else getattr(error, "status", None),
            error=failure,
            request_id=meta.request_id if meta is not None else getattr(error, "request_id", None),
            conversation=context.conversation,
            notebook=notebook_of(context),
            gateway=self.gateway,
            cached=meta is not None and meta.cached,
            partial=outcome.partial,
            cache_key=note.cache_key,
            media=media,
            media_type=media_type,
            log_media=self._log_media(),
            secrets=secrets,
            at=note.at,
            schema=schema,
            parsed_json=schema.logged(result.parsed) if typed else None,
            cost=cost,
            cost_source=cost_source,
            wake=self._wake,
        )
        _asked_at.set(note.at)  # a tool call this answer asks for is logged beside it (`tool_call`)
        ticket = logged if logged is not None else ticket  # the later ticket covers the job's too
        return None if ticket is None else Commit(self.store, ticket)

    def _failure(self, result: Any) -> str | None:
        """The error an answer is logged with though its call succeeded (none here)."""
        return None

    def for_batch(self, cache: bool) -> BatchJournal:
        return BatchJournal(self, cache)

    def for_embeddings(self) -> EmbedJournal:
        return EmbedJournal(self)

    # -- embed's vectors (table ``embeddings``: by gateway, model, dimensions, text hash) --

    def kept_vectors(self, model: str, dimensions: int | None, hashes: list[bytes]) -> dict[bytes, bytes]:
        return self.store.vectors(self.gateway, model, dimensions, hashes)

    def keep_vectors(self, model: str, dimensions: int | None, hashes: list[bytes], vectors: Any) -> None:
        self._kept(self.store.record_vectors(self.gateway, model, dimensions, hashes, vectors))

    def _kept(self, ticket: int | None) -> None:
        """A ticket this journal's caller does not wait for now (a batch's: `settled`)."""

    def _job(
        self, call: Call, job: Job, context: CallContext, secrets: tuple[Any, ...], at: float | None
    ) -> int | None:
        """A submit records the job; a poll what is new about it."""
        submitted = call.method == "POST"
        return self.store.record_job(
            job.kind,
            job.id,
            gateway=self.gateway,
            model=call.model if submitted else None,
            prompt=_prompt(call.body) if submitted else None,
            state=job.status,
            progress=job.progress,
            error=job.error,
            notebook=notebook_of(context) if submitted else None,
            body=job.raw,
            secrets=secrets,
            at=at,
        )


class BatchJournal(Journal):
    """A map's journal: the client's log (same gateway, key and switches) as a batch's rows
    use it, so that a row is logged, cached and waited for as an interactive call is.

    What differs is what a batch of many rows cannot afford or must not keep:

    - **lookups never wait** for this process's pending writes (rows are looked up while
      others are logged), and the keys the log can answer are read once (`Store.answer_keys`):
      most rows of a batch are not in the log, and a set says so without a query; with none
      at all, no cache key is made here (the writer makes it);
    - **an empty answer is no answer**: one without text (and without a typed value) is
      logged as an error (`EMPTY_REPLY`), which the log never answers with, and an empty one
      the log holds from elsewhere is not taken;
    - **a row's calls do not wait for their commit**: the engine waits for it once the row
      is counted (`unwaited`), so a row stopped meanwhile is both logged and counted, as it
      is neither when stopped before; answers from the log are not waited for at all
      (nothing new was shown); `settled` is the commit of everything, for the batch's end.

    **Parameters:** ``journal``: the client's; ``cache``: answer rows from the log.
    """

    _wake = True

    def __init__(self, journal: Journal, cache: bool) -> None:
        super().__init__(journal.gateway, journal._key, journal._log, lambda: cache, journal._log_media)
        self._store = journal.store
        self._known = self.store.answer_keys() if cache else None
        self._last: int | None = None

    def started(self, call: Call) -> tuple[_Note, tuple[Response, ResponseMeta] | None]:
        at = time.time()
        known = self._known
        if known == set() or not (self._cache() and call.method == "POST" and api_of(call.path) in TEXT_APIS):
            return _Note(_EMPTY, at, None), None
        from gatecell.store import cache_key

        key = cache_key(call.path, call.model, call.body, self.gateway)
        answer = self.store.lookup(key, settle=False) if known is None or key in known else None
        if answer is None or not (answer.text or "").strip():  # an empty answer is none
            return _Note(_EMPTY, at, key), None
        return _Note(_EMPTY, at, key), _replayed(call, answer)

    def _failure(self, result: Any) -> str | None:
        empty = isinstance(result, (ChatCompletion, Reply)) and not (result.text or "").strip()
        return EMPTY_REPLY if empty and result.parsed is None else None

    def ended(self, outcome: Outcome) -> Commit | None:
        commit = super().ended(outcome)
        if commit is None:
            return None
        self._last = commit.ticket
        if outcome.meta is None or not outcome.meta.cached:
            _unwaited.set(commit)  # the row's task's own: each worker runs in a context of its own
        return None

    def unwaited(self) -> Commit | None:
        commit = _unwaited.get()
        if commit is not None:
            _unwaited.set(None)
        return commit

    def _kept(self, ticket: int | None) -> None:
        self._last = ticket if ticket is not None else self._last

    def for_batch(self, cache: bool) -> BatchJournal:
        return BatchJournal(self, cache)

    def settled(self) -> Commit | None:
        return None if self._last is None else Commit(self.store, self._last)


class EmbedJournal(BatchJournal):
    """``embed``'s journal: each request logged as any exchange (its texts, tokens, cost,
    status; not its vectors, kept by `keep_vectors`), but, as a batch's answers from the log,
    not waited for one by one: the engine waits for `settled`, the commit of its requests and
    vectors, once, at its end (an interrupted one too, so what came back is kept). The log's
    text answers are never looked up: ``/v1/embeddings`` is no text API.

    **Parameters:** ``journal``: the client's."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal, cache=False)

    def ended(self, outcome: Outcome) -> Commit | None:
        super().ended(outcome)
        return None


def _prompt(body: bytes | None) -> str | None:
    try:
        prompt = json.loads(body or b"null")
    except ValueError:
        return None
    prompt = prompt.get("prompt") if isinstance(prompt, dict) else None
    return prompt if isinstance(prompt, str) else None


def _replayed(call: Call, answer: store.CachedReply) -> tuple[Response, ResponseMeta]:
    """A response as the gateway would send it, holding the logged answer: no request."""
    started = time.perf_counter()
    body = answer.response if answer.response is not None else _rebuilt(call, answer)
    request = Request(call.method, call.path, _JSON_HEADERS)
    response = Response(200, _JSON_HEADERS, request, content=json.dumps(body).encode())
    meta = ResponseMeta(call.path, call.model, 200, 0.0, request_id=answer.request_id, cached=True)
    meta.latency = time.perf_counter() - started
    return response, meta


def _rebuilt(call: Call, answer: store.CachedReply) -> dict[str, Any]:
    """A reply of the endpoint's own shape (its `Dialect`'s) from a streamed reply's text,
    reasoning and usage, for the parser of that endpoint."""
    return dialect(api_of(call.path) or "chat").answer(
        answer.text or "",
        answer.reasoning,
        answer.usage,
        answer.model or call.model or "",
        answer.request_id or "",
    )
