"""Client CPU per streamed chunk: gatecell (log on and off) vs the openai SDK vs a bare httpx loop.

A neutral server in another process (_neutral.py) streams a 50,000-chunk chat completion
(SPEC 6, one HTTP chunk per event) as fast as the socket takes it. In this process each
contender reads the whole stream; ``time.process_time()`` around the read is its CPU cost.
Contenders take turns within every repetition (rotating the order); the median over
repetitions is reported.

    .venv/bin/python benchmarks/bench_stream.py [--chunks 50000] [--reps 5] [--profile]
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

from _common import BENCH_KEY, Child, chat_body, cpu_benchmark, summary_row

MODEL = "bench-model"
MESSAGES = chat_body(MODEL)["messages"]

Reader = Callable[[int], int]  # reads a stream of n chunks, returns the number of fragments seen


def gatecell_reader(server: Child, log: bool = True) -> Reader:
    from gatecell import Gateway, store

    gw = Gateway(base_url=server.url, api_key=BENCH_KEY, log=log)
    writer = store.default_store(log=True)

    def read(n: int) -> int:
        count = 0
        for _fragment in gw.chat(model=MODEL, messages=MESSAGES, max_tokens=n, stream=True):
            count += 1
        if log:
            writer.flush()  # the stream's row, written inside the run
        return count

    return read


def openai_reader(server: Child) -> Reader:
    import openai

    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=BENCH_KEY)

    def read(n: int) -> int:
        count = 0
        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=n, stream=True)
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                count += 1
        return count

    return read


def bare_reader(server: Child) -> Reader:
    import httpx

    client = httpx.Client()
    url = f"{server.url}/v1/chat/completions"
    headers = {"Authorization": f"Bearer {BENCH_KEY}"}

    def read(n: int) -> int:
        count = 0
        body = chat_body(MODEL, stream=True, max_tokens=n)
        with client.stream("POST", url, json=body, headers=headers) as r:
            for line in r.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    json.loads(line[6:])
                    count += 1
        return count

    return read


CONTENDERS = {
    "gatecell": gatecell_reader,
    "gatecell (log off)": functools.partial(gatecell_reader, log=False),
    "openai": openai_reader,
    "bare httpx": bare_reader,
}


def summarize(per_chunk: dict[str, float]) -> list[dict]:
    gc_us, oa_us, bare_us = per_chunk["gatecell"], per_chunk["openai"], per_chunk["bare httpx"]
    off_us = per_chunk["gatecell (log off)"]
    lower, within, logging = oa_us / gc_us, gc_us / bare_us, gc_us / off_us
    print(
        f"\nopenai / gatecell = {lower:.2f}x (target >= 5x)   "
        f"gatecell / bare = {within:.2f}x (target <= 1.3x)"
    )
    print(f"log on / log off = {logging:.3f}x per chunk (the log writes one row per stream, at its end)")
    return [
        summary_row("stream CPU/chunk vs openai", f"{gc_us:.1f} us", f"openai {oa_us:.1f} us",
                    lower, ">= 5x lower", lower >= 5),
        summary_row("stream CPU/chunk vs bare httpx", f"{gc_us:.1f} us", f"bare {bare_us:.1f} us",
                    within, "<= 1.3x", within <= 1.3),
        summary_row("stream CPU/chunk, log on vs off", f"{gc_us:.1f} us", f"log off {off_us:.1f} us",
                    logging, "nothing per chunk (~1.0x)", None),
    ]  # fmt: skip


if __name__ == "__main__":
    cpu_benchmark(
        "bench_stream",
        __doc__,
        CONTENDERS,
        unit="chunk",
        default_n=50_000,
        method="Neutral loopback server in a separate process streams n chat chunks (one HTTP chunk per SSE "
        "event, pre-built bytes). Client CPU = time.process_time() around one full read, median of reps, "
        "contenders interleaved.",
        summarize=summarize,
    )
