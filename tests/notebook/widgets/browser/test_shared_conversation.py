"""A chat panel sharing the conversation ``%%chat`` cells built, and one over an AsyncGateway,
served by Voila and used in Chromium."""

from __future__ import annotations

import pytest
from browsers import clean_env, dashboard_page, free_port, serve, voila, write_notebook

pytestmark = pytest.mark.browser

CELLS = [
    "%load_ext gatecell",
    "%%chat\nMy name is Ada.",
    "%%chat\nrepeat after me: ## Notes\n\n| key | value |\n|---|---|\n| pace | slow |",
    "from gatecell.notebook.widgets import ChatPanel\n"
    "ChatPanel(conversation='default', model='local-chat').add_class('shared-panel')",
    "from gatecell import AsyncGateway\n"
    "ChatPanel(AsyncGateway(), model='local-chat').add_class('async-panel')",
]


@pytest.fixture(scope="module")
def page(tmp_path_factory, browser):
    home = tmp_path_factory.mktemp("voila-shared")
    notebook = write_notebook(home / "shared.ipynb", CELLS)
    port = free_port()
    env = clean_env(home, GATECELL_LOCAL_PACE="0.01")
    with serve(voila(notebook, port), port, env, home / "voila.log", cwd=home):
        with dashboard_page(browser, f"http://127.0.0.1:{port}/", ready=".async-panel") as found:
            yield found


def test_the_panel_shows_and_continues_the_conversation_of_the_cells(page):
    panel = page.locator(".shared-panel")
    transcript = panel.locator(".gatecell-transcript")
    assert transcript.locator(".gatecell-message").count() == 4  # the two cells' turns
    reply = transcript.locator(".gatecell-assistant").nth(1)
    assert reply.locator("h2").inner_text() == "Notes"  # rendered as Markdown, like the cells
    assert reply.locator("table td").all_inner_texts() == ["pace", "slow"]
    panel.locator(".gatecell-prompt textarea").fill("What is my name?")
    panel.locator("button.gatecell-send").click()
    panel.locator(".gatecell-assistant", has_text="Your name is Ada.").wait_for()  # the cells' turn was sent
    assert panel.locator(".gatecell-max-tokens input").get_attribute("placeholder") == "no limit"


def test_a_panel_over_an_async_gateway_streams_in_the_page(page):
    panel = page.locator(".async-panel")
    panel.locator(".gatecell-prompt textarea").fill("count to 30")
    panel.locator("button.gatecell-send").click()
    final = ", ".join(str(n) for n in range(1, 31)) + "."
    panel.locator(".gatecell-assistant .gatecell-text", has_text=final).wait_for()
    panel.locator(".gatecell-status", has_text="local-chat ·").wait_for()
    assert panel.locator("button.gatecell-send").is_enabled()
