"""The notebook as context in a real IPython shell, checked where it arrives: a local gateway
that records every request (``recording_gateway``)."""

from __future__ import annotations

import json
import sys

import pytest

from gatecell.wire.util._text import fence
from gatecell.wire.util.secret import redact


@pytest.fixture
def cells(ipshell, gc, recording_gateway, monkeypatch):
    """``cells(code)`` runs a cell as a notebook does (kept in the history, numbered), with
    gatecell pointed at the recording gateway; returns (result, captured output)."""
    from IPython.utils.capture import capture_output

    monkeypatch.setenv("GATECELL_API_KEY", recording_gateway.api_key.reveal())
    gc.session.config.base_url = recording_gateway.base_url
    gc.session.disconnect()
    sys.last_value = sys.last_exc = None  # no error yet (pytest clears them before each test too)

    def run(code: str):
        with capture_output() as captured:
            result = ipshell.run_cell(code, store_history=True)
        return result, captured

    return run


def sent(recording_gateway) -> str:
    return recording_gateway.recorder.prompts()[-1]


def test_show_prompt_shows_what_the_gateway_received_and_provenance_keeps_it(
    cells, recording_gateway, ipshell
):
    ipshell.user_ns["rows"] = list(range(100_000))
    result, captured = cells("%%chat --show-prompt -o r\nHow many rows are there in {rows}?")
    assert result.success, result.error_in_exec
    received = sent(recording_gateway)
    assert received.startswith("How many rows are there in [0, 1, 2,") and "more items]?" in received
    assert len(received) < 4100  # the list was bounded by Gatecell.context_chars
    shown = captured.outputs[0].data["text/plain"]
    assert shown.startswith(f"*prompt sent ({len(received):,} characters; filled \\{{rows\\}}):*")
    assert received in shown
    assert ipshell.user_ns["r"].prov["prompt"] == received
    assert captured.outputs[-1].metadata["gatecell"]["prompt"] == received


def test_cells_sends_the_last_cells_with_what_they_printed_and_showed(cells, recording_gateway):
    cells("import time\nprint('loaded 3 files')\nsum(range(10))")
    cells("print('warning: slow disk', file=__import__('sys').stderr)\nfor i in range(3): time.sleep(0)")
    cells("1 / 0")
    result, captured = cells("%%chat --cells 3\nwhy is this slow?")
    assert result.success, result.error_in_exec
    body = sent(recording_gateway)
    context, question = body.rsplit("\n\n---\n\n", 1)
    assert question == "why is this slow?"
    n = result.execution_count
    assert context.startswith("Notebook context: the last 3 cells run before this message.")
    assert f"In[{n - 3}]:\n```python\nimport time\nprint('loaded 3 files')\nsum(range(10))\n```" in context
    assert "printed to stdout:\n```text\nloaded 3 files\n```" in context
    assert f"Out[{n - 3}]:\n45" in context
    assert "printed to stderr:\n```text\nwarning: slow disk\n```" in context
    assert (
        f"In[{n - 1}]:\n```python\n1 / 0\n```" in context
        and "raised: ZeroDivisionError: division by zero" in context
    )
    assert f"In[{n - 4}]" not in context and "%%chat" not in context  # neither older cells nor this one


def test_explain_sends_the_last_error_trimmed_and_redacted(cells, recording_gateway):
    before = len(recording_gateway.recorder.requests)
    result, captured = cells("%gatecell explain")
    assert (
        result.success
        and captured.stdout == "no error to explain yet: run the cell that fails first (nothing was sent)\n"
    )
    assert len(recording_gateway.recorder.requests) == before  # nothing left the notebook

    cells('token = "hunter2-secret"\ndef ratio(a, b):\n    return a / b  # sk-' + "x" * 20)
    failing, _ = cells("ratio(1, 0)")
    result, captured = cells("%gatecell explain")
    assert result.success, result.error_in_exec
    body = sent(recording_gateway)
    n = failing.execution_count
    assert body.startswith(
        f"The last error in this notebook, raised by cell In[{n}]:\n\n```python\nratio(1, 0)\n```"
    )
    assert (
        f"  Cell In[{n}], line 1, in <module>\n    ratio(1, 0)\n  Cell In[{n - 1}], line 3, in ratio" in body
    )
    assert "ZeroDivisionError: division by zero\n```" in body
    assert body.endswith("Then suggest a fix, as code when code is the fix.")
    assert "sk-" + "x" * 20 not in body and "interactiveshell.py" not in body  # redacted, trimmed
    assert "Traceback" not in captured.stderr  # the reply streamed as usual


def test_gatecells_own_one_line_errors_can_be_explained(cells, recording_gateway, gc, fault_server):
    fault_server.mode = "error429"
    gc.session.config.base_url = fault_server.base_url
    failed, captured = cells("%chat hello")
    assert (
        not failed.success
        and captured.stderr.startswith("gatecell: 429")
        and "Traceback" not in captured.stderr
    )
    gc.session.config.base_url = recording_gateway.base_url
    result, _ = cells("%%chat --error\nWhat should I do now?")
    assert result.success, result.error_in_exec
    body = sent(recording_gateway)
    assert f"raised by cell In[{failed.execution_count}]:\n\n```python\n%chat hello\n```" in body
    assert "rate limit reached" in body and body.endswith("---\n\nWhat should I do now?")
    assert fault_server.key not in body and fault_server.key.removeprefix("sk-") not in body


def test_code_puts_the_replys_code_in_the_next_cell(cells, ipshell):
    result, captured = cells("%%chat --code\nwrite python to add two numbers")
    assert result.success, result.error_in_exec
    assert ipshell.rl_next_input.startswith('def add_two_numbers():\n    """Add two numbers."""')
    ipshell.rl_next_input = None
    result, captured = cells("%%chat --code\nhello")
    assert "the reply has no code block: no cell added\n" in captured.stdout
    assert ipshell.rl_next_input is None


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ('os.environ["OPENAI_API_KEY"] = "abc123secret"', "abc123secret"),
        ("client = Client(api_key='k-12345678')", "k-12345678"),
        ('{"password": "correct horse"}', "correct horse"),
        ("key sk-proj-" + "a" * 30 + " leaked", "a" * 30),
        ("hf_" + "b" * 34, "b" * 34),
        ("AKIA" + "C" * 16, "C" * 16),
    ],
)
def test_redaction_masks_keys_and_secrets(text, hidden):
    masked = redact(text)
    assert hidden not in masked and masked != text
    assert redact("max_tokens = 100 and tokenizer = 'bert'") == "max_tokens = 100 and tokenizer = 'bert'"


def test_a_cell_that_does_not_compile_is_explained_by_its_message(cells, recording_gateway):
    failed, _ = cells("total = 1\nif total\n    print(total)")
    assert not failed.success
    result, _ = cells("%gatecell explain")
    assert result.success, result.error_in_exec
    n = failed.execution_count
    body = sent(recording_gateway)
    assert body.startswith(
        f"The last error in this notebook, raised by cell In[{n}]:\n\n```python\ntotal = 1\n"
    )
    assert f"```text\n  Cell In[{n}], line 2\n    if total\n" in body and "SyntaxError: expected ':'" in body
    assert (
        "Traceback" not in body and "interactiveshell" not in body
    )  # IPython's own frames are not the error


# -- issue 20, items 2 and 3: one redaction, before sending, for everything gathered ---------

PROJECT_KEY = "sk-proj-" + "Ab3" * 16
SECRETS = {  # a cell's line, and the secret in it (issue 20, item 3)
    f'OPENAI_KEY = "{PROJECT_KEY}"': PROJECT_KEY,
    'db_pass = "db-pa55-word"': "db-pa55-word",
    'token = b"tok-0123456789"': "tok-0123456789",
    'TOKEN = f"tk-{1}-9876543210"': "tk-{1}-9876543210",
    'password: str = "correct-horse-battery"': "correct-horse-battery",
    'SECRET = """first-secret-line\nsecond-secret-line"""': "first-secret-line",
    'DSN = "postgresql://admin:pg-s3cret-pw@db.example/app"': "pg-s3cret-pw",
}


def _everything_sent(recording_gateway) -> str:
    return "\n".join(body.decode() for _, _, body in recording_gateway.recorder.requests)


def test_in_n_is_redacted_before_sending_and_show_prompt_shows_what_was_sent(
    cells, recording_gateway, ipshell
):
    source, _ = cells("\n".join(SECRETS) + "\nSECRET")
    n = source.execution_count
    result, captured = cells(f"%%chat --show-prompt -o r\nWhat does this cell do? {{In[{n}]}}")
    assert result.success, result.error_in_exec
    received = sent(recording_gateway)
    assert "OPENAI_KEY = " in received and "db_pass = " in received  # the cell went, its secrets did not
    shown = captured.outputs[0].data["text/plain"]
    filled = f"filled \\{{In&#91;{n}\\]\\}}"
    assert shown == f"*prompt sent ({len(received):,} characters; {filled}):*\n\n{fence(received, 'text')}"
    assert ipshell.user_ns["r"].prov["prompt"] == received
    cells("%%chat\nand now?")  # the conversation, as kept in memory, is sent again
    for secret in SECRETS.values():
        assert secret not in _everything_sent(recording_gateway), secret
        assert secret not in json.dumps([o.metadata for o in captured.outputs], default=str)


def test_cells_and_explain_send_no_secret_of_any_kind(cells, recording_gateway):
    cells("\n".join(SECRETS))
    cells(
        "def fetch():\n"
        "    raise ConnectionError(\n"
        "        'GET https://api.example/v1?api_key=q-9f8e7d6c5b&x=1 with password=hunter2'\n"
        "        ' and Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl')"
    )
    failed, _ = cells("fetch()")
    assert not failed.success
    for magic in ("%%chat --cells 3\nwhat went wrong?", "%gatecell explain", "%%chat --error\nwhy?"):
        result, _ = cells(magic)
        assert result.success, (magic, result.error_in_exec)
        body = sent(recording_gateway)
        assert "ConnectionError" in body, magic
    everything = _everything_sent(recording_gateway)
    for secret in (*SECRETS.values(), "q-9f8e7d6c5b", "hunter2", "eyJzdWIiOiIxMjM0NTY3ODkwIn0"):
        assert secret not in everything, secret
