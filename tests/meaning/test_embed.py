"""``Gateway.embed`` and ``rerank`` against `EmbedServer`: what is sent is counted, not assumed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from embedserver import KEY, vector
from interrupts import python

from gatecell.batch.embed import EmbedError
from gatecell.wire.transport.errors import APIError, InvalidRequest

HERE = Path(__file__).parent
TEXTS = ["the battery dies fast", "screen is bright", "battery life is short", "great screen colours"]


def expected(texts: list[str], dimensions: int = 64) -> np.ndarray:
    return np.stack([vector(t, dimensions) for t in texts])


def test_rows_in_the_order_given_from_base64(embed_server, gateway):
    server = embed_server()
    vecs = gateway(server).embed(TEXTS, progress=False)
    assert vecs.dtype == np.float32 and vecs.shape == (4, 64)
    np.testing.assert_array_equal(vecs, expected(TEXTS))  # the server answers in reverse: read by index
    assert vecs.meta.normalized and vecs.meta.requests == 1 and vecs.meta.sent == 4
    assert isinstance(vecs[1:], np.ndarray) and vecs[1:].meta is vecs.meta


def test_floats_are_read_when_base64_is_ignored(embed_server, gateway):
    server = embed_server(floats_only=True)
    np.testing.assert_allclose(gateway(server).embed(TEXTS, progress=False), expected(TEXTS), rtol=1e-6)


def test_duplicates_are_sent_once_and_batched_by_count(embed_server, gateway):
    server = embed_server()
    texts = [TEXTS[i % 3] for i in range(30)] + ["one more", "and another"]
    vecs = gateway(server).embed(texts, batch_size=2, progress=False)
    assert sorted(server.inputs) == sorted({*texts})  # 5 distinct texts, each once
    assert sorted(server.batches) == [1, 2, 2] and server.requests == 3
    np.testing.assert_array_equal(vecs, expected(texts))
    assert vecs.meta.texts == 32 and vecs.meta.unique == 5


def test_batched_by_token_estimate(embed_server, gateway):
    server = embed_server()
    texts = ["word " * 40 + str(i) for i in range(6)]  # about 51 tokens each by the estimate
    gateway(server).embed(texts, batch_tokens=110, progress=False)
    assert server.batches == [2, 2, 2]  # any order: all alike


def test_a_new_process_asks_for_none_of_the_texts_kept(embed_server, gateway, home):
    server = embed_server()
    gateway(server).embed(TEXTS, progress=False)
    assert server.requests == 1
    code = (
        "import sys, numpy as np; from gatecell import Gateway\n"
        f"gw = Gateway(base_url={server.url!r}, api_key={KEY!r})\n"
        f"v = gw.embed({TEXTS!r}, progress=False)\n"
        "print(v.meta.requests, v.meta.cached); np.save(sys.argv[1], v)\n"
    )
    out = home.parent / "vectors.npy"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "4"]
    assert server.requests == 1  # counted by the server: nothing came
    np.testing.assert_array_equal(np.load(out), expected(TEXTS))


def test_a_batch_refused_as_too_large_is_split_in_half(embed_server, gateway):
    server = embed_server(max_inputs=3)
    texts = [f"text number {i}" for i in range(8)]
    vecs = gateway(server).embed(texts, batch_size=8, progress=False)
    np.testing.assert_array_equal(vecs, expected(texts))
    # 8 -> 413; 4 -> 413; 2, 2; 4 -> 413; 2, 2
    assert server.statuses == [413, 413, 200, 200, 413, 200, 200]
    assert sorted(server.inputs) == sorted(texts)


def test_one_text_still_too_large_fails_alone_in_one_line(embed_server, gateway):
    server = embed_server(max_inputs=0)
    with pytest.raises(EmbedError) as caught:
        gateway(server).embed(["alpha", "beta"], progress=False, concurrency=1)
    line = str(caught.value)
    assert "\n" not in line and "413" in line and "at most 0 inputs" in line
    assert "'alpha'" in line and "0 of 2 texts embedded" in line
    assert server.statuses == [413, 413]  # both halves, then it stops


def test_429_pauses_and_resends(embed_server, gateway):
    server = embed_server(rate_limited=2)
    vecs = gateway(server).embed(TEXTS, progress=False)
    np.testing.assert_array_equal(vecs, expected(TEXTS))
    assert server.statuses == [429, 429, 200]


def test_a_refused_dimensions_is_one_line_and_not_split(embed_server, gateway):
    server = embed_server(reject_dimensions=True)
    with pytest.raises(EmbedError) as caught:
        gateway(server).embed(TEXTS, dimensions=16, progress=False)
    line = str(caught.value)
    assert "\n" not in line and "400" in line and "does not support specifying dimensions" in line
    assert server.requests == 1


def test_dimensions_are_sent_when_given(embed_server, gateway):
    server = embed_server()
    vecs = gateway(server).embed(TEXTS, dimensions=16, progress=False)
    np.testing.assert_array_equal(vecs, expected(TEXTS, 16))
    assert vecs.meta.dimensions == 16


@pytest.mark.parametrize(
    "texts, options, said",
    [
        (["fine", ""], {}, "texts[1] is empty"),
        (["fine", 3], {}, "texts[1] is 3, not a string"),
        (TEXTS, {"dimensions": 0}, "dimensions: must be a positive whole number"),
        (TEXTS, {"batch_size": -1}, "batch_size: must be a positive whole number"),
        (TEXTS, {"rpm": 0}, "rpm: must be a positive number"),
        (TEXTS, {"batch": 3}, "is not an option of embed; did you mean batch_size?"),
    ],
)
def test_bad_input_is_refused_before_any_request(embed_server, gateway, texts, options, said):
    server = embed_server()
    with pytest.raises(InvalidRequest) as caught:
        gateway(server).embed(texts, progress=False, **options)
    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert server.statuses == []


def test_the_log_counts_embedding_requests_tokens_and_cost(embed_server, gateway):
    from gatecell.store import default_store

    server = embed_server(cost=0.25)
    vecs = gateway(server).embed(TEXTS + ["one more text"], batch_size=2, progress=False)
    assert vecs.meta.cost == pytest.approx(0.75) and vecs.meta.prompt_tokens == 17
    rows = [r for r in default_store().usage() if r.model == "local-embed"]
    assert [(r.requests, r.prompt_tokens) for r in rows] == [(3, 17)]
    logged = default_store().logs(n=0)
    assert len(logged) == 3 and all(r["endpoint"] == "/v1/embeddings" for r in logged)
    assert sum(r["cost"] for r in logged) == pytest.approx(0.75)


def test_the_log_keeps_each_request_and_its_error_not_its_vectors(embed_server, gateway):
    import sqlite3

    from gatecell.store import default_store

    server = embed_server(refuse=frozenset({"gamma"}))
    with pytest.raises(EmbedError):
        gateway(server).embed(["alpha", "gamma"], batch_size=1, concurrency=1, progress=False)
    with sqlite3.connect(default_store().path) as conn:
        rows = conn.execute(
            "SELECT coalesce(prompt, '') || coalesce(params_json, '') || coalesce(messages_json, ''), "
            "coalesce(response, '') || coalesce(response_json, ''), status, error FROM exchanges ORDER BY id"
        ).fetchall()
    assert [(status, error is None) for _, _, status, error in rows] == [(200, True), (400, False)]
    assert ["gamma" in sent for sent, _, _, _ in rows] == [False, True]
    assert "embedding" not in rows[0][1]  # the vectors are in their own table, not the log's


def test_async_embed(embed_server):
    from gatecell import AsyncGateway

    server = embed_server()

    async def main() -> np.ndarray:
        async with AsyncGateway(base_url=server.url, api_key=KEY) as gw:
            return await gw.embed(TEXTS + TEXTS, progress=False, batch_size=3)

    vecs = asyncio.run(main())
    np.testing.assert_array_equal(vecs, expected(TEXTS + TEXTS))
    assert sorted(server.batches) == [1, 3]  # two requests, in flight at once


def test_rerank_orders_by_relevance(embed_server, gateway):
    server = embed_server()
    ranked = gateway(server).rerank("battery life", TEXTS, top_n=2)
    assert [r.index for r in ranked] == [2, 0] and ranked.results[0].document == TEXTS[2]
    assert ranked.results[0].relevance_score == 1.0


def test_rerank_where_the_gateway_does_not_serve_it(embed_server, gateway):
    server = embed_server(rerank=False)
    with pytest.raises(APIError) as caught:
        gateway(server).rerank("battery", TEXTS)
    assert "404" in str(caught.value) and "does not serve /v1/rerank" in str(caught.value)
    with pytest.raises(InvalidRequest):
        gateway(server).rerank("battery", TEXTS, top_n=0)


def test_a_failed_call_keeps_what_came_back_and_a_rerun_sends_only_the_rest(embed_server, gateway):
    server = embed_server(refuse=frozenset({"gamma"}))
    texts = ["alpha", "beta", "gamma", "delta"]
    with pytest.raises(EmbedError) as caught:
        gateway(server).embed(texts, batch_size=1, concurrency=1, progress=False)
    assert "text 'gamma': 400" in str(caught.value) and "2 of 4 texts embedded" in str(caught.value)
    assert server.inputs == ["alpha", "beta"]  # delta never went: the call stopped at the failure
    server.refuse = frozenset()
    vecs = gateway(server).embed(texts, batch_size=1, concurrency=1, progress=False)
    assert server.inputs == ["alpha", "beta", "gamma", "delta"]
    np.testing.assert_array_equal(vecs, expected(texts))


@pytest.mark.parametrize(
    "data, said",
    [
        ([{"index": 0, "embedding": [1.0, 2.0]}], "1 embeddings for 2 inputs"),
        ([{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}], "repeated or missing"),
        ([{"index": "0", "embedding": [1.0]}, {"index": 1, "embedding": [1.0]}], "indexes '0'"),
        ([{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}], "vectors of 1 and 2"),
        ([{"index": 0, "embedding": "AAAA!AAA"}, {"index": 1, "embedding": "AAAAAAAA"}], "neither base64"),
        ([{"index": 0, "embedding": None}, {"index": 1, "embedding": [1.0]}], "an embedding is None"),
    ],
)
def test_an_answer_that_is_not_one_vector_per_input_is_one_line(data, said):
    from gatecell.wire.apis.embeddings import read_embeddings

    with pytest.raises(APIError) as caught:
        read_embeddings({"data": data}, 2)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_packed_and_one_by_one_reading_agree():
    import base64

    from gatecell.wire.apis.embeddings import read_embeddings

    rows = (
        np.arange(9, dtype="<f4").reshape(3, 3) / 7
    )  # 12 bytes a row: base64 with no padding, decoded at once
    packed = [{"index": i, "embedding": base64.b64encode(r.tobytes()).decode()} for i, r in enumerate(rows)]
    floats = [{"index": i, "embedding": r.tolist()} for i, r in enumerate(rows)]
    for data in (packed, floats, packed[::-1], [packed[0], floats[1], packed[2]]):
        np.testing.assert_array_equal(read_embeddings({"data": data}, 3).matrix, rows)
    padded = [{"index": 0, "embedding": base64.b64encode(np.arange(5, dtype="<f4").tobytes()).decode()}]
    assert read_embeddings({"data": padded}, 1).matrix.shape == (1, 5)  # 20 bytes: padded base64


def test_ctrl_c_keeps_what_came_back_and_says_so_in_one_line(embed_server, gateway):
    import signal

    server = embed_server(delay=0.3)
    texts = [f"text number {i}" for i in range(20)]
    code = (
        "from gatecell import Gateway\n"
        f"Gateway(base_url={server.url!r}, api_key={KEY!r}).embed({texts!r}, batch_size=1, concurrency=1)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        python("-c", code), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while server.requests < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    last = err.strip().splitlines()[-1]
    assert "EmbedError: interrupted;" in last and "of 20 texts embedded, kept" in last
    sent = len(server.inputs)
    assert 2 <= sent < 20
    vecs = gateway(server).embed(texts, batch_size=1, progress=False)
    np.testing.assert_array_equal(vecs, expected(texts))
    assert set(server.inputs) == set(texts) and len(server.inputs) <= len(texts) + 1  # one in flight, at most
