"""Pictures and files in the magics, in a real IPython shell: ``{name}``, ``--image``,
``--file``, ``--as-text``, ``--last-plot``, ``--show-prompt`` and the one-line errors, each
checked where it arrives (a local gateway that records bodies)."""

from __future__ import annotations

import base64
import io
import json

import matplotlib
import numpy as np
import pytest
from PIL import Image

matplotlib.use("Agg")
import matplotlib.pyplot as plt


@pytest.fixture
def recorded(gc, cell_runner, recording_gateway, monkeypatch, home):
    """``run(code)`` with the magics pointed at the recording gateway; ``.bodies()`` the JSON
    bodies it got since the test began."""
    monkeypatch.setenv("GATECELL_API_KEY", recording_gateway.api_key.reveal())
    gc.session.config.base_url = recording_gateway.base_url
    gc.session.disconnect()
    start = len(recording_gateway.recorder.requests)

    def bodies() -> list[dict]:
        return [json.loads(b) for _, _, b in recording_gateway.recorder.requests[start:] if b]

    cell_runner.bodies = bodies
    return cell_runner


def _png(url: str) -> Image.Image:
    assert url.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.partition(",")[2])))


def test_arrays_and_images_in_braces_keep_their_place(recorded, ipshell):
    ipshell.user_ns["heat"] = np.linspace(0, 1, 64 * 48).reshape(48, 64)
    ipshell.user_ns["logo"] = Image.new("RGB", (30, 20), "red")
    ipshell.user_ns["small"] = np.eye(3)  # a matrix, not a picture: a table
    result, _ = recorded("%%chat --no-stream\nCompare {heat} with {logo}; and {small}")
    assert result.success, result.error_in_exec
    (body,) = recorded.bodies()
    content = body["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "text", "image_url", "text"]
    assert content[0]["text"] == "Compare " and content[2]["text"] == " with "
    assert _png(content[1]["image_url"]["url"]).size == (64, 48)
    assert _png(content[3]["image_url"]["url"]).getpixel((0, 0)) == (255, 0, 0)
    assert "1" in content[4]["text"] and "image" not in content[4]["text"]


def test_image_options_by_path_variable_and_url(recorded, ipshell, tmp_path):
    Image.new("RGB", (12, 10), "blue").save(tmp_path / "photo.png")
    fig, ax = plt.subplots(figsize=(2, 1), dpi=100)
    ax.plot([1, 2])
    ipshell.user_ns["chart"] = fig
    cell = f"%%chat --no-stream --image {tmp_path / 'photo.png'} --image chart --image https://pictures.invalid/c.jpg\nCompare."
    result, _ = recorded(cell)
    plt.close(fig)
    assert result.success, result.error_in_exec
    content = recorded.bodies()[-1]["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "Compare."}
    assert _png(content[1]["image_url"]["url"]).size == (12, 10)
    assert _png(content[2]["image_url"]["url"]).size == (200, 100)
    assert content[3] == {
        "type": "image_url",
        "image_url": {"url": "https://pictures.invalid/c.jpg", "detail": "auto"},
    }


def test_files_as_text_and_as_documents(recorded, tmp_path):
    (tmp_path / "sales.csv").write_text("month,sales\njan,3\nfeb,5\n")
    fig, ax = plt.subplots()
    ax.set_title("Annual report")
    fig.savefig(tmp_path / "report.pdf")
    plt.close(fig)
    csv, pdf = tmp_path / "sales.csv", tmp_path / "report.pdf"
    result, _ = recorded(f"%%chat --no-stream --file {csv} --file {pdf}\nSummarise.")
    assert result.success, result.error_in_exec
    content = recorded.bodies()[-1]["messages"][-1]["content"]
    assert content[1] == {
        "type": "text",
        "text": "sales.csv (24 bytes):\n```csv\nmonth,sales\njan,3\nfeb,5\n```",
    }
    assert content[2]["type"] == "file" and content[2]["file"]["filename"] == "report.pdf"
    assert base64.b64decode(content[2]["file"]["file_data"].partition(",")[2]) == pdf.read_bytes()
    result, _ = recorded(f"%%chat --no-stream --new --as-text --file {pdf}\nSummarise.")
    assert result.success, result.error_in_exec
    content = recorded.bodies()[-1]["messages"][-1]["content"]
    assert content[1]["type"] == "text" and "Annual report" in content[1]["text"]
    assert "text extracted from a PDF" in content[1]["text"]


def test_other_apis_and_reason(recorded, ipshell):
    ipshell.user_ns["logo"] = Image.new("RGB", (16, 16), "green")
    for cell in (
        "%%chat --no-stream --new --api messages\nWhat is {logo}?",
        "%%chat --no-stream --new --api generate-content\nWhat is {logo}?",
        "%%reason --no-stream\nWhat is {logo}?",
    ):
        result, _ = recorded(cell)
        assert result.success, (cell, result.error_in_exec)
    messages, generate, reason = recorded.bodies()
    assert messages["messages"][0]["content"][1]["type"] == "image"
    assert generate["contents"][0]["parts"][1]["inline_data"]["mime_type"] == "image/png"
    assert reason["input"][0]["content"][1]["type"] == "input_image"


def test_show_prompt_shows_thumbnails_not_base64(recorded, ipshell):
    ipshell.user_ns["big"] = Image.new("RGB", (900, 600), "purple")
    result, captured = recorded("%%chat --no-stream --show-prompt\nWhat colour is {big}?")
    assert result.success, result.error_in_exec
    prompt = captured.outputs[0].data
    assert prompt["text/plain"].startswith(
        "prompt sent (16 characters, 1 attachment; filled {big}):\nWhat colour is [image: PNG 900x600, "
    )
    assert prompt["text/plain"].endswith("]?")
    thumbnail = prompt["text/html"].split('src="data:image/png;base64,', 1)[1].split('"', 1)[0]
    assert Image.open(io.BytesIO(base64.b64decode(thumbnail))).size == (160, 107)
    sent = recorded.bodies()[-1]["messages"][-1]["content"][1]["image_url"]["url"].partition(",")[2]
    assert sent[:200] not in json.dumps([o.data for o in captured.outputs])


@pytest.mark.parametrize(
    ("cell", "says"),
    [
        ("%%chat --image missing.png\nhi", "UsageError: %chat: missing.png: no such file"),
        ("%%chat --image number\nhi", "UsageError: %chat --image number: not a picture (int)"),
        ("%%chat --file missing.csv\nhi", "UsageError: %chat: missing.csv: no such file"),
        ("%%chat\nLook at {path}", "UsageError: {path} in the prompt: missing.png: no such file"),
        ("%%reason --image notes.txt\nhi", "UsageError: %reason --image notes.txt: not a picture (text file"),
    ],
)
def test_bad_attachments_are_one_line_and_send_nothing(recorded, ipshell, tmp_path, monkeypatch, cell, says):
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    ipshell.user_ns.update(number=3, path=Path("missing.png"))
    result, _ = recorded(cell)
    assert not result.success
    assert f"UsageError: {result.error_in_exec}".startswith(says)
    assert "\n" not in str(result.error_in_exec)
    assert recorded.bodies() == []


def test_last_plot_with_nothing_shown_is_one_line(recorded, ipshell):
    from gatecell.notebook import _STATE

    plots = _STATE[id(ipshell)]["magics"].plots
    plots._png = None
    ipshell.history_manager.outputs.clear()
    result, _ = recorded("%%chat --last-plot\nhi")
    assert "no cell has shown a picture yet" in str(result.error_in_exec)
    assert recorded.bodies() == []


def test_last_plot_from_the_shells_history(recorded, ipshell):
    from IPython.display import Image as Shown
    from IPython.display import display

    buffer = io.BytesIO()
    Image.new("RGB", (7, 5), "orange").save(buffer, format="PNG")
    ipshell.user_ns["shown_png"] = buffer.getvalue()
    ipshell.user_ns["Shown"], ipshell.user_ns["display"] = Shown, display
    ipshell.run_cell("display(Shown(data=shown_png))")  # not captured: the shell's own publisher
    result, _ = recorded("%%chat --no-stream --last-plot\nWhat is it?")
    assert result.success, result.error_in_exec
    url = recorded.bodies()[-1]["messages"][-1]["content"][1]["image_url"]["url"]
    assert base64.b64decode(url.partition(",")[2]) == buffer.getvalue()


def test_a_model_that_refuses_pictures_gets_one_line(gc, cell_runner, fault_server, ipshell, capsys):
    gc.session.config.base_url = fault_server.base_url
    gc.session.disconnect()
    fault_server.mode = "text_only"
    ipshell.user_ns["logo"] = Image.new("RGB", (16, 16), "green")
    before = len(fault_server.requests)
    result, captured = cell_runner("%%chat --no-stream\nWhat is {logo}?")
    assert not result.success
    assert len(fault_server.requests) == before + 1
    line = captured.stderr.strip()
    assert line.count("\n") == 0
    assert line.startswith(
        "gatecell: 400 from POST /v1/chat/completions: Invalid content type. image_url is only"
    )
    assert line.endswith(
        "The model takes text only: it refused the picture or file in the prompt. Ask a model that reads "
        "them, or send a document as its text (Attachment.as_text(), --as-text in the magics)"
    )
