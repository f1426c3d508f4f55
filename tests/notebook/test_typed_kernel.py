"""``%%chat --schema`` in a real kernel, the model class defined in the notebook itself, as a
user writes it: the value in ``-o VAR``, and ``--over`` a DataFrame into typed columns."""

from __future__ import annotations

import json

from kernels import displays, execute, running, stream_text

MODEL = """
from typing import Literal
from pydantic import BaseModel

class Review(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    product: str
    stars: int
"""


def test_a_model_class_defined_in_the_notebook(tmp_path):
    with running(tmp_path, GATECELL_HOME=str(tmp_path / "home")) as kc:
        reply, _ = execute(kc, MODEL)
        assert reply["content"]["status"] == "ok"
        reply, messages = execute(
            kc, "%%chat --schema Review -o r\nRead this review: the Acme kettle is wonderful, 5 stars."
        )
        assert reply["content"]["status"] == "ok", stream_text(messages, "stderr")
        shown = displays(messages)[-1]["content"]["data"]
        assert '"stars": 5' in shown["text/plain"]
        _, messages = execute(
            kc,
            "import json; print(json.dumps([type(r.parsed).__name__, r.parsed.model_dump(), r.parse_error]))",
        )
        name, value, error = json.loads(stream_text(messages, "stdout"))
        assert name == "Review" and error is None
        assert value == {"sentiment": "positive", "product": "Acme", "stars": 5}

        reply, messages = execute(
            kc,
            "import pandas as pd\n"
            "df = pd.DataFrame({'review': ['Great Acme kettle, 5 stars', 'Awful Zeta lamp, 1 star', "
            "'The Foo mug is fine, 3 stars']}, index=['x', 'y', 'z'])",
        )
        reply, messages = execute(kc, "%%chat --over df --schema Review -o batch\nRead this review: {review}")
        assert reply["content"]["status"] == "ok", stream_text(messages, "stderr")
        _, messages = execute(
            kc,
            "f = batch.frame\n"
            "print(json.dumps([list(f.index), {c: str(t) for c, t in f.dtypes.items()}, f['stars'].tolist(),"
            " f['sentiment'].tolist(), batch.failed]))",
        )
        index, dtypes, stars, sentiments, failed = json.loads(stream_text(messages, "stdout"))
        assert index == ["x", "y", "z"] and failed == 0
        assert dtypes == {"sentiment": "category", "product": "string", "stars": "Int64"}
        assert stars == [5, 1, 3] and sentiments == ["positive", "negative", "neutral"]
