"""1,000 concurrent streaming chat requests against the local gateway's ``local-chat`` model.

``gatecell serve`` runs in its own process with its defaults (pace, log level); this process
opens 1,000 connections at once (raw asyncio sockets, so the client is not the bottleneck),
sends one streaming chat completion on each, and reads every stream to its end. A request counts as
completed when it got 200, at least one content chunk and the final ``data: [DONE]``.
The soft limit on open files is raised to the hard one first (the gateway inherits it).

    .venv/bin/python benchmarks/bench_concurrency.py [--requests 1000] [--timeout 150]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time

from _common import (
    BENCH_KEY,
    HOST,
    chat_body,
    percentile,
    print_table,
    proc_status_kib,
    raw_request,
    read_body,
    read_head,
    save,
    spawn_gatecell,
    summary_row,
)

PROMPT = "Tell me about the local gateway in a few sentences."


def raise_nofile(needed: int) -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        soft = hard if hard == resource.RLIM_INFINITY else min(hard, max(needed, 65536))
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


async def one(raw: bytes, port: int, started: float) -> dict:
    """One streaming request on its own connection: outcome, time to response head, total time."""
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
    except OSError as exc:
        return {"error": f"connect: {type(exc).__name__}"}
    try:
        writer.write(raw)
        status, headers = await read_head(reader)
        head = time.perf_counter() - started
        body = await read_body(reader, headers)
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        return {"error": type(exc).__name__}
    finally:
        writer.close()
    if status != 200:
        return {"error": f"HTTP {status}"}
    chunks = body.count(b"data: ")
    if not body.rstrip().endswith(b"data: [DONE]") or chunks < 3:
        return {"error": "incomplete stream"}
    return {"head": head, "total": time.perf_counter() - started, "chunks": chunks}


async def burst(port: int, n: int, timeout: float) -> tuple[list[dict], float]:
    body = json.dumps(
        {**chat_body("local-chat", stream=True), "messages": [{"role": "user", "content": PROMPT}]}
    )
    raw = raw_request(
        "POST", "/v1/chat/completions", port, body.encode(), {"Authorization": f"Bearer {BENCH_KEY}"}
    )
    started = time.perf_counter()
    tasks = [asyncio.ensure_future(one(raw, port, started)) for _ in range(n)]
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    results = [t.result() for t in done] + [{"error": "timeout"} for _ in pending]
    return results, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=150)
    args = parser.parse_args()
    soft, hard = raise_nofile(args.requests * 2 + 256)

    with spawn_gatecell() as gateway:
        cpu, client_cpu = gateway.cpu_seconds(), time.process_time()
        results, elapsed = asyncio.run(burst(gateway.port, args.requests, args.timeout))
        cpu, client_cpu = gateway.cpu_seconds() - cpu, time.process_time() - client_cpu
        peak_rss = proc_status_kib(gateway.pid, "VmHWM")

    ok = [r for r in results if "error" not in r]
    errors: dict[str, int] = {}
    for r in results:
        if "error" in r:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    stats = {
        "requests": args.requests,
        "completed": len(ok),
        "errors": sum(errors.values()),
        "error_kinds": errors,
        "elapsed_s": elapsed,
        "gateway_cpu_s": cpu,
        "client_cpu_s": client_cpu,
        "gateway_peak_rss_mib": peak_rss / 1024,
        "chunks_per_stream": ok[0]["chunks"] if ok else 0,
        "head_p50_s": percentile([r["head"] for r in ok], 50) if ok else None,
        "head_p99_s": percentile([r["head"] for r in ok], 99) if ok else None,
        "total_p50_s": percentile([r["total"] for r in ok], 50) if ok else None,
        "total_p99_s": percentile([r["total"] for r in ok], 99) if ok else None,
        "nofile_limit": [soft, hard],
    }  # fmt: skip
    print(f"\n{args.requests} streaming chat requests opened at once against local-chat (default pace)\n")
    print_table(["measure", "value"], [[k, v] for k, v in stats.items()])
    met = stats["completed"] == args.requests and not errors
    save(
        "bench_concurrency",
        "All requests opened at once on separate connections (raw asyncio client in the benchmark process) "
        "against `gatecell serve` in its own process; each stream read to data: [DONE].",
        {"requests": args.requests, "timeout_s": args.timeout, "model": "local-chat"},
        stats,
        [
            summary_row(f"{args.requests} concurrent streams (local-chat)",
                        f"{stats['completed']}/{args.requests} ok, {stats['errors']} errors, {elapsed:.1f} s",
                        "-", None, "all complete, no error", met),
        ],
    )  # fmt: skip


if __name__ == "__main__":
    main()
