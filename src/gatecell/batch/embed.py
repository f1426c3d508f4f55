"""Texts to vectors, each text embedded once, ever: ``Gateway.embed``.

What happens to a call's texts, in order:

1. **Checked** before any request: each a string with something in it (one line naming the
   first that is not, by its position or its row's label), the options in range.
2. **Once per call.** Identical texts are sent once; their rows share the vector.
3. **Once ever.** Vectors are kept in the store (`gatecell.store.tables`, table
   ``embeddings``) by gateway, model, dimensions and the text's sha256, so a text the store
   holds is not sent again, in this process or any later one. A call that stopped (Ctrl-C,
   a failure) kept what came back before it: running it again sends only the rest.
4. **Batched** by count (``batch_size``) and by an estimate of tokens (``batch_tokens``,
   four characters a token), one request a batch with ``input`` as a list, sent with up to
   ``concurrency`` at once within ``rpm``/``tpm`` (`pacing`: a 429 pauses every batch for its
   Retry-After, capped, and halves the concurrency). Vectors are asked as base64 (a fifth of
   the bytes of JSON floats); floats are read too.
5. **Split when too large.** A batch the gateway refuses as too large (413, or a 400 whose
   message names tokens or inputs) is split in half and each half sent again, down to one
   text, which then fails alone: one line naming it and the gateway's answer.

Each request is logged like any exchange (its texts, tokens, cost, status), so ``gatecell
usage`` counts embedding requests too; the vectors are not logged (they are in the table).
Both go through the client's hooks in their embedding mode (`Hooks.for_embeddings`: the
client's journal, `gatecell.journal.EmbedJournal`), as a map's rows do: the engine knows
no store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from gatecell.wire.apis.embeddings import MAX_DIMENSIONS, Embeddings, EmbedMeta, embed_model
from gatecell.wire.transport.drivers import AsyncSend, arun
from gatecell.wire.transport.errors import APIError, GatecellError, InvalidRequest, echo
from gatecell.wire.transport.http import Request, Response
from gatecell.wire.transport.settings import env_number

from .options import positive, rate_limits
from .pacing import Pacing, pause_for

if TYPE_CHECKING:
    import numpy as np

    from gatecell.wire.apis.vectors import Vectors
    from gatecell.wire.endpoints import Endpoints

__all__ = ["EmbedOptions", "EmbedSettings", "EmbedError", "EmbedEngine", "resolve_embed", "texts_of"]

_FILL = "drop it or fill it"
_RATE_LIMIT_RETRIES = 20  # 429s one batch waits out with the others; the next fails it
# A 400 that says the batch is too large: too many inputs, or too many tokens.
_TOO_LARGE = re.compile(
    r"token|too (many|large|long)|maximum|max(imum)?[ _]?(batch|inputs?)|batch size|context length|"
    r"inputs? (must|should|cannot|can't|may)|array (too|must)|limit",
    re.I,
)


class EmbedOptions(TypedDict, total=False):
    """Keyword arguments of ``embed``; all optional."""

    model: str | None  # default: GATECELL_EMBED_MODEL, else local-embed
    dimensions: int | None  # shorter vectors, where the model takes it (sent only when given)
    batch_size: int | None  # texts a request at most: GATECELL_EMBED_BATCH, else 512
    batch_tokens: int | None  # estimated tokens a request at most: GATECELL_EMBED_BATCH_TOKENS, else 100,000
    concurrency: int | None  # requests in flight: GATECELL_EMBED_CONCURRENCY, else 4
    rpm: float | None  # requests per minute at most: GATECELL_RPM, else no limit
    tpm: float | None  # tokens per minute at most: GATECELL_TPM, else no limit
    max_retries: int | None  # retries of a request's 5xx and connection errors: the client's
    patience: float | None  # seconds 429 pauses may add up to: GATECELL_MAP_PATIENCE, else 600
    cache: bool  # keep vectors in the store and take them from it (default True)


@dataclass(frozen=True)
class EmbedSettings:
    """`EmbedOptions` with their defaults, checked."""

    model: str
    dimensions: int | None = None
    batch_size: int = 512
    batch_tokens: int = 100_000
    concurrency: int = 4
    rpm: float | None = None
    tpm: float | None = None
    max_retries: int | None = None
    patience: float = 600.0
    cache: bool = True


def resolve_embed(options: EmbedOptions | dict[str, Any]) -> EmbedSettings:
    """The options with their defaults; a name unknown or a value out of range is an
    `InvalidRequest` in one line, before any request."""
    import difflib

    known = list(EmbedSettings.__dataclass_fields__)
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, 1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InvalidRequest(name, f"is not an option of embed{hint}")
    given: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    given["model"] = embed_model(options.get("model"))
    given["batch_size"] = env_number(options.get("batch_size"), "GATECELL_EMBED_BATCH", 512)
    given["batch_tokens"] = env_number(options.get("batch_tokens"), "GATECELL_EMBED_BATCH_TOKENS", 100_000)
    given["concurrency"] = env_number(options.get("concurrency"), "GATECELL_EMBED_CONCURRENCY", 4)
    given["patience"] = env_number(options.get("patience"), "GATECELL_MAP_PATIENCE", 600.0)
    given.update(rate_limits(options))
    settings = EmbedSettings(**given)
    for name in ("batch_size", "batch_tokens", "concurrency"):
        positive(name, getattr(settings, name), whole=True)
    dimensions = settings.dimensions
    if dimensions is not None:
        positive("dimensions", dimensions, whole=True)
        if dimensions > MAX_DIMENSIONS:
            raise InvalidRequest("dimensions", f"must be at most {MAX_DIMENSIONS:,}; got {echo(dimensions)}")
    retries = settings.max_retries
    if retries is not None and (not isinstance(retries, int) or isinstance(retries, bool) or retries < 0):
        raise InvalidRequest("max_retries", f"must be a whole number >= 0; got {echo(retries)}")
    if not isinstance(settings.patience, (int, float)) or not settings.patience >= 0:
        raise InvalidRequest("patience", f"must be a number of seconds >= 0; got {echo(settings.patience)}")
    return settings


def texts_of(texts: Any, labels: Sequence[Any] | None = None) -> list[str]:
    """``texts`` as a list of strings (one string is a list of one); the first that is not a
    string with something in it refused in one line, by its label when given."""
    if isinstance(texts, str):
        texts = [texts]
    try:
        texts = list(texts)
    except TypeError:
        raise InvalidRequest("texts", f"must be a list of strings; got {echo(texts)}") from None
    for position, text in enumerate(texts):
        where = f"row {labels[position]!r}" if labels is not None else f"texts[{position}]"
        if not isinstance(text, str):
            if text is None or text != text:  # None, NaN, pandas' NA
                raise InvalidRequest("texts", f"{where} is missing: gateways embed no missing text ({_FILL})")
            raise InvalidRequest("texts", f"{where} is {echo(text)}, not a string")
        if not text.strip():
            raise InvalidRequest(
                "texts", f"{where} is empty: gateways embed no empty text (drop it or fill it)"
            )
    return texts


class EmbedError(GatecellError):
    """Texts that could not be embedded (what was embedded before is kept in the store, so
    running the call again sends only the rest)."""


def _estimate(text: str) -> int:
    return len(text) // 4 + 1


def _too_large(error: APIError) -> bool:
    return error.status == 413 or (error.status == 400 and bool(_TOO_LARGE.search(error.message)))


class _Sender:
    """Sends one batch's requests within the pacing (a `drivers.AsyncSend`)."""

    __slots__ = ("engine", "tokens", "rate_limited")

    def __init__(self, engine: EmbedEngine, tokens: float) -> None:
        self.engine = engine
        self.tokens = tokens
        self.rate_limited = 0

    async def __call__(self, request: Request) -> Response:
        engine, pacing = self.engine, self.engine.pacing
        while True:
            sent_at = await pacing.acquire(self.tokens)
            engine.requests += 1
            try:
                response = await engine.send(request)
                if response.status == 429:
                    await response.aread()
            finally:
                pacing.release()
            if response.status == 429:
                self.rate_limited += 1
                pause = pause_for(response.headers, self.rate_limited, engine.retry_after_cap)
                if pacing.rate_limited_for(pause, sent_at) and self.rate_limited <= _RATE_LIMIT_RETRIES:
                    continue
            elif response.status < 300:
                pacing.succeeded()
            return response


class EmbedEngine:
    """One ``embed`` call; `run` it on an event loop, `stop` it from any thread. Counts
    (``done``, ``cached``, ``failed``, ``tokens``, ``requests``) are for the progress bar.

    **Parameters:** ``client``: the endpoints (their programs are run here, with the
    client's hooks in their embedding mode: they log each request, keep the vectors and
    hold those kept before); ``texts`` (checked); ``settings``: `EmbedSettings`; ``send``:
    how requests go (an `AsyncSend`); ``close``: awaited at the end (the sender's client,
    when it was made for this call).
    """

    def __init__(
        self,
        client: Endpoints[Any, Any, Any, Any, Any, Any, Any, Any],
        texts: list[str],
        settings: EmbedSettings,
        send: AsyncSend,
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        import numpy as np

        self.settings = settings
        self.model = settings.model
        self.hooks = client.hooks.for_embeddings()
        self.programs = client.programs(max_retries=settings.max_retries, hooks=self.hooks)
        self.retry_after_cap = self.programs.options.retry.retry_after_cap
        self.send = send
        self._close = close
        self.pacing = Pacing(settings.concurrency, settings.rpm, settings.tpm, settings.patience)
        self.total = len(texts)
        unique: dict[str, int] = {}
        self.rows = np.fromiter((unique.setdefault(t, len(unique)) for t in texts), np.int64, len(texts))
        self.unique = list(unique)
        self.hashes = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest() for t in self.unique]
        self.matrix: np.ndarray | None = None
        self.have = np.zeros(len(self.unique), dtype=bool)
        self.done = self.cached = self.failed = self.tokens = self.requests = 0
        self.sent = 0  # distinct texts the gateway embedded
        self.cost: float | None = None
        self._costs_known = True
        self._per_unique = np.bincount(self.rows, minlength=len(self.unique)) if len(texts) else self.rows
        self._queue: deque[list[int]] = deque()
        self._errors: list[str] = []
        self._running: asyncio.Future[Any] | None = None
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._take_kept()  # now, so the caller knows what is left to send (no bar for none)
        self._batches()

    @property
    def to_send(self) -> int:
        """Texts the store does not hold: what the gateway will be asked for."""
        return len(self.unique) - int(self.have.sum())

    # -- the texts --------------------------------------------------------------------

    def _take_kept(self) -> None:
        """The vectors the store holds already."""
        import numpy as np

        if not self.settings.cache:
            return
        kept = self.hooks.kept_vectors(self.model, self.settings.dimensions, self.hashes)
        if not kept:
            return
        width = len(next(iter(kept.values())))
        found = [p for p, digest in enumerate(self.hashes) if len(kept.get(digest, b"")) == width]
        # (a vector of another length: the model changed; asked again)
        blobs = b"".join(kept[self.hashes[p]] for p in found)
        self.matrix = np.zeros((len(self.unique), width // 4), dtype=np.float32)
        self.matrix[found] = np.frombuffer(blobs, dtype="<f4").reshape(len(found), width // 4)
        self.have[found] = True
        self.cached = int(self._per_unique[found].sum())
        self.done += self.cached

    def _batches(self) -> None:
        """The texts to send, in batches within the count and the token estimate."""
        size, budget = self.settings.batch_size, self.settings.batch_tokens
        batch: list[int] = []
        tokens = 0
        for position in map(int, (~self.have).nonzero()[0]):
            cost = _estimate(self.unique[position])
            if batch and (len(batch) >= size or tokens + cost > budget):
                self._queue.append(batch)
                batch, tokens = [], 0
            batch.append(position)
            tokens += cost
        if batch:
            self._queue.append(batch)

    # -- running ----------------------------------------------------------------------

    async def run(self) -> Vectors:
        """Every text's vector: a `Vectors` in the order of the texts given."""
        self._loop = asyncio.get_running_loop()
        workers = min(self.settings.concurrency, len(self._queue))
        running = self._running = asyncio.gather(*(self._worker() for _ in range(workers)))
        interrupted = False
        try:
            if self._stopping:
                running.cancel()
            await running
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            interrupted = True
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            if self._close is not None:
                await self._close()
            settled = self.hooks.settled()  # what came back is kept before the call returns
            if settled is not None:
                await settled
        missing = self.to_send
        if self._errors or interrupted or missing:
            why = self._errors[0] if self._errors else "interrupted"
            more = f" (and {len(self._errors) - 1} more)" if len(self._errors) > 1 else ""
            raise EmbedError(
                f"{why}{more}; {self.done:,} of {self.total:,} texts embedded, "
                "kept: running it again sends only the rest"
            )
        return self._vectors()

    def _vectors(self) -> Vectors:
        import numpy as np

        from gatecell.wire.apis.vectors import Vectors

        unique = self.matrix if self.matrix is not None else np.zeros((0, 0), dtype=np.float32)
        # Every text distinct (they come in order then): the matrix itself, no copy.
        matrix = unique if len(unique) == len(self.rows) else unique[self.rows]
        squares = np.einsum("ij,ij->i", unique, unique)
        meta = EmbedMeta(
            self.model,
            self.settings.dimensions,
            normalized=bool(np.allclose(squares, 1.0, atol=2e-3)),
            texts=self.total,
            unique=len(self.unique),
            cached=self.cached,
            sent=self.sent,
            requests=self.requests,
            prompt_tokens=self.tokens,
            cost=self.cost if self._costs_known else None,
        )
        return Vectors(matrix, meta)

    async def _worker(self) -> None:
        while self._queue and not self._errors:
            batch = self._queue.popleft()
            await self._batch(batch)

    async def _batch(self, batch: list[int]) -> None:
        texts = [self.unique[p] for p in batch]
        tokens = sum(_estimate(t) for t in texts)
        sender = _Sender(self, float(tokens) if self.pacing.tokens is not None else 0.0)
        try:  # the hooks log the request however it ends
            answer: Embeddings = await arun(
                self.programs._embeddings(self.model, texts, self.settings.dimensions), sender
            )
        except APIError as error:
            if _too_large(error) and len(batch) > 1:
                half = len(batch) // 2
                self._queue.appendleft(batch[half:])
                self._queue.appendleft(batch[:half])
                return
            self._failed(batch, texts, error)
            return
        except GatecellError as error:
            self._failed(batch, texts, error)
            return
        self._answered(batch, answer, sender)

    def _answered(self, batch: list[int], answer: Embeddings, sender: _Sender) -> None:
        import numpy as np

        self._priced(answer)
        vectors = answer.matrix
        if self.matrix is None:
            self.matrix = np.zeros((len(self.unique), vectors.shape[1]), dtype=np.float32)
        if vectors.shape[1] != self.matrix.shape[1]:
            error = APIError(
                f"vectors of {vectors.shape[1]} numbers where earlier ones had {self.matrix.shape[1]}",
                status=200,
                path="/v1/embeddings",
            )
            self._failed(batch, [self.unique[p] for p in batch], error)
            return
        where: Any = batch
        if batch[-1] - batch[0] == len(batch) - 1:  # the usual batch: texts in a row, copied as a slice
            where = slice(batch[0], batch[-1] + 1)
        self.matrix[where] = vectors
        self.have[where] = True
        self.sent += len(batch)
        self.done += int(self._per_unique[batch].sum())
        used = answer.prompt_tokens
        if used is not None:
            self.tokens += used
            self.pacing.correct_tokens(used - sender.tokens if sender.tokens else 0)
        if self.settings.cache:
            hashes = [self.hashes[p] for p in batch]
            self.hooks.keep_vectors(self.model, self.settings.dimensions, hashes, vectors)

    def _priced(self, answer: Embeddings) -> None:
        """What the answer cost, added up (the hooks priced it as they logged it)."""
        cost = answer.meta.cost if answer.meta is not None else None
        if cost is None:
            self._costs_known = False
        else:
            self.cost = (self.cost or 0.0) + cost

    def _failed(self, batch: list[int], texts: list[str], error: GatecellError) -> None:
        line = " ".join(str(error).split())
        self.failed += int(self._per_unique[batch].sum())
        which = f"text {echo(texts[0])}" if len(texts) == 1 else f"a batch of {len(texts)} texts"
        self._errors.append(f"{which}: {line}")

    def stop(self) -> None:
        """Stop at once: requests in flight are dropped; what came back is kept."""
        self._stopping = True
        if self._running is not None:
            self._running.cancel()

    def stop_threadsafe(self) -> None:
        """`stop`, from the thread that took the Ctrl-C."""
        if self._loop is None:
            self._stopping = True  # not started: it stops as it starts
            return
        with contextlib.suppress(RuntimeError):  # its loop closed: it is over already
            self._loop.call_soon_threadsafe(self.stop)
