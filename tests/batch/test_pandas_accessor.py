"""``df.gatecell.map``: the pandas accessor, registered by ``import gatecell.pandas`` only,
run for real against the local gateway (its default client) and a `RowServer` (yours)."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
from typed_models import Review

LABELS = ["positive", "negative", "neutral"]


def test_the_accessor_is_there_once_asked_for_and_import_gatecell_stays_without_pandas():
    has = "print(hasattr(pd.DataFrame(), 'gatecell'), hasattr(pd.Series(dtype=object), 'gatecell'))"
    code = (
        f"import sys, gatecell; print('pandas' in sys.modules); import pandas as pd; {has}; "
        f"import gatecell.pandas; {has}"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:3] == ["False", "False False", "True True"]


def test_a_frame_maps_through_the_default_gateway_into_typed_columns():
    import gatecell.pandas

    df = pd.DataFrame(
        {"review": ["I love my Acme kettle, 5 stars", "The Zeta lamp broke, awful, 1 star"]}, index=["a", "b"]
    )
    batch = df.gatecell.map("Read this review: {review}", schema=Review, progress=False)
    assert gatecell.pandas.default_gateway().local  # nothing configured: the local gateway
    df[["sentiment", "product", "stars"]] = batch.frame
    assert df["stars"].tolist() == [5, 1] and df["sentiment"].tolist() == ["positive", "negative"]
    assert str(df["stars"].dtype) == "Int64"


def test_a_series_maps_its_values_with_a_gateway_of_your_own(row_server, gateway):
    import gatecell.pandas  # noqa: F401

    server = row_server(reply=lambda prompt, body: "NEGATIVE" if "broke" in prompt else "positive.")
    reviews = pd.Series(["it broke", "love it"], index=[10, 20], name="review")
    labels = reviews.gatecell.map(
        "Sentiment of: {review}", choices=LABELS, gateway=gateway(server), progress=False
    )
    assert labels.text.to_dict() == {10: "negative", 20: "positive"}
    assert str(labels.text.dtype) == "category" and server.answered == 2
