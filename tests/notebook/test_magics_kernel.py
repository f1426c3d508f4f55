"""The magics in a real kernel (jupyter_client / nbclient), as a notebook frontend sees them."""

from __future__ import annotations

import re
import time

import pytest
from kernels import displays, execute, kernel_env, stream_text

from gatecell.connect import NOTICE

WORDS = 20_000


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A kernel with no gateway configured: its first magic starts the embedded gateway,
    here at full speed (pace 0: thousands of tokens a second), faster than any
    frontend could take one message per fragment."""
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(
        env=kernel_env(GATECELL_LOCAL_PACE="0", GATECELL_LOCAL_JOB_SECONDS="0.5"),
        cwd=str(tmp_path_factory.mktemp("kernel")),
    )
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    execute(kc, "%load_ext gatecell")
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def test_long_fast_stream_sends_few_display_messages(kernel):
    km, kc = kernel
    words = [f"w{i}" for i in range(WORDS)]
    started = time.monotonic()
    reply, messages = execute(kc, "%%chat\nrepeat after me: " + " ".join(words), timeout=120)
    seconds = time.monotonic() - started
    assert reply["content"]["status"] == "ok", stream_text(messages, "stderr")
    # the first magic started the embedded gateway and said so in one line, a display of its own
    notice, *shown = displays(messages)
    text = notice["content"]["data"]["text/plain"]
    assert text == NOTICE.format(url=re.search(r"http://127\.0\.0\.1:\d+", text).group(0))
    assert stream_text(messages, "stderr") == stream_text(messages, "stdout") == ""
    final = shown[-1]["content"]
    assert final["data"]["text/plain"] == " ".join(words)  # the final render holds the whole text
    assert final["data"]["text/html"].endswith(f"<p>{' '.join(words)}</p>\n</div>")
    assert "text/markdown" not in final["data"]  # JupyterLab would render it unsanitised
    assert final["metadata"]["gatecell"]["model"] == "local-chat"
    assert len({m["content"]["transient"]["display_id"] for m in shown}) == 1
    print(
        f"\n{WORDS} tokens in {seconds:.1f} s: {len(shown)} display messages, "
        f"{len(messages)} iopub messages in all"
    )
    assert len(shown) < 200  # one per fragment would be 20,000
    # the value was shown live: the cell sends no execute_result on top
    assert not [m for m in messages if m["msg_type"] == "execute_result"]
    reply, messages = execute(kc, "%chat count to 3")
    assert not [
        m for m in displays(messages) if "local gateway" in m["content"]["data"]["text/plain"]
    ]  # once


def test_interrupt_keeps_partial_text(kernel, fault_server):
    km, kc = kernel
    fault_server.mode = "slow"
    execute(kc, f"%config Gatecell.base_url = {fault_server.base_url!r}")
    interrupted = []

    def interrupt_once_text_arrives(msg: dict) -> None:
        if (
            not interrupted
            and msg["msg_type"] in ("display_data", "update_display_data")
            and "word3" in msg["content"]["data"]["text/plain"]
        ):
            interrupted.append(True)
            km.interrupt_kernel()

    try:
        reply, messages = execute(
            kc, "%%chat -o r\nhello", timeout=30, on_message=interrupt_once_text_arrives
        )
        assert interrupted
        assert reply["content"]["status"] == "error"
        err = stream_text(messages, "stderr")
        assert err.count("\n") == 1 and err.startswith("gatecell: interrupted: kept the"), err
        assert not [m for m in messages if m["msg_type"] == "error"]  # no traceback
        last = displays(messages)[-1]["content"]["data"]["text/plain"]
        assert last.startswith("word0 word1 word2 word3") and "interrupted: partial reply" in last
        reply, messages = execute(kc, "print(r.partial, r.split()[:2], len(r.split()) < 1000)")
        assert stream_text(messages, "stdout") == "True ['word0', 'word1'] True\n"
        reply, messages = execute(kc, "%gatecell history")
        assert "partial: interrupted" in displays(messages)[-1]["content"]["data"]["text/plain"]
    finally:
        execute(kc, "%config Gatecell.base_url = ''")


def test_executed_notebook_holds_no_key(local_gateway, fault_server, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    key = local_gateway.api_key.reveal()
    cells = [
        "%load_ext gatecell",
        "%%chat --footer\nhello",
        "%image -o img a red square",
        "%speak --save hi.wav hello there",
        "%gatecell config",
        "%video a cat",
        "%chat -m no-such-model hi",
        f"%config Gatecell.base_url = {fault_server.base_url!r}",
        "%chat hello",  # the fault server echoes a key in its error message
        "%config Gatecell.base_url = ''",
        "%gatecell history",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    fault_server.mode = "error429"
    for name, value in kernel_env(GATECELL_BASE_URL=local_gateway.base_url, GATECELL_API_KEY=key).items():
        monkeypatch.setenv(name, value)
    NotebookClient(
        nb,
        timeout=60,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, str(path))
    text = path.read_text()
    assert key not in text and key.removeprefix("sk-") not in text
    assert fault_server.key not in text and fault_server.key.removeprefix("sk-") not in text
    outputs = [o for cell in nb.cells for o in cell.outputs]
    chat = [o for o in nb.cells[1].outputs if "text/html" in o.get("data", {})]
    assert len(chat) == 1  # the live display, holding its final render
    assert chat[0]["data"]["text/plain"].startswith("Hello! I am local-chat")
    assert "-- local-chat · /v1/chat/completions" in chat[0]["data"]["text/plain"]
    assert "<sub>local-chat · /v1/chat/completions" in chat[0]["data"]["text/html"]
    assert chat[0]["metadata"]["gatecell"]["endpoint"] == "/v1/chat/completions"
    # embedded, not a link: 1024 px wide, so an <img> of the bytes shown 512 px wide (display.py)
    assert any('<img src="data:image/png;base64,' in o.get("data", {}).get("text/html", "") for o in outputs)
    assert any("data:audio/" in o.get("data", {}).get("text/html", "") for o in outputs)
    errors = [o["text"] for o in outputs if o.get("name") == "stderr"]
    assert any(e.startswith("gatecell: 404") and e.count("\n") == 1 for e in errors), errors
    assert any(e.startswith("gatecell: 429") and "rate limit reached" in e for e in errors), errors
    assert not [o for o in outputs if o["output_type"] == "error"]  # no tracebacks
    assert (tmp_path / "hi.wav").exists()
    assert any(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs
    )  # the job's progress bar
    assert any("<video controls" in o.get("data", {}).get("text/html", "") for o in outputs)
