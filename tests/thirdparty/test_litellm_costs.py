"""What answers cost, as LiteLLM's proxy says, with prices in its config (`litellm_prices.PRICES`):
its cost header on a whole answer, the ``cost`` of a stream's last usage (the stream asked for
it, LiteLLM having named itself), else the prices of its ``/model/info`` (generate-content
answers carry no cost); on the replies, in the log, in ``usage`` (Python, CLI) and a batch."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from litellm_prices import PRICES

from gatecell import AsyncGateway, Gateway, store

pytestmark = pytest.mark.litellm

SUM = [{"role": "user", "content": "What is 2+2?"}]


def priced(model: str, usage) -> float:
    per_input, per_output = PRICES[model]
    return usage.prompt_tokens * per_input + usage.completion_tokens * per_output


def test_whole_answers_streams_and_model_info_each_say_what_they_cost(litellm, home: Path):
    with Gateway(litellm.base_url, litellm.key) as gw:
        reply = gw.chat(model="lite-chat", messages=SUM)
        assert (reply.meta.cost, reply.meta.cost_source) == (
            pytest.approx(priced("lite-chat", reply.usage)),
            "gateway",
        )
        stream = gw.chat(model="lite-chat", messages=SUM, stream=True)  # LiteLLM is known: usage asked
        assert stream.read() == "2+2 = 4" and stream.usage is not None
        assert (stream.meta.cost, stream.meta.cost_source) == (
            pytest.approx(priced("lite-chat", stream.usage)),
            "gateway",
        )
        reasoned = gw.responses("lite-reasoner", "What is 2+2?", stream=True)
        reasoned.read()
        assert reasoned.meta.cost_source == "gateway" and reasoned.meta.cost > 0
        native = gw.generate_content("lite-chat", "What is 2+2?")  # no cost header: the model info's prices
        assert (native.meta.cost, native.meta.cost_source) == (
            pytest.approx(priced("lite-chat", native.meta.usage)),
            "model-info",
        )
    rows = store.default_store().logs(n=4)
    assert [r["cost_source"] for r in reversed(rows)] == ["gateway", "gateway", "gateway", "model-info"]
    assert all(r["cost"] > 0 for r in rows)
    with sqlite_rows(home) as prices:
        assert {model: (i, o) for model, i, o in prices if model} == PRICES  # kept, with their date
    [day] = [r for r in store.default_store().usage() if r.model == "lite-chat"]
    assert day.cost_source == "gateway+model-info" and day.unpriced == 0
    assert day.cost == pytest.approx(sum(r["cost"] for r in rows if r["model"] == "lite-chat"))
    cli = subprocess.run(
        [sys.executable, "-m", "gatecell", "usage"],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
            "GATECELL_HOME": str(home),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    [line] = [line for line in cli.stdout.splitlines() if " lite-chat " in line]
    assert line.split()[-2:] == [f"{day.cost:.6f}", "gateway+model-info"]


class sqlite_rows:
    """The ``model_prices`` rows of the log in ``home``: (model, input, output per token)."""

    def __init__(self, home: Path) -> None:
        import sqlite3

        self.conn = sqlite3.connect(home / "gatecell.db")

    def __enter__(self) -> list[tuple[str, float, float]]:
        return self.conn.execute(
            "SELECT model, input_cost_per_token, output_cost_per_token FROM model_prices"
        ).fetchall()

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def test_an_async_stream_and_a_batch_say_what_they_cost(litellm, home: Path):
    async def streamed() -> tuple[float | None, str | None]:
        async with AsyncGateway(litellm.base_url, litellm.key) as gw:
            await gw.chat(model="lite-chat", messages=SUM)  # LiteLLM names itself
            stream = await gw.chat(model="lite-chat", messages=SUM, stream=True)
            await stream.aread()
            return stream.meta.cost, stream.meta.cost_source

    cost, source = asyncio.run(streamed())
    assert source == "gateway" and cost and cost > 0
    with Gateway(litellm.base_url, litellm.key) as gw:
        batch = gw.map("What is {item}+{item}?", [5, 6, 7], model="lite-chat", progress=False)
    assert {r.cost_source for r in batch.rows} == {"gateway"}
    usage = batch.usage
    assert usage["cost_source"] == "gateway" and usage["unpriced_rows"] == 0
    assert usage["cost"] == pytest.approx(
        usage["prompt_tokens"] * PRICES["lite-chat"][0] + usage["completion_tokens"] * PRICES["lite-chat"][1]
    )
    assert json.loads(batch.to_pandas()[["cost", "cost_source"]].to_json(orient="values"))[0][1] == "gateway"
