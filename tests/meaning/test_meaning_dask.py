"""``gatecell.dask.embed / search / join`` on a real ``distributed.LocalCluster`` (worker
processes) against `EmbedServer`: the same results as pandas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from embedserver import KEY

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import gatecell.dask as gdask  # noqa: E402
import gatecell.pandas  # noqa: E402,F401

WORDS = ["battery", "screen", "cable", "charger", "case", "speaker", "camera", "button"]


def test_the_same_results_as_pandas(embed_server, gateway):
    server = embed_server()
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS, size=3)) + f" item{i % 7}" for i in range(40)]
    frame = pd.DataFrame({"text": texts, "n": range(40)}, index=[f"t{i}" for i in rng.permutation(40)])
    catalogue = pd.DataFrame({"name": [f"{a} {b}" for a, b in zip(WORDS, WORDS[1:], strict=False)]})
    ddf = dd.from_pandas(frame, npartitions=4)
    key, gw = gdask.ship(KEY), gateway(server)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        vectors = gdask.embed(ddf, "text", base_url=server.url, api_key=key).compute()
        hits = gdask.search(ddf, "battery charger item3", on="text", k=6, base_url=server.url, api_key=key)
        joined = gdask.join(
            ddf,
            catalogue,
            left_on="text",
            right_on="name",
            k=2,
            threshold=0.3,
            base_url=server.url,
            api_key=key,
        )
        joined = joined.compute()
    sent = len(server.inputs)
    assert set(server.inputs) == {*texts, *catalogue["name"], "battery charger item3"}
    frame = ddf.compute()  # the rows in the dask frame's order (from_pandas sorts the index)
    here = frame.gatecell.embed("text", gateway=gw, progress=False)
    assert list(vectors.index) == list(frame.index)
    for label in frame.index:
        np.testing.assert_array_equal(vectors[label], here[label])
    expected = frame.gatecell.search("battery charger item3", on="text", k=6, gateway=gw, progress=False)
    assert list(hits.index) == list(expected.index)
    np.testing.assert_allclose(hits["score"], expected["score"], rtol=1e-5)
    same = frame.gatecell.join(
        catalogue, left_on="text", right_on="name", k=2, threshold=0.3, gateway=gw, progress=False
    )
    assert list(joined.index) == list(same.index) and list(joined["name"]) == list(same["name"])
    np.testing.assert_allclose(joined["score"], same["score"], rtol=1e-5)
    assert len(server.inputs) == sent  # pandas here found every vector the workers kept in the store
