"""Prompts over data: rows per second and client CPU per row of ``gw.map`` against the loops
people write, side by side in one run; then rate-limit accuracy and memory.

1. Throughput. A neutral server in another process (_neutral.py) answers every chat
   completion with the same small reply from a cache. Each contender sends ``--rows``
   one-token prompts with 64 in flight: the official SDK (``AsyncOpenAI`` + a semaphore +
   ``gather``), bare ``httpx.AsyncClient`` with a pool of 64 and of 8, ``aiohttp`` when it
   is installed, a raw asyncio keep-alive socket loop (the floor), and gatecell's
   ``Gateway.map`` with its shipped defaults: log on, cache on, progress bar on, each
   repetition in a fresh data folder (so nothing comes from the cache, and the log's writer
   thread is in the CPU figure). Contenders take turns; the median is reported.
2. Rate accuracy. ``map(..., rpm=R)`` for ``--rate-seconds``, counted at a server (the
   embedded gateway's requests are not the measure: a counting proxy server is).
3. Against a gateway that enforces ``R`` requests per minute with 429s (``R/60`` per fixed
   one-second window, Retry-After to the window's end): rows failed and the share of 429s.
4. Typed answers: ``map(..., schema=Review)`` against the same ``map`` without a schema, the
   neutral server answering every request with the same JSON object (``--reply-json``), 64
   in flight, shipped defaults as in 1 (the schema goes by instruction: the neutral server
   has no ``/model/info``). The parse and validation must not become the batch's cost: the
   target is at most 1.25x the CPU per row.
5. Behind a proxy: the same ``map`` direct and through Debian's squid on loopback (a config
   of the tests' own, nothing cached), taking turns; information, no target.
6. Memory: peak RSS of ``map`` over a generator, in fresh processes: 1,000 rows;
   ``--memory-rows`` rows stopped (Ctrl-C) after 1,000, the rest still queued; and all of
   them (peak RSS: the process's VmHWM). The engine pulls rows as workers free up, so the
   queue costs nothing; what grows is the results (one `Row` per finished row).

    .venv/bin/python benchmarks/bench_batch.py [--rows 10000] [--reps 3] [--rpm 1200]
        [--rate-seconds 30] [--memory-rows 100000] [--only throughput rate limited typed proxy memory]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _common import (
    BENCH_KEY,
    PYTHON,
    Child,
    chat_body,
    contest,
    median,
    print_table,
    save,
    spawn_neutral,
    summary_row,
)

MODEL = "bench-model"
BODY = chat_body(MODEL, max_tokens=1)
REPLY = "Hello from the neutral server."
CONCURRENCY = 64

Work = Callable[[int], int]


def _sdk(server: Child) -> Work:
    from openai import AsyncOpenAI

    async def go(n: int) -> int:
        client = AsyncOpenAI(base_url=f"{server.url}/v1", api_key=BENCH_KEY, max_retries=0)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(i: int) -> bool:
            async with gate:
                reply = await client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": f"row {i}"}], max_tokens=1
                )
                return reply.choices[0].message.content == REPLY

        try:
            return sum(await asyncio.gather(*(one(i) for i in range(n))))
        finally:
            await client.close()

    return lambda n: asyncio.run(go(n))


def _httpx(connections: int) -> Callable[[Child], Work]:
    def make(server: Child) -> Work:
        import httpx

        async def go(n: int) -> int:
            limits = httpx.Limits(max_connections=connections)
            headers = {"authorization": f"Bearer {BENCH_KEY}"}
            async with httpx.AsyncClient(base_url=server.url, limits=limits, headers=headers) as client:
                gate = asyncio.Semaphore(CONCURRENCY)

                async def one(i: int) -> bool:
                    async with gate:
                        body = {**BODY, "messages": [{"role": "user", "content": f"row {i}"}]}
                        r = await client.post("/v1/chat/completions", json=body)
                        return r.json()["choices"][0]["message"]["content"] == REPLY

                return sum(await asyncio.gather(*(one(i) for i in range(n))))

        return lambda n: asyncio.run(go(n))

    return make


def _aiohttp(server: Child) -> Work:
    import aiohttp

    async def go(n: int) -> int:
        connector = aiohttp.TCPConnector(limit=CONCURRENCY)
        headers = {"authorization": f"Bearer {BENCH_KEY}"}
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            gate = asyncio.Semaphore(CONCURRENCY)

            async def one(i: int) -> bool:
                async with gate:
                    body = {**BODY, "messages": [{"role": "user", "content": f"row {i}"}]}
                    async with session.post(f"{server.url}/v1/chat/completions", json=body) as r:
                        return (await r.json())["choices"][0]["message"]["content"] == REPLY

            return sum(await asyncio.gather(*(one(i) for i in range(n))))

    return lambda n: asyncio.run(go(n))


def _raw(server: Child) -> Work:
    """The floor: 64 keep-alive sockets, each writing a request and reading its answer."""

    async def go(n: int) -> int:
        rows = iter(range(n))
        good = 0

        async def worker() -> None:
            nonlocal good
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            for i in rows:
                body = json.dumps({**BODY, "messages": [{"role": "user", "content": f"row {i}"}]}).encode()
                writer.write(
                    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    b"authorization: Bearer %s\r\ncontent-length: %d\r\n\r\n%s"
                    % (BENCH_KEY.encode(), len(body), body)
                )
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                reply = json.loads(await reader.readexactly(length))
                good += reply["choices"][0]["message"]["content"] == REPLY
            writer.close()

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return good

    return lambda n: asyncio.run(go(n))


def _gatecell(server: Child) -> Work:
    from gatecell import Gateway

    gw = Gateway(base_url=server.url, api_key=BENCH_KEY)

    def work(n: int) -> int:
        os.environ["GATECELL_HOME"] = tempfile.mkdtemp(prefix="gatecell-bench-batch-")  # a fresh log
        batch = gw.map("row {item}", range(n), model=MODEL, max_tokens=1, concurrency=CONCURRENCY)
        return sum(t == REPLY for t in batch.text)

    return work


def contenders() -> dict[str, Callable[[Child], Work]]:
    found: dict[str, Callable[[Child], Work]] = {
        "gatecell map": _gatecell,
        "openai AsyncOpenAI": _sdk,
        "httpx pool 64": _httpx(64),
        "httpx pool 8": _httpx(8),
    }
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        print("aiohttp is not installed: left out")
    else:
        found["aiohttp"] = _aiohttp
    found["raw asyncio loop"] = _raw
    return found


def throughput(rows: int, reps: int) -> tuple[dict, list[dict]]:
    with spawn_neutral(1) as server:
        runs = contest(contenders(), server, rows, reps)
    assert runs is not None
    table = {
        name: {
            "rows_per_s": rows / median([r["wall_s"] for r in rs]),
            "cpu_us_per_row": median([r["cpu_s"] for r in rs]) / rows * 1e6,
        }
        for name, rs in runs.items()
    }
    print(f"\n{rows:,} one-token prompts, {CONCURRENCY} in flight, {reps} repetitions, medians\n")
    sdk = table["openai AsyncOpenAI"]
    print_table(
        ["loop", "rows/s", "CPU us/row", "rows/s vs SDK", "CPU vs SDK"],
        [
            [
                n,
                round(t["rows_per_s"]),
                round(t["cpu_us_per_row"]),
                f"{t['rows_per_s'] / sdk['rows_per_s']:.1f}x",
                f"{t['cpu_us_per_row'] / sdk['cpu_us_per_row']:.2f}x",
            ]
            for n, t in table.items()
        ],
    )
    ours, raw = table["gatecell map"], table["raw asyncio loop"]
    speed = ours["rows_per_s"] / sdk["rows_per_s"]
    cpu = sdk["cpu_us_per_row"] / ours["cpu_us_per_row"]
    floor = ours["rows_per_s"] / raw["rows_per_s"]
    print(
        f"\nmap / SDK: {speed:.1f}x rows/s (target >= 10x), CPU {cpu:.1f}x lower (target >= 5x); "
        f"{floor:.0%} of the raw socket loop's rows/s"
    )
    summary = [
        summary_row(
            "map rows/s vs openai SDK loop, 64 in flight",
            f"{ours['rows_per_s']:,.0f}/s",
            f"openai {sdk['rows_per_s']:,.0f}/s",
            speed,
            ">= 10x",
            speed >= 10,
        ),
        summary_row(
            "map CPU/row vs openai SDK loop",
            f"{ours['cpu_us_per_row']:.0f} us",
            f"openai {sdk['cpu_us_per_row']:.0f} us",
            cpu,
            ">= 5x lower",
            cpu >= 5,
        ),
        summary_row(
            "map rows/s vs raw asyncio socket loop (info)",
            f"{ours['rows_per_s']:,.0f}/s",
            f"raw {raw['rows_per_s']:,.0f}/s",
            floor,
            "info",
            None,
        ),
    ]
    return {"concurrency": CONCURRENCY, "runs": runs, "table": table}, summary


# -- typed answers ----------------------------------------------------------------------------


def _typed_map(typed: bool) -> Callable[[Child], Work]:
    from pydantic import BaseModel

    class Review(BaseModel):
        sentiment: str
        product: str
        stars: int

    def make(server: Child) -> Work:
        from gatecell import Gateway

        gw = Gateway(base_url=server.url, api_key=BENCH_KEY)
        schema = {"schema": Review} if typed else {}

        def work(n: int) -> int:
            os.environ["GATECELL_HOME"] = tempfile.mkdtemp(prefix="gatecell-bench-batch-")  # a fresh log
            batch = gw.map(
                "row {item}", range(n), model=MODEL, max_tokens=1, concurrency=CONCURRENCY, **schema
            )
            if typed:
                return sum(value is not None and value.stars == 4 for value in batch.parsed)
            return sum(json.loads(t)["stars"] == 4 for t in batch.text)

        return work

    return make


def typed(rows: int, reps: int) -> tuple[dict, list[dict]]:
    """``map`` with and without ``schema=``, the same JSON answers, taking turns in one run."""
    with spawn_neutral(1, reply_json=True) as server:
        runs = contest(
            {"map, schema=Review": _typed_map(True), "map, no schema": _typed_map(False)}, server, rows, reps
        )
    assert runs is not None
    cpu = {name: median([r["cpu_s"] for r in rs]) / rows * 1e6 for name, rs in runs.items()}
    speed = {name: rows / median([r["wall_s"] for r in rs]) for name, rs in runs.items()}
    ratio = cpu["map, schema=Review"] / cpu["map, no schema"]
    print(f"\ntyped answers: {rows:,} rows, {CONCURRENCY} in flight, {reps} repetitions, medians\n")
    print_table(["loop", "rows/s", "CPU us/row"], [[n, round(speed[n]), round(cpu[n])] for n in runs])
    print(f"\nschema= costs {ratio:.2f}x the CPU per row of map without one (target <= 1.25x)")
    summary = [
        summary_row(
            "map CPU/row with schema= vs without, 64 in flight",
            f"{cpu['map, schema=Review']:.0f} us",
            f"no schema {cpu['map, no schema']:.0f} us",
            ratio,
            "<= 1.25x",
            ratio <= 1.25,
        )
    ]
    return {"runs": runs, "cpu_us_per_row": cpu, "rows_per_s": speed, "ratio": ratio}, summary


# -- behind a proxy: the same map direct and through Debian's squid ------------------------


def _proxied_map(proxy: str | None) -> Callable[[Child], Work]:
    def make(server: Child) -> Work:
        from gatecell import Gateway

        gw = Gateway(base_url=server.url, api_key=BENCH_KEY, proxy=proxy, trust_env=False)

        def work(n: int) -> int:
            os.environ["GATECELL_HOME"] = tempfile.mkdtemp(prefix="gatecell-bench-batch-")  # a fresh log
            batch = gw.map("row {item}", range(n), model=MODEL, max_tokens=1, concurrency=CONCURRENCY)
            return sum(t == REPLY for t in batch.text)

        return work

    return make


def proxied(rows: int, reps: int) -> tuple[dict, list[dict]]:
    """``map`` direct and through squid (tests/proxy.py: squid on loopback, nothing cached),
    taking turns in one run; for information: a proxy adds a hop, and keeps its connections."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from proxy import SQUID, Squid

    if not SQUID.exists():
        print("squid is not installed (make test installs it): left out")
        return {}, []
    squid = Squid()
    try:
        with spawn_neutral(1) as server:
            makers = {"map, direct": _proxied_map(None), "map, through squid": _proxied_map(squid.url)}
            runs = contest(makers, server, rows, reps)
    finally:
        squid.stop()
    assert runs is not None
    speed = {name: rows / median([r["wall_s"] for r in rs]) for name, rs in runs.items()}
    cpu = {name: median([r["cpu_s"] for r in rs]) / rows * 1e6 for name, rs in runs.items()}
    print(f"\nbehind a proxy: {rows:,} rows, {CONCURRENCY} in flight, {reps} repetitions, medians\n")
    print_table(["loop", "rows/s", "CPU us/row"], [[n, round(speed[n]), round(cpu[n])] for n in runs])
    through, direct = speed["map, through squid"], speed["map, direct"]
    summary = [
        summary_row(
            "map rows/s through squid vs direct (info)",
            f"{through:,.0f}/s",
            f"direct {direct:,.0f}/s",
            through / direct,
            "info",
            None,
        )
    ]
    return {"runs": runs, "rows_per_s": speed, "cpu_us_per_row": cpu}, summary


# -- rate limits: a counting server, in a thread of this process -----------------------------


class Counter:
    """A chat-completions server on loopback, in a thread of this process, that counts the
    requests it answers (the neutral server's protocol, answering through `answer`); with
    ``limit`` (per minute) it enforces it per second, as gateways do, in fixed one-second
    windows of ``limit / 60``, answering 429 with a Retry-After to the end of the window."""

    def __init__(self, limit: int | None = None) -> None:
        from _neutral import COMPLETION, Neutral

        counter = self

        class Counting(Neutral):
            def _answer(self, head: bytes, body: bytes) -> bytes:
                return counter.answer()

        self.limit = limit
        self.times: list[float] = []
        self.rejected = 0
        self._window = (0.0, 0)
        self._ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
            len(COMPLETION),
            COMPLETION,
        )
        self.loop = asyncio.new_event_loop()
        server = self.loop.run_until_complete(self.loop.create_server(Counting, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def answer(self) -> bytes:
        now = time.monotonic()
        start, count = self._window
        if now - start >= 1:
            start, count = now, 0
        if self.limit is not None and count >= self.limit / 60:
            self.rejected += 1
            body = b'{"error":{"message":"rate limited","type":"rate_limit"}}'
            return (
                b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
                b"retry-after: %.3f\r\ncontent-length: %d\r\n\r\n%s" % (start + 1 - now, len(body), body)
            )
        self._window = (start, count + 1)
        self.times.append(now)
        return self._ok


def rate(rpm: int, seconds: float) -> tuple[dict, list[dict]]:
    """``map(..., rpm=rpm)`` over enough rows to last ``seconds``: the rate the server saw."""
    from gatecell import Gateway

    os.environ["GATECELL_HOME"] = tempfile.mkdtemp(prefix="gatecell-bench-batch-")
    server = Counter()
    rows = int(rpm * seconds / 60)
    gw = Gateway(base_url=server.url, api_key=BENCH_KEY)
    batch = gw.map("rate row {item}", range(rows), model=MODEL, rpm=rpm, concurrency=16, progress=False)
    times = server.times
    achieved = (len(times) - 1) / (times[-1] - times[0]) * 60
    error = achieved / rpm - 1
    print(
        f"\nrpm={rpm}: {len(times)} requests in {times[-1] - times[0]:.1f} s = {achieved:.1f}/min "
        f"({error:+.2%}; target within 3%), {batch.failed} failed"
    )
    measured = {"rpm": rpm, "rows": rows, "achieved_rpm": achieved, "error": error, "failed": batch.failed}
    summary = [
        summary_row(
            f"map rpm={rpm} for {seconds:.0f} s, counted at the server",
            f"{achieved:.1f}/min",
            "-",
            None,
            "within 3%",
            abs(error) <= 0.03 and batch.failed == 0,
        )
    ]
    return measured, summary


def limited(rpm: int, seconds: float) -> tuple[dict, list[dict]]:
    """``map(..., rpm=rpm)`` against a gateway enforcing ``rpm`` per minute with 429s."""
    from gatecell import Gateway

    os.environ["GATECELL_HOME"] = tempfile.mkdtemp(prefix="gatecell-bench-batch-")
    server = Counter(limit=rpm)
    rows = int(rpm * seconds / 60)
    gw = Gateway(base_url=server.url, api_key=BENCH_KEY)
    batch = gw.map("limited row {item}", range(rows), model=MODEL, rpm=rpm, concurrency=16, progress=False)
    sent = len(server.times) + server.rejected
    share = server.rejected / sent
    print(
        f"\nagainst a gateway enforcing {rpm}/min: {rows} rows, {batch.failed} failed, "
        f"{server.rejected} 429s of {sent} requests ({share:.2%}; target < 1%, no row failed)"
    )
    measured = {"rpm": rpm, "rows": rows, "failed": batch.failed, "rejected": server.rejected, "sent": sent}
    summary = [
        summary_row(
            f"map rpm={rpm} vs a gateway enforcing {rpm}/min with 429s",
            f"{share:.2%} 429s, {batch.failed} failed",
            "-",
            None,
            "< 1% 429s, none failed",
            share < 0.01 and batch.failed == 0,
        )
    ]
    return measured, summary


_MEMORY_CHILD = """
import os, signal, sys, tempfile
os.environ["GATECELL_HOME"] = tempfile.mkdtemp(prefix="gatecell-bench-batch-")
from gatecell import Gateway
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C works even when started in the background
gw = Gateway(base_url=sys.argv[1], api_key=sys.argv[2])
rows, stop_at = int(sys.argv[3]), int(sys.argv[4])

def queued():
    for i in range(rows):
        if i == stop_at:  # Ctrl-C, as a user stops a batch: the rest stays queued, never read
            os.kill(os.getpid(), signal.SIGINT)
        yield i

batch = gw.map("memory row {item}", queued(), model="bench-model", max_tokens=1,
               concurrency=64, progress=False)
assert batch.done >= min(rows, stop_at) - 64, batch
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so it would be the parent's peak
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def memory(big: int) -> tuple[dict, list[dict]]:
    """Peak RSS (best of two fresh processes each) of a map over a generator: 1,000 rows;
    ``big`` rows; and ``big`` rows stopped after 1,000 (the rest queued in the generator)."""
    runs = {
        "1,000 rows": (1000, 1000),
        f"{big:,} rows": (big, big),
        f"{big:,} queued, stopped at 1,000": (big, 1000),
    }
    peaks = {}
    with spawn_neutral(1) as server:
        for name, (rows, stop_at) in runs.items():
            argv = [PYTHON, "-c", _MEMORY_CHILD, server.url, BENCH_KEY, str(rows), str(stop_at)]
            peaks[name] = min(
                int(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()[-1])
                / 1024
                for _ in range(2)
            )  # KiB -> MiB
    small, whole, queued = peaks.values()
    per_row = (whole - small) * 2**20 / (big - 1000)
    print(
        f"\npeak RSS: {small:.1f} MiB for 1,000 rows; {queued:.1f} MiB with {big:,} queued and 1,000 done; "
        f"{whole:.1f} MiB with all {big:,} done ({per_row:.0f} bytes per finished row, its Row in the Batch)"
    )
    summary = [
        summary_row(
            f"map peak RSS, {big:,} rows queued (a generator), 1,000 done",
            f"{queued:.1f} MiB",
            f"1,000 rows {small:.1f} MiB",
            queued / small,
            "no growth with queued rows",
            queued < small * 1.1,
        ),
        summary_row(
            f"map peak RSS, {big:,} rows done (info)",
            f"{whole:.1f} MiB",
            "-",
            None,
            f"reported: {per_row:.0f} B/row",
            None,
        ),
    ]
    return {"peak_rss_mib": peaks, "bytes_per_finished_row": per_row}, summary


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rpm", type=int, default=1200)
    parser.add_argument("--rate-seconds", type=float, default=30.0)
    parser.add_argument("--memory-rows", type=int, default=100_000)
    parser.add_argument(
        "--only", nargs="*", default=["throughput", "rate", "limited", "typed", "proxy", "memory"]
    )
    args = parser.parse_args()
    sys.stderr = open(os.devnull, "w")  # the progress bars of the map runs
    measurements, summary = {}, []
    steps = {
        "throughput": lambda: throughput(args.rows, args.reps),
        "rate": lambda: rate(args.rpm, args.rate_seconds),
        "limited": lambda: limited(args.rpm, args.rate_seconds),
        "typed": lambda: typed(args.rows, args.reps),
        "proxy": lambda: proxied(args.rows, args.reps),
        "memory": lambda: memory(args.memory_rows),
    }
    for name in args.only:
        measurements[name], rows = steps[name]()
        summary += rows
    save("bench_batch", __doc__.split("\n\n")[1] if __doc__ else "", vars(args), measurements, summary)


if __name__ == "__main__":
    main()
