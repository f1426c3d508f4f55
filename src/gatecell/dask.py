"""Prompts over data past one machine: ``gatecell.dask.map(ddf, template, ...)``.

Each partition runs the same engine as ``Gateway.map`` (see `gatecell.batch`), on the worker
that holds it, through ``map_partitions``; the result is a dask Series of the reply texts
(None where a row failed) on the partitions' index. With ``schema=``, a dask DataFrame of the
typed columns instead (`Batch.frame`: a row whose answer never validated is missing in each);
with ``choices=``, a Series of the labels (a categorical). Every worker logs to its own
``GATECELL_HOME`` and answers from it, so a re-run after a failure sends only the rows that
had not finished on the worker that runs them (shared folders on one machine share the log).

**Settings.** Workers build their own client from picklable settings: the gateway's address
(``base_url``, else ``GATECELL_BASE_URL`` as the caller sees it) and the options of the map.
The key comes from the worker's own environment (``GATECELL_API_KEY`` / ``OPENAI_API_KEY``),
or is shipped explicitly: ``api_key=gatecell.dask.ship(key)``. A shipped key travels inside
the pickled tasks to the workers (ship it only to a cluster you trust); it shows masked in
every repr, so Dask's dashboard, task and graph reprs and logs never print it. A plain `Secret`
is refused here: it cannot be pickled, on purpose, so that no key reaches a disk by accident.

**Schemas** travel as the caller gave them (a model class by reference, a JSON Schema dict
as data) and each worker makes its own `gatecell.wire.typed.structured.Schema`: one made from a
JSON Schema dict holds classes made on the fly, which ``pickle`` cannot carry (and which
would travel whole, validators and all, with every task).

**Meaning.** ``embed``, ``search`` and ``join`` run `gatecell.batch.meaning` on each partition,
on its worker (each worker embeds its rows once, ever, in its own store): ``embed`` gives a
lazy Series of vectors, ``join`` a lazy frame of matches (the right side, a pandas frame, goes
to every partition), ``search`` the ``k`` best rows of all partitions (each partition's ``k``
best, then the best of those, ties in the rows' order), computed, as a pandas frame.

**Rate limits.** ``rpm`` and ``tpm`` are for the whole computation: each partition gets an
equal share, the limit divided by the number of partitions that run at once (the smaller of
the number of partitions and the cluster's worker threads, read from the current
``distributed`` client; pass ``parallel=N`` to say it). ``concurrency`` and ``patience`` (how
long 429s may pause a batch in all) are per partition.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gatecell.wire.transport.errors import ConfigError, InvalidRequest
from gatecell.wire.transport.settings import ENV_BASE_URL, root_url
from gatecell.wire.util.secret import Secret

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from gatecell.batch import MapOptions
    from gatecell.batch.embed import EmbedOptions
    from gatecell.batch.meaning import JoinOptions

__all__ = ["map", "embed", "search", "join", "ship", "ShippedKey"]


class ShippedKey:
    """An API key on its way to Dask workers: pickled on purpose, shown masked everywhere."""

    __slots__ = ("_secret",)

    def __init__(self, key: str | Secret) -> None:
        self._secret = Secret(key)

    def reveal(self) -> str:
        return self._secret.reveal()

    def __repr__(self) -> str:
        return f"ShippedKey({self._secret.masked!r})"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (ShippedKey, (self._secret.reveal(),))

    def __dask_tokenize__(self) -> str:  # task names are made from tokens: a hash, never the key
        return hashlib.sha256(b"gatecell.ShippedKey:" + self.reveal().encode()).hexdigest()


def ship(key: str | Secret) -> ShippedKey:
    """Mark ``key`` for shipping to Dask workers with their tasks (see the module's docs)."""
    return ShippedKey(key)


@dataclass(frozen=True)
class _Settings:
    """What a worker needs to build its client: picklable, and with the key masked in its repr."""

    base_url: str
    api_key: ShippedKey | None
    options: tuple[tuple[str, Any], ...]
    typed: tuple[tuple[str, Any], ...] = ()  # ``schema`` or ``choices`` as the caller gave it
    columns: bool = False  # a typed frame, not a Series of texts


def _partition(part: Any, template: str, settings: _Settings) -> Any:
    """One partition, on its worker: the engine over its rows; the texts (or the typed
    columns) on its index."""
    from gatecell.gateway import Gateway

    key = settings.api_key.reveal() if settings.api_key is not None else None
    with Gateway(base_url=settings.base_url, api_key=key) as gw:
        batch = gw.map(template, part, progress=False, **dict(settings.options), **dict(settings.typed))
    return batch.frame if settings.columns else batch.text


def _parallel(npartitions: int) -> int:
    """How many partitions run at once: the cluster's threads (1 without a client), at most
    the number of partitions."""
    try:
        from distributed import get_client

        threads = sum(get_client().nthreads().values())
    except (ImportError, ValueError):
        threads = 1
    return max(1, min(npartitions, threads))


def _address(base_url: str | None, api_key: Any, what: str) -> str:
    """The gateway's root address for the workers; a key that is not shipped on purpose, or no
    address, refused in one line."""
    if isinstance(api_key, Secret) or (api_key is not None and not isinstance(api_key, ShippedKey)):
        raise InvalidRequest(
            "api_key",
            "a key goes to Dask workers only when shipped on purpose: api_key=gatecell.dask.ship(key) "
            "(or set GATECELL_API_KEY in the workers' environment)",
        )
    url = base_url or next((os.environ[n] for n in ENV_BASE_URL if os.environ.get(n)), None)
    if not url:
        raise ConfigError(
            f"gatecell.dask.{what} needs the gateway's address: base_url=... or GATECELL_BASE_URL"
        )
    return root_url(url)


def _shared(resolved: Any, ddf: Any, parallel: int | None) -> Any:
    """The options with ``rpm`` and ``tpm`` divided between the partitions that run at once."""
    share = parallel or _parallel(ddf.npartitions)
    rpm, tpm = resolved.rpm, resolved.tpm
    return dataclasses.replace(resolved, rpm=rpm / share if rpm else None, tpm=tpm / share if tpm else None)


def map(
    ddf: Any,
    template: str,
    *,
    base_url: str | None = None,
    api_key: ShippedKey | None = None,
    parallel: int | None = None,
    **options: Unpack[MapOptions],
) -> Any:
    """``template`` over every row of a dask DataFrame or Series: a lazy dask Series of the
    reply texts, named ``text``, on ``ddf``'s index (with ``schema=``, a dask DataFrame of
    the typed columns; with ``choices=``, the labels). Options as `Gateway.map`
    (`gatecell.batch.MapOptions`); see the module's docs for ``base_url``, ``api_key``,
    schemas and how ``rpm``/``tpm`` are shared."""
    import pandas as pd

    from gatecell.batch.options import resolve
    from gatecell.batch.rows import Rows, Template

    resolved = resolve(options)  # the caller's environment decides the unset limits
    Rows(ddf._meta).check(Template(template, images=resolved.images))  # a field the columns lack: refused now
    url = _address(base_url, api_key, "map")
    shared = dataclasses.replace(_shared(resolved, ddf, parallel), schema=None)
    options_for_workers = tuple((k, v) for k, v in dataclasses.asdict(shared).items() if k != "schema")
    typed = tuple((k, v) for k, v in options.items() if k in ("schema", "choices") and v is not None)
    schema = resolved.schema
    columns = schema is not None and schema.kind != "choices"
    settings = _Settings(url, api_key, options_for_workers, typed, columns)
    index = ddf._meta.index
    if schema is not None and columns:
        from gatecell.batch.frame import frame

        meta = frame([], index, schema)
    elif schema is not None:
        meta = pd.Series(pd.Categorical([], categories=list(schema.labels)), name="text", index=index)
    else:
        meta = pd.Series([], dtype=object, name="text", index=index)
    return ddf.map_partitions(_partition, template, settings, meta=meta)


# -- meaning -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Meaning:
    """What a worker needs for one meaning operation: where, the key, the embed options, and
    the operation's own arguments (``operation``: embed, search or join)."""

    base_url: str
    api_key: ShippedKey | None
    options: tuple[tuple[str, Any], ...]
    operation: str
    arguments: tuple[tuple[str, Any], ...] = ()


def _meaning(part: Any, task: _Meaning, *extra: Any) -> Any:
    """One partition's share of a meaning operation, on its worker."""
    from gatecell.batch import meaning
    from gatecell.gateway import Gateway

    key = task.api_key.reveal() if task.api_key is not None else None
    arguments, options = dict(task.arguments), dict(task.options)
    with Gateway(base_url=task.base_url, api_key=key) as gw:
        if task.operation == "embed":
            series = meaning.column_of(part, arguments["column"])
            return meaning.vector_series(meaning.embed_column(gw, series, False, options), series)
        if task.operation == "search":
            return meaning.search_frame(gw, part, progress=False, options=options, **arguments)
        return meaning.join_frames(gw, part, extra[0], progress=False, options=options, **arguments)


def _task(
    ddf: Any,
    operation: str,
    base_url: str | None,
    api_key: Any,
    parallel: int | None,
    options: Any,
    **arguments: Any,
) -> _Meaning:
    from gatecell.batch.embed import resolve_embed

    url = _address(base_url, api_key, operation)
    shared = _shared(resolve_embed(options), ddf, parallel)
    return _Meaning(
        url, api_key, tuple(dataclasses.asdict(shared).items()), operation, tuple(arguments.items())
    )


def embed(
    ddf: Any,
    column: str | None = None,
    *,
    base_url: str | None = None,
    api_key: ShippedKey | None = None,
    parallel: int | None = None,
    **options: Unpack[EmbedOptions],
) -> Any:
    """The vectors of a column's texts (a Series' own), partition by partition on the
    workers: a lazy dask Series of float32 vectors on ``ddf``'s index. Options as
    `Gateway.embed`; ``base_url``, ``api_key``, ``parallel`` as `map`."""
    import pandas as pd

    from gatecell.batch.meaning import column_of

    name = column_of(ddf._meta, column).name
    task = _task(ddf, "embed", base_url, api_key, parallel, options, column=column)
    meta = pd.Series([], dtype=object, name=name, index=ddf._meta.index)
    return ddf.map_partitions(_meaning, task, meta=meta)


def search(
    ddf: Any,
    query: str,
    *,
    on: str | None = None,
    k: int = 10,
    threshold: float | None = None,
    base_url: str | None = None,
    api_key: ShippedKey | None = None,
    parallel: int | None = None,
    **options: Unpack[EmbedOptions],
) -> Any:
    """The ``k`` rows nearest ``query`` by meaning over every partition, best first, with a
    ``score`` column: computed now, a pandas DataFrame (each partition's ``k`` best on its
    worker, then the best of those; ties in the rows' order), as ``df.gatecell.search``."""
    import pandas as pd

    from gatecell.batch.meaning import column_of
    from gatecell.batch.nearest import check

    check(k, threshold)
    column_of(ddf._meta, on)  # a column the frame lacks: refused now
    task = _task(
        ddf, "search", base_url, api_key, parallel, options, query=query, on=on, k=k, threshold=threshold
    )
    frame = ddf._meta.to_frame() if ddf._meta.ndim == 1 else ddf._meta
    meta = frame.assign(score=pd.Series(dtype="float32"))
    best = ddf.map_partitions(_meaning, task, meta=meta).compute()
    order = (-best["score"].to_numpy()).argsort(kind="stable")  # partitions in order: ties by row
    return best.iloc[order[:k]]


def join(
    ddf: Any,
    right: Any,
    *,
    base_url: str | None = None,
    api_key: ShippedKey | None = None,
    parallel: int | None = None,
    **options: Unpack[JoinOptions],
) -> Any:
    """A semantic join of each partition of ``ddf`` with ``right`` (a pandas DataFrame or
    Series, sent to every partition), on the workers: a lazy dask DataFrame, as
    ``df.gatecell.join`` gives for each partition, on ``ddf``'s index. The options are
    `gatecell.batch.meaning.JoinOptions`."""
    from gatecell.batch.meaning import join_arguments, join_frames

    arguments = join_arguments(options)
    embedding = arguments.pop("options")
    task = _task(ddf, "join", base_url, api_key, parallel, embedding, **arguments)
    meta = join_frames(_NoClient(), ddf._meta, right.iloc[:0], progress=False, **arguments)
    return ddf.map_partitions(_meaning, task, right, meta=meta)


class _NoClient:
    """Stands for a client where a join of empty frames gives its columns (no request)."""

    def embed(self, texts: list[str], **options: Any) -> Any:
        import numpy as np

        return np.zeros((len(texts), 1), dtype=np.float32)
