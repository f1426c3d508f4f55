"""Latency a gateway adds in front of an upstream, at 50 concurrent connections, open loop.

Processes: a neutral upstream (_neutral.py, answers a small chat completion from a cache);
``gatecell serve --upstream`` in front of it (as a user starts it, and once more with
``--log-level warning`` to show what the per-request access log costs); LiteLLM's proxy in
front of the same upstream when it is installed in a venv of its own (GATECELL_BENCH_LITELLM_VENV,
default /tmp/litellm-venv); and a load generator (_loadgen.py) that sends chat completions at
a FIXED rate spread over 50 kept-alive connections.

Why open loop: on a 2-core machine a closed loop of 50 connections saturates the CPU, and
its latencies then measure queueing, not a gateway's work. At a fixed rate below
saturation, "added latency" is what one request through the gateway costs on top of the same
request sent straight to the upstream. Targets take turns over several rounds. Each server's
CPU per request (from /proc) is reported too: it does not depend on the rate.

    .venv/bin/python benchmarks/bench_forward.py [--rate 200] [--idle-rate 25] [--duration 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess

from _common import (
    BENCH_KEY,
    HERE,
    PYTHON,
    UPSTREAM_KEY,
    Child,
    chat_body,
    percentile,
    print_table,
    proc_cpu_seconds,
    save,
    spawn_gatecell,
    spawn_litellm,
    spawn_neutral,
    summary_row,
    tree_pids,
)

BODY = json.dumps(chat_body("bench-model"))


def tree_cpu(child: Child) -> float:
    total = 0.0
    for pid in tree_pids(child.pid):
        try:
            total += proc_cpu_seconds(pid)
        except OSError:
            pass
    return total


def load(target: Child, key: str, rate: float, duration: float, connections: int) -> dict:
    argv = [
        PYTHON,
        str(HERE / "_loadgen.py"),
        "--port",
        str(target.port),
        "--path",
        "/v1/chat/completions",
        "--body",
        BODY,
        "--header",
        f"Authorization: Bearer {key}",
        "--rate",
        str(rate),
        "--duration",
        str(duration),
        "--connections",
        str(connections),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=duration * 10 + 30)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=200, help="requests per second of the loaded pass")
    parser.add_argument(
        "--idle-rate", type=float, default=25, help="requests per second of the unloaded pass"
    )
    parser.add_argument("--duration", type=float, default=3, help="seconds per target per round and pass")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args()
    passes = {"loaded": args.rate, "unloaded": args.idle_rate}

    with spawn_neutral() as upstream:
        targets: dict[str, tuple[Child, str]] = {"direct": (upstream, UPSTREAM_KEY)}
        try:
            targets["gatecell"] = (spawn_gatecell(upstream=upstream), BENCH_KEY)
            targets["gatecell, quiet log"] = (
                spawn_gatecell("--log-level", "warning", upstream=upstream),
                BENCH_KEY,
            )
            litellm, litellm_note = spawn_litellm(upstream)
            if litellm is not None:
                targets["litellm"] = (litellm, BENCH_KEY)
            for child, key in targets.values():  # warm up: connection pools, caches
                load(child, key, args.rate, 1, args.connections)
            results = {name: run(targets, upstream, rate, args) for name, rate in passes.items()}
        finally:
            for name, (child, _key) in targets.items():
                if name != "direct":
                    child.stop()
    report(results, passes, args, litellm_note)


def run(
    targets: dict[str, tuple[Child, str]], upstream: Child, rate: float, args: argparse.Namespace
) -> dict:
    """One pass at ``rate``: targets take turns over the rounds; latencies and CPU add up."""
    names = list(targets)
    results = {
        n: {
            "latency_s": [],
            "late_s": [],
            "errors": {},
            "cpu_s": 0.0,
            "upstream_cpu_s": 0.0,
            "requests": 0,
            "unsent": 0,
            "achieved_rate": [],
        }
        for n in names
    }
    for rnd in range(args.rounds):
        for name in names[rnd % len(names) :] + names[: rnd % len(names)]:
            child, key = targets[name]
            cpu, up_cpu = tree_cpu(child), tree_cpu(upstream)
            out = load(child, key, rate, args.duration, args.connections)
            r = results[name]
            r["cpu_s"] += tree_cpu(child) - cpu
            r["upstream_cpu_s"] += tree_cpu(upstream) - up_cpu
            r["requests"] += out["requests"] - out["unsent"]
            r["unsent"] += out["unsent"]
            r["achieved_rate"].append(out["achieved_rate"])
            r["latency_s"] += [x for x in out["latency_s"] if x is not None]
            r["late_s"] += [x for x in out["late_s"] if x is not None]
            for err, count in out["errors"].items():
                r["errors"][err] = r["errors"].get(err, 0) + count
    return results


def stats_of(results: dict[str, dict], rate: float) -> dict[str, dict]:
    stats = {}
    for name, r in results.items():
        lat = [x * 1e3 for x in r["latency_s"]]
        achieved = min(r["achieved_rate"])
        stats[name] = {
            "p50_ms": percentile(lat, 50),
            "p90_ms": percentile(lat, 90),
            "p99_ms": percentile(lat, 99),
            "max_ms": max(lat),
            "ok": len(lat),
            "errors": sum(r["errors"].values()),
            "unsent": r["unsent"],
            "late_p99_ms": percentile([x * 1e3 for x in r["late_s"]], 99),
            "achieved_rate": achieved,
            "saturated": r["unsent"] > 0 or achieved < 0.95 * rate,
            "cpu_ms_per_request": r["cpu_s"] / r["requests"] * 1e3 if name != "direct" else None,
            "upstream_cpu_ms_per_request": r["upstream_cpu_s"] / r["requests"] * 1e3,
        }
    for s in stats.values():
        s["added_p50_ms"] = s["p50_ms"] - stats["direct"]["p50_ms"]
        s["added_p99_ms"] = s["p99_ms"] - stats["direct"]["p99_ms"]
    return stats


def report(
    results: dict[str, dict], passes: dict[str, float], args: argparse.Namespace, litellm_note: str
) -> None:
    stats = {name: stats_of(results[name], rate) for name, rate in passes.items()}
    for name, rate in passes.items():
        print(
            f"\n{name} pass, open loop: {rate:.0f} req/s over {args.connections} kept-alive connections, "
            f"{args.rounds} rounds x {args.duration:.0f} s per target; latency from write to last byte\n"
        )
        print_table(
            [
                "target",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "added p50",
                "added p99",
                "ok",
                "errors",
                "req/s",
                "server CPU ms/req",
                "late p99 ms",
            ],
            [
                [
                    n,
                    s["p50_ms"],
                    s["p90_ms"],
                    s["p99_ms"],
                    s["added_p50_ms"],
                    s["added_p99_ms"],
                    s["ok"],
                    s["errors"],
                    f"{s['achieved_rate']:.0f}" + (" SATURATED" if s["saturated"] else ""),
                    "-" if s["cpu_ms_per_request"] is None else s["cpu_ms_per_request"],
                    s["late_p99_ms"],
                ]
                for n, s in stats[name].items()
            ],
        )
    print(
        "\nserver CPU: the target process's own user+system time per request (the upstream's is extra).\n"
        "SATURATED: the target could not keep up with the offered rate "
        "(requests went out late or not at all),\n"
        "so its latencies there hold queueing; late p99 says how late requests left the load generator."
    )
    if litellm_note:
        print(f"LiteLLM proxy: {litellm_note}")
    loaded, idle = stats["loaded"], stats["unloaded"]
    g, gi, q = loaded["gatecell"], idle["gatecell"], loaded["gatecell, quiet log"]
    rate, idle_rate = passes["loaded"], passes["unloaded"]

    def peer(pass_stats: dict, key: str) -> str:
        if "litellm" not in pass_stats:
            return f"LiteLLM: {litellm_note}"
        lite = pass_stats["litellm"]
        return f"LiteLLM {lite[key]:.2f} ms" + (" (saturated)" if lite["saturated"] else "")

    summary = [
        summary_row(
            f"forward added p50, {rate:.0f} req/s open loop, 50 conns",
            f"{g['added_p50_ms']:.2f} ms (quiet log {q['added_p50_ms']:.2f})",
            peer(loaded, "added_p50_ms"),
            None,
            "< 1 ms",
            g["added_p50_ms"] < 1,
        ),
        summary_row(
            f"forward added p99, {rate:.0f} req/s open loop, 50 conns",
            f"{g['added_p99_ms']:.2f} ms (quiet log {q['added_p99_ms']:.2f})",
            peer(loaded, "added_p99_ms"),
            None,
            "< 3 ms",
            g["added_p99_ms"] < 3,
        ),
        summary_row(
            f"forward added p50 / p99, {idle_rate:.0f} req/s (unloaded, info)",
            f"{gi['added_p50_ms']:.2f} / {gi['added_p99_ms']:.2f} ms",
            peer(idle, "added_p50_ms") + " p50",
            None,
            "info",
            None,
        ),
        summary_row(
            "forward CPU per request (gateway process)",
            f"{g['cpu_ms_per_request']:.2f} ms (quiet log {q['cpu_ms_per_request']:.2f})",
            peer(loaded, "cpu_ms_per_request"),
            loaded["litellm"]["cpu_ms_per_request"] / g["cpu_ms_per_request"]
            if "litellm" in loaded
            else None,
            "info (x lower)",
            None,
        ),
    ]
    save(
        "bench_forward",
        "Open loop: requests due at a fixed rate over kept-alive connections "
        "(separate load-generator process); "
        "latency from write to last byte; added = target percentile - direct percentile, same run, targets "
        "interleaved over rounds; a loaded and an unloaded pass. Server CPU from /proc/<pid>/stat.",
        {
            "passes_req_per_s": passes,
            "duration_s": args.duration,
            "rounds": args.rounds,
            "connections": args.connections,
            "litellm": litellm_note or "measured",
        },
        {
            "stats": stats,
            "errors": {p: {n: r["errors"] for n, r in res.items()} for p, res in results.items()},
        },
        summary,
    )


if __name__ == "__main__":
    main()
