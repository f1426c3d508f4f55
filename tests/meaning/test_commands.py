"""``gatecell embed``, ``gatecell cache clear --embeddings``, ``gatecell logs --similar``,
``%gatecell search`` and ``%gatecell log --similar``, against `EmbedServer`."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from embedserver import KEY, vector

TICKETS = [
    "printer jams on page two",
    "cannot log in after update",
    "printer jams on page two",
    "refund not received",
]
LOGGED = [
    ("how do I merge two pandas frames on a key", "use pd.merge(left, right, on='key')"),
    ("write a haiku about autumn", "leaves fall quietly"),
    ("why does my printer jam", "check the paper tray for stuck pages"),
]


def gatecell(server, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "GATECELL_BASE_URL": server.url, "GATECELL_API_KEY": KEY}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, "-m", "gatecell", *args], env=env, capture_output=True, text=True, timeout=120
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def test_embed_a_csv_column_to_parquet_once_ever(embed_server, tmp_path):
    import pyarrow.parquet as pq

    server = embed_server()
    source, target = tmp_path / "tickets.csv", tmp_path / "vectors.parquet"
    pd.DataFrame({"id": range(4), "text": TICKETS}).to_csv(source, index=False)
    done = gatecell(server, "embed", "-i", str(source), "--column", "text", "-o", str(target), "-q")
    assert "4 rows, 3 distinct texts: 3 embedded now in 1 requests" in done.stderr
    table = pq.read_table(target)
    assert table.column_names == ["id", "text", "embedding"]
    got = np.array(table.column("embedding").to_pylist(), dtype=np.float32)
    np.testing.assert_array_equal(got, np.stack([vector(t) for t in TICKETS]))
    assert sorted(server.inputs) == sorted(set(TICKETS))
    gatecell(server, "embed", "-i", str(source), "--column", "text", "-o", str(target), "-q")
    assert server.requests == 1  # a new process: every vector from the store
    cleared = gatecell(server, "cache", "clear", "--embeddings")
    assert cleared.stderr.startswith("3 kept vectors forgotten")
    gatecell(server, "embed", "-i", str(source), "--column", "text", "-o", str(target), "-q")
    assert server.requests == 2


@pytest.mark.parametrize(
    "rows, column, said",
    [
        (TICKETS, "body", "'body' is not a column of t.csv: id, text"),
        (["fine", "", "fine"], "text", "row 'line 3' is empty"),
    ],
)
def test_embed_refuses_bad_input_in_one_line_before_any_request(embed_server, tmp_path, rows, column, said):
    server = embed_server()
    source = tmp_path / "t.csv"
    pd.DataFrame({"id": range(len(rows)), "text": rows}).to_csv(source, index=False)
    done = gatecell(
        server, "embed", "-i", str(source), "--column", column, "-o", str(tmp_path / "v.parquet"), check=False
    )
    assert done.returncode == 1 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert server.statuses == []


def _log(home):
    from gatecell.store import Store

    store = Store(home / "gatecell.db")
    for prompt, reply in LOGGED:
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
        store.record_exchange("/v1/chat/completions", "m", body, text=reply, status=200)
    assert store.flush(30)
    store.close()


def test_logs_similar_finds_the_nearest_exchange(embed_server, home):
    server = embed_server()
    _log(home)
    done = gatecell(server, "logs", "--similar", "pandas merge frames", "-n", "2")
    heads = [line for line in done.stdout.splitlines() if line.startswith("## ")]
    assert len(heads) == 2 and "similarity" in done.stdout.splitlines()[0]
    first = done.stdout.split("<!-- similarity")[1]
    assert "how do I merge two pandas frames" in first
    asked = server.requests
    gatecell(server, "logs", "--similar", "pandas merge frames")
    assert server.requests == asked  # the log's texts and the query: all kept


@pytest.fixture
def magics(ipshell, embed_server, home, monkeypatch, tmp_path):
    from gatecell.notebook import _STATE

    server = embed_server()
    session = _STATE[id(ipshell)]["magics"].session
    monkeypatch.setenv("GATECELL_API_KEY", KEY)
    monkeypatch.chdir(tmp_path)
    before = session.config.base_url
    session.config.base_url = server.url
    yield server
    session.config.base_url = before


def test_magic_search_and_log_similar(magics, ipshell, cell_runner, home):
    ipshell.user_ns["df"] = pd.DataFrame({"review": TICKETS}, index=["a", "b", "c", "d"])
    result, _ = cell_runner('%gatecell search "printer jams" --in df.review -k 2')
    assert result.success, result.error_in_exec
    assert list(result.result.index) == ["a", "c"] and list(result.result.columns) == ["review", "score"]
    np.testing.assert_allclose(result.result["score"], vector("printer jams") @ vector(TICKETS[0]), rtol=1e-5)
    _log(home)
    result, captured = cell_runner("%gatecell log --similar 'paper stuck in the printer' -n 1")
    assert result.success, result.error_in_exec
    (table,) = [o.data for o in captured.outputs if "text/html" in o.data]
    assert "why does my printer jam" in table["text/plain"] and "similarity" in table["text/plain"]
    assert "haiku" not in table["text/plain"]


def test_magic_search_bad_input_is_one_line(magics, ipshell, cell_runner):
    ipshell.user_ns["words"] = ["a", "b"]
    for line, said in (
        ('%gatecell search "x" --in nothing.review', "no variable 'nothing'"),
        ('%gatecell search "x" --in words', "words is a list, not a DataFrame or Series"),
    ):
        result, captured = cell_runner(line)
        assert not result.success and said in captured.stderr
        assert len(captured.stderr.strip().splitlines()) == 1
    ipshell.user_ns["df"] = pd.DataFrame({"review": TICKETS})
    result, captured = cell_runner('%gatecell search "x" --in df.nope')
    assert not result.success and "'nope' is not a column" in captured.stderr
    assert "Traceback" not in captured.stderr and magics.statuses == []
