"""``df.gatecell.map(template, ...)``: prompts over a DataFrame (or a Series) from pandas itself.

``import gatecell.pandas`` registers a ``gatecell`` accessor on DataFrames and Series through
pandas' own extension API (``pandas.api.extensions``), as pint-pandas and other libraries
do: registering is a side effect on pandas' classes, so it happens when asked for, never on
``import gatecell`` (which must not import pandas). The accessor's ``map`` is `Gateway.map`
over the object, with a default `Gateway` (settings from the environment, as ``Gateway()``
takes them; none: the local gateway) made on first use and shared, or ``gateway=`` yours::

    import gatecell.pandas

    df[["sentiment", "product", "stars"]] = df.gatecell.map("Read this review: {review}", schema=Review).frame
    df["label"] = df["review"].gatecell.map("Sentiment of: {item}", choices=["positive", "negative"]).text

And meaning over a column (each text embedded once, ever; see `gatecell.batch.meaning`)::

    df["vector"] = df.gatecell.embed("review")                    # a Series of vectors on df's index
    df.gatecell.search("battery dies too fast", on="review", k=10)  # rows + score, best first
    lines.gatecell.join(catalogue, left_on="item", right_on="name", k=1, threshold=0.8)
    df.gatecell.dedupe("title", threshold=0.92)                   # a group per row, first of each kept
    df.gatecell.cluster("answer", n=8, label=True)                # cluster and theme columns
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from gatecell.batch import Batch, MapOptions
    from gatecell.batch.embed import EmbedOptions
    from gatecell.batch.meaning import JoinOptions
    from gatecell.gateway import Gateway

__all__ = ["GatecellAccessor", "default_gateway"]

_made: list[Gateway] = []
_making = threading.Lock()


def default_gateway() -> Gateway:
    """The `Gateway` the accessor uses when not given one: made on first use, then shared."""
    with _making:
        if not _made:
            from gatecell.gateway import Gateway

            _made.append(Gateway())
        return _made[0]


@pd.api.extensions.register_dataframe_accessor("gatecell")
@pd.api.extensions.register_series_accessor("gatecell")
class GatecellAccessor:
    """``obj.gatecell``: gatecell on a pandas DataFrame or Series.

    **Parameters:**

    * **obj** - the DataFrame or Series (pandas hands it over).
    """

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def map(
        self,
        template: str,
        *,
        gateway: Gateway | None = None,
        progress: bool = True,
        **options: Unpack[MapOptions],
    ) -> Batch:
        """`Gateway.map` of ``template`` over these rows (a DataFrame's columns as its
        ``{field}``s, a Series' values as ``{item}``): a `Batch` on this index, with
        ``schema=`` or ``choices=`` typed (``.frame``, ``.text``, ``.errors``)."""
        return (gateway or default_gateway()).map(template, self._obj, progress=progress, **options)

    # -- meaning (see `gatecell.batch.meaning`) ----------------------------------------------
    #
    # ``**options`` are `Gateway.embed`'s (model, dimensions, batch_size, concurrency, rpm,
    # ...): the same for every text of a call, queries included, so their vectors compare.

    def embed(
        self,
        column: str | None = None,
        *,
        matrix: bool = False,
        gateway: Gateway | None = None,
        progress: bool = True,
        **options: Unpack[EmbedOptions],
    ) -> Any:
        """The vectors of a column's texts (a Series' own): a Series of float32 vectors on
        this index, named after the column; ``matrix=True``: the `Vectors` matrix itself, one
        row per row in order (``.meta`` says the model, dimensions, what was sent)."""
        from gatecell.batch.meaning import column_of, embed_column, vector_series

        series = column_of(self._obj, column)
        vectors = embed_column(gateway or default_gateway(), series, progress, dict(options))
        if matrix:
            return vectors
        return vector_series(vectors, series)

    def search(
        self,
        query: str,
        *,
        on: str | None = None,
        k: int = 10,
        threshold: float | None = None,
        rerank: str | None = None,
        gateway: Gateway | None = None,
        progress: bool = True,
        **options: Unpack[EmbedOptions],
    ) -> pd.DataFrame:
        """The ``k`` rows nearest ``query`` by meaning, best first, with a ``score`` column
        (cosine); ``threshold`` drops rows below it; ``rerank=MODEL`` orders the nearest
        through the gateway's ``/v1/rerank`` (a ``relevance`` column)."""
        from gatecell.batch.meaning import search_frame

        client = gateway or default_gateway()
        return search_frame(
            client, self._obj, query, on, k, threshold, rerank, progress=progress, options=dict(options)
        )

    def join(
        self,
        right: Any,
        *,
        gateway: Gateway | None = None,
        progress: bool = True,
        **options: Unpack[JoinOptions],
    ) -> pd.DataFrame:
        """A semantic join: each row beside the ``k`` (1) rows of ``right`` nearest it by
        meaning (``left_on`` here, ``right_on`` there), a ``score`` column, pairs below
        ``threshold`` dropped; ``how="left"`` keeps rows with no match; ``suffixes`` for names
        in both. On this index. The options are `gatecell.batch.meaning.JoinOptions`."""
        from gatecell.batch.meaning import join_arguments, join_frames

        client = gateway or default_gateway()
        return join_frames(client, self._obj, right, progress=progress, **join_arguments(options))

    def dedupe(
        self,
        column: str | None = None,
        *,
        threshold: float = 0.92,
        keep: str | bool = "first",
        gateway: Gateway | None = None,
        progress: bool = True,
        **options: Unpack[EmbedOptions],
    ) -> pd.DataFrame:
        """Near-duplicates: rows at least ``threshold`` alike (cosine), linked into groups; a
        ``group`` column, and the first row of each group kept (``keep=False``: every row)."""
        from gatecell.batch.meaning import dedupe_frame

        client = gateway or default_gateway()
        return dedupe_frame(
            client, self._obj, column, threshold, keep, progress=progress, options=dict(options)
        )

    def cluster(
        self,
        column: str | None = None,
        *,
        n: int = 8,
        label: bool = False,
        label_model: str | None = None,
        sample: int = 8,
        seed: int = 0,
        gateway: Gateway | None = None,
        progress: bool = True,
        **options: Unpack[EmbedOptions],
    ) -> pd.DataFrame:
        """``n`` clusters by meaning (scikit-learn's KMeans): a ``cluster`` column; with
        ``label=True`` a model (``label_model``, else the default chat model) names each
        cluster once from ``sample`` of its texts: a ``theme`` column, and the clusters'
        names, descriptions and sizes in ``.attrs["themes"]``."""
        from gatecell.batch.meaning import cluster_frame

        client = gateway or default_gateway()
        return cluster_frame(
            client, self._obj, column, n, label, label_model, sample, seed, progress, dict(options)
        )
