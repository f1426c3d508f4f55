"""Requests the panels make run in threads of their own, and are logged all the same, with
the notebook's path (VS Code's ``__vsc_ipynb_file__`` here) and whatever the caller set."""

from __future__ import annotations

from gatecell import store
from gatecell.journal import call_context
from gatecell.notebook.widgets import ChatPanel, MediaPanel

NOTEBOOK = "/code/panels.ipynb"


def _logged(prompt: str) -> dict:
    st = store.default_store(log=True)
    assert st.flush(30)
    (row,) = [r for r in st.logs(n=0) if r["prompt"] == prompt]
    return row


def test_panel_requests_are_logged_with_the_notebook(gw, ipshell, monkeypatch):
    monkeypatch.setitem(ipshell.user_ns, "__vsc_ipynb_file__", NOTEBOOK)
    chat = ChatPanel(gw, model="local-chat")
    with call_context(conversation="from the panel"):  # copied into the panel's thread
        chat.ask("panel asks: what is 6*7?")
    assert chat.wait(30) and chat.reply.text == "6*7 = 42"
    row = _logged("panel asks: what is 6*7?")
    assert (row["response"], row["notebook"], row["conversation"]) == ("6*7 = 42", NOTEBOOK, "from the panel")
    media = MediaPanel(gw, interval=0.05)
    view = media.submit("imagine", "a panel's picture --ar 1:1")
    assert view.wait(60) and view.error is None and view.media
    job = store.default_store(log=True).job(view.job.id)
    assert (job.state, job.notebook, job.prompt) == ("succeeded", NOTEBOOK, "a panel's picture --ar 1:1")
    assert _logged("a panel's picture --ar 1:1")["notebook"] == NOTEBOOK
