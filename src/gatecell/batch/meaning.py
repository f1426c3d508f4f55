"""Meaning over DataFrames: embed a column, search it, join two frames by meaning, find
near-duplicates, cluster and name themes. What ``df.gatecell.embed / search / join / dedupe
/ cluster``, ``gatecell.dask`` and ``%gatecell search`` run, written once, over any client
with ``embed``, ``rerank`` and ``map`` (`gatecell.gateway.Gateway`).

Every row keeps its label: results are rows of the frames given, on their own index, in the
order the operation defines (best first), never renumbered. The vectors come from the
client's ``embed`` (each text once, ever; see `gatecell.batch.embed`), the neighbours from
`nearest` (exact, bounded memory, stable ties). pandas and scikit-learn are imported when
used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from gatecell.wire.transport.errors import InvalidRequest, echo

from .embed import EmbedOptions
from .nearest import check, groups, normalized, pairs_over, top_k

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Theme",
    "column_of",
    "embed_column",
    "vector_series",
    "search_frame",
    "join_frames",
    "JoinOptions",
    "join_arguments",
    "dedupe_frame",
    "cluster_frame",
    "similar_exchanges",
    "RERANK_POOL",
]

RERANK_POOL = 4  # with ``rerank=``, k x this many nearest go to the reranker
_SAMPLE_CHARS = 300  # of each sample text in a theme's prompt


class Theme(BaseModel):
    """What a model names a cluster: a short ``name`` and a one-line ``description``."""

    name: str = Field(description="a short name for what the texts share, 1 to 4 words")
    description: str = Field(description="one line saying what the texts are about")


def column_of(obj: Any, column: str | None, what: str = "on") -> Any:
    """The Series to work on: a Series itself, or a DataFrame's ``column`` (named, or the
    only column); an `InvalidRequest` naming the columns otherwise."""
    import pandas as pd

    if isinstance(obj, pd.Series):
        return obj
    if column is None:
        if obj.shape[1] == 1:
            return obj.iloc[:, 0]
        raise InvalidRequest(what, f"which column? one of {', '.join(map(str, obj.columns))}")
    if column not in obj.columns:
        columns = ", ".join(map(str, obj.columns))
        raise InvalidRequest(what, f"{echo(column)} is not a column; the columns: {columns}")
    return obj[column]


def embed_column(client: Any, series: Any, progress: bool, options: dict[str, Any]) -> np.ndarray:
    """The vectors of a Series' texts, one row per row (a missing or empty value refused in
    one line naming its row)."""
    return client.embed(series.tolist(), labels=list(series.index), progress=progress, **options)


def vector_series(vectors: np.ndarray, series: Any) -> Any:
    """The rows of ``vectors`` as a Series of plain float32 arrays on ``series``' index and name."""
    import numpy as np
    import pandas as pd

    return pd.Series(list(np.asarray(vectors)), index=series.index, name=series.name, dtype=object)


def _query_vector(client: Any, query: str, options: dict[str, Any]) -> np.ndarray:
    if not isinstance(query, str) or not query.strip():
        raise InvalidRequest("query", f"must be a text with something in it; got {echo(query)}")
    return client.embed([query], progress=False, **options)


def search_frame(
    client: Any,
    obj: Any,
    query: str,
    on: str | None,
    k: int = 10,
    threshold: float | None = None,
    rerank: str | None = None,
    score: str = "score",
    progress: bool = True,
    chunk: int | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    """The ``k`` rows nearest ``query`` by meaning, best first, with their cosine in a
    ``score`` column (a Series becomes a frame of its values and the score). With ``rerank``
    (a model), the ``k x RERANK_POOL`` nearest go to the gateway's ``/v1/rerank`` and come
    back in its order, its score in ``relevance``."""
    check(k, threshold)
    options = options or {}
    series = column_of(obj, on)
    pool = k * RERANK_POOL if rerank else k
    vectors = embed_column(client, series, progress, options)
    positions, scores = top_k(_query_vector(client, query, options), vectors, pool, threshold, chunk)
    found = positions[0] >= 0
    positions, best = positions[0][found], scores[0][found]
    frame = obj.to_frame() if obj.ndim == 1 else obj
    rows = frame.iloc[positions].copy()
    rows[score] = best
    if rerank and len(rows):
        ranked = client.rerank(query, series.iloc[positions].astype(str).tolist(), model=rerank, top_n=k)
        rows = rows.iloc[ranked.indices].copy()
        rows["relevance"] = [r.relevance_score for r in ranked]
    return rows.iloc[:k]


class JoinOptions(EmbedOptions, total=False):
    """Keyword arguments of a semantic join (``df.gatecell.join``, ``gatecell.dask.join``):
    where to match and how, then `EmbedOptions`. See `join_frames`."""

    left_on: str | None
    right_on: str | None
    k: int
    threshold: float | None
    how: str  # "inner" (default) or "left"
    suffixes: tuple[str, str]  # for names in both frames: ("", "_right")


_JOIN = ("left_on", "right_on", "k", "threshold", "how", "suffixes")


def join_arguments(options: JoinOptions | dict[str, Any]) -> dict[str, Any]:
    """`join_frames`' keyword arguments from `JoinOptions`: the join's own, and the embed
    options in ``options``."""
    arguments: dict[str, Any] = {name: options[name] for name in _JOIN if name in options}  # type: ignore[literal-required]
    arguments["options"] = {name: value for name, value in options.items() if name not in _JOIN}
    return arguments


def join_frames(
    client: Any,
    left: Any,
    right: Any,
    left_on: str | None = None,
    right_on: str | None = None,
    k: int = 1,
    threshold: float | None = None,
    how: str = "inner",
    suffixes: tuple[str, str] = ("", "_right"),
    score: str = "score",
    progress: bool = True,
    chunk: int | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    """Each left row beside its ``k`` nearest right rows by meaning (best first), with their
    cosine in ``score``; pairs below ``threshold`` dropped. ``how="inner"`` keeps only left
    rows with a match, ``"left"`` every left row (no match: missing values). The result is on
    the left's index (a label repeated once per match)."""
    import numpy as np
    import pandas as pd

    if how not in ("inner", "left"):
        raise InvalidRequest("how", f"must be 'inner' or 'left'; got {echo(how)}")
    check(k, threshold)
    options = options or {}
    lseries, rseries = column_of(left, left_on, "left_on"), column_of(right, right_on, "right_on")
    both = embed_column(client, _concat(lseries, rseries), progress, options)  # texts in both: sent once
    lvec, rvec = both[: len(lseries)], both[len(lseries) :]
    positions, scores = top_k(lvec, rvec, k, threshold, chunk)
    rows = np.repeat(np.arange(len(lseries)), k)
    matched, best = positions.ravel(), scores.ravel()
    keep = matched >= 0
    if how == "left":  # a left row with no match keeps one row, its right side missing
        first = np.zeros_like(keep)
        first[::k] = True
        keep |= first & ~(positions >= 0).any(axis=1).repeat(k)
    rows, matched, best = rows[keep], matched[keep], best[keep]
    lframe = left.to_frame() if left.ndim == 1 else left
    rframe = right.to_frame() if right.ndim == 1 else right
    mine = lframe.iloc[rows].reset_index(drop=True)
    theirs = rframe.reset_index(drop=True).reindex(matched).reset_index(drop=True)  # -1: missing values
    clash = set(mine.columns) & set(theirs.columns)
    mine = mine.rename(columns={c: f"{c}{suffixes[0]}" for c in clash})
    theirs = theirs.rename(columns={c: f"{c}{suffixes[1]}" for c in clash})
    joined = pd.concat([mine, theirs], axis=1)
    joined.index = lframe.index[rows]
    joined[score] = best
    return joined


def _concat(first: Any, second: Any) -> Any:
    import pandas as pd

    return pd.concat([first.reset_index(drop=True), second.reset_index(drop=True)], ignore_index=True)


def dedupe_frame(
    client: Any,
    obj: Any,
    column: str | None,
    threshold: float = 0.92,
    keep: str | bool = "first",
    group: str = "group",
    progress: bool = True,
    chunk: int | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    """Near-duplicates: rows whose cosine is at least ``threshold`` are linked, and linked
    rows form a group (so A~B and B~C put A, B and C together). A ``group`` column numbers
    the groups in the order of their first row; ``keep="first"`` (the default) keeps the
    first row of each group, ``keep=False`` every row."""
    if keep not in ("first", False):
        raise InvalidRequest("keep", f"must be 'first' or False; got {echo(keep)}")
    check(None, threshold)
    series = column_of(obj, column)
    vectors = embed_column(client, series, progress, options or {})
    left, right = pairs_over(vectors, threshold, chunk)
    numbers = groups(len(series), left, right)
    frame = (obj.to_frame() if obj.ndim == 1 else obj).copy()
    frame[group] = numbers
    if keep == "first":
        frame = frame[~frame[group].duplicated().to_numpy()]
    return frame


def cluster_frame(
    client: Any,
    obj: Any,
    column: str | None,
    n: int = 8,
    label: bool = False,
    model: str | None = None,
    sample: int = 8,
    seed: int = 0,
    progress: bool = True,
    options: dict[str, Any] | None = None,
) -> Any:
    """Rows grouped by meaning into ``n`` clusters (scikit-learn's KMeans on the normalised
    vectors, seeded): a ``cluster`` column, numbered in the order of each cluster's first
    row. With ``label``, a model (``model``, else the client's default chat model) names
    each cluster once, through a typed answer (`Theme`: a name and a one-line description),
    from the ``sample`` texts nearest its centre: a ``theme`` column, and the table of
    clusters (cluster, theme, description, size) in ``.attrs["themes"]``."""
    import numpy as np
    import pandas as pd

    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InvalidRequest("n", f"must be a whole number of clusters >= 1; got {echo(n)}")
    if not isinstance(sample, int) or isinstance(sample, bool) or sample < 1:
        raise InvalidRequest("sample", f"must be a whole number >= 1; got {echo(sample)}")
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        raise InvalidRequest(
            "cluster", "needs scikit-learn, which is not installed: pip install 'gatecell[data]'"
        ) from None
    series = column_of(obj, column)
    if len(series) < n:
        raise InvalidRequest("n", f"{n} clusters need at least {n} rows; there are {len(series)}")
    vectors = normalized(embed_column(client, series, progress, options or {}))
    kmeans = KMeans(n_clusters=n, random_state=seed, n_init=10).fit(vectors)
    _, first, raw = np.unique(kmeans.labels_, return_index=True, return_inverse=True)
    renumber = np.argsort(np.argsort(first))  # clusters numbered by their first row
    numbers = renumber[raw.ravel()]
    frame = (obj.to_frame() if obj.ndim == 1 else obj).copy()
    frame["cluster"] = numbers
    if not label:
        return frame
    centres = normalized(kmeans.cluster_centers_[np.argsort(renumber)])
    texts = series.astype(str).to_numpy()
    prompts = []
    for number in range(n):
        members = (numbers == number).nonzero()[0]
        nearest = members[np.argsort(-(vectors[members] @ centres[number]), kind="stable")[:sample]]
        listed = "\n".join(f"- {' '.join(texts[i].split())[:_SAMPLE_CHARS]}" for i in nearest)
        prompts.append(
            "These texts were grouped together by meaning:\n"
            f"{listed}\n"
            "Name the theme they share: a short name (1 to 4 words) and a one-line description."
        )
    asked = {"model": model} if model else {}
    batch = client.map("{prompt}", pd.DataFrame({"prompt": prompts}), schema=Theme, progress=False, **asked)
    named = batch.frame
    sizes = np.bincount(numbers, minlength=n)
    themes = pd.DataFrame(
        {
            "cluster": range(n),
            "theme": named["name"].to_numpy(),
            "description": named["description"].to_numpy(),
        }
    ).assign(size=sizes)
    frame["theme"] = themes["theme"].to_numpy()[numbers]
    frame.attrs["themes"] = themes
    return frame


_LOG_CHARS = 4000  # of an exchange's prompt and reply embedded for ``logs --similar``


def similar_exchanges(
    client: Any, store: Any, text: str, n: int = 5, scan: int = 5000, options: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The ``n`` logged exchanges nearest ``text`` by meaning, best first, each the log's
    dict with a ``similarity`` (cosine) added. The newest ``scan`` exchanges with a prompt or
    a reply are embedded (their first `_LOG_CHARS` characters: once ever, as every text)."""
    from gatecell.wire.apis.names import api_of

    check(n, None)
    options = options or {}
    query = _query_vector(client, text, options)
    rows, texts = [], []
    for row in store.logs(n=scan):
        if api_of(row["endpoint"]) in ("embeddings", "rerank"):
            continue
        said = " ".join(f"{row['prompt'] or ''}\n{row['response'] or ''}".split())[:_LOG_CHARS]
        if said:
            rows.append(row)
            texts.append(said)
    if not texts:
        return []
    vectors = client.embed(texts, progress=False, **options)
    positions, scores = top_k(query, vectors, n)
    found = positions[0] >= 0
    return [
        {**rows[p], "similarity": float(s)}
        for p, s in zip(positions[0][found], scores[0][found], strict=True)
    ]
