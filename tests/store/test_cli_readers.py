"""``gatecell logs``, ``usage`` and ``jobs``, run as real subprocesses on logs filled through
the store's API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from store_helpers import chat_body, run_cli

from gatecell.store import Store

T0 = 1_790_000_000.0  # 2026-09-21T14:13:20Z
DAY = 86400
JSON_KEYS = {
    "time",
    "endpoint",
    "model",
    "prompt",
    "response",
    "usage",
    "latency",
    "error",
    "conversation",
    "cached",
}


@pytest.fixture
def filled(home: Path) -> Path:
    s = Store(home / "gatecell.db")
    turns = [
        ("gpt-a", "Describe a lighthouse", "A tower of light.", "trip", None, False),
        ("gpt-b", "What is 2+2?", "4", None, None, False),
        ("gpt-a", "And at dawn?", "The lighthouse sleeps.", "trip", None, True),
        ("gpt-a", "Name a colour", None, None, "500 from POST /v1/chat/completions: down", False),
        ("gpt-b", "What is 3+3?", "6", None, None, False),
    ]
    for i, (model, prompt, reply, conv, error, cached) in enumerate(turns):
        n = i + 1
        usage = None if error else {"prompt_tokens": 10 * n, "completion_tokens": n, "total_tokens": 11 * n}
        s.record_exchange(
            "/v1/chat/completions", model, chat_body(prompt, model=model), text=reply, usage=usage,
            error=error, conversation=conv, cached=cached, latency=0.25, status=500 if error else 200,
            request_id=f"req-{i}", at=T0 + i * DAY / 2,
        )  # fmt: skip
    s.record_job(
        "video", "vid-1", gateway="http://gw:1", prompt="waves at dusk", state="running", progress=40, at=T0
    )
    s.record_job("music", "mus-1", gateway="http://gw:1", prompt="a calm tune", state="succeeded", at=T0 + 60)
    assert s.flush(30)
    s.close()
    return home


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_logs_shows_the_last_three_oldest_first(filled: Path):
    out = run_cli("logs", home=filled)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Describe a lighthouse" not in text and "What is 2+2?" not in text
    assert text.index("And at dawn?") < text.index("Name a colour") < text.index("What is 3+3?")
    assert "500 from POST /v1/chat/completions: down" in text and "conversation trip · cached" in text
    assert "30 prompt + 3 completion = 33 tokens · 0.25 s · status 200 · request req-2" in text


def test_logs_json_has_one_object_per_line_with_the_promised_keys(filled: Path):
    out = run_cli("logs", "--json", "-n", "0", home=filled)
    assert out.returncode == 0, out.stderr
    rows = json_lines(out.stdout)
    assert [r["prompt"] for r in rows] == [
        "Describe a lighthouse",
        "What is 2+2?",
        "And at dawn?",
        "Name a colour",
        "What is 3+3?",
    ]
    assert all(JSON_KEYS <= set(r) for r in rows)
    first = rows[0]
    assert first["time"] == "2026-09-21T14:13:20.000000Z"
    assert first["usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 1,
        "reasoning_tokens": None,
        "total_tokens": 11,
    }
    assert (first["conversation"], first["cached"], first["latency"], first["error"]) == (
        "trip",
        False,
        0.25,
        None,
    )
    assert rows[2]["cached"] is True and rows[3]["usage"] is None and rows[3]["response"] is None


@pytest.mark.parametrize(
    ("args", "prompts"),
    [
        (["-q", "lighthouse"], ["Describe a lighthouse", "And at dawn?"]),
        (["-q", "lighthouse sleeps"], ["And at dawn?"]),
        (["-m", "gpt-b"], ["What is 2+2?", "What is 3+3?"]),
        (["-c", "trip"], ["Describe a lighthouse", "And at dawn?"]),
        (["-m", "gpt-a", "-n", "1"], ["Name a colour"]),
        (["-q", "nothing-like-it"], []),
    ],
)
def test_logs_filters(filled: Path, args: list[str], prompts: list[str]):
    out = run_cli("logs", "--json", *args, home=filled)
    assert out.returncode == 0, out.stderr
    assert [r["prompt"] for r in json_lines(out.stdout)] == prompts


def test_readers_on_a_home_without_a_log_say_so(tmp_path: Path):
    for command in ("logs", "usage", "jobs"):
        out = run_cli(command, home=tmp_path / "empty")
        assert out.returncode == 0 and out.stdout == ""
        assert out.stderr == f"gatecell: no log yet at {tmp_path / 'empty' / 'gatecell.db'}\n"
    assert not (tmp_path / "empty").exists()


def test_usage_table_per_model_per_day_without_a_cost_column_unless_priced(filled: Path, tmp_path: Path):
    out = run_cli("usage", home=filled)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == [
        "day",
        "model",
        "requests",
        "errors",
        "prompt",
        "completion",
        "reasoning",
        "total",
    ]
    assert [line.split() for line in lines[2:]] == [
        ["2026-09-21", "gpt-a", "1", "0", "10", "1", "0", "11"],
        ["2026-09-22", "gpt-b", "1", "0", "20", "2", "0", "22"],  # gpt-a's cached turn is not counted
        ["2026-09-23", "gpt-a", "1", "1", "0", "0", "0", "0"],
        ["2026-09-23", "gpt-b", "1", "0", "50", "5", "0", "55"],
    ]
    prices = tmp_path / "prices.toml"
    prices.write_text('["gpt-a"]\ninput = 2.5\noutput = 10\n')
    priced = run_cli("usage", "--since", "2026-09-21", home=filled, GATECELL_PRICES=str(prices))
    assert priced.returncode == 0, priced.stderr
    rows = [line.split() for line in priced.stdout.splitlines()]
    assert rows[0][-3:] == ["cost", "($)", "source"]
    assert rows[2][-2:] == [f"{(10 * 2.5 + 1 * 10) / 1e6:.6f}", "prices"] and rows[3][-2:] == ["unknown", "-"]


def test_usage_json_and_since(filled: Path, tmp_path: Path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-b": {"input": 1, "output": 2}}))
    out = run_cli("usage", "--json", "--since", "2026-09-22", home=filled, GATECELL_PRICES=str(prices))
    assert out.returncode == 0, out.stderr
    rows = json_lines(out.stdout)
    assert [(r["day"], r["model"], r["requests"], r["total_tokens"]) for r in rows] == [
        ("2026-09-22", "gpt-b", 1, 22),
        ("2026-09-23", "gpt-a", 1, 0),
        ("2026-09-23", "gpt-b", 1, 55),
    ]
    assert rows[0]["cost"] == pytest.approx((20 * 1 + 2 * 2) / 1e6) and rows[1]["cost"] is None
    assert (rows[0]["cost_source"], rows[0]["unpriced"]) == ("prices", 0) and rows[1]["cost_source"] is None
    later = run_cli("usage", "--json", "--since", "2026-09-22T12:00:00+02:00", home=filled)
    # 10:00 UTC on the 22nd: gpt-b's request at 02:13 that day is left out
    assert [(r["day"], r["model"]) for r in json_lines(later.stdout)] == [
        ("2026-09-23", "gpt-a"),
        ("2026-09-23", "gpt-b"),
    ]


def test_usage_bad_input_is_one_line(filled: Path, tmp_path: Path):
    out = run_cli("usage", "--since", "yesterday", home=filled)
    assert out.returncode == 1
    assert out.stderr == "gatecell: since: must be a date (YYYY-MM-DD) or an ISO time, got 'yesterday'\n"
    broken = tmp_path / "prices.json"
    broken.write_text('{"gpt-a": {"input": "cheap"}}')
    out = run_cli("usage", home=filled, GATECELL_PRICES=str(broken))
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith(f"gatecell: GATECELL_PRICES ({broken}): 'gpt-a' needs numbers")


def test_jobs_table_and_json(filled: Path):
    out = run_cli("jobs", home=filled)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["updated", "kind", "id", "state", "progress", "prompt", "gateway"]
    assert lines[2].split()[2:5] == ["music", "mus-1", "succeeded"]
    assert lines[3].split()[2:6] == ["video", "vid-1", "running", "40%"]
    rows = json_lines(run_cli("jobs", "--json", home=filled).stdout)
    assert [(r["kind"], r["job_id"], r["state"], r["prompt"], r["gateway"]) for r in rows] == [
        ("music", "mus-1", "succeeded", "a calm tune", "http://gw:1"),
        ("video", "vid-1", "running", "waves at dusk", "http://gw:1"),
    ]


def test_every_option_is_in_help(home: Path):
    top = run_cli("--help", home=home)
    assert all(command in top.stdout for command in ("logs", "usage", "jobs"))
    options = {"logs": ["-n", "-q", "-m", "-c", "--json"], "usage": ["--since", "--json"], "jobs": ["--json"]}
    for command, flags in options.items():
        out = run_cli(command, "--help", home=home)
        assert out.returncode == 0
        assert all(flag in out.stdout for flag in flags), command
        assert "GATECELL_HOME" in out.stdout


def test_the_cli_logs_its_own_exchanges(home: Path):
    """``gatecell chat`` (the embedded gateway: no gateway configured) is logged like any call."""
    said = run_cli("chat", "what is 12+30?", home=home)
    assert said.returncode == 0 and said.stdout.strip() == "12+30 = 42", said.stderr
    run_cli("chat", "--no-stream", "count to 2", home=home)
    logged = json_lines(run_cli("logs", "--json", home=home).stdout)
    assert [(r["prompt"], r["response"], r["model"], r["gateway"]) for r in logged] == [
        ("what is 12+30?", "12+30 = 42", "local-chat", "local"),
        ("count to 2", "1, 2.", "local-chat", "local"),
    ]
    assert [r["params"]["stream"] for r in logged] == [True, False]
