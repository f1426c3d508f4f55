"""Panels in a real kernel: streaming leaves the kernel free, Stop works from the next cell,
widget updates are coalesced, and no iopub message carries the key."""

from __future__ import annotations

import json
import os
import secrets

import pytest

jupyter_client = pytest.importorskip("jupyter_client")


KEY = "sk-" + secrets.token_urlsafe(24)


@pytest.fixture
def kernel():
    """A kernel with no gateway configured: the panel starts the embedded gateway in it, as
    in a fresh notebook, with a key this test knows and a pace that keeps streams visible."""
    from jupyter_client.manager import start_new_kernel

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GATECELL_"))}
    env.update(GATECELL_LOCAL_KEYS=KEY, GATECELL_LOCAL_PACE="0.01")
    km, kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=60)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


class Run:
    """Execute cells, keeping every iopub message and the printed text."""

    def __init__(self, kc) -> None:
        self.kc = kc
        self.messages: list[dict] = []

    def __call__(self, code: str) -> str:
        out: list[str] = []

        def hook(msg: dict) -> None:
            self.messages.append(msg)
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        reply = self.kc.execute_interactive(code, output_hook=hook, timeout=60)
        assert reply["content"]["status"] == "ok", "".join(out)
        return "".join(out)

    def updates_of(self, model_id: str, since: int = 0) -> list[dict]:
        """The state updates sent to the frontend for one widget."""
        return [
            m["content"]["data"]["state"]
            for m in self.messages[since:]
            if m["msg_type"] == "comm_msg"
            and m["content"]["comm_id"] == model_id
            and m["content"]["data"].get("method") == "update"
        ]


def test_streaming_leaves_the_kernel_free_and_stop_works_from_another_cell(kernel):
    run = Run(kernel)
    printed = run("from gatecell.notebook.widgets import ChatPanel\np = ChatPanel(model='local-chat')")
    shown = [m["content"]["data"]["text/plain"] for m in run.messages if m["msg_type"] == "display_data"]
    assert printed == "" and len(shown) == 1 and "local gateway" in shown[0]  # said once, not on stderr
    run("p.ask('count to 200')")
    # The cell returned while the reply streams: the kernel runs the next cell meanwhile.
    assert run("print(p.busy)").strip() == "True"
    run("import time\nwhile not p.reply.text: time.sleep(0.01)")
    assert run("p.stop(); print(p.busy, p.stop_button.disabled)").strip() == "False True"
    partial = run("print(p.messages[-1]['content'])").strip()
    assert partial and not partial.endswith("200.")
    assert run("print(p.wait(10))").strip() == "True"

    # A whole stream of 100 fragments reaches the frontend in far fewer widget updates.
    start = len(run.messages)
    run("p.ask('count to 100'); p.wait(30)")
    bubble = run("print(p.transcript.children[-1].model_id)").strip()
    text = json.loads(run("import json; print(json.dumps(p.messages[-1]['content']))"))
    assert text.endswith("100.")
    updates = [u["value"] for u in run.updates_of(bubble, since=start) if "value" in u]
    assert 1 <= len(updates) < 34
    assert "100." in updates[-1]  # the frontend got the complete reply
    assert KEY not in json.dumps([m["content"] for m in run.messages], default=str)

    # After %load_ext gatecell, panels use the magics' settings (here: a gateway that is down).
    out = run(
        "%load_ext gatecell\n%config Gatecell.base_url = 'http://127.0.0.1:9'\nprint(ChatPanel().error)"
    )
    assert out.strip().startswith("could not list models:"), out
