"""``gatecell map`` and ``%%chat --over``: the command line and the magic of the batch."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from interrupts import python
from rowserver import KEY, reply_to, wait_until


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
    assert "map: 3 rows [" in first.stderr and "failed=0" in first.stderr  # the progress bar, on stderr
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == [
        "re: 1x",
        "re: 2y",
        "re: 3z",
    ]
    again = _gatecell(server, *args, "--force")  # the file is there: replaced only when asked
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
        (("--patience", "-1"), "gatecell: patience: must be a number of seconds >= 0; got -1.0"),
        (("--encoding", "no-such"), "gatecell: map: --encoding: unknown encoding: no-such"),
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
    options = (
        "-i FILE",
        "-o FILE",
        "-m MODEL",
        "-j N",
        "--rpm",
        "--tpm",
        "--api",
        "--no-cache",
        "--encoding",
    )
    for option in (*options, "--patience SECONDS"):
        assert option in done.stdout


def test_the_magic_over_a_dataframe(cell_runner, ipshell, local_gateway):
    ipshell.user_ns["reviews"] = pd.DataFrame({"a": [2, 3], "b": [5, 8]}, index=["p", "q"])
    result, captured = cell_runner("%%chat --over reviews -o sums -j 2 --rpm 6000\nWhat is {a} + {b}?")
    assert result.error_in_exec is None, captured.stderr
    batch = ipshell.user_ns["sums"]
    assert result.result is batch
    assert batch.text.to_dict() == {"p": "2 + 5 = 7", "q": "3 + 8 = 11"}
    assert "map: 100%" in captured.stderr  # the progress bar (text outside a notebook)


def test_the_magic_over_rows_keeps_latex_and_json_braces(
    cell_runner, ipshell, row_server, monkeypatch, request
):
    from gatecell.notebook import _STATE

    server = row_server()
    session = _STATE[id(ipshell)]["magics"].session
    monkeypatch.setattr(session.config, "base_url", server.url)
    monkeypatch.setenv("GATECELL_API_KEY", KEY)
    session.disconnect()
    request.addfinalizer(session.disconnect)  # the next test connects where it is told
    ipshell.user_ns["rows"] = [{"w": "a"}, {"w": "b"}]
    cell = 'Rate {w}: $\\frac{1}{\\sqrt{2}}$, $e^{x}$, {"k": {"v": 1}} and {{w}}'
    result, captured = cell_runner(f"%%chat --over rows --rpm 6000\n{cell}")
    assert result.error_in_exec is None, captured.stderr
    assert sorted(server.prompts) == [cell.replace("{w}:", f"{w}:").replace("{{w}}", "{w}") for w in "ab"]
    result, captured = cell_runner(f"%%chat --over rows\nRate {{word}}: {cell}")
    assert "template: {word} is not a field of the rows (they have: w)" in str(result.error_in_exec)
    assert len(server.prompts) == 2


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


# -- bad input files: one line, nothing sent ------------------------------------------------


def _one_line(done: subprocess.CompletedProcess[str], server) -> str:
    """The run's single stderr line, once it is certain nothing was sent."""
    assert done.returncode == 1 and done.stdout == ""
    assert server.prompts == []
    (line,) = done.stderr.splitlines()
    return line


def test_a_bad_jsonl_line_after_good_rows_is_one_line_and_nothing_is_sent(row_server, tmp_path: Path):
    server = row_server()
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"w": 1}\n{"w": 2}\n\n{"w": 3}\n{"w": 4,}\n{"w": 5}\n')
    line = _one_line(_gatecell(server, "map", "say {w}", "-i", str(rows)), server)
    assert line.startswith(f"gatecell: map: {rows} line 5 is not JSON (")
    assert line.endswith("); nothing was sent")
    stdin = _gatecell(server, "map", "say {w}", stdin='{"w": 1}\n{"w": 2\n')  # stdin is read whole first
    assert _one_line(stdin, server).startswith("gatecell: map: stdin line 2 is not JSON (")


@pytest.mark.parametrize(
    ("encoding", "data", "hint"),
    [
        (
            "latin-1",
            "a,b\nx,café au lait\n",
            "say the file's encoding with --encoding (e.g. --encoding latin-1",
        ),
        ("utf-16", "a,b\nx,café au lait\n", "it starts as UTF-16 does: --encoding utf-16"),  # Excel's export
    ],
)
def test_an_input_in_another_encoding_is_one_line_naming_the_byte_and_encoding(
    row_server, tmp_path: Path, encoding, data, hint
):
    server = row_server()
    rows = tmp_path / "rows.csv"
    rows.write_bytes(data.encode(encoding))
    line = _one_line(_gatecell(server, "map", "{a}: {b}", "-i", str(rows)), server)
    offset = 0 if encoding == "utf-16" else data.encode(encoding).index("é".encode(encoding))
    assert line.startswith(f"gatecell: map: {rows}: byte {offset} is not utf-8-sig (")
    assert hint in line and line.endswith("; nothing was sent")
    done = _gatecell(server, "map", "{a}: {b}", "-i", str(rows), "--encoding", encoding, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == reply_to("x: café au lait")


def test_a_bad_byte_deep_in_a_jsonl_file_is_found_at_its_offset(row_server, tmp_path: Path):
    server = row_server()
    good = "".join(json.dumps({"w": "é" * 40 + str(i)}, ensure_ascii=False) + "\n" for i in range(5000))
    data = good.encode() + b'{"w": "\xff"}\n'  # past the text reader's first chunks
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(b"\xef\xbb\xbf" + data)  # a BOM first: the default encoding skips it
    line = _one_line(_gatecell(server, "map", "say {w}", "-i", str(rows)), server)
    assert line.startswith(
        f"gatecell: map: {rows}: byte {3 + len(good.encode()) + 7} is not utf-8-sig (invalid start byte)"
    )


def test_a_bom_and_fields_past_csvs_128_kib_are_fine(row_server, tmp_path: Path):
    server = row_server()
    long = "x" * 300_000
    rows = tmp_path / "rows.csv"
    rows.write_text(f"a,b\n1,{long}\n2,short\n", encoding="utf-8-sig")  # with a BOM, as Excel writes
    done = _gatecell(server, "map", "{a} {b}", "-i", str(rows), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["text"] for line in done.stdout.splitlines()] == [
        reply_to(f"1 {long}"),
        reply_to("2 short"),
    ]


@pytest.mark.parametrize(
    ("suffix", "lines", "what"),
    [
        ("jsonl", 1, "line 2 is longer than"),
        ("csv", 1, "line 3 is longer than"),
        ("csv", 17, "line 19: a field is longer than"),  # a quoted field over many lines
    ],
)
def test_a_row_past_the_row_cap_is_one_line(row_server, tmp_path: Path, suffix, lines, what):
    from gatecell.cli.map import ROW_CAP

    server = row_server()
    rows = tmp_path / f"rows.{suffix}"
    with rows.open("w") as f:
        f.write('a\n"1"\n"' if suffix == "csv" else '{"a": 1}\n{"a": "')  # an unclosed quote
        for _ in range(lines):
            f.write("y" * (ROW_CAP // lines + 1) + "\n")
    line = _one_line(_gatecell(server, "map", "{a}", "-i", str(rows)), server)
    assert (
        line
        == f"gatecell: map: {rows} {what} {ROW_CAP:,} characters, more than a row may have; nothing was sent"
    )


def test_an_unknown_encoding_is_one_line(row_server):
    server = row_server()
    line = _one_line(_gatecell(server, "map", "{w}", "--encoding", "base64", stdin='{"w": 1}\n'), server)
    assert line.startswith("gatecell: map: --encoding: 'base64' is not a text encoding")


# -- the output: checked first, written as rows finish -------------------------------------


def test_an_output_file_is_kept_when_the_batch_refuses_its_options(row_server, tmp_path: Path):
    server = row_server()
    out = tmp_path / "out.jsonl"
    out.write_text("yesterday's\n")
    argv = ("map", "{w}", "-o", str(out), "--force", "-t", "9")
    line = _one_line(_gatecell(server, *argv, stdin='{"w": 1}\n'), server)
    assert line.startswith("gatecell: temperature") and out.read_text() == "yesterday's\n"
    empty = _gatecell(server, "map", "{w}", "-o", str(out), "--force", "--no-progress")  # no rows: empty
    assert empty.returncode == 0 and out.read_text() == ""


def test_an_output_that_cannot_be_written_is_one_line_before_any_request(row_server, tmp_path: Path):
    server = row_server()
    rows = '{"w": 1}\n'
    missing = tmp_path / "no" / "out.jsonl"
    line = _one_line(_gatecell(server, "map", "{w}", "-o", str(missing), stdin=rows), server)
    assert line == f"gatecell: map: cannot write {missing}: there is no folder {missing.parent}"
    line = _one_line(_gatecell(server, "map", "{w}", "-o", str(tmp_path), stdin=rows), server)
    assert line == f"gatecell: map: cannot write {tmp_path}: Is a directory"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="runs the command as nobody")
def test_an_output_file_of_another_user_is_one_line_before_any_request(row_server, request):
    """Root writes any file; the command runs as nobody, for whom root's 0644 file is read-only."""
    server = row_server()
    folder = Path(tempfile.mkdtemp())  # not under pytest's folder, which nobody cannot enter
    folder.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(folder))
    out = folder / "out.jsonl"
    out.write_text("root's\n")
    out.chmod(0o644)
    env = {
        **os.environ,
        "GATECELL_BASE_URL": server.url,
        "GATECELL_API_KEY": KEY,
        "GATECELL_HOME": str(folder / "h"),
    }
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "gatecell"]
        + ["map", "{w}", "-o", str(out), "--force"],
        input='{"w": 1}\n', capture_output=True, text=True, env=env, cwd=folder,
    )  # fmt: skip
    assert _one_line(done, server) == f"gatecell: map: cannot write {out}: Permission denied"
    assert out.read_text() == "root's\n"


def _lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_rows_are_written_as_they_finish_in_input_order(row_server, tmp_path: Path):
    """Row 3 is held at the server: the three before it are in the file meanwhile; with row 0
    held, nothing is, though rows after it are done."""
    held = {"say 3"}

    async def rule(prompt, srv):
        if prompt in held:
            await srv.hold()

    server = row_server(rule)
    out = tmp_path / "out.jsonl"
    rows = "".join(json.dumps({"w": i}) + "\n" for i in range(6))
    env = {**os.environ, "GATECELL_BASE_URL": server.url, "GATECELL_API_KEY": KEY}
    argv = [sys.executable, "-m", "gatecell", "map", "say {w}", "-o", str(out), "--no-progress"]
    child = subprocess.Popen([*argv, "-j", "1"], stdin=subprocess.PIPE, text=True, env=env)
    child.stdin.write(rows)
    child.stdin.close()
    wait_until(
        lambda: len(_lines_of(out)) == 3 and server.in_flight == 1, "three rows written, the fourth held"
    )
    assert [line["text"] for line in _lines_of(out)] == [reply_to(f"say {i}") for i in range(3)]
    server.release.set()
    assert child.wait(60) == 0
    assert [line["index"] for line in _lines_of(out)] == list(range(6))

    server.release.clear()
    held.clear()
    held.add("say 0")
    child = subprocess.Popen(
        [*argv, "-j", "3", "--no-cache", "--force"], stdin=subprocess.PIPE, text=True, env=env
    )
    child.stdin.write(rows)
    child.stdin.close()
    wait_until(lambda: server.answered == 6 + 5, "every row but the first answered")
    assert _lines_of(out) == []  # emptied when the first row was done; row 0 comes first
    server.release.set()
    assert child.wait(60) == 0
    assert [line["text"] for line in _lines_of(out)] == [reply_to(f"say {i}") for i in range(6)]


def test_ctrl_c_writes_the_rows_done_also_after_one_that_never_finished(row_server, tmp_path: Path):
    server = row_server(lambda prompt, srv: srv.hold() if prompt == "say 1" else None)
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "GATECELL_BASE_URL": server.url, "GATECELL_API_KEY": KEY}
    child = subprocess.Popen(
        python("-m", "gatecell", "map", "say {w}", "-o", str(out), "-j", "2", "--no-progress"),
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    child.stdin.write("".join(json.dumps({"w": i}) + "\n" for i in range(40)))
    child.stdin.close()
    wait_until(lambda: server.answered >= 3 and server.in_flight == 1, "row 1 held, others answered")
    child.send_signal(signal.SIGINT)
    assert child.wait(60) == 130
    err = child.stderr.read()
    lines = _lines_of(out)
    assert lines[0]["index"] == 0 and 1 not in [line["index"] for line in lines]
    assert [line["index"] for line in lines] == sorted(line["index"] for line in lines)
    assert err.strip() == f"gatecell: interrupted: {len(lines)} rows written"
    assert server.answered - 1 <= len(lines) <= server.answered  # one answer may have come as it stopped
