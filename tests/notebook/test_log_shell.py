"""``%gatecell log``, ``usage``, ``export`` and ``restore`` in a real IPython shell, on a log
of the test's own: what a model wrote is shown as text, bad input is one line, and a
conversation comes back as it was last sent (whatever API carried it)."""

from __future__ import annotations

import json
import stat

import pytest

from gatecell.store import Store

HOSTILE = '<img src=x onerror="alert(1)"> **bold** <script>alert(2)</script> | cell'


@pytest.fixture
def log(ipshell, tmp_path, monkeypatch):
    """A log of the test's own (GATECELL_HOME), with its Store to fill."""
    monkeypatch.setenv("GATECELL_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    store = Store(tmp_path / "gatecell.db")
    yield store
    store.close()


def _tags(html: str) -> list[tuple[str, list]]:
    """Every element of an HTML fragment, with its attributes."""
    from html.parser import HTMLParser

    found: list[tuple[str, list]] = []
    parser = HTMLParser()
    parser.handle_starttag = lambda tag, attrs: found.append((tag, attrs))  # type: ignore[method-assign]
    parser.feed(html)
    return found


def _chat(store: Store, prompt: str, reply: str, *, conversation: str | None = None, messages=None, **params):
    body = {"model": "m", "messages": messages or [{"role": "user", "content": prompt}], **params}
    store.record_exchange(
        "/v1/chat/completions", "m", body, text=reply, conversation=conversation, status=200
    )


def test_the_log_table_shows_what_a_model_wrote_as_text(log, cell_runner):
    _chat(log, "show me html", HOSTILE)
    assert log.flush(30)
    result, captured = cell_runner("%gatecell log")
    assert result.success, result.error_in_exec
    (table,) = [o.data for o in captured.outputs if "text/html" in o.data]
    tags = _tags(table["text/html"])
    assert not {"img", "script"} & {tag for tag, _ in tags}
    assert not [name for _, attrs in tags for name, _ in attrs if name.startswith("on")]
    assert "&lt;img" in table["text/html"] and "strong" not in {tag for tag, _ in tags}  # shown as written
    assert "show me html" in table["text/plain"]


def test_bad_input_and_missing_names_are_one_line(log, cell_runner):
    result, captured = cell_runner("%gatecell usage --since yesterday")
    assert not result.success and "since" in str(result.error_in_exec)
    assert len(captured.stderr.strip().splitlines()) == 1
    for line, said in (
        ("%gatecell restore nope", "no conversation named 'nope' in the log"),
        ("%gatecell export nope", "no conversation named 'nope' in the log"),
        ("%gatecell log", "nothing logged yet"),
        ("%gatecell jobs", "no job logged yet"),
    ):
        result, captured = cell_runner(line)
        assert result.success and captured.stdout.strip() == said, (line, captured.stdout)


@pytest.mark.parametrize(
    ("sent", "params"),
    [
        ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a"},
          {"role": "assistant", "content": "A"}, {"role": "user", "content": "b"}], {}),
        ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "A"},
          {"role": "user", "content": "b"}], {"system": "Be brief."}),
    ],
    ids=["chat", "messages"],
)  # fmt: skip
def test_restore_brings_back_the_conversation_as_last_sent(log, cell_runner, ipshell, sent, params):
    from gatecell.notebook import _STATE

    _chat(log, "a", "A", conversation="trip")
    endpoint = "/v1/chat/completions" if not params else "/v1/messages"
    log.record_exchange(
        endpoint, "m", {"model": "m", "messages": sent, **params}, text="B", conversation="trip", status=200
    )
    assert log.flush(30)
    result, captured = cell_runner("%gatecell restore trip")
    assert result.success and "restored conversation 'trip': 2 turns" in captured.stdout
    memory = _STATE[id(ipshell)]["magics"].session.memory
    turns = [(t.role, t.content) for t in memory.get("trip").turns]
    assert turns == [
        ("system", "Be brief."),
        ("user", "a"),
        ("assistant", "A"),
        ("user", "b"),
        ("assistant", "B"),
    ]
    memory.reset("trip")


def test_export_writes_markdown_or_json_lines(log, cell_runner, tmp_path):
    _chat(log, "first", "one", conversation="trip")
    _chat(log, "second", "two", conversation="trip")
    assert log.flush(30)
    assert cell_runner("%gatecell export trip")[0].success
    assert cell_runner("%gatecell export trip out.ndjson")[0].success
    markdown = (tmp_path / "trip.md").read_text()
    assert markdown.startswith("# Conversation trip") and markdown.index("first") < markdown.index("second")
    lines = [json.loads(line) for line in (tmp_path / "out.ndjson").read_text().splitlines()]
    assert [(r["prompt"], r["response"], r["conversation"]) for r in lines] == [
        ("first", "one", "trip"),
        ("second", "two", "trip"),
    ]


def test_export_never_replaces_a_file_nor_follows_a_link(log, cell_runner, tmp_path):
    """Issue 20, item 7: ``export default mynb.ipynb`` replaced the notebook with Markdown."""
    _chat(log, "first", "one", conversation="default")
    assert log.flush(30)
    notebook = tmp_path / "mynb.ipynb"
    notebook.write_text('{"cells": []}')
    target = tmp_path / "elsewhere.txt"
    target.write_text("not yours to write")
    (tmp_path / "link.md").symlink_to(target)
    (tmp_path / "dangling.md").symlink_to(tmp_path / "made-through-a-link.md")
    for line, said in (
        ("%gatecell export default mynb.ipynb", "mynb.ipynb exists; add --force to replace it"),
        ("%gatecell export default link.md", "cannot write link.md: it is a symbolic link (not followed)"),
        ("%gatecell export default dangling.md", "dangling.md: it is a symbolic link (not followed)"),
        ("%gatecell export default link.md --force", "link.md: it is a symbolic link (not followed)"),
        ("%gatecell export default no/such/folder/x.md", "no folder no/such/folder to write x.md in"),
    ):
        result, captured = cell_runner(line)
        assert not result.success and "Traceback" not in captured.stderr, (line, captured.stderr)
        (shown,) = captured.stderr.strip().splitlines()
        assert shown.endswith(said), (line, shown)
    assert notebook.read_text() == '{"cells": []}' and target.read_text() == "not yours to write"
    assert not (tmp_path / "made-through-a-link.md").exists() and not (tmp_path / "no").exists()
    assert cell_runner("%gatecell export default new.md")[0].success
    assert cell_runner("%gatecell export default mynb.ipynb --force")[0].success
    for written in (tmp_path / "new.md", notebook):
        assert written.read_text().startswith("# Conversation default")
        assert stat.S_IMODE(written.stat().st_mode) == 0o600  # as private as the log


def test_a_replys_footer_shows_what_it_cost_when_known(log, run, tmp_path, monkeypatch):
    """The local gateway does not say what an answer cost: the user's prices do."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"local-chat": {"input": 1000, "output": 2000}}))
    monkeypatch.setenv("GATECELL_PRICES", str(prices))
    result, captured = run("%%chat --footer\nWhat is 2+2?")
    assert result.success, result.error_in_exec
    shown = captured.outputs[-1]
    prov = shown.metadata["gatecell"]
    usage = prov["usage"]
    cost = (usage["prompt_tokens"] * 1000 + usage["completion_tokens"] * 2000) / 1e6
    assert (prov["cost"], prov["cost_source"]) == (pytest.approx(cost), "prices")
    assert f"· ${cost:.6f}".rstrip("0") + " (prices)" in shown.data["text/plain"]
    [row] = log.logs(n=1)
    assert (row["cost"], row["cost_source"]) == (pytest.approx(cost), "prices")
