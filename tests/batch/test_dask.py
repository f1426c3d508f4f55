"""``gatecell.dask.map`` on a real ``distributed.LocalCluster`` (worker processes) against the
embedded gateway, which the workers reach over loopback with a key shipped to them."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import gatecell.dask as gdask  # noqa: E402
from gatecell import Gateway  # noqa: E402
from gatecell.wire.transport.errors import ConfigError, InvalidRequest  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def test_the_same_results_as_the_single_machine_map(cluster, local_gateway):
    frame = pd.DataFrame(
        {"a": range(24), "b": [3 * i for i in range(24)]}, index=pd.Index([f"id{i}" for i in range(24)])
    )
    ddf = dd.from_pandas(frame, npartitions=4)
    key = gdask.ship(local_gateway.api_key)
    texts = gdask.map(
        ddf, "What is {a} + {b}?", base_url=local_gateway.base_url, api_key=key, concurrency=3, rpm=60_000
    )
    assert texts.npartitions == 4
    got = texts.compute()
    local = ddf.compute()  # the rows in the dask frame's order
    here = Gateway(base_url=local_gateway.base_url, api_key=local_gateway.api_key)
    expected = here.map("What is {a} + {b}?", local, progress=False, cache=False).text
    assert got.index.equals(local.index) and expected.index.equals(local.index)
    assert got.to_dict() == expected.to_dict() == {f"id{i}": f"{i} + {3 * i} = {4 * i}" for i in range(24)}
    ran = cluster.run(lambda: __import__("os").getpid())
    assert len(set(ran.values())) == 2  # two worker processes did it


def _shown(texts) -> list[str]:
    """Everything Dask can print about a collection: its repr, its graph, task names, and each
    task with every argument it carries (a task's own repr elides them)."""
    graph = dict(texts.__dask_graph__())
    shown = [repr(texts), str(texts.dask), str(graph), *map(str, graph)]
    for task in graph.values():
        shown += [repr(task), *map(repr, getattr(task, "args", ())), repr(getattr(task, "kwargs", {}))]
    return shown


def test_the_key_is_in_no_task_or_graph_repr(local_gateway):
    secret = local_gateway.api_key.reveal()
    ddf = dd.from_pandas(pd.DataFrame({"a": [1, 2]}), npartitions=2)
    texts = gdask.map(ddf, "say {a}", base_url=local_gateway.base_url, api_key=gdask.ship(secret), parallel=2)
    shown = _shown(texts)
    assert all(secret not in text for text in shown)
    assert sum("ShippedKey('sk-…" in text for text in shown) == 2  # one per partition's task, masked
    assert pickle.loads(pickle.dumps(gdask.ship(secret))).reveal() == secret  # shipped on purpose


def test_bad_settings_are_refused_before_any_task(local_gateway, monkeypatch):
    ddf = dd.from_pandas(pd.DataFrame({"a": [1]}), npartitions=1)
    with pytest.raises(InvalidRequest, match="gatecell.dask.ship"):
        gdask.map(ddf, "{a}", base_url=local_gateway.base_url, api_key=local_gateway.api_key)
    with pytest.raises(InvalidRequest, match="{b} is not a field"):
        gdask.map(ddf, "{b}", base_url=local_gateway.base_url)
    with pytest.raises(InvalidRequest, match="rpm"):
        gdask.map(ddf, "{a}", base_url=local_gateway.base_url, rpm=0)
    monkeypatch.delenv("GATECELL_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="base_url"):
        gdask.map(ddf, "{a}")


def test_rpm_is_shared_by_the_partitions_that_run_at_once(local_gateway):
    ddf = dd.from_pandas(pd.DataFrame({"a": range(6)}), npartitions=3)
    texts = gdask.map(ddf, "say {a}", base_url=local_gateway.base_url, rpm=600, tpm=9000, parallel=2)
    settings = [text for text in _shown(texts) if text.startswith("_Settings(")]
    assert len(settings) == 3 and all("('rpm', 300.0)" in s and "('tpm', 4500.0)" in s for s in settings)


REVIEWS = pd.DataFrame(
    {
        "review": [
            "I love my Acme kettle, 5 stars",
            "The Zeta lamp broke, awful, 1 star",
            "The Foo mug is fine, 3 stars",
            "Wonderful Bar chair, 4 stars",
        ]
    },
    index=pd.Index(["r1", "r2", "r3", "r4"]),
)
REVIEW_SCHEMA = {  # a JSON Schema dict: its Schema holds classes made on the fly, which pickle cannot carry
    "title": "Review",
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]},
        "stars": {"type": "integer"},
    },
    "required": ["sentiment", "stars"],
}


@pytest.mark.parametrize("spec", ["model class", "json schema"])
def test_a_schema_gives_typed_columns_made_on_the_workers(cluster, local_gateway, spec):
    from typed_models import Review

    schema = Review if spec == "model class" else REVIEW_SCHEMA
    ddf = dd.from_pandas(REVIEWS, npartitions=2)
    key = gdask.ship(local_gateway.api_key)
    frame = gdask.map(
        ddf, "Read this review: {review}", base_url=local_gateway.base_url, api_key=key, schema=schema
    )
    got = frame.compute()
    here = Gateway(base_url=local_gateway.base_url, api_key=local_gateway.api_key)
    expected = here.map("Read this review: {review}", REVIEWS, progress=False, schema=schema).frame
    assert list(got.columns) == list(expected.columns) and got.dtypes.equals(expected.dtypes)
    assert got.equals(expected)
    assert got["sentiment"].tolist() == ["positive", "negative", "neutral", "positive"]
    assert got["stars"].tolist() == [5, 1, 3, 4]


def test_choices_give_a_categorical_series(cluster, local_gateway):
    ddf = dd.from_pandas(REVIEWS, npartitions=2)
    labels = gdask.map(
        ddf,
        "Sentiment of: {review}",
        base_url=local_gateway.base_url,
        api_key=gdask.ship(local_gateway.api_key),
        choices=["positive", "negative", "neutral"],
    ).compute()
    assert str(labels.dtype) == "category" and list(labels.cat.categories) == [
        "positive",
        "negative",
        "neutral",
    ]
    assert labels.to_dict() == {"r1": "positive", "r2": "negative", "r3": "neutral", "r4": "positive"}


def test_a_bad_schema_is_refused_before_any_task(local_gateway):
    ddf = dd.from_pandas(REVIEWS, npartitions=2)
    with pytest.raises(InvalidRequest, match="schema: must be a pydantic model class"):
        gdask.map(ddf, "{review}", base_url=local_gateway.base_url, schema="Review")
