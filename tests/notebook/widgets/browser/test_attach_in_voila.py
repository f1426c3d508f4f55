"""The chat panel's Attach button in Chromium, served by Voila: files picked in the browser's
file chooser go with the next message, the local stand-in describes what it got, thumbnails
show in the transcript, and a hostile file name runs nothing and reads as text. A control
widget proves that this page runs the handlers of widget HTML (``window.__control``), so that
``window.__pwned`` staying unset means the panel gave it nothing to run.

The notebook also shows a ``%%chat --image`` cell and a panel sharing its conversation: the
cell's picture shows as a thumbnail there too.
"""

from __future__ import annotations

import io

import pytest
from browsers import (
    CONTROL,
    SCAN,
    SETTLED,
    clean_env,
    dashboard_page,
    free_port,
    serve,
    voila,
    write_notebook,
)
from pictures import png
from PIL import Image

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=window.__pwned=1>.png"

CELLS = [
    f"import ipywidgets\nipywidgets.HTML({CONTROL!r})",
    "from PIL import Image\nImage.new('RGB', (80, 60), (45, 160, 60)).save('green.png')",
    "%load_ext gatecell",
    "%%chat --no-stream --image green.png\nWhat is this?",
    "from gatecell.notebook.widgets import ChatPanel\n"
    "ChatPanel(conversation='default', model='local-chat').add_class('shared-panel')",
    "import gatecell\ngatecell.dashboard()",
]


def chart() -> bytes:
    """A line chart as a plotting library draws one: axes and a line on white."""
    from PIL import ImageDraw

    image = Image.new("RGB", (320, 200), "white")
    draw = ImageDraw.Draw(image)
    draw.line([(30, 10), (30, 180), (310, 180)], fill="black", width=2)
    draw.line(
        [(30, 170), (90, 120), (150, 135), (210, 60), (270, 80), (305, 30)], fill=(35, 105, 200), width=4
    )
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def page(tmp_path_factory, browser):
    home = tmp_path_factory.mktemp("voila-attach")
    notebook = write_notebook(home / "attach.ipynb", CELLS)
    port = free_port()
    env = clean_env(home, GATECELL_LOCAL_PACE="0.01", GATECELL_STREAM_USAGE="1")
    with serve(voila(notebook, port), port, env, home / "voila.log", cwd=home):
        with dashboard_page(browser, f"http://127.0.0.1:{port}/") as found:
            yield found


def attach(page, panel, *files: dict) -> None:
    """Pick files in the chooser the Attach button opens, as a person does."""
    with page.expect_file_chooser() as chooser:
        panel.locator(".gatecell-attach").click()
    chooser.value.set_files(list(files))


def ran_nothing(page, panel) -> None:
    """Every picture of the panel has loaded or failed (so any handler among them has run),
    and none ran: nothing in the panel can run or load anything but its own thumbnails."""
    panel.evaluate("p => Promise.all([...p.querySelectorAll('img')].map(i => i.decode().catch(() => null)))")
    assert page.evaluate("() => window.__control") == 1  # this page runs widget HTML's handlers
    assert page.evaluate("() => window.__pwned || null") is None
    assert panel.evaluate(SCAN) == []


def test_an_attached_picture_is_sent_described_and_shown_and_its_name_runs_nothing(page, screenshots):
    chat = page.locator(".gatecell-dashboard .gatecell-chat")
    attach(
        page,
        chat,
        {"name": HOSTILE, "mimeType": "image/png", "buffer": png((64, 48), (215, 40, 40))},
        {"name": "sales.csv", "mimeType": "text/csv", "buffer": b"region,units\nnorth,120\nsouth,80\n"},
    )
    waiting = chat.locator(".gatecell-attachments .gatecell-attachment")
    waiting.nth(1).wait_for()
    chat.locator(".gatecell-status", has_text="2 files attached").wait_for()
    button = chat.locator(".gatecell-attach")
    page.wait_for_function("b => b.textContent.trim() === 'Attach (2)'", arg=button.element_handle())
    ran_nothing(page, chat)
    assert waiting.nth(0).locator("figcaption").inner_text().startswith(HOSTILE + " · PNG 64x48")
    assert waiting.nth(1).locator(".gatecell-chip").inner_text() == "text file sales.csv, 32 bytes"

    chat.locator(".gatecell-prompt textarea").fill("What is in these?")
    chat.locator("button.gatecell-send").click()
    reply = chat.locator(".gatecell-assistant", has_text="I received 1 picture.")
    reply.wait_for()
    chat.locator(".gatecell-status", has_text="completion tokens").wait_for()
    text = reply.inner_text()
    assert "picture 1: PNG 64x48" in text and "mostly red (100%)" in text
    assert "north,120" in text  # the CSV went in as text
    assert waiting.count() == 0  # sent: none wait any more
    page.wait_for_function("b => b.textContent.trim() === 'Attach (0)'", arg=button.element_handle())

    question = chat.locator(".gatecell-user").last
    thumbnail = question.locator("figure.gatecell-thumbnail img")
    ran_nothing(page, chat)
    assert thumbnail.evaluate("i => [i.complete, i.naturalWidth, i.naturalHeight]") == [True, 64, 48]
    assert question.locator("figcaption").inner_text().startswith(HOSTILE)  # the name, as text
    assert question.locator(".gatecell-chip").inner_text() == "text file sales.csv, 32 bytes"
    ran_nothing(page, chat)


def test_remove_takes_a_file_off_and_a_refused_file_is_one_line(page, screenshots):
    chat = page.locator(".gatecell-dashboard .gatecell-chat")
    attach(page, chat, {"name": "blue.png", "mimeType": "image/png", "buffer": png((32, 32), (35, 105, 200))})
    waiting = chat.locator(".gatecell-attachments .gatecell-attachment")
    waiting.first.wait_for()
    button = chat.locator(".gatecell-attach")
    page.wait_for_function("b => b.textContent.trim() === 'Attach (1)'", arg=button.element_handle())
    waiting.first.locator("button.gatecell-attachment-remove").click()
    waiting.first.wait_for(state="detached")
    chat.locator(".gatecell-status", has_text="nothing attached").wait_for()  # not "1 file attached"
    page.wait_for_function("b => b.textContent.trim() === 'Attach (0)'", arg=button.element_handle())

    attach(
        page,
        chat,
        {"name": "blob.bin", "mimeType": "application/octet-stream", "buffer": bytes(range(256)) * 4},
    )
    status = chat.locator(".gatecell-status.gatecell-error")
    status.wait_for()
    assert status.inner_text() == (
        "not attached: blob.bin: not a picture, a PDF or text, so it has no form a prompt can hold"
    )
    assert waiting.count() == 0

    chat.locator(".gatecell-prompt textarea").fill("Anything attached?")
    chat.locator("button.gatecell-send").click()
    chat.locator(".gatecell-status", has_text="completion tokens").wait_for()
    reply = chat.locator(".gatecell-assistant").last.inner_text()
    assert "Anything attached?" in reply and "I received" not in reply  # the removed picture did not go
    assert "Earlier in this conversation you sent 1 picture." in reply and "blue" not in reply

    attach(page, chat, {"name": "sales-chart.png", "mimeType": "image/png", "buffer": chart()})
    waiting.first.wait_for()
    chat.locator(".gatecell-prompt textarea").fill("What does this chart show?")
    chat.locator("button.gatecell-send").click()
    chat.locator(".gatecell-assistant", has_text="it looks like a chart or a diagram").wait_for()
    chat.locator(".gatecell-status", has_text="completion tokens").wait_for()
    page.wait_for_function(SETTLED, arg=".gatecell-dashboard")
    page.locator(".gatecell-dashboard").screenshot(path=str(screenshots / "chat-attach.png"))


def test_a_panel_sharing_the_conversation_shows_the_picture_a_cell_sent(page):
    shared = page.locator(".shared-panel")
    thumbnail = shared.locator(".gatecell-user figure.gatecell-thumbnail img")
    thumbnail.wait_for()
    page.wait_for_function(SETTLED, arg=".shared-panel")
    assert thumbnail.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [80, 60]
    assert "What is this?" in shared.locator(".gatecell-user").first.inner_text()
    shared.locator(".gatecell-prompt textarea").fill("And what colour was it?")
    shared.locator("button.gatecell-send").click()
    shared.locator(
        ".gatecell-assistant", has_text="Earlier in this conversation you sent 1 picture."
    ).wait_for()


def test_a_file_over_the_servers_message_limit_is_one_line_and_attach_keeps_working(page):
    """A Jupyter server drops a websocket message over its limit (10 MiB unless raised) without
    a word, and ipywidgets then sends nothing more from that button: the panel hears the file's
    size first, says so in one line, and gets a fresh button."""
    chat = page.locator(".gatecell-dashboard .gatecell-chat")
    big = png((32, 32), (200, 30, 30)) + bytes(12 * 2**20)
    attach(page, chat, {"name": "huge.png", "mimeType": "image/png", "buffer": big})
    status = chat.locator(".gatecell-status.gatecell-error")
    status.wait_for()
    line = status.inner_text()
    assert line.startswith(
        "not attached: huge.png (12.0 MiB) is over the Jupyter server's websocket message limit"
    )
    assert "websocket_max_message_size" in line and "GATECELL_UPLOAD_MAX_BYTES" in line and "\n" not in line
    waiting = chat.locator(".gatecell-attachments .gatecell-attachment")
    assert waiting.count() == 0
    attach(
        page, chat, {"name": "after.png", "mimeType": "image/png", "buffer": png((40, 30), (35, 105, 200))}
    )
    waiting.first.wait_for()
    chat.locator(".gatecell-status", has_text="1 file attached").wait_for()
    chat.locator(".gatecell-prompt textarea").fill("And this one?")
    chat.locator("button.gatecell-send").click()
    chat.locator(".gatecell-assistant", has_text="picture 1: PNG 40x30").wait_for()
