"""``df.gatecell.embed / search / join / dedupe / cluster`` against `EmbedServer`, each result
checked against numpy computed here from the server's own vectors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from embedserver import vector

import gatecell.pandas  # noqa: F401  (registers the accessor)
from gatecell.wire.transport.errors import APIError, InvalidRequest

REVIEWS = [
    "battery dies too fast",
    "the screen is bright and sharp",
    "battery life is short on this phone",
    "great screen but slow charging",
    "charging cable broke",
    "fast delivery and nice box",
    "the battery drains overnight",
    "screen cracked after a week",
]


def matrix(texts) -> np.ndarray:
    return np.stack([vector(t) for t in texts])


@pytest.fixture
def reviews() -> pd.DataFrame:
    labels = [f"r{i}" for i in np.random.default_rng(7).permutation(len(REVIEWS))]
    return pd.DataFrame({"review": REVIEWS, "stars": range(len(REVIEWS))}, index=pd.Index(labels, name="id"))


def test_vectors_are_aligned_to_a_shuffled_string_index(embed_server, gateway, reviews):
    server = embed_server()
    df = pd.concat([reviews, reviews.iloc[[3, 0]].rename(index=lambda x: x + "b")])  # two duplicated texts
    df = df.sample(frac=1, random_state=3)
    vectors = df.gatecell.embed("review", gateway=gateway(server), progress=False)
    assert list(vectors.index) == list(df.index) and vectors.name == "review"
    for label, text in df["review"].items():
        np.testing.assert_array_equal(vectors[label], vector(text))
    assert sorted(server.inputs) == sorted(REVIEWS)  # 10 rows, 8 texts sent, once each
    m = df.gatecell.embed("review", matrix=True, gateway=gateway(server), progress=False)
    np.testing.assert_array_equal(m, matrix(df["review"]))
    assert server.requests == 1  # the second call: all from the store


def test_search_matches_numpy(embed_server, gateway, reviews):
    server = embed_server()
    query = "battery drains fast"
    hits = reviews.gatecell.search(query, on="review", k=3, gateway=gateway(server), progress=False)
    sims = matrix(REVIEWS) @ vector(query)
    order = np.argsort(-sims, kind="stable")[:3]
    assert list(hits.index) == list(reviews.index[order])
    np.testing.assert_allclose(hits["score"], sims[order], rtol=1e-5)
    assert list(hits.columns) == ["review", "stars", "score"]
    above = reviews.gatecell.search(
        query, on="review", k=8, threshold=0.3, gateway=gateway(server), progress=False
    )
    assert list(above.index) == list(reviews.index[np.argsort(-sims, kind="stable")][: (sims >= 0.3).sum()])


def test_search_ties_come_in_row_order_whatever_the_chunk(embed_server, gateway):
    from gatecell.batch.nearest import top_k

    texts = ["alpha beta", "gamma", "beta alpha", "delta", "alpha beta alpha beta"]  # 0, 2, 4: one vector
    series = pd.Series(texts, index=list("edcba"))
    hits = series.gatecell.search("alpha beta", k=3, gateway=gateway(embed_server()), progress=False)
    assert list(hits.index) == ["e", "c", "a"]
    rng = np.random.default_rng(0)
    prototypes = rng.normal(size=(6, 8)).astype(np.float32)
    kinds = rng.integers(0, 6, size=500)
    scale = np.float32(2.0) ** rng.integers(0, 3, size=(500, 1))  # powers of two: equal once normalised
    candidates = prototypes[kinds] * scale  # many exact ties
    queries = rng.normal(size=(37, 8)).astype(np.float32)
    whole = top_k(queries, candidates, 7, chunk=1 << 30)
    chunked = top_k(queries, candidates, 7, chunk=500 * 16 * 3)  # three rows a block
    np.testing.assert_array_equal(whole[0], chunked[0])
    unit = prototypes / np.linalg.norm(prototypes, axis=1, keepdims=True)
    for row, query in enumerate(queries.astype(np.float64)):
        by_kind = unit @ (query / np.linalg.norm(query))
        expected = sorted(range(500), key=lambda j: (-by_kind[kinds[j]], j))[:7]
        assert list(whole[0][row]) == expected


def test_search_reranks_where_asked(embed_server, gateway, reviews):
    server = embed_server()
    hits = reviews.gatecell.search(
        "battery", on="review", k=2, rerank="local-embed", gateway=gateway(server), progress=False
    )
    assert server.reranks == 1
    assert list(hits["relevance"]) == [1.0, 1.0] and all("battery" in r for r in hits["review"])


def test_search_says_in_one_line_that_the_gateway_has_no_rerank(embed_server, gateway, reviews):
    server = embed_server(rerank=False)
    with pytest.raises(APIError) as caught:
        reviews.gatecell.search("battery", on="review", rerank="x", gateway=gateway(server), progress=False)
    assert "does not serve /v1/rerank" in str(caught.value) and "\n" not in str(caught.value)


def test_join_matches_numpy(embed_server, gateway):
    server = embed_server()
    lines = pd.DataFrame({"item": ["usb c cable 2m", "phone battery pack", "screen protector glass", "zzz"]})
    lines.index = ["l1", "l2", "l3", "l4"]
    catalogue = pd.DataFrame(
        {
            "name": ["glass screen protector", "usb c cable", "battery pack for phone", "lamp"],
            "price": [5, 7, 30, 12],
        }
    )
    on = {
        "left_on": "item",
        "right_on": "name",
        "threshold": 0.5,
        "gateway": gateway(server),
        "progress": False,
    }
    joined = lines.gatecell.join(catalogue, k=1, **on)
    sims = matrix(lines["item"]) @ matrix(catalogue["name"]).T
    best = sims.argmax(axis=1)
    keep = sims.max(axis=1) >= 0.5
    assert list(joined.index) == list(lines.index[keep])
    assert list(joined["name"]) == list(catalogue["name"].to_numpy()[best[keep]])
    np.testing.assert_allclose(joined["score"], sims.max(axis=1)[keep], rtol=1e-5)
    assert list(joined.columns) == ["item", "name", "price", "score"]
    assert sorted(server.inputs) == sorted([*lines["item"], *catalogue["name"]])
    every = lines.gatecell.join(catalogue, k=2, how="left", **on)
    assert every.loc["l4", "name"] is np.nan or pd.isna(every.loc["l4", "name"])
    assert list(every.index).count("l4") == 1


def test_dedupe_links_chains_into_groups(embed_server, gateway):
    texts = [
        "w1 w2 w3 w4",  # A
        "lonely text here",
        "w1 w2 w3 w4 w5 w6",  # B: near A and C
        "w3 w4 w5 w6",  # C: near B, not A
        "here text lonely",  # the same words as row 1
        "something else entirely",
    ]
    sims = matrix(texts) @ matrix(texts).T
    assert sims[0, 2] >= 0.8 and sims[2, 3] >= 0.8 and sims[0, 3] < 0.8  # the chain holds
    df = pd.DataFrame({"title": texts}, index=list("uvwxyz"))
    groups = df.gatecell.dedupe(
        "title", threshold=0.8, keep=False, gateway=gateway(embed_server()), progress=False
    )
    assert list(groups["group"]) == [0, 1, 0, 0, 1, 2]
    kept = df.gatecell.dedupe("title", threshold=0.8, gateway=gateway(embed_server()), progress=False)
    assert list(kept.index) == ["u", "v", "z"]


def test_cluster_names_come_through_typed_answers(embed_server, gateway):
    from gatecell.store import default_store

    server = embed_server()
    texts = [f"battery {w}" for w in ("drains", "dies", "weak", "short")] + [
        f"screen {w}" for w in ("bright", "cracked", "dim", "sharp")
    ]
    df = pd.DataFrame({"answer": texts}, index=[f"a{i}" for i in range(8)])
    themed = df.gatecell.cluster("answer", n=2, label=True, sample=3, gateway=gateway(server), progress=False)
    assert list(themed["cluster"]) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert list(themed["theme"]) == ["battery"] * 4 + ["screen"] * 4
    themes = themed.attrs["themes"]
    assert list(themes["description"]) == ["texts about battery", "texts about screen"]
    assert list(themes["size"]) == [4, 4]
    assert len(server.chats) == 2 and all(p.count("\n- ") == 3 for p in server.chats)  # 3 samples each
    typed = [r for r in default_store().logs(n=0) if r["endpoint"] == "/v1/chat/completions"]
    assert len(typed) == 2 and all(r["schema"] == "Theme" and r["parsed"]["name"] for r in typed)


def test_a_missing_value_is_refused_by_its_row_before_any_request(embed_server, gateway):
    server = embed_server()
    df = pd.DataFrame({"t": ["fine", None, "also fine"]}, index=["a", "b", "c"])
    with pytest.raises(InvalidRequest) as caught:
        df.gatecell.search("x", on="t", gateway=gateway(server), progress=False)
    assert "row 'b' is missing" in str(caught.value)
    with pytest.raises(InvalidRequest, match="'nope' is not a column"):
        df.gatecell.dedupe("nope", gateway=gateway(server), progress=False)
    with pytest.raises(InvalidRequest, match="k: must be a whole number >= 1"):
        df.dropna().gatecell.search("x", on="t", k=0, gateway=gateway(server), progress=False)
    with pytest.raises(
        InvalidRequest, match="threshold: must be a cosine similarity between -1 and 1; got 2"
    ):
        df.dropna().gatecell.dedupe("t", threshold=2, gateway=gateway(server), progress=False)
    assert server.statuses == []


def test_series_search_and_join_need_no_column(embed_server, gateway):
    gw = gateway(embed_server())
    texts = pd.Series(["red apple", "green pear", "red car"], index=["x", "y", "z"], name="text")
    hits = texts.gatecell.search("apple", k=1, gateway=gw, progress=False)
    assert list(hits.index) == ["x"] and list(hits.columns) == ["text", "score"]
    things = pd.Series(["green pear", "red car"], name="thing")
    joined = texts.gatecell.join(things, k=1, gateway=gw, progress=False)
    nearest = (matrix(texts) @ matrix(things).T).argmax(axis=1)  # ties: the first, as the join
    assert list(joined["thing"]) == list(things.to_numpy()[nearest])
    assert list(joined.index) == ["x", "y", "z"]
