"""Meaning over data: embedding many short texts, and a semantic join, each against a peer
measured in the same run.

**Embedding.** ``--texts`` short texts (default 50,000), all new to the store, against the
neutral server (_neutral.py: 384 numbers a vector, base64 when asked), in another process.
CPU is this process's ``time.process_time()`` (its threads included: gatecell's event loop
and the store's writer, which keeps every vector); wall from ``perf_counter``:

- ``gatecell``: ``Gateway.embed(texts)``: batches of 512, 4 in flight, base64, every vector
  kept in the store and every request logged (the defaults);
- ``openai SDK``: ``client.embeddings.create(model, input=batch)`` for batches of 100 in a
  loop (the SDK asks base64 and decodes it with numpy too);
- ``gatecell, cache=False`` (information): the same, keeping no vector (what the store costs).

Goal: at least 5x the SDK's rows/s at no more of its CPU.

**Join.** A ``--rows`` x ``--rows`` join (default 20,000 x 20,000, 384 numbers a vector) of
random vectors, each contender in a fresh process, once: seconds, and peak RSS (``VmHWM``, its
high-water mark reset once the inputs are made) above the RSS it had then:

- ``gatecell``: ``gatecell.batch.nearest.top_k(A, B, k=1)`` (what ``df.gatecell.join`` runs:
  chunked products, 64 MiB blocks by default);
- ``numpy``: ``normalize(A) @ normalize(B).T`` and its argmax, the whole matrix held.

Goal: within 1.5x numpy's time at under a quarter of its memory.

    .venv/bin/python benchmarks/bench_embed.py [--texts 50000] [--rows 20000] [--reps 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time

from _common import (
    BENCH_KEY,
    HERE,
    PYTHON,
    contest,
    median,
    print_table,
    report_cpu,
    save,
    spawn_neutral,
    summary_row,
)

MODEL = "bench-model"
DIMENSIONS = 384
_fresh = itertools.count()


def texts(n: int) -> list[str]:
    """``n`` short texts no run has embedded before (the store keeps what it has seen)."""
    run = next(_fresh)
    return [f"ticket {run}-{i}: the printer on floor {i % 7} jams again" for i in range(n)]


def gatecell_maker(cache: bool):
    def make(server):
        from gatecell import Gateway

        gw = Gateway(base_url=server.url, api_key=BENCH_KEY)

        def work(n: int) -> int:
            vectors = gw.embed(texts(n), model=MODEL, progress=False, cache=cache)
            return vectors.shape[0] if vectors.shape[1] == DIMENSIONS else 0

        return work

    return make


def sdk_maker(server):
    import numpy as np
    from openai import OpenAI

    client = OpenAI(base_url=server.url + "/v1", api_key=BENCH_KEY, max_retries=0)

    def work(n: int) -> int:
        given = texts(n)
        done = 0
        for start in range(0, n, 100):
            answer = client.embeddings.create(model=MODEL, input=given[start : start + 100])
            matrix = np.asarray([d.embedding for d in answer.data], dtype=np.float32)
            done += matrix.shape[0] if matrix.shape[1] == DIMENSIONS else 0
        return done

    return work


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def join_child(kind: str, rows: int) -> None:
    """One join in this (fresh) process; prints seconds and RSS as JSON."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, DIMENSIONS), dtype=np.float32)
    b = rng.standard_normal((rows, DIMENSIONS), dtype=np.float32)
    with open("/proc/self/clear_refs", "w") as refs:  # the high-water mark starts again from now
        refs.write("5")
    before = _rss_kib("VmRSS")
    start = time.perf_counter()
    if kind == "gatecell":
        from gatecell.batch.nearest import top_k

        best, _ = top_k(a, b, 1)
        best = best[:, 0]
    else:

        def normalize(m):
            return m / np.linalg.norm(m, axis=1, keepdims=True)

        best = (normalize(a) @ normalize(b).T).argmax(axis=1)
    seconds = time.perf_counter() - start
    peak = _rss_kib("VmHWM")
    print(json.dumps({"seconds": seconds, "peak_mib": peak / 1024, "above_inputs_mib": (peak - before) / 1024,
                      "checksum": int(best[:100].sum())}))  # fmt: skip


def join(rows: int) -> dict[str, dict]:
    results = {}
    for kind in ("numpy", "gatecell"):
        done = subprocess.run(
            [PYTHON, str(HERE / "bench_embed.py"), "--join-child", kind, "--rows", str(rows)],
            capture_output=True,
            text=True,
            check=True,
        )
        results[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    if results["numpy"]["checksum"] != results["gatecell"]["checksum"]:
        raise SystemExit("the joins disagree")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--texts", type=int, default=50_000, help="texts per repetition")
    parser.add_argument("--rows", type=int, default=20_000, help="rows on each side of the join")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--join-child", choices=("gatecell", "numpy"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.join_child:
        join_child(args.join_child, args.rows)
        return

    with spawn_neutral() as server:
        makers = {
            "gatecell": gatecell_maker(True),
            "openai SDK": sdk_maker,
            "gatecell, cache=False": gatecell_maker(False),
        }
        runs = contest(makers, server, args.texts, args.reps)
    assert runs is not None
    print(f"\n{args.texts:,} texts per repetition, {args.reps} repetition(s); client CPU (process_time)\n")
    cpu = report_cpu(runs, args.texts, "text")
    rate = {name: args.texts / median([r["wall_s"] for r in rs]) for name, rs in runs.items()}
    print()
    print_table(["client", "texts/s"], [[name, round(value)] for name, value in rate.items()])

    joined = join(args.rows)
    print(f"\n{args.rows:,} x {args.rows:,} join, {DIMENSIONS} numbers a vector, k=1\n")
    print_table(
        ["contender", "seconds", "peak RSS MiB", "MiB above inputs"],
        [[k, v["seconds"], v["peak_mib"], v["above_inputs_mib"]] for k, v in joined.items()],
    )

    speed = rate["gatecell"] / rate["openai SDK"]
    cpu_ratio = cpu["gatecell"] / cpu["openai SDK"]
    time_ratio = joined["gatecell"]["seconds"] / joined["numpy"]["seconds"]
    ours, theirs = joined["gatecell"]["above_inputs_mib"], joined["numpy"]["above_inputs_mib"]
    memory_ratio = ours / theirs
    summary = [
        summary_row("embed: texts/s (Gateway.embed vs the openai SDK, batches of 100)",
                    f"{rate['gatecell']:,.0f}/s", f"{rate['openai SDK']:,.0f}/s", speed, ">= 5x", speed >= 5),
        summary_row("embed: CPU per text", f"{cpu['gatecell']:.1f} us", f"{cpu['openai SDK']:.1f} us",
                    cpu_ratio, "<= 1x", cpu_ratio <= 1),
        summary_row(f"join {args.rows:,} x {args.rows:,}: seconds (top_k vs numpy matrix)",
                    f"{joined['gatecell']['seconds']:.2f} s", f"{joined['numpy']['seconds']:.2f} s",
                    time_ratio, "<= 1.5x", time_ratio <= 1.5),
        summary_row("join: peak memory above the inputs",
                    f"{ours:.0f} MiB", f"{theirs:.0f} MiB",
                    memory_ratio, "< 0.25x", memory_ratio < 0.25),
    ]  # fmt: skip
    save(
        "bench_embed",
        "Embedding: neutral loopback server in a separate process, fresh texts each repetition; this "
        "process's CPU (process_time, threads included) and wall. Join: each contender once in a fresh "
        "process; seconds (perf_counter) and peak RSS (VmHWM, reset once the inputs are made) above the "
        "RSS then.",
        vars(args),
        {"cpu_us_per_text": cpu, "texts_per_s": rate, "runs": runs, "join": joined},
        summary,
    )


if __name__ == "__main__":
    sys.exit(main())
