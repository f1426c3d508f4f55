"""Issue 32, "The command line": ``gatecell map`` as a real subprocess in a pipeline. A reader
that goes away (``| head -2``) ends it quietly with the rows done logged; a template naming a
column the rows lack is the first and only line, before the local gateway starts; the
progress bar counts "rows"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gatecell.connect import NOTICE
from gatecell.store import Store

CLI = [sys.executable, "-m", "gatecell"]


def _env(home: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    return {**base, "GATECELL_HOME": str(home), **extra}


@pytest.fixture
def served(local_gateway, tmp_path) -> dict[str, str]:
    """The settings of a CLI pointed at the embedded gateway, with a log of the test's own."""
    return _env(
        tmp_path / "home",
        GATECELL_BASE_URL=local_gateway.base_url,
        GATECELL_API_KEY=local_gateway.api_key.reveal(),
    )


def test_a_reader_that_goes_away_ends_the_map_quietly_with_the_rows_done_logged(served, tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"w": f"word {i}"}) + "\n" for i in range(3000)))
    child = subprocess.Popen(
        [*CLI, "map", "say {w}", "-i", str(rows), "-j", "2", "--no-progress"],
        env=served,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    read = [json.loads(child.stdout.readline()) for _ in range(2)]  # as `head -2` does
    child.stdout.close()
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=120) == 0, stderr
    assert stderr == ""  # no "[Errno 32] Broken pipe", no "Exception ignored"
    assert [line["index"] for line in read] == [0, 1]
    logged = {row["prompt"] for row in Store(tmp_path / "home" / "gatecell.db", log=False).logs(n=0)}
    assert {"say word 0", "say word 1"} <= logged  # the rows done are in the log
    assert len(logged) < 3000  # and the map stopped sending once its reader had gone


def test_a_reader_that_goes_away_ends_the_other_commands_quietly(served):
    for argv in (["models"], ["chat", "--no-stream", "Name three colours."]):
        child = subprocess.Popen([*CLI, *argv], env=served, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()  # gone before the first line
        stderr = child.stderr.read().decode()
        assert child.wait(timeout=120) == 0, stderr
        assert stderr == ""


@pytest.mark.parametrize(
    ("name", "content"),
    [("rows.csv", "w,x\n1,2\n"), ("rows.jsonl", '{"w": 1, "x": 2}\n')],
)
def test_a_wrong_column_is_the_first_and_only_line_before_the_local_gateway_starts(tmp_path, name, content):
    rows = tmp_path / name
    rows.write_text(content)
    done = subprocess.run(
        [*CLI, "map", "{w} and {nope}", "-i", str(rows)],
        env=_env(tmp_path / "home"),  # no gateway set: the local one would start and say so
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()  # the first and only line
    assert line.startswith("gatecell: template: {nope} is not a field of the rows (they have: w, x)")
    assert NOTICE.split(",")[0] not in done.stderr
    assert not (tmp_path / "home" / "local-key").exists()  # the local gateway never started


def test_the_progress_bar_counts_rows_plural_and_spaced(served, tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("w\na\nb\nc\n")
    done = subprocess.run(
        [*CLI, "map", "say {w}", "-i", str(rows)], env=served, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "map: 0 rows [" in done.stderr and "map: 3 rows [" in done.stderr
    assert " rows/s" in done.stderr
    assert "row [" not in done.stderr.replace(" rows [", "") and "0row" not in done.stderr
