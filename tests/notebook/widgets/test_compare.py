"""The comparison panel streams one prompt from several models at once."""

from __future__ import annotations

from gatecell.notebook.widgets import ComparePanel


def test_two_models_stream_side_by_side_with_stats(gw, until):
    panel = ComparePanel(gw, selected=["local-chat", "local-reasoner"])
    panel.prompt.value = "count to 40"
    panel.run_button.click()
    # Both columns stream at the same time: each has text before either has finished.
    until(lambda: all(r.text for r in panel.replies.values()) or not panel.busy)
    assert panel.wait(30)
    results = panel.results
    assert set(results) == {"local-chat", "local-reasoner"}
    for model, result in results.items():
        assert result["error"] is None, (model, result["error"])
        assert result["text"].strip()
        assert result["latency"] >= result["ttft"] > 0
        assert result["completion_tokens"]
    columns = panel.columns.children
    assert [c.header.value for c in columns] == ["<b>local-chat</b>", "<b>local-reasoner</b>"]
    for column in columns:
        assert "first token" in column.stats.value and "completion tokens" in column.stats.value
    assert not panel.run_button.disabled and panel.stop_button.disabled


def test_the_runs_overlap(gw):
    panel = ComparePanel(gw)
    replies = panel.run("count to 100", ["local-chat", "local-reasoner"])
    panel.wait(30)
    a, b = replies.values()
    # Each had text before the other ended: streamed at the same time, not one after the other.
    assert a.first_text_at < b.ended and b.first_text_at < a.ended


def test_one_failing_model_does_not_stop_the_others(gw):
    panel = ComparePanel(gw)
    panel.run("count to 5", ["local-chat", "missing-model"])
    panel.wait(30)
    results = panel.results
    assert results["local-chat"]["text"] == "1, 2, 3, 4, 5."
    assert "404" in results["missing-model"]["error"]
    assert "1 of 2 failed" in panel.error


def test_stop_stops_every_column(gw, until):
    panel = ComparePanel(gw)
    panel.run("count to 200", ["local-chat", "local-reasoner"])
    until(lambda: any(r.text for r in panel.replies.values()))
    panel.stop()
    assert not panel.busy
    assert all(r.stopped for r in panel.replies.values())
    assert panel.wait(10)
    assert panel.error is None and "stopped" in panel.status.value and "done" not in panel.status.value
    assert all("(stopped)" in column.stats.value for column in panel.columns.children)


def test_a_reply_cut_by_max_tokens_says_so(gw):
    panel = ComparePanel(gw)
    panel.max_tokens.value = "3"
    panel.run("count to 50", ["local-chat", "local-reasoner"])
    panel.wait(30)
    for column in panel.columns.children:
        assert "(cut at the token limit (finish reason: length))" in column.stats.value
    assert "cut at the token limit: local-chat, local-reasoner" in panel.status.value


def test_nothing_selected_is_refused(gw):
    panel = ComparePanel(gw)
    assert panel.run("hi", []) == {}
    assert panel.error == "select at least one model"
