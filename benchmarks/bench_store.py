"""The durable store: what logging costs the caller, what a cache hit costs, and FTS5 vs LIKE.

    .venv/bin/python benchmarks/bench_store.py                 # about a minute
    .venv/bin/python benchmarks/bench_store.py --exchanges 5000 --rows 20000

1. **Caller CPU per logged exchange** (`time.thread_time()` of the calling thread around
   ``n`` calls): ``Store.record_exchange`` against a no-op function with the same arguments (the cost of
   the call itself) and a plain ``sqlite3`` loop that inserts and commits each row on the
   caller's thread (WAL, ``synchronous=NORMAL``, the body dumped to JSON), the way a simple
   logger would. The writer thread's own CPU is reported too: it is the process's CPU less
   the caller's, until `flush` returns. Contenders take turns, the order rotating.
2. **A cache hit**: wall time of ``cache_key(...)`` over a 2 KB request plus ``lookup(key)``
   of a 2 KB reply, in a log of ``--rows`` exchanges, against a plain ``sqlite3`` SELECT by
   an indexed key (precomputed) in a table of the same rows.
3. **Search** (``gatecell logs -q``): FTS5 against LIKE on logs of the same ``--rows``
   exchanges, and the writer CPU per exchange with and without the FTS5 index to keep.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import median, percentile, print_table, save, summary_row

import gatecell.store.tables
from gatecell.store import Store, cache_key

CHAT = "/v1/chat/completions"
GW = "http://127.0.0.1:8000"


def _vocabulary(size: int = 5000) -> list[str]:
    """Pseudo-words, drawn Zipf-like below: a few very common, most rare, as in real text."""
    rng = random.Random(0)
    syllables = "ka lo mi ra te su no ve li da po ne fa ri go mu sa be zo ta".split()
    found: dict[str, None] = {}
    while len(found) < size:
        found["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))] = None
    return list(found)


VOCABULARY = _vocabulary()
WEIGHTS = [1 / rank for rank in range(1, len(VOCABULARY) + 1)]


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(VOCABULARY, WEIGHTS, k=n))


def request(rng: random.Random, i: int) -> bytes:
    """A chat request of about 2 KB, as the client sends it: JSON bytes."""
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": words(rng, 120)},
        {"role": "assistant", "content": words(rng, 100)},
        {"role": "user", "content": f"question {i}: " + words(rng, 40)},
    ]
    return json.dumps(
        {"model": "gpt-bench", "messages": messages, "temperature": 0.7, "max_tokens": 400}
    ).encode()


def reply(rng: random.Random, i: int) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A reply of about 2 KB: its text, usage and raw body."""
    text = f"answer {i}: " + words(rng, 300)
    usage = {"prompt_tokens": 420, "completion_tokens": 380, "total_tokens": 800}
    raw = {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion",
        "model": "gpt-bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage,
    }
    return text, usage, raw


def exchanges(n: int, seed: int = 1) -> list[tuple[bytes, str, dict[str, Any], dict[str, Any]]]:
    rng = random.Random(seed)
    return [(request(rng, i), *reply(rng, i)) for i in range(n)]


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class PlainLogger:
    """The peer: insert and commit each row on the caller's thread."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS log (time REAL, model TEXT, request TEXT, response TEXT, usage TEXT, "
            "latency REAL, raw TEXT)"
        )

    def log(self, body: bytes, text: str, usage: dict[str, Any], raw: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?, ?)",
            (time.time(), "gpt-bench", body.decode(), text, json.dumps(usage), 0.5, json.dumps(raw)),
        )


def bench_log(folder: Path, n: int, reps: int) -> dict[str, Any]:
    data = exchanges(n)
    store = Store(folder / "log.db")
    plain = PlainLogger(folder / "plain.db")

    def run_store() -> None:
        for body, text, usage, raw in data:
            store.record_exchange(CHAT, "gpt-bench", body, response=raw, text=text, usage=usage, latency=0.5,
                      status=200, request_id="req", gateway=GW)  # fmt: skip

    def run_noop() -> None:
        for body, text, usage, raw in data:
            _noop(CHAT, "gpt-bench", body, response=raw, text=text, usage=usage, latency=0.5,
                  status=200, request_id="req", gateway=GW)  # fmt: skip

    def run_plain() -> None:
        for body, text, usage, raw in data:
            plain.log(body, text, usage, raw)

    contenders = {
        "gatecell Store.record_exchange": run_store,
        "no-op call": run_noop,
        "sqlite3 insert+commit per row": run_plain,
    }
    run_store(), store.flush()  # warm up: the file made, the writer started
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in contenders}
    names = list(contenders)
    for rep in range(reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            gc.collect()
            cpu0, proc0, wall0 = time.thread_time(), time.process_time(), time.perf_counter()
            contenders[name]()
            caller = time.thread_time() - cpu0
            wall = time.perf_counter() - wall0
            if name == "gatecell Store.record_exchange":
                store.flush()
            runs[name].append(
                {"caller_cpu_s": caller, "process_cpu_s": time.process_time() - proc0, "wall_s": wall}
            )
    batches, rows = store.batches, store.rows
    store.close()
    per = {name: {k: median([r[k] for r in rs]) / n * 1e6 for k in rs[0]} for name, rs in runs.items()}
    print(f"\n1. caller CPU per logged exchange ({n} per repetition, {reps} repetitions, median)")
    print_table(
        ["contender", "caller CPU us", "process CPU us", "caller wall us"],
        [[name, p["caller_cpu_s"], p["process_cpu_s"], p["wall_s"]] for name, p in per.items()],
    )
    print(f"writer: {rows} entries in {batches} transactions ({rows / max(batches, 1):.0f} per transaction)")
    return {"per_exchange_us": per, "writer_batches": batches, "writer_rows": rows}


def fill(path: Path, rows: int, *, fts: bool) -> tuple[float, list[str]]:
    """A log of ``rows`` exchanges; returns the writer's CPU per exchange (us) and the keys."""
    real = gatecell.store.tables.fts5_available
    gatecell.store.tables.fts5_available = real if fts else (lambda: False)  # type: ignore[assignment]
    try:
        store = Store(path)
        store.record_exchange(
            CHAT, "gpt-bench", b"{}", text="first"
        )  # the file made, before the clock starts
        store.flush()
        data = exchanges(rows, seed=2)
        keys = [cache_key(CHAT, "gpt-bench", body, GW) for body, *_ in data]
        cpu0 = time.process_time()
        caller0 = time.thread_time()
        for (body, text, usage, raw), key in zip(data, keys, strict=True):
            store.record_exchange(
                CHAT, "gpt-bench", body, response=raw, text=text, usage=usage, gateway=GW, cache_key=key
            )
        caller = time.thread_time() - caller0
        store.flush()
        writer_us = (time.process_time() - cpu0 - caller) / rows * 1e6
        store.close()
    finally:
        gatecell.store.tables.fts5_available = real  # type: ignore[assignment]
    return writer_us, keys


def bench_hit(folder: Path, rows: int, hits: int) -> dict[str, Any]:
    path = folder / "hits.db"
    _, keys = fill(path, rows, fts=True)
    rng = random.Random(3)
    # The same requests again (every one a hit), kept as bytes and text only: with a list of
    # dicts, the collector's passes over it, not the lookups, would be what is measured.
    data = [(body, text) for body, text, _, _ in exchanges(rows, seed=2)]
    gc.collect()
    store = Store(path, log=False)
    plain = sqlite3.connect(folder / "plain-hits.db")
    plain.execute("CREATE TABLE cache (key TEXT PRIMARY KEY, response TEXT)")
    plain.executemany("INSERT INTO cache VALUES (?, ?)", [(k, d[1]) for k, d in zip(keys, data, strict=True)])
    plain.commit()
    picks = [rng.randrange(rows) for _ in range(hits)]
    store.lookup(keys[0])  # warm up: this thread's connection opened
    gatecell_ms, plain_ms = [], []
    for i in picks:
        body, text = data[i]
        t0 = time.perf_counter()
        hit = store.lookup(cache_key(CHAT, "gpt-bench", body, GW))
        gatecell_ms.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        row = plain.execute("SELECT response FROM cache WHERE key = ?", (keys[i],)).fetchone()
        plain_ms.append((time.perf_counter() - t0) * 1e3)
        if hit is None or hit.text != text or row[0] != text:
            raise SystemExit(f"wrong cache answer for exchange {i}")
    store.close()
    result = {
        "gatecell_ms": {"p50": median(gatecell_ms), "p99": percentile(gatecell_ms, 99)},
        "plain_select_ms": {"p50": median(plain_ms), "p99": percentile(plain_ms, 99)},
        "reply_bytes": len(data[0][1].encode()),
        "request_bytes": len(data[0][0]),
    }
    print(f"\n2. cache hit, wall per hit ({hits} hits in a log of {rows} exchanges)")
    print_table(
        ["contender", "p50 ms", "p99 ms"],
        [
            ["gatecell cache_key + lookup", result["gatecell_ms"]["p50"], result["gatecell_ms"]["p99"]],
            ["sqlite3 SELECT by key", result["plain_select_ms"]["p50"], result["plain_select_ms"]["p99"]],
        ],
    )
    return result


def bench_search(folder: Path, rows: int, queries: int) -> dict[str, Any]:
    writer = {}
    stores = {}
    for fts in (True, False):
        name = "fts5" if fts else "like"
        writer[name], _ = fill(folder / f"search-{name}.db", rows, fts=fts)
        stores[name] = Store(folder / f"search-{name}.db", log=False)
    terms = {  # by how many exchanges hold them
        "one exchange": f"question {rows // 2}",
        "rare word": VOCABULARY[2000],
        "common word": VOCABULARY[20],
        "most common word": VOCABULARY[0],
        "two words": f"{VOCABULARY[5]} {VOCABULARY[300]}",
    }
    timings: dict[str, dict[str, float]] = {name: {} for name in stores}
    matches: dict[str, dict[str, int]] = {name: {} for name in stores}
    for kind, term in terms.items():
        for name, store in stores.items():
            times = []
            for _ in range(queries):
                t0 = time.perf_counter()
                store.logs(n=20, q=term)
                times.append((time.perf_counter() - t0) * 1e3)
            timings[name][kind] = median(times)
            matches[name][kind] = len(store.logs(n=0, q=term))
    for store in stores.values():
        store.close()
    print(f"\n3. search (-q, the 20 newest matches) in a log of {rows} exchanges: median ms per query")
    print_table(
        ["query", "matches (FTS5 / LIKE)", "FTS5 ms", "LIKE ms"],
        [
            [f"{kind}: {term!r}", f"{matches['fts5'][kind]} / {matches['like'][kind]}",
             timings["fts5"][kind], timings["like"][kind]]
            for kind, term in terms.items()
        ],
    )  # fmt: skip
    print_table(["index", "writer CPU us/exchange"], [[name, us] for name, us in writer.items()])
    total = {name: sum(t.values()) for name, t in timings.items()}
    return {"query_ms": timings, "total_ms": total, "matches": matches, "writer_cpu_us": writer}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--exchanges", type=int, default=2000, help="log() calls per repetition")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rows", type=int, default=10_000, help="exchanges in the logs of parts 2 and 3")
    parser.add_argument("--hits", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=10, help="repetitions of each search query")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gatecell-bench-store-") as tmp:
        folder = Path(tmp)
        log = bench_log(folder, args.exchanges, args.reps)
        hit = bench_hit(folder, args.rows, args.hits)
        search = bench_search(folder, args.rows, args.queries)
    per = log["per_exchange_us"]
    added = per["gatecell Store.record_exchange"]["caller_cpu_s"] - per["no-op call"]["caller_cpu_s"]
    plain = per["sqlite3 insert+commit per row"]["caller_cpu_s"]
    hit_ms = hit["gatecell_ms"]["p50"]
    writer_us = (
        per["gatecell Store.record_exchange"]["process_cpu_s"]
        - per["gatecell Store.record_exchange"]["caller_cpu_s"]
    )
    fts, like = search["total_ms"]["fts5"], search["total_ms"]["like"]
    summary = [
        summary_row(
            "log(): caller CPU added per exchange (vs a no-op call)",
            f"{added:.1f} us",
            f"sqlite3 insert+commit per row {plain:.1f} us",
            added / plain,
            "<= 50 us",
            added <= 50,
        ),
        summary_row(
            "log(): writer thread CPU per exchange (info)",
            f"{writer_us:.1f} us",
            f"{log['writer_rows'] / max(log['writer_batches'], 1):.0f} exchanges per transaction",
            None,
            "info",
            None,
        ),
        summary_row(
            f"cache hit p50 wall, 2 KB reply, {args.rows} rows (cache_key + lookup)",
            f"{hit_ms:.3f} ms (p99 {hit['gatecell_ms']['p99']:.3f})",
            f"sqlite3 SELECT by key {hit['plain_select_ms']['p50']:.3f} ms",
            hit_ms / hit["plain_select_ms"]["p50"],
            "<= 2 ms",
            hit_ms <= 2,
        ),
        summary_row(
            f"logs -q, {args.rows} rows, the five queries' medians summed: FTS5 vs LIKE (info)",
            f"FTS5 {fts:.2f} ms",
            f"LIKE {like:.2f} ms",
            fts / like,
            "info",
            None,
        ),
        summary_row(
            "writer CPU per exchange: FTS5 index kept vs none (info)",
            f"{search['writer_cpu_us']['fts5']:.1f} us",
            f"{search['writer_cpu_us']['like']:.1f} us",
            search["writer_cpu_us"]["fts5"] / search["writer_cpu_us"]["like"],
            "info",
            None,
        ),
    ]
    print("\nsummary")
    print_table(
        ["measure", "gatecell", "peer (same run)", "ratio", "target", "met"],
        [
            [r["measure"], r["gatecell"], r["peer"], "" if r["ratio"] is None else f"{r['ratio']:.2f}x",
             r["target"], "" if r["met"] is None else ("yes" if r["met"] else "NO")]
            for r in summary
        ],
    )  # fmt: skip
    save(
        "bench_store",
        __doc__ or "",
        vars(args),
        {"log": log, "hit": hit, "search": search},
        summary,
    )


if __name__ == "__main__":
    main()
