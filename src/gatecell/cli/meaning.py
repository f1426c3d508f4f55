"""``gatecell embed``, ``gatecell cache clear --embeddings`` and ``gatecell logs --similar``.

``embed`` reads a CSV, TSV, JSONL or Parquet file whole (pandas), checks the column (every
value a text: a missing or empty one is one line naming its row, before any request), embeds
it with `Gateway.embed` (each text once, ever) and writes a Parquet file: the input's columns
and ``embedding``, a fixed-size list of float32 per row.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gatecell.wire.transport.errors import InvalidRequest
from gatecell.wire.util._terminal import printable

__all__ = ["add_parsers", "similar"]

_READERS = {".csv": "read_csv", ".tsv": "read_csv", ".jsonl": "read_json", ".ndjson": "read_json"}


def _read(path: Path) -> Any:
    import pandas as pd

    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return pd.read_parquet(path)
    if suffix not in _READERS:
        raise InvalidRequest("input", f"{path.name}: not a .csv, .tsv, .jsonl, .ndjson or .parquet file")
    if suffix == ".tsv":
        return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    if suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    return pd.read_json(path, lines=True, dtype=False)


def _write(frame: Any, vectors: Any, path: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
    column = pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])
    pq.write_table(table.append_column("embedding", column), path)


def _embed(args: argparse.Namespace) -> int:
    from gatecell.gateway import Gateway

    source, target = Path(args.input), Path(args.output)
    if target.suffix.lower() != ".parquet":
        raise InvalidRequest("output", f"{target.name}: the vectors go to a .parquet file")
    frame = _read(source)
    if args.column not in frame.columns:
        columns = ", ".join(map(str, frame.columns))
        raise InvalidRequest("column", f"{args.column!r} is not a column of {source.name}: {columns}")
    first = 2 if source.suffix.lower() in (".csv", ".tsv") else 1  # a CSV's header is its line 1
    labels = [f"line {first + i}" for i in range(len(frame))]
    options = {
        "model": args.model,
        "dimensions": args.dimensions,
        "batch_size": args.batch_size,
        "concurrency": args.jobs,
        "rpm": args.rpm,
        "tpm": args.tpm,
    }
    with Gateway() as gw:
        vectors = gw.embed(frame[args.column].tolist(), labels=labels, progress=not args.quiet, **options)
    _write(frame, vectors, target)
    meta = vectors.meta
    assert meta is not None
    sent = f"{meta.sent:,} embedded now in {meta.requests:,} requests, {meta.cached:,} rows from the store"
    shape = f"{vectors.shape[1]} dimensions ({meta.model})"
    print(
        f"{len(frame):,} rows, {meta.unique:,} distinct texts: {sent}; {shape} -> {target}", file=sys.stderr
    )
    return 0


def _clear(args: argparse.Namespace) -> int:
    from gatecell.store import Store, settings

    if not args.embeddings:
        raise InvalidRequest("cache clear", "say what to clear: --embeddings (the kept vectors)")
    path = settings().path
    if not path.exists():
        print(f"gatecell: no log yet at {path}", file=sys.stderr)
        return 0
    store = Store(path)
    try:
        count = store.clear_vectors()
    finally:
        store.close()
    print(f"{count:,} kept vectors forgotten ({path})", file=sys.stderr)
    return 0


def similar(store: Any, text: str, n: int) -> int:
    """``gatecell logs --similar TEXT``: the nearest exchanges, best first, as Markdown."""
    from gatecell.batch.meaning import similar_exchanges
    from gatecell.gateway import Gateway
    from gatecell.store.report import exchange_text

    with Gateway() as gw:
        rows = similar_exchanges(gw, store, text, n or 3)
    for row in rows:
        print(f"<!-- similarity {row['similarity']:.3f} -->")
        print(printable(exchange_text(row)))
    return 0


def add_parsers(sub: Any) -> None:
    """``embed`` and ``cache``, on the ``gatecell`` command's subparsers."""
    p = sub.add_parser(
        "embed",
        help="embed a column of texts (CSV, TSV, JSONL, Parquet) into a Parquet file",
        description="Each text is embedded once, ever: duplicates are sent once, and vectors are kept in "
        "the store (GATECELL_HOME), so running it again sends only texts it has not seen. The output holds "
        "the input's columns and 'embedding' (float32, one list per row).",
    )
    p.add_argument("-i", "--input", required=True, metavar="FILE", help="rows.csv, .tsv, .jsonl or .parquet")
    p.add_argument("--column", required=True, help="the column of texts")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="vectors.parquet")
    p.add_argument("-m", "--model", help="default: GATECELL_EMBED_MODEL, else local-embed")
    p.add_argument("--dimensions", type=int, help="shorter vectors, where the model takes it")
    p.add_argument(
        "--batch-size", type=int, metavar="N", help="texts a request (GATECELL_EMBED_BATCH, else 512)"
    )
    p.add_argument(
        "-j", "--jobs", type=int, metavar="N", help="requests at once (GATECELL_EMBED_CONCURRENCY, else 4)"
    )
    p.add_argument("--rpm", type=float, help="at most this many requests per minute (GATECELL_RPM)")
    p.add_argument("--tpm", type=float, help="at most this many tokens per minute (GATECELL_TPM)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=_embed)

    cache = sub.add_parser("cache", help="the store's caches")
    verbs = cache.add_subparsers(dest="verb", metavar="VERB", required=True)
    clear = verbs.add_parser("clear", help="forget what a cache keeps")
    clear.add_argument(
        "--embeddings", action="store_true", help="the vectors kept so that texts are embedded once"
    )
    clear.set_defaults(run=_clear)
