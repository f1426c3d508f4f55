"""Pictures in prompts in a real kernel: a matplotlib figure (Agg) made in one cell is asked
about with ``{fig}`` in the next, then again in a follow-up; ``--last-plot`` sends the PNG an
earlier cell showed inline. What reached the gateway is checked where it arrived (a local
gateway that records bodies), and the log row in the kernel's GATECELL_HOME."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import sqlite3
import time

import pytest
from kernels import displays, execute, running, stream_text
from PIL import Image

FIGURE = """\
import hashlib, io
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
ax.plot([0, 1, 2, 3, 4], [0, 1, 0.8, 0.1, 0.9])
buffer = io.BytesIO()
fig.savefig(buffer, format="png", dpi=fig.dpi)
print(hashlib.sha256(buffer.getvalue()).hexdigest())
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory, recording_gateway):
    home = tmp_path_factory.mktemp("home")
    with running(
        tmp_path_factory.mktemp("kernel"),
        GATECELL_BASE_URL=recording_gateway.base_url,
        GATECELL_API_KEY=recording_gateway.api_key.reveal(),
        GATECELL_HOME=str(home),
    ) as kc:
        yield kc, home


def _last_body(recording_gateway) -> dict:
    method, path, body = recording_gateway.recorder.requests[-1]
    assert (method, path) == ("POST", "/v1/chat/completions")
    return json.loads(body)


def _png(url: str) -> bytes:
    head, _, data = url.partition(",")
    assert head == "data:image/png;base64"
    return base64.b64decode(data)


def test_a_figure_asked_about_then_a_follow_up(kernel, recording_gateway):
    kc, home = kernel
    reply, messages = execute(kc, FIGURE)
    assert reply["content"]["status"] == "ok", stream_text(messages, "stderr")
    figure_sha = stream_text(messages, "stdout").strip()

    cell = "%%chat --no-stream --show-prompt\nWhat does {fig} show, and why does the curve dip near x=3?"
    reply, messages = execute(kc, cell)
    assert reply["content"]["status"] == "ok", stream_text(messages, "stderr")
    content = _last_body(recording_gateway)["messages"][-1]["content"]
    assert [part["type"] for part in content] == ["text", "image_url", "text"]
    assert (
        content[0]["text"] == "What does "
        and content[2]["text"] == " show, and why does the curve dip near x=3?"
    )
    png = _png(content[1]["image_url"]["url"])
    assert hashlib.sha256(png).hexdigest() == figure_sha  # the figure itself, at its own DPI
    assert Image.open(io.BytesIO(png)).size == (400, 300)

    shown = displays(messages)
    prompt, answer = shown[0]["content"], shown[-1]["content"]
    html = prompt["data"]["text/html"]
    assert "[image: PNG 400x300, " in prompt["data"]["text/plain"]
    thumbnail = html.split('<img src="data:image/png;base64,', 1)[1].split('"', 1)[0]
    assert max(Image.open(io.BytesIO(base64.b64decode(thumbnail))).size) <= 160
    full = base64.b64encode(png).decode()
    assert all(full[:100] not in json.dumps(m["content"]) for m in shown)  # a thumbnail, no base64 wall
    assert "I received 1 picture." in answer["data"]["text/plain"]
    assert "- picture 1: PNG 400x300" in answer["data"]["text/plain"]
    (attached,) = answer["metadata"]["gatecell"]["attachments"]
    assert attached["sha256"] == figure_sha and attached["size"] == len(png)
    assert attached["source"] == "matplotlib figure"

    reply, messages = execute(kc, "%%chat --no-stream\nAnd what colour is the line?")
    assert reply["content"]["status"] == "ok", stream_text(messages, "stderr")
    sent = _last_body(recording_gateway)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"] == content  # the picture goes again with the history
    assert sent[2]["content"] == "And what colour is the line?"
    assert (
        "Earlier in this conversation you sent 1 picture."
        in displays(messages)[-1]["content"]["data"]["text/plain"]
    )

    found = _logged(home, figure_sha)
    assert '"type":"attachment"' in found and '"media_type":"image/png"' in found
    assert f'"size":{len(png)}' in found and full[:100] not in found


def _logged(home, sha: str) -> str:
    """The messages_json of the kernel's logged exchanges that name ``sha`` (the writer
    commits in the background: waited for)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(home / "gatecell.db") as conn:
                rows = [
                    r[0] for r in conn.execute("SELECT messages_json FROM exchanges") if sha in (r[0] or "")
                ]
        except sqlite3.Error:
            rows = []
        if rows:
            return rows[-1]
        time.sleep(0.1)
    raise AssertionError("no logged exchange names the picture")


def test_last_plot_sends_what_an_earlier_cell_showed(kernel, recording_gateway):
    kc, _ = kernel
    reply, messages = execute(
        kc,
        "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2), dpi=50)\n"
        "plt.plot([3, 1, 2], color='red')",
    )
    assert reply["content"]["status"] == "ok", stream_text(messages, "stderr")
    shown = [
        m["content"]["data"]["image/png"] for m in displays(messages) if "image/png" in m["content"]["data"]
    ]
    assert shown, "the inline backend showed no PNG"
    reply, messages = execute(kc, "print('a cell in between')")
    reply, messages = execute(kc, "%%chat --no-stream --new --last-plot\nDescribe the last plot.")
    assert reply["content"]["status"] == "ok", stream_text(messages, "stderr")
    content = _last_body(recording_gateway)["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "Describe the last plot."}
    png = _png(content[1]["image_url"]["url"])
    assert png == base64.b64decode(shown[-1])  # the very PNG the cell showed
    width, height = Image.open(io.BytesIO(png)).size
    assert f"- picture 1: PNG {width}x{height}" in displays(messages)[-1]["content"]["data"]["text/plain"]
