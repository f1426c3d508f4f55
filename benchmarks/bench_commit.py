"""What waiting for the log's commit adds to a call: a call returns only once its exchange is
committed (what the notebook shows is in the file), so its wall time holds that wait.

A neutral server in another process (_neutral.py) answers every chat completion with the
same small reply from a cache. In this process each contender makes ``--calls`` calls one
after the other: ``Gateway`` and ``AsyncGateway`` (its calls awaited one by one on one event
loop), each with the log on (in a fresh GATECELL_HOME) and off. ``time.perf_counter()``
around every call gives its wall time; around the client's wait for its commit
(`gatecell.journal.Commit`, wrapped here) gives the wait itself. Contenders take turns
within every repetition; percentiles are over all the calls of all repetitions.

Reported: the commit wait's p50 / p99 / max, per client and over both (target: p99 under
1 ms), and each contender's call wall time p50 / p99, so the log's whole share (the wait,
and the caller's work on the entry) shows as log on minus log off.

    .venv/bin/python benchmarks/bench_commit.py [--calls 2000] [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Callable, Generator
from typing import Any

from _common import BENCH_KEY, chat_body, percentile, print_table, save, spawn_neutral, summary_row

MODEL = "bench-model"
MESSAGES = chat_body(MODEL)["messages"]
REPLY = "Hello from the neutral server."

waits: dict[str, list[float]] = {"Gateway": [], "AsyncGateway": []}  # seconds each call waited


def _time_the_waits() -> None:
    from gatecell import journal

    sync_wait, async_wait = journal.Commit.wait, journal.Commit.__await__

    def wait(self: Any) -> None:
        started = time.perf_counter()
        sync_wait(self)
        waits["Gateway"].append(time.perf_counter() - started)

    def awaited(self: Any) -> Generator[Any, None, None]:
        started = time.perf_counter()
        yield from async_wait(self)
        waits["AsyncGateway"].append(time.perf_counter() - started)

    journal.Commit.wait = wait  # type: ignore[method-assign]
    journal.Commit.__await__ = awaited  # type: ignore[method-assign]


def contenders(url: str) -> dict[str, Callable[[int], list[float]]]:
    from gatecell import AsyncGateway, Gateway

    def sync(log: bool) -> Callable[[int], list[float]]:
        gw = Gateway(base_url=url, api_key=BENCH_KEY, log=log)

        def calls(n: int) -> list[float]:
            times = []
            for _ in range(n):
                started = time.perf_counter()
                reply = gw.chat(model=MODEL, messages=MESSAGES)
                times.append(time.perf_counter() - started)
                assert reply.text == REPLY
            return times

        return calls

    def asynchronous(log: bool) -> Callable[[int], list[float]]:
        loop = asyncio.new_event_loop()
        gw = AsyncGateway(base_url=url, api_key=BENCH_KEY, log=log)

        async def go(n: int) -> list[float]:
            times = []
            for _ in range(n):
                started = time.perf_counter()
                reply = await gw.chat(model=MODEL, messages=MESSAGES)
                times.append(time.perf_counter() - started)
                assert reply.text == REPLY
            return times

        return lambda n: loop.run_until_complete(go(n))

    return {
        "Gateway, log on": sync(True),
        "Gateway, log off": sync(False),
        "AsyncGateway, log on": asynchronous(True),
        "AsyncGateway, log off": asynchronous(False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per contender and repetition")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    _time_the_waits()
    with spawn_neutral(1) as server:
        runs = contenders(server.url)
        for work in runs.values():
            work(200)  # warm up: imports, connections, the log's file and writer
        for kind in waits.values():
            kind.clear()
        times: dict[str, list[float]] = {name: [] for name in runs}
        names = list(runs)
        for rep in range(args.reps):
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                gc.collect()
                times[name] += runs[name](args.calls)
    ms = 1e3
    rows = [
        [f"{kind}: the commit wait", *(percentile(w, p) * ms for p in (50, 99)), max(w) * ms]
        for kind, w in waits.items()
    ]
    rows += [[name, *(percentile(t, p) * ms for p in (50, 99)), max(t) * ms] for name, t in times.items()]
    print(f"\n{args.calls} calls per contender and repetition, {args.reps} repetitions; wall ms\n")
    print_table(["", "p50 ms", "p99 ms", "max ms"], rows)
    every = waits["Gateway"] + waits["AsyncGateway"]
    wait50, wait99 = percentile(every, 50) * ms, percentile(every, 99) * ms
    added = {
        kind: (
            percentile(times[f"{kind}, log on"], 50) * ms - percentile(times[f"{kind}, log off"], 50) * ms,
            percentile(times[f"{kind}, log on"], 99) * ms - percentile(times[f"{kind}, log off"], 99) * ms,
        )
        for kind in ("Gateway", "AsyncGateway")
    }
    for kind, (p50, p99) in added.items():
        print(f"{kind}: the log adds {p50:+.3f} ms at p50, {p99:+.3f} ms at p99 (log on - log off)")
    off99 = {kind: percentile(times[f"{kind}, log off"], 99) * ms for kind in added}
    summary = (
        [
            summary_row(
                "commit wait per call, p99 (Gateway and AsyncGateway)",
                f"{wait99:.2f} ms",
                f"p50 {wait50:.2f} ms",
                None,
                "< 1 ms",
                wait99 < 1.0,
            )
        ]
        + [
            summary_row(
                f"commit wait per call, p50 / p99 ({kind}, info)",
                f"{percentile(w, 50) * ms:.2f} / {percentile(w, 99) * ms:.2f} ms",
                "",
                None,
                "info",
                None,
            )
            for kind, w in waits.items()
        ]
        + [
            summary_row(
                f"call wall, log on - off, p50 / p99 ({kind})",
                f"{p50:+.2f} / {p99:+.2f} ms",
                f"log off p99 {off99[kind]:.2f} ms",
                None,
                "info",
                None,
            )
            for kind, (p50, p99) in added.items()
        ]
    )
    save(
        "bench_commit",
        "Neutral loopback server in a separate process. Wall time (perf_counter) of each of --calls "
        "sequential chat calls per contender (Gateway / AsyncGateway, log on / off), contenders "
        "interleaved over reps; the commit wait timed inside the log-on calls. Percentiles over all calls.",
        vars(args),
        {
            "commit_wait_ms": {
                kind: {p: percentile(w, p) * ms for p in (50, 90, 99, 99.9)} for kind, w in waits.items()
            },
            "call_wall_ms": {
                name: {p: percentile(t, p) * ms for p in (50, 90, 99)} for name, t in times.items()
            },
        },
        summary,
    )


if __name__ == "__main__":
    main()
