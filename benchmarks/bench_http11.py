"""Client CPU per request of the lean HTTP/1.1 pool (`gatecell.wire.transport.http11`), the batch's path.

A neutral server in another process (_neutral.py, a raw asyncio protocol) answers every
chat completion with the same small reply from a cache. In this process a `Pool` sends
``--requests`` small POSTs with 64 in flight over kept-alive connections, each answer read
whole under a size cap (``Answer.body``), as the batch engine does; ``time.process_time()``
around them is the CPU cost (this process runs one thread: it is that thread's CPU).

With ``--baseline REV...`` the pool of each of those git revisions runs too, all of them
taking turns within every repetition; the median is reported. That is how the parsers were
compared: ``--baseline 01edcea e52f325`` runs the lax regex parser the pool had, and the h11
reader that was tried and dropped (it cost the batch over 15% of its CPU per row), beside
today's strict parser.

With ``--batch ROWS`` what counts is measured instead: CPU per row and rows per second of
``gw.map`` (shipped defaults: log, cache and progress bar on; as in bench_batch.py) over
ROWS one-token prompts, this tree and each baseline's whole ``src/`` taking turns, each run
in a fresh process (so that two versions of gatecell never share one), the median per tree
reported.

    .venv/bin/python benchmarks/bench_http11.py [--requests 10000] [--reps 7] [--baseline REV...]
        [--batch ROWS]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import subprocess
import tempfile
from pathlib import Path
from types import ModuleType

from _common import (
    BENCH_KEY,
    HERE,
    PYTHON,
    Child,
    chat_body,
    contest,
    median,
    print_table,
    report_cpu,
    save,
    spawn_neutral,
)

CONCURRENCY = 64
REPLY = b"Hello from the neutral server."
MODULE = "src/gatecell/wire/transport/http11.py"


def _module_at(revision: str) -> ModuleType:
    """``wire/http11.py`` as it was at ``revision``, beside this tree's ``gatecell.wire``
    (whose modules it may import)."""
    source = subprocess.run(
        ["git", "show", f"{revision}:{MODULE}"], cwd=HERE.parent, capture_output=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="gatecell-bench-")) / f"http11_{revision}.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location(f"gatecell.wire.{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# One run of `gw.map` in a fresh process: prints its CPU per row (the writer thread's included)
# and its rows per second.
_MAP = """
import gc, os, sys, tempfile, time
from gatecell import Gateway

gw = Gateway(base_url=sys.argv[1], api_key=sys.argv[2])

def work(n):
    os.environ["GATECELL_HOME"] = tempfile.mkdtemp(prefix="gatecell-bench-http11-")
    batch = gw.map("row {item}", range(n), model="bench-model", max_tokens=1, concurrency=64)
    return sum(t == "Hello from the neutral server." for t in batch.text)

assert work(200) == 200
n = int(sys.argv[3])
gc.collect()
cpu, wall = time.process_time(), time.perf_counter()
assert work(n) == n
print((time.process_time() - cpu) / n * 1e6, n / (time.perf_counter() - wall))
"""


def _tree_at(revision: str) -> str:
    """The ``src/`` folder of ``revision``, unpacked in a temporary folder."""
    folder = tempfile.mkdtemp(prefix=f"gatecell-bench-{revision}-")
    archive = subprocess.run(
        ["git", "archive", revision, "src"], cwd=HERE.parent, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    return f"{folder}/src"


def batch(rows: int, reps: int, baselines: list[str]) -> dict[str, dict[str, float]]:
    """Median CPU us per row and rows/s of `gw.map` with this tree and each baseline's, taking
    turns."""
    trees = {"this tree": str(HERE.parent / "src"), **{f"@{rev}": _tree_at(rev) for rev in baselines}}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    names = list(trees)
    with spawn_neutral(1) as server:
        for rep in range(reps):
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                env = {**os.environ, "PYTHONPATH": trees[name]}
                argv = [PYTHON, "-c", _MAP, server.url, BENCH_KEY, str(rows)]
                done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
                cpu, rate = map(float, done.stdout.split())
                runs[name].append((cpu, rate))
    per = {
        name: {"cpu_us_per_row": median([c for c, _ in v]), "rows_per_s": median([r for _, r in v])}
        for name, v in runs.items()
    }
    first = per["this tree"]
    print(f"\n{rows:,} one-token prompts through gw.map, {reps} repetitions, medians\n")
    print_table(
        ["gatecell", "CPU us/row", "vs this tree", "rows/s", "vs this tree", "CPU runs"],
        [
            [
                name,
                p["cpu_us_per_row"],
                f"{p['cpu_us_per_row'] / first['cpu_us_per_row']:.2f}x",
                round(p["rows_per_s"]),
                f"{p['rows_per_s'] / first['rows_per_s']:.2f}x",
                " ".join(f"{c:.0f}" for c, _ in sorted(runs[name])),
            ]
            for name, p in per.items()
        ],
    )
    return per


def sender(http11: ModuleType):
    """A contender: ``work(n)`` sends n POSTs over a fresh pool, returns how many came back right."""

    def make(server: Child):
        import json

        body = json.dumps(chat_body("bench-model", max_tokens=1)).encode()
        headers = [
            (b"authorization", f"Bearer {BENCH_KEY}".encode()),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json"),
        ]

        async def go(n: int) -> int:
            pool = http11.Pool(server.url, answer_timeout=None, idle=CONCURRENCY)
            raw = http11.with_body("POST", pool.request_head("POST", b"/v1/chat/completions", headers), body)
            left, right = n, 0

            async def worker() -> None:
                nonlocal left, right
                while left > 0:
                    left -= 1
                    answer = await pool.send("POST", raw)
                    try:
                        right += answer.status == 200 and REPLY in await answer.body(1 << 20)
                    finally:
                        answer.release()

            try:
                await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
            finally:
                await pool.aclose()
            return right

        return lambda n: asyncio.run(go(n))

    return make


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument(
        "--baseline", nargs="*", default=[], help="git revisions whose wire/http11.py runs too"
    )
    parser.add_argument("--profile", action="store_true", help="profile this tree's pool instead")
    parser.add_argument("--batch", type=int, metavar="ROWS", help="measure gw.map's CPU per row instead")
    args = parser.parse_args()
    if args.batch:
        per = batch(args.batch, args.reps, args.baseline)
        save("bench_http11_batch", __doc__.split("\n\n")[3], vars(args), {"per_tree": per}, [])
        return
    from gatecell.wire.transport import http11

    makers = {"http11": sender(http11)}
    for revision in args.baseline:
        makers[f"http11 @{revision}"] = sender(_module_at(revision))
    with spawn_neutral() as server:
        runs = contest(makers, server, args.requests, args.reps, profile_first=args.profile)
    if runs is None:
        return
    print(
        f"\n{args.requests:,} requests per repetition, {CONCURRENCY} in flight, {args.reps} repetitions,"
        " median client CPU (process_time)\n"
    )
    per = report_cpu(runs, args.requests, "request")
    save(
        "bench_http11",
        __doc__.split("\n\n")[1],
        vars(args),
        {"cpu_us_per_request": per, "runs": runs},
        [],
    )


if __name__ == "__main__":
    main()
