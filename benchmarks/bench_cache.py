"""Wall time of a cache hit through the client: ``Gateway(cache=True)`` answering a request
identical to a logged one, a 2 KB reply, against the same request sent to a loopback gateway.

A neutral server in another process (_neutral.py) answers the chat completion with a
``--reply``-character text. The log (a fresh GATECELL_HOME) holds ``--rows`` other exchanges
besides, so the lookup is one read among many. Then each contender makes ``--calls``
identical calls, taking turns within every repetition; ``time.perf_counter()`` around them is
its wall time; the median over repetitions is reported:

- ``cache hit``: ``Gateway(cache=True).chat(...)``, answered from the log, nothing sent
  (each hit is logged as one too, as in use);
- ``sent``: the same client with the cache off: the request goes to the gateway.

    .venv/bin/python benchmarks/bench_cache.py [--calls 500] [--reply 2048] [--rows 10000] [--reps 5]
"""

from __future__ import annotations

import argparse
import gc
import time

from _common import BENCH_KEY, median, print_table, save, spawn_neutral, summary_row

MODEL = "bench-model"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=500, help="calls per repetition")
    parser.add_argument("--reply", type=int, default=2048, help="characters of the reply")
    parser.add_argument("--rows", type=int, default=10_000, help="other exchanges in the log")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    from gatecell import Gateway, store

    st = store.default_store(log=True)
    for i in range(args.rows):  # a log in use: many exchanges, each with its own key
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"q{i}"}]}
        st.record_exchange(
            "/v1/chat/completions", MODEL, body, text="x" * args.reply, gateway="http://127.0.0.1:1"
        )
    assert st.flush(120)
    messages = [{"role": "user", "content": "Tell me a long story. " * 30}]  # a 2 KB request too
    with spawn_neutral(reply=args.reply) as server:
        hits = Gateway(base_url=server.url, api_key=BENCH_KEY, cache=True)
        sent = Gateway(base_url=server.url, api_key=BENCH_KEY, cache=False)
        first = hits.chat(MODEL, messages)
        assert len(first.text) == args.reply and not first.meta.cached
        assert hits.chat(MODEL, messages).meta.cached and not sent.chat(MODEL, messages).meta.cached
        contenders = {"cache hit": hits, "sent": sent}
        runs: dict[str, list[float]] = {name: [] for name in contenders}
        for rep in range(args.reps):
            names = list(contenders)[rep % 2 :] + list(contenders)[: rep % 2]
            for name in names:
                gw = contenders[name]
                gc.collect()
                start = time.perf_counter()
                for _ in range(args.calls):
                    reply = gw.chat(MODEL, messages)
                runs[name].append((time.perf_counter() - start) / args.calls)
                assert reply.meta.cached == (name == "cache hit") and len(reply.text) == args.reply
    ms = {name: median(values) * 1e3 for name, values in runs.items()}
    print(f"\n{args.calls} calls per repetition, {args.reps} repetitions, {args.reply}-character reply, "
          f"{args.rows} other exchanges in the log; median wall per call\n")  # fmt: skip
    print_table(["client", "ms/call"], [[name, value] for name, value in ms.items()])
    hit, sent_ms = ms["cache hit"], ms["sent"]
    summary = [
        summary_row("cache hit wall, 2 KB reply (Gateway(cache=True))", f"{hit:.2f} ms",
                    f"sent {sent_ms:.2f} ms", sent_ms / hit, "<= 2 ms", hit <= 2.0),
    ]  # fmt: skip
    save(
        "bench_cache",
        "Neutral loopback server in a separate process; a fresh log with --rows other exchanges. Wall time "
        "(perf_counter) of --calls identical chat calls through Gateway(cache=True) (answered from the log) "
        "and through the same client with the cache off (sent), median of reps, contenders interleaved.",
        vars(args),
        {"ms_per_call": ms, "runs_s_per_call": runs},
        summary,
    )


if __name__ == "__main__":
    main()
