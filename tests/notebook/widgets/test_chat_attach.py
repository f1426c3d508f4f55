"""The chat panel's Attach button, without a browser: files arrive as the front end sends them
(a comm message whose buffers are the files' bytes), go with the next message as content parts
to the real local gateway, wait with a Remove button, show as thumbnails or chips, and come
back when the turn is taken back. The conversation it shares with ``%%chat`` keeps them."""

from __future__ import annotations

import base64
import io
import re
from types import SimpleNamespace

import pytest
from pictures import bomb_png, png
from PIL import Image

from gatecell.notebook.widgets import ChatPanel
from gatecell.wire.apis.attachments import Attachment


def pdf() -> bytes:
    from pypdf import PdfWriter

    writer, buffer = PdfWriter(), io.BytesIO()
    writer.add_blank_page(200, 200)
    writer.write(buffer)
    return buffer.getvalue()


def upload(panel: ChatPanel, *files: tuple[str, bytes]) -> None:
    """Files picked in the browser, as the front end sends them: an ``update`` of the
    FileUpload's value over its comm, each file's content one binary buffer."""
    value = [{"name": name, "type": "", "size": len(data), "last_modified": 0} for name, data in files]
    panel.attachments.upload.comm.handle_msg(
        {
            "content": {
                "data": {
                    "method": "update",
                    "state": {"value": value},
                    "buffer_paths": [["value", i, "content"] for i in range(len(files))],
                }
            },
            "buffers": [memoryview(data) for _, data in files],
        }
    )


def attached(panel: ChatPanel, *files: tuple[str, bytes]) -> ChatPanel:
    upload(panel, *files)
    assert panel.attachments.wait(30)
    return panel


def waiting_html(panel: ChatPanel) -> list[str]:
    return [box.children[0].value for box in panel.attachments.row.children]


def thumbnail_size(html: str) -> tuple[int, int]:
    data = html.split('<img src="data:image/png;base64,', 1)[1].split('"', 1)[0]
    return Image.open(io.BytesIO(base64.b64decode(data))).size


def test_a_picture_goes_with_the_next_message_and_shows_as_a_thumbnail(gw):
    panel = attached(ChatPanel(gw, model="local-chat"), ("red.png", png()))
    assert panel.error is None, panel.error
    # the button lists the file waiting, without its bytes: it counts it, and the same file
    # can be attached again
    assert [(f["name"], f["size"], bytes(f["content"])) for f in panel.attachments.upload.value] == [
        ("red.png", len(panel.attachments.items[0].data), b"")
    ]
    (waiting,) = waiting_html(panel)
    assert thumbnail_size(waiting) == (64, 48) and "red.png · PNG 64x48" in waiting
    assert "1 file attached" in panel.status.value

    panel.prompt.value = "What is this?"
    panel.send_button.click()
    assert panel.wait(30)
    question, reply = panel.messages
    assert question["content"][0] == "What is this?"
    sent = question["content"][1]
    assert isinstance(sent, Attachment) and sent.data == png() and sent.name == "red.png"
    assert "I received 1 picture." in reply["content"]
    assert "- picture 1: PNG 64x48, " in reply["content"] and "mostly red (100%)" in reply["content"]
    bubble = panel.transcript.children[0].value
    assert "What is this?" in bubble and thumbnail_size(bubble) == (64, 48)
    assert panel.attachments.items == () and panel.attachments.row.children == ()
    assert panel.error is None and "completion tokens" in panel.status.value

    panel.messages = panel.messages  # a turn with a picture can be assigned back
    assert panel.messages[0]["content"][1] is sent
    assert thumbnail_size(panel.transcript.children[0].value) == (64, 48)
    with pytest.raises(ValueError, match="a user's may be a list of text and pictures"):
        panel.messages = [{"role": "assistant", "content": ["not", "a reply"]}]


def test_a_large_picture_is_read_in_a_thread_and_downscaled_as_for_the_magics(gw, monkeypatch):
    monkeypatch.setenv("GATECELL_IMAGE_MAX_SIDE", "512")
    big = png((3000, 2000), (35, 105, 200))
    panel = ChatPanel(gw, model="local-chat")
    upload(panel, ("big.png", big))
    # The comm handler returned before the picture was read: the kernel answers meanwhile.
    assert panel.attachments.reading and panel.send_button.disabled
    assert "reading 1 file" in panel.status.value
    assert panel.ask("too soon") is None and "still being read" in panel.error
    assert panel.attachments.wait(60)
    assert not panel.send_button.disabled
    (item,) = panel.attachments.items
    assert (item.width, item.height) == (512, 341) and "downscaled from 3000x2000" in item.description
    panel.ask("and this?")
    assert panel.wait(30)
    assert "PNG 512x341" in panel.messages[-1]["content"]


def test_documents_wait_as_chips_and_go_as_parts(gw):
    panel = attached(
        ChatPanel(gw, model="local-chat"),
        ("report.pdf", pdf()),
        ("data.csv", b"city,people\nOslo,700000\n"),
    )
    chips = waiting_html(panel)
    assert 'class="gatecell-chip"' in chips[0] and "PDF report.pdf, " in chips[0] and "<img" not in chips[0]
    assert "<sub>text file data.csv, 24 bytes</sub>" in chips[1]
    panel.ask("")  # the files alone are a message
    assert panel.wait(30)
    question, reply = panel.messages
    assert [getattr(item, "kind", None) for item in question["content"]] == ["document", "text"]
    assert "1 document" in reply["content"] and "PDF" in reply["content"]
    assert "Oslo,700000" in reply["content"]  # the CSV went in as text
    bubble = panel.transcript.children[0].value
    assert bubble.count('class="gatecell-chip"') == 2


def test_remove_takes_a_file_off_the_next_message(gw):
    panel = attached(
        ChatPanel(gw, model="local-chat"), ("red.png", png()), ("blue.png", png(colour=(35, 105, 200)))
    )
    assert [i.name for i in panel.attachments.items] == ["red.png", "blue.png"]
    first, second = panel.attachments.row.children
    first_remove = first.children[1]
    assert first_remove.description == "Remove" and "red.png" in first_remove.tooltip
    assert "2 files attached" in panel.status.value and len(panel.attachments.upload.value) == 2
    first_remove.click()
    assert [i.name for i in panel.attachments.items] == ["blue.png"]
    assert panel.attachments.row.children == (second,)  # the other one's thumbnail is not made again
    assert "1 file attached: it goes with the next message" in panel.status.value  # not 2 any more
    assert [f["name"] for f in panel.attachments.upload.value] == ["blue.png"]  # the button says (1)
    second.children[1].click()
    assert "nothing attached" in panel.status.value and panel.attachments.upload.value == ()
    upload(panel, ("blue.png", png(colour=(35, 105, 200))))  # the same file again
    assert panel.attachments.wait(30) and [i.name for i in panel.attachments.items] == ["blue.png"]
    panel.ask("What colour?")
    assert panel.wait(30)
    reply = panel.messages[-1]["content"]
    assert "I received 1 picture." in reply and "mostly blue" in reply and "red" not in reply


def test_a_file_name_is_data_never_a_path_and_shows_as_text(gw, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("never,read\n")
    hostile = '<img src=x onerror="alert(1)">.png'
    panel = attached(
        ChatPanel(gw, model="local-chat"),
        (hostile, png()),
        (str(secret), b"what,was\nuploaded,here\n"),
    )
    picture, text = panel.attachments.items
    assert picture.name == hostile
    assert text.name == "secret.csv" and "uploaded,here" in text.text and "never" not in text.text
    html = " ".join(waiting_html(panel))
    assert "<img src=x" not in html and 'onerror="' not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;.png · PNG 64x48" in html
    panel.ask("what is it?")
    assert panel.wait(30)
    bubble = panel.transcript.children[0].value
    assert re.findall(r"<img [^>]*>", bubble) == [
        re.search(
            r'<img src="data:image/png;base64,[^"]+" width="64" height="48" alt="[^"]*"/>', bubble
        ).group(0)
    ]  # one element: the thumbnail; the name is in its escaped alt and caption


def test_a_picture_pillow_will_not_open_is_refused_and_the_panel_stays_usable(gw):
    panel = attached(ChatPanel(gw, model="local-chat"), ("bomb.png", bomb_png()), ("red.png", png()))
    assert panel.error.startswith(
        "not attached: bomb.png: not a readable picture (Image size (900000000 pixels)"
    )
    assert "\n" not in panel.error
    assert [i.name for i in panel.attachments.items] == ["red.png"]  # the other file is attached
    assert not panel.send_button.disabled


@pytest.mark.parametrize(
    ("files", "says"),
    [
        (
            [("big.txt", b"x" * 2000)],
            "not attached: big.txt: 2 KB, over the 1000 bytes a file may have (GATECELL_FILE_MAX_BYTES)",
        ),
        (
            [("blob.bin", bytes(range(256)) * 2), ("big.txt", b"x" * 2000)],
            "not attached: blob.bin: not a picture, a PDF or text, so it has no form a prompt can hold "
            "(and 1 more)",
        ),
    ],
)
def test_a_refused_file_is_one_line_and_nothing_is_attached(gw, monkeypatch, files, says):
    monkeypatch.setenv("GATECELL_FILE_MAX_BYTES", "1000")
    panel = attached(ChatPanel(gw, model="local-chat"), *files)
    assert panel.error == says
    assert panel.attachments.items == () and panel.attachments.row.children == ()
    assert not panel.send_button.disabled


def test_a_turn_taken_back_returns_its_files(fault_server, monkeypatch):
    from gatecell import Gateway

    monkeypatch.setattr(fault_server, "mode", "text_only")
    with Gateway(base_url=fault_server.base_url, api_key="sk-test") as gw:
        panel = ChatPanel(gw, models=[SimpleNamespace(id="fault-chat", endpoints=None)], model="fault-chat")
        attached(panel, ("red.png", png()))
        panel.ask("What is this?")
        assert panel.wait(30)
    assert panel.error is not None and "\n" not in panel.error
    assert panel.error.startswith("400 from POST /v1/chat/completions: Invalid content type.")
    assert "The model takes text only" in panel.error
    assert panel.messages == [] and panel.transcript.children == ()
    assert panel.prompt.value == "What is this?"
    assert [i.name for i in panel.attachments.items] == ["red.png"]  # nothing lost
    assert len(panel.attachments.row.children) == 1


# -- one conversation for the magics and the panel ------------------------------------------


def test_pictures_go_both_ways_between_the_panel_and_chat_cells(run, ipshell, gc, local_gateway, tmp_path):
    from gatecell import Gateway

    (tmp_path / "plot.png").write_bytes(png((80, 60), (45, 160, 60)))
    result, _ = run(f"%%chat --no-stream --image {tmp_path / 'plot.png'}\nWhat is this?")
    assert result.success, result.error_in_exec
    with Gateway(base_url=local_gateway.base_url, api_key=local_gateway.api_key) as gw:
        panel = ChatPanel(gw, model="local-chat", conversation="default")
        bubble = panel.transcript.children[0].value
        assert "What is this?" in bubble and thumbnail_size(bubble) == (80, 60)  # the cell's picture

        attached(panel, ("red.png", png()))
        panel.ask("And this one?")
        assert panel.wait(30)
        earlier = panel.reply.request["messages"][0]["content"][1]
        assert earlier.data == (tmp_path / "plot.png").read_bytes()  # the cell's picture went again
        assert "- picture 1: PNG 64x48, " in panel.messages[-1]["content"]

        result, _ = run("%%chat --no-stream\nWhat did I send you?")
        assert result.success, result.error_in_exec
    turns = gc.session.memory.get("default").turns
    assert [t.role for t in turns] == ["user", "assistant"] * 3
    assert isinstance(turns[2].content[1], Attachment)  # the panel's picture, kept as a part
    assert "Earlier in this conversation you sent 2 pictures." in turns[-1].content


def listener_message(panel: ChatPanel, content: dict, buffers: list) -> None:
    """A message of the panel's browser listener (`widgets._keys`), as the kernel gets it."""
    from gatecell.notebook.widgets._keys import Listener

    (listener,) = [w for w in panel.children if isinstance(w, Listener)]
    listener.comm.handle_msg(
        {"content": {"data": {"method": "custom", "content": content}}, "buffers": buffers}
    )


def test_files_too_big_for_the_server_are_one_line_and_the_next_ones_come(gw, monkeypatch):
    monkeypatch.setenv("GATECELL_UPLOAD_MAX_BYTES", "1000")
    panel = ChatPanel(gw, model="local-chat")
    assert panel.attachments.limit == 1000
    listener_message(panel, {"event": "picked", "files": [{"name": "../huge.png", "size": 21 * 2**20}]}, [])
    assert panel.error.startswith(
        "not attached: huge.png (21.0 MiB) is over the Jupyter server's websocket message limit (1,000 bytes)"
    )
    assert "websocket_max_message_size" in panel.error and panel.attachments.items == ()
    picture = png()
    listener_message(
        panel, {"event": "files", "files": [{"name": "red.png", "size": len(picture)}]}, [picture]
    )
    assert panel.attachments.wait(30) and [i.name for i in panel.attachments.items] == ["red.png"]
    assert "1 file attached" in panel.status.value
