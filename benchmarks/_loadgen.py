"""Open-loop HTTP/1.1 load generator, run in a process of its own (prints JSON on stdout).

Request ``i`` is due at ``t0 + i / rate`` and goes out on kept-alive connection
``i % connections``, so the offered load is fixed whatever the server does (open loop): a
slow server does not slow the generator down, it shows up as latency. Latency is from the
moment the request is written to the moment its last byte is read. ``late`` says how far
behind schedule a request went out (a connection still busy, or this process too slow);
when it is large the numbers hold queueing, and the caller says so.

    python _loadgen.py --port P --path /v1/chat/completions --body '{...}' \
        [--header 'Authorization: Bearer sk-...'] --rate 200 --duration 5 --connections 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from _common import HOST, raw_request, read_response


async def open_loop(
    raw: bytes, port: int, rate: float, duration: float, connections: int, expect: bytes
) -> dict:
    """Send ``rate * duration`` requests on schedule; none is sent after twice ``duration``
    (a saturated server then shows as ``unsent``, and the run stays bounded in time)."""
    total = int(rate * duration)
    conns = [await asyncio.open_connection(HOST, port) for _ in range(connections)]
    latency: list[float | None] = [None] * total  # None: the request failed
    late: list[float | None] = [None] * total
    errors: dict[str, int] = {}
    t0 = time.perf_counter() + 0.05
    stop_at = t0 + 2 * duration
    unsent = 0

    async def worker(c: int) -> None:
        nonlocal unsent
        reader, writer = conns[c]
        for i in range(c, total, connections):
            if time.perf_counter() > stop_at:
                unsent += 1
                continue
            due = t0 + i / rate
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            start = time.perf_counter()
            writer.write(raw)
            try:
                status, body = await read_response(reader)
            except (OSError, asyncio.IncompleteReadError) as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                reader, writer = await asyncio.open_connection(HOST, port)
                continue
            latency[i] = time.perf_counter() - start
            late[i] = start - due
            if status != 200 or expect not in body:
                errors[str(status)] = errors.get(str(status), 0) + 1

    await asyncio.gather(*(worker(c) for c in range(connections)))
    elapsed = time.perf_counter() - t0
    for _reader, writer in conns:
        writer.close()
    done = sum(x is not None for x in latency)
    return {"latency_s": latency, "late_s": late, "errors": errors, "elapsed_s": elapsed, "requests": total,
            "unsent": unsent, "achieved_rate": done / elapsed}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--body", required=True, help="JSON request body")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--expect", default="chat.completion", help="bytes every good answer holds")
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args()
    headers = dict(h.split(": ", 1) for h in args.header)
    raw = raw_request("POST", args.path, args.port, args.body.encode(), headers)
    result = asyncio.run(
        open_loop(raw, args.port, args.rate, args.duration, args.connections, args.expect.encode())
    )
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
