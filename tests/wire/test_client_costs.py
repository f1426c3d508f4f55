"""What an answer cost, and who said: the gateway (LiteLLM's cost header, or its stream's last
usage chunk), else its model info's prices, else the user's (GATECELL_PRICES), else unknown;
on the reply (``meta.cost``, ``meta.cost_source``) and in the log. Against the fault server's
imitation of LiteLLM's proxy (the real one: tests/thirdparty)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fault_server import KEY, LITELLM_COST, LITELLM_STREAM_COST

from gatecell import Gateway, store

HI = [{"role": "user", "content": "Hi"}]


def _costs(n: int) -> list[tuple[str, float | None, str | None]]:
    """The newest ``n`` exchanges' (model, cost, cost_source), oldest first."""
    return [(r["model"], r["cost"], r["cost_source"]) for r in reversed(store.default_store().logs(n=n))]


def _paths(fault, gw) -> list[str]:
    return [r.path for r in fault.seen(gw.token)]


def test_a_litellm_answer_and_stream_say_what_they_cost(make, fault):
    gw = make("litellm")
    reply = gw.chat("m", HI)
    assert (reply.meta.cost, reply.meta.cost_source) == (float(LITELLM_COST), "gateway")
    # LiteLLM named itself (x-litellm-* headers): its streams are asked for their usage,
    # whose last chunk says what the stream cost.
    stream = gw.chat("m", HI, stream=True)
    assert stream.read() == "Hello world"
    assert (stream.meta.cost, stream.meta.cost_source) == (LITELLM_STREAM_COST, "gateway")
    sent = fault.seen(gw.token)[-1].json()
    assert sent["stream_options"] == {"include_usage": True}
    assert _costs(2) == [("m", float(LITELLM_COST), "gateway"), ("m", LITELLM_STREAM_COST, "gateway")]


def test_an_answer_that_does_not_say_is_priced_by_the_model_info_asked_once_per_gateway(make, fault):
    first = make("litellm")
    reply = first.chat("by-info", HI)  # 3 prompt and 2 completion tokens at 2e-6 and 4e-6 a token
    assert reply.meta.cost == pytest.approx(3 * 2e-6 + 2 * 4e-6) and reply.meta.cost_source == "model-info"
    assert _paths(fault, first) == ["/v1/chat/completions", "/model/info"]
    with Gateway(first.base_url, KEY) as second:  # another client of the same gateway
        second.chat("by-info", HI)
    assert _paths(fault, first).count("/model/info") == 1  # the log has the prices, with their date
    asked = store.default_store().model_info_asked(first.journal.gateway)
    assert asked is not None and asked.endswith("Z")
    assert _costs(2) == [("by-info", pytest.approx(1.4e-5), "model-info")] * 2


def test_the_users_prices_price_the_rest_and_else_the_cost_is_unknown(
    make, fault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps({"free-form": {"input": 1, "output": 2}, "m": {"input": 100, "output": 100}})
    )
    monkeypatch.setenv("GATECELL_PRICES", str(prices))
    gw = make("litellm")
    gw.chat("m", HI)  # the gateway's own figure comes first
    by_prices = gw.chat("free-form", HI)  # its model info has no prices for it
    nothing = gw.chat("unpriced", HI)
    assert (by_prices.meta.cost, by_prices.meta.cost_source) == (pytest.approx(7e-6), "prices")
    assert (nothing.meta.cost, nothing.meta.cost_source) == (None, None)
    assert _costs(3) == [
        ("m", float(LITELLM_COST), "gateway"),
        ("free-form", pytest.approx(7e-6), "prices"),
        ("unpriced", None, None),
    ]


def test_a_gateway_that_is_not_litellm_is_asked_nothing_more(make, fault):
    """SPEC shows no ``stream_options`` and no ``/model/info``: neither is sent elsewhere."""
    gw = make("ok")
    gw.chat("m", HI)
    "".join(gw.chat("m", HI, stream=True))
    assert _paths(fault, gw) == ["/v1/chat/completions"] * 2
    assert "stream_options" not in fault.seen(gw.token)[-1].json()
    assert _costs(2) == [("m", None, None)] * 2


def test_a_reply_from_the_log_cost_nothing(make, fault):
    gw = make("litellm", cache=True)
    gw.chat("m", HI)
    again = gw.chat("m", HI)
    assert again.meta.cached and again.meta.cost is None
    assert _costs(2) == [("m", float(LITELLM_COST), "gateway"), ("m", None, None)]
