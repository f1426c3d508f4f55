"""Resident memory of the idle gateway, next to the smallest uvicorn app.

Each server is started fresh in its own process; once it answers, the benchmark waits a
moment and reads VmRSS from /proc/<pid>/status. gatecell is read twice: ready and idle, and
again after one local-chat request (the lazily imported parts then count). The peer is a
bare ASGI callable under uvicorn; LiteLLM's proxy is shown too when it is installed in a venv
of its own (its upstream is the neutral server). Median over fresh starts.

    .venv/bin/python benchmarks/bench_memory.py [--starts 3]
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request

from _common import (
    BENCH_KEY,
    Child,
    chat_body,
    median,
    print_table,
    save,
    spawn_gatecell,
    spawn_hello,
    spawn_litellm,
    spawn_neutral,
    summary_row,
)

SETTLE_S = 1.0


def chat_once(child: Child) -> None:
    request = urllib.request.Request(
        f"{child.url}/v1/chat/completions",
        data=json.dumps(chat_body("local-chat")).encode(),
        headers={"Authorization": f"Bearer {BENCH_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


def idle_rss(child: Child) -> float:
    time.sleep(SETTLE_S)
    return child.rss_kib() / 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()

    mib: dict[str, list[float]] = {
        "gatecell serve, idle": [],
        "gatecell serve, after 1 chat": [],
        "uvicorn hello": [],
    }
    for _ in range(args.starts):
        with spawn_gatecell() as gateway:
            mib["gatecell serve, idle"].append(idle_rss(gateway))
            chat_once(gateway)
            mib["gatecell serve, after 1 chat"].append(idle_rss(gateway))
        with spawn_hello() as hello:
            mib["uvicorn hello"].append(idle_rss(hello))
    with spawn_neutral(100) as upstream:
        litellm, note = spawn_litellm(upstream)
        if litellm is not None:
            with litellm:
                mib["litellm proxy, idle"] = [idle_rss(litellm)]

    rss = {name: median(values) for name, values in mib.items()}
    peer = rss["uvicorn hello"]
    print(
        f"\nRSS of a freshly started server, {SETTLE_S:.0f} s after it answers; "
        f"median of {args.starts} starts\n"
    )
    print_table(
        ["server", "RSS MiB", "vs uvicorn hello"], [[n, v, f"{v / peer:.2f}x"] for n, v in rss.items()]
    )
    if note:
        print(f"\nLiteLLM proxy: {note}")
    g = rss["gatecell serve, idle"]
    summary = [
        summary_row(
            "idle gateway RSS", f"{g:.1f} MiB", f"uvicorn hello {peer:.1f} MiB", g / peer, "reported", None
        )
    ]
    if "litellm proxy, idle" in rss:
        lite = rss["litellm proxy, idle"]
        summary.append(summary_row("idle gateway RSS vs LiteLLM proxy (info)", f"{g:.1f} MiB",
                                   f"LiteLLM {lite:.1f} MiB", g / lite, "reported", None))  # fmt: skip
    save(
        "bench_memory",
        "VmRSS from /proc/<pid>/status of a freshly started server process, after it answers and a "
        f"{SETTLE_S:.0f} s pause; median over fresh starts.",
        {"starts": args.starts, "settle_s": SETTLE_S},
        {"rss_mib": rss, "samples_mib": mib, "litellm": note or "measured"},
        summary,
    )


if __name__ == "__main__":
    main()
