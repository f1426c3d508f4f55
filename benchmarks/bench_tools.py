"""The tool loop: eight calls in one round, each sleeping 0.5 s, and what the loop costs.

``gatecell serve`` in another process plays the model (its offline ``local-chat`` answers a
prompt naming eight order ids with eight calls of ``order_status``, then a sentence quoting
their results). Measured in this process, contenders taking turns each repetition:

- **wall time of a chain** whose eight calls each sleep ``--sleep`` seconds: ``parallel=True``
  (threads) against its peer ``parallel=False`` (one after another, as a loop that does not
  run calls concurrently would); the target is under 1 s for the parallel chain;
- **client CPU per round** (``time.process_time``) of a chain whose calls return at once,
  against the same two requests sent without the loop (round 1 with the tools in the wire's
  own shape, passed through: the same request and answer; round 2 a plain prompt): the
  difference over the two rounds is what the loop adds (offer, reading the calls, validating
  the arguments, the threads, the follow-up turns); the target is under 1 ms a round.

    .venv/bin/python benchmarks/bench_tools.py [--reps 5] [--chains 30] [--sleep 0.5]
"""

from __future__ import annotations

import argparse
import gc
import time

from _common import BENCH_KEY, median, print_table, save, spawn_gatecell, summary_row

PROMPT = "Where are orders A-1, A-2, A-3, A-4, A-5, A-6, A-7 and A-8?"
MODEL = "local-chat"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--chains", type=int, default=30, help="chains per repetition of the CPU measure")
    parser.add_argument(
        "--sleep", type=float, default=0.5, help="seconds each call of the wall measure sleeps"
    )
    args = parser.parse_args()

    from gatecell import Gateway
    from gatecell.tools import as_tools

    def slow_status(order_id: str) -> str:
        """Where an order is now, by its id."""
        time.sleep(args.sleep)
        return f"order {order_id} is in Lyon"

    def order_status(order_id: str) -> str:
        """Where an order is now, by its id."""
        return f"order {order_id} is in Lyon"

    slow_status.__name__ = "order_status"
    asked = [{"role": "user", "content": PROMPT}]
    (tool,) = as_tools([order_status])
    wire_tools = [
        {
            "type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
        }
    ]
    with spawn_gatecell() as server:
        gw = Gateway(base_url=server.url, api_key=BENCH_KEY, log=False)
        check = gw.chat(MODEL, asked, tools=[slow_status])
        assert len(check.tool_calls) == 8 and check.tool_calls.rounds == 2, check.tool_calls
        wall: dict[str, list[float]] = {"parallel": [], "one at a time": []}
        for rep in range(args.reps):
            for name in list(wall)[rep % 2 :] + list(wall)[: rep % 2]:
                started = time.perf_counter()
                gw.chat(MODEL, asked, tools=[slow_status], parallel=name == "parallel")
                wall[name].append(time.perf_counter() - started)

        def chains() -> None:
            for _ in range(args.chains):
                gw.chat(MODEL, asked, tools=[order_status])

        def plain() -> None:
            for _ in range(args.chains):
                gw.chat(MODEL, asked, tools=wire_tools)  # round 1: the same request, the calls not run
                gw.chat(MODEL, [{"role": "user", "content": "Say: the orders are in Lyon."}])  # round 2

        cpu: dict[str, list[float]] = {"chain": [], "same requests": []}
        work = {"chain": chains, "same requests": plain}
        for rep in range(args.reps):
            for name in list(cpu)[rep % 2 :] + list(cpu)[: rep % 2]:
                gc.collect()
                started = time.process_time()
                work[name]()
                cpu[name].append((time.process_time() - started) / args.chains)
        gw.close()

    par, serial = median(wall["parallel"]), median(wall["one at a time"])
    chain_cpu, plain_cpu = median(cpu["chain"]), median(cpu["same requests"])
    per_round = (chain_cpu - plain_cpu) / 2
    print_table(
        ["measure", "gatecell", "peer", "ratio"],
        [
            [f"wall of 8 calls x {args.sleep:g} s (s)", par, serial, serial / par],
            ["client CPU per chain (ms)", chain_cpu * 1000, plain_cpu * 1000, chain_cpu / plain_cpu],
            ["loop CPU per round (ms)", per_round * 1000, "", ""],
        ],
    )
    save(
        "bench_tools",
        __doc__ or "",
        vars(args),
        {"wall_seconds": wall, "cpu_seconds_per_chain": cpu},
        [
            summary_row(
                "8 tool calls of 0.5 s in one round, wall",
                f"{par:.2f} s",
                f"{serial:.2f} s one at a time",
                serial / par,
                "< 1 s",
                par < 1.0,
            ),
            summary_row(
                "tool loop client CPU per round",
                f"{per_round * 1000:.2f} ms",
                f"{plain_cpu * 1000:.2f} ms the requests alone (2 rounds)",
                None,
                "< 1 ms",
                per_round < 0.001,
            ),
        ],
    )


if __name__ == "__main__":
    main()
