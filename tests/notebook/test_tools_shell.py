"""``%%chat --tools`` in a real IPython shell against the local gateway: each call one line
in the cell (HTML-escaped), the user's say before a call runs, the answer quoting results."""

from __future__ import annotations

import builtins

import pytest

TOOLS = '''
import gatecell
ran = []

def order_status(order_id: str) -> dict:
    """Where an order is now, by its id."""
    ran.append(order_id)
    return {"order": order_id, "city": "Lyon <b>centre</b>"}

@gatecell.tool(safe=True)
def weather(city: str, days: int = 1) -> str:
    """The weather in a city."""
    return f"sun in {city}"
'''


def _html(captured) -> str:
    return "\n".join(o.data.get("text/html", "") for o in captured.outputs)


def test_each_call_is_a_line_and_the_answer_quotes_the_results(run, ipshell, monkeypatch):
    monkeypatch.setattr(builtins, "input", lambda prompt: pytest.fail(f"asked: {prompt}"))
    run(TOOLS)
    result, captured = run("%%chat --tools order_status,weather --yes -o r\nWhere are orders A-1 and B-22?")
    assert result.success, result.error_in_exec
    assert ipshell.user_ns["ran"] == ["A-1", "B-22"]
    shown = _html(captured)
    assert "→ order_status(order_id=&#x27;A-1&#x27;)  ✓ " in shown
    assert "→ order_status(order_id=&#x27;B-22&#x27;)  ✓ " in shown
    assert "&lt;b&gt;centre&lt;/b&gt;" in shown and "<b>centre</b>" not in shown  # a result is data
    assert "Lyon" in str(ipshell.user_ns["r"])


def test_a_call_runs_only_when_the_user_says_yes(run, ipshell, monkeypatch):
    asked: list[str] = []

    def answer(prompt: str) -> str:
        asked.append(prompt)
        return "n"

    monkeypatch.setattr(builtins, "input", answer)
    run(TOOLS)
    result, captured = run(
        "%%chat --tools order_status,weather\nWhere is order A-1027, and is it sunny in Paris?"
    )
    assert result.success, result.error_in_exec
    assert asked == ["run order_status(order_id='A-1027')? [y/N] "]  # weather is safe=True: not asked
    assert ipshell.user_ns["ran"] == []
    shown = _html(captured)
    assert "✗ the user denied this call" in shown and "→ weather(city=&#x27;Paris&#x27;, days=1)  ✓" in shown


def test_approve_tools_off_runs_without_asking(run, gc, ipshell, monkeypatch):
    monkeypatch.setattr(builtins, "input", lambda prompt: pytest.fail(f"asked: {prompt}"))
    gc.session.config.approve_tools = False
    try:
        run(TOOLS)
        result, _ = run("%%chat --tools order_status\nWhere is order A-1027?")
    finally:
        gc.session.config.approve_tools = True
    assert result.success, result.error_in_exec
    assert ipshell.user_ns["ran"] == ["A-1027"]


def test_a_name_that_is_not_a_tool_is_one_line_and_sends_nothing(run, ipshell):
    run(TOOLS)
    ipshell.user_ns["number"] = 3
    for line, words in [
        ("--tools missing", "%chat --tools: no function 'missing' in the notebook"),
        ("--tools number", "%chat --tools: a tool is a function; got 3"),
    ]:
        result, _ = run(f"%%chat {line}\nWhere is order A-1027?")
        assert not result.success and str(result.error_in_exec) == words
    assert ipshell.user_ns["ran"] == []


def test_gatecell_resume_goes_on_with_a_chain_cut_short(run, ipshell, monkeypatch):
    monkeypatch.setattr(builtins, "input", lambda prompt: pytest.fail(f"asked: {prompt}"))
    run(TOOLS)
    result, _ = run("%%chat --tools order_status --max-rounds 1 --yes -o cut\nWhere are orders A-1 and B-22?")
    assert result.success, result.error_in_exec
    cut = ipshell.user_ns["cut"]
    assert cut.tool_calls.stopped.startswith("stopped after 1 rounds (max_rounds)")
    assert ipshell.user_ns["ran"] == []  # the round limit ran none of the last answer's calls
    result, captured = run(f"%gatecell resume {cut.tool_calls.chain} --tools order_status --yes -o r")
    assert result.success, result.error_in_exec
    assert ipshell.user_ns["ran"] == ["A-1", "B-22"]
    assert "Lyon" in ipshell.user_ns["r"] and "→ order_status(order_id=&#x27;A-1&#x27;)  ✓ " in _html(
        captured
    )
    result, _ = run(f"%gatecell resume {cut.tool_calls.chain}")
    assert str(result.error_in_exec) == "%gatecell resume: name the chain's functions again with --tools f,g"
