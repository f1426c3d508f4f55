"""Client CPU per non-streaming chat completion: gatecell (log on and off) vs bare httpx vs openai.

A neutral server in another process (_neutral.py) answers every chat completion with the
same small reply from a cache. In this process each contender makes ``--requests`` calls
one after the other on a kept-alive connection; ``time.process_time()`` around them is its
CPU cost. Contenders take turns within every repetition; the median is reported.

gatecell logs every exchange by default (the store, in a fresh GATECELL_HOME here): its run
ends with the store's flush, so the writer thread's work for those exchanges (JSON,
redaction, the SQLite commits) is counted in the run too. ``gatecell (log off)`` is the same
client with ``log=False``; the difference is what the log costs per exchange.

    .venv/bin/python benchmarks/bench_request.py [--requests 2000] [--reps 5] [--profile]
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from _common import BENCH_KEY, Child, chat_body, cpu_benchmark, summary_row

MODEL = "bench-model"
MESSAGES = chat_body(MODEL)["messages"]
REPLY = "Hello from the neutral server."

Caller = Callable[[int], int]  # makes n requests, returns how many came back right


def gatecell_caller(server: Child, log: bool = True) -> Caller:
    from gatecell import Gateway, store

    gw = Gateway(base_url=server.url, api_key=BENCH_KEY, log=log)
    writer = store.default_store(log=True)

    def call(n: int) -> int:
        right = sum(
            gw.chat(model=MODEL, messages=MESSAGES).choices[0].message.content == REPLY for _ in range(n)
        )
        if log:
            writer.flush()  # the writer thread's share of these exchanges, inside the run
        return right

    return call


def bare_caller(server: Child) -> Caller:
    import httpx

    client = httpx.Client()
    url = f"{server.url}/v1/chat/completions"
    headers = {"Authorization": f"Bearer {BENCH_KEY}"}
    body = chat_body(MODEL)

    def call(n: int) -> int:
        return sum(
            client.post(url, json=body, headers=headers).json()["choices"][0]["message"]["content"] == REPLY
            for _ in range(n)
        )

    return call


def openai_caller(server: Child) -> Caller:
    import openai

    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=BENCH_KEY)

    def call(n: int) -> int:
        create = client.chat.completions.create
        return sum(
            create(model=MODEL, messages=MESSAGES).choices[0].message.content == REPLY for _ in range(n)
        )

    return call


CONTENDERS = {
    "gatecell": gatecell_caller,
    "gatecell (log off)": functools.partial(gatecell_caller, log=False),
    "bare httpx": bare_caller,
    "openai": openai_caller,
}


def summarize(per_request: dict[str, float]) -> list[dict]:
    gc_us, bare_us, oa_us = per_request["gatecell"], per_request["bare httpx"], per_request["openai"]
    off_us = per_request["gatecell (log off)"]
    within, logging = gc_us / bare_us, gc_us - off_us
    print(
        f"\ngatecell / bare = {within:.2f}x (target <= 1.2x)   openai / bare = {oa_us / bare_us:.2f}x   "
        f"the log: {logging:+.0f} us per exchange (target <= 50 us)"
    )
    return [
        summary_row("request CPU vs bare httpx (log on)", f"{gc_us:.0f} us", f"bare {bare_us:.0f} us",
                    within, "<= 1.2x", within <= 1.2),
        summary_row("request CPU vs openai (info)", f"{gc_us:.0f} us", f"openai {oa_us:.0f} us",
                    oa_us / gc_us, "info (x lower)", None),
        summary_row("request CPU vs bare httpx (log off)", f"{off_us:.0f} us", f"bare {bare_us:.0f} us",
                    off_us / bare_us, "<= 1.2x", off_us / bare_us <= 1.2),
        summary_row("CPU the log adds per exchange (on - off)", f"{logging:+.0f} us",
                    f"log off {off_us:.0f} us", None, "<= 50 us", logging <= 50),
    ]  # fmt: skip


if __name__ == "__main__":
    cpu_benchmark(
        "bench_request",
        __doc__,
        CONTENDERS,
        unit="request",
        default_n=2000,
        method="Neutral loopback server in a separate process answers a small chat completion from a cache. "
        "Client CPU = time.process_time() around n sequential keep-alive requests, median of reps, "
        "contenders interleaved.",
        summarize=summarize,
    )
