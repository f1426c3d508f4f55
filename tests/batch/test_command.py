"""``gatecell map`` and ``%%chat --over``: the command line and the magic of the batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from rowserver import KEY, reply_to


def _gatecell(server, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GATECELL_BASE_URL": server.url, "GATECELL_API_KEY": KEY}
    return subprocess.run(
        [sys.executable, "-m", "gatecell", *argv], input=stdin, capture_output=True, text=True, env=env
    )


def test_jsonl_on_stdin_gives_one_json_line_per_row_in_order(row_server):
    server = row_server(lambda prompt, srv: (400, {}) if "bad" in prompt else None)
    rows = [{"w": f"w{i}"} for i in range(12)] + [{"w": "bad"}, "plain", {"other": 1}]
    done = _gatecell(server, "map", "say {w}", "-j", "4", "--no-progress",
                     stdin="".join(json.dumps(r) + "\n" for r in rows))  # fmt: skip
    assert done.returncode == 1  # some rows failed
    assert done.stderr.strip().endswith("gatecell: 3 of 15 rows failed (see their error)")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["index"] for line in lines] == list(range(15))
    assert [line["text"] for line in lines[:12]] == [reply_to(f"say w{i}") for i in range(12)]
    assert lines[0]["input"] == {"w": "w0"} and lines[0]["total_tokens"] == 5 and lines[0]["cached"] is False
    assert lines[12]["error"] == "400 from POST /v1/chat/completions: no: 400"
    assert lines[13]["error"] == lines[14]["error"] == "{w}: this row has no field 'w'"
    assert len(server.prompts) == 13


def test_a_csv_file_to_an_output_file_and_again_from_the_log(row_server, tmp_path: Path):
    server = row_server()
    pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]}).to_csv(tmp_path / "rows.csv", index=False)
    out = tmp_path / "out.jsonl"
    args = ("map", "{a}{b}", "-i", str(tmp_path / "rows.csv"), "-o", str(out), "--rpm", "6000")
    first = _gatecell(server, *args)
    assert first.returncode == 0 and first.stdout == ""
    assert "map: 3row [" in first.stderr and "failed=0" in first.stderr  # the progress bar, on stderr
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == [
        "re: 1x",
        "re: 2y",
        "re: 3z",
    ]
    again = _gatecell(server, *args)
    assert again.returncode == 0 and len(server.prompts) == 3  # all three from the log
    assert all(json.loads(line)["cached"] for line in out.read_text().splitlines())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("-j", "0"), "gatecell: map: -j/--jobs must be a positive number, got 0"),
        (("--rpm", "-1"), "gatecell: map: --rpm must be a positive number, got -1"),
        (("-i", "nowhere.jsonl"), "gatecell: map: no such file: nowhere.jsonl"),
        (("--api", "nope"), "gatecell: api: must be one of chat, messages, generate-content, responses"),
        (("-t", "9"), "gatecell: temperature"),
    ],
)
def test_bad_options_are_one_line_before_any_request(row_server, argv, message):
    server = row_server()
    done = _gatecell(server, "map", "say {w}", *argv, stdin='{"w": 1}\n')
    assert done.returncode == 1
    assert done.stderr.strip().startswith(message) and len(done.stderr.strip().splitlines()) == 1
    assert server.prompts == []


def test_map_help_lists_its_options(row_server):
    done = _gatecell(row_server(), "map", "--help")
    assert done.returncode == 0
    for option in ("-i FILE", "-o FILE", "-m MODEL", "-j N", "--rpm", "--tpm", "--api", "--no-cache"):
        assert option in done.stdout


def test_the_magic_over_a_dataframe(cell_runner, ipshell, local_gateway):
    ipshell.user_ns["reviews"] = pd.DataFrame({"a": [2, 3], "b": [5, 8]}, index=["p", "q"])
    result, captured = cell_runner("%%chat --over reviews -o sums -j 2 --rpm 6000\nWhat is {a} + {b}?")
    assert result.error_in_exec is None, captured.stderr
    batch = ipshell.user_ns["sums"]
    assert result.result is batch
    assert batch.text.to_dict() == {"p": "2 + 5 = 7", "q": "3 + 8 = 11"}
    assert "map: 100%" in captured.stderr  # the progress bar (text outside a notebook)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--over missing", "%chat --over: no variable 'missing' in the notebook"),
        ("--over reviews -j 0", "%chat: -j/--jobs must be a positive number, got 0"),
        ("--over reviews --tpm 0", "%chat: --tpm must be a positive number, got 0"),
        ("--over reviews -j many", "argument -j/--jobs: invalid int value: 'many'"),
    ],
)
def test_the_magic_refuses_bad_values_in_one_line(cell_runner, ipshell, line, message):
    ipshell.user_ns["reviews"] = [1, 2]
    result, captured = cell_runner(f"%%chat {line}\nsay {{item}}")
    assert message in str(result.error_in_exec) + captured.stderr + captured.stdout


REVIEW_SCHEMA = {
    "title": "Review",
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]},
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["sentiment", "stars"],
}


def _stars(prompt: str, body: dict) -> str:
    """Row text ``n stars``: the JSON, in a fence; ``9 stars`` is out of range every time."""
    n = int(json.dumps(body).split(" stars")[0].rsplit(" ", 1)[-1])
    return f"```json\n{json.dumps({'sentiment': 'positive', 'stars': n})}\n```"


def test_a_json_schema_file_gives_each_line_its_value(row_server, tmp_path: Path):
    server = row_server(reply=_stars)
    schema = tmp_path / "review.json"
    schema.write_text(json.dumps(REVIEW_SCHEMA))
    rows = "".join(json.dumps({"text": f"{n} stars"}) + "\n" for n in (4, 9, 2))
    done = _gatecell(server, "map", "Rate: {text}", "--schema", str(schema), "--no-progress", stdin=rows)
    assert done.returncode == 1 and done.stderr.strip().endswith("1 of 3 rows failed (see their error)")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["parsed"] for line in lines] == [
        {"sentiment": "positive", "stars": 4},
        None,
        {"sentiment": "positive", "stars": 2},
    ]
    assert lines[1]["error"] == "stars: Input should be less than or equal to 5, got 9"
    assert len(server.prompts) == 4  # row 9 had its repair round
    assert "Answer with JSON only" in server.prompts[0]


def test_choices_on_the_command_line(row_server):
    server = row_server(reply=lambda prompt, body: "Negative." if "bad" in json.dumps(body) else "meh")
    rows = '{"t": "bad"}\n{"t": "so so"}\n'
    done = _gatecell(server, "map", "{t}", "--choices", "positive, negative", "--no-progress", stdin=rows)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["parsed"] for line in lines] == ["negative", None]
    assert lines[1]["error"] == "'meh' is not one of the choices: positive, negative"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "gatecell: map: no such file: "),
        ("{not json", "gatecell: map: {path} is not a JSON file (Expecting property name"),
        ("[1, 2]", "gatecell: map: {path} must hold a JSON Schema (an object), not list"),
        ('{"type": "wat"}', "gatecell: map: {path}: schema: unknown type 'wat'"),
    ],
)
def test_a_schema_file_that_will_not_do_is_one_line_before_any_request(
    row_server, tmp_path, content, message
):
    server = row_server()
    path = tmp_path / "schema.json"
    if content is not None:
        path.write_text(content)
    done = _gatecell(server, "map", "{w}", "--schema", str(path), stdin='{"w": 1}\n')
    assert done.returncode == 1
    assert done.stderr.strip().startswith(message.format(path=path)), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    both = _gatecell(server, "map", "{w}", "--schema", str(path), "--choices", "a,b", stdin='{"w": 1}\n')
    assert both.stderr.strip() == "gatecell: map: --schema or --choices, not both"
    assert server.prompts == [] and server.infos == 0
