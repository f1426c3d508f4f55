"""The dashboard served by Voila, used in Chromium the way a person would.

The tests share one page (each page load starts a kernel) and run in file order: chat,
compare, image, speech, media, then a look for the key in everything the browser got.
Screenshots go to docs/screenshots/ for the README.
"""

from __future__ import annotations

from typing import Any

import pytest
from browsers import dashboard_page

pytestmark = pytest.mark.browser

# Records every distinct text of the second assistant message, from inside the page, so
# that the test sees the reply grow however fast Python polls.
WATCH_REPLY = """() => {
  window.__seen = [];
  window.__watch = setInterval(() => {
    const all = document.querySelectorAll('.gatecell-chat .gatecell-assistant .gatecell-text');
    const text = all.length > 1 ? all[1].innerText : null;
    if (text !== null && window.__seen[window.__seen.length - 1] !== text) window.__seen.push(text);
  }, 10);
}"""

WATCH_PROGRESS = """() => {
  window.__seen = [];
  window.__watch = setInterval(() => {
    const bar = document.querySelector('.gatecell-job-progress');
    const text = bar ? bar.innerText.trim() : null;
    if (text && window.__seen[window.__seen.length - 1] !== text) window.__seen.push(text);
  }, 10);
}"""


def open_tab(page, title: str) -> None:
    page.locator(".gatecell-tabs .lm-TabBar-tab", has_text=title).click()


def test_end_users_see_the_dashboard_not_the_authors_instructions(page):
    shown = page.locator("body").inner_text()
    assert "gatecell dashboard" in shown and "Chat, compare models side by side" in shown
    for instruction in ("voila notebooks/dashboard.ipynb", "GATECELL_API_KEY", "%config", "import gatecell"):
        assert instruction not in shown
    header = page.locator(".gatecell-header").inner_text()
    assert "(offline stand-in models)" in header  # what the local gateway's notice told the author


def test_chat_reply_streams_into_the_panel(page, screenshots):
    chat = page.locator(".gatecell-chat")
    chat.locator(".gatecell-prompt textarea").fill("My name is Ada.")
    chat.locator("button.gatecell-send").click()
    chat.locator(".gatecell-assistant", has_text="rest of this conversation.").wait_for()
    chat.locator(".gatecell-status", has_text="completion tokens").wait_for()
    page.evaluate(WATCH_REPLY)
    chat.locator(".gatecell-prompt textarea").fill("Please count to 40.")
    chat.locator("button.gatecell-send").click()
    final = ", ".join(str(n) for n in range(1, 41)) + "."
    chat.locator(".gatecell-assistant .gatecell-text", has_text=final).wait_for()
    chat.locator(".gatecell-status", has_text="completion tokens").wait_for()
    seen = page.evaluate("() => { clearInterval(window.__watch); return window.__seen; }")
    growing = [t for t in seen if t and t != final]
    assert len(growing) >= 2, seen  # the reply appeared piece by piece, not all at once
    assert all(final.startswith(t) for t in growing), seen
    assert chat.locator("button.gatecell-send").is_enabled()
    assert chat.locator("button.gatecell-stop").is_disabled()
    page.locator(".gatecell-dashboard").screenshot(path=str(screenshots / "chat.png"))


MARKDOWN = """repeat after me: # Shopping list

Twelve eggs weigh $m \\approx 12 \\times 60\\,\\mathrm{g}$.

| item | count |
|------|------:|
| eggs | 12 |

```python
def total(items):
    return sum(items)  # all of them
```"""

# Samples the transcript while a reply streams: whether the view shows the growing end.
WATCH_FOLLOW = """() => {
  window.__follow = [];
  window.__watch = setInterval(() => {
    const box = document.querySelector('.gatecell-chat .gatecell-follow');
    const bubbles = box.querySelectorAll('.gatecell-assistant');
    const last = bubbles[bubbles.length - 1];
    if (!last) return;
    const view = box.getBoundingClientRect(), end = last.getBoundingClientRect();
    window.__follow.push({overflow: box.scrollHeight > box.clientHeight + 20,
                          endInView: end.bottom <= view.bottom + 2 && end.bottom >= view.top});
  }, 20);
}"""

FIRST_VISIBLE = """() => {
  const box = document.querySelector('.gatecell-chat .gatecell-follow');
  const view = box.getBoundingClientRect();
  const lines = [...box.querySelectorAll('.gatecell-assistant p')];
  const seen = lines.find(p => p.getBoundingClientRect().top >= view.top);
  return seen ? [seen.innerText, seen.getBoundingClientRect().top - view.top] : null;
}"""


def lines(n: int, word: str) -> str:
    return "repeat after me: " + "\n\n".join(f"{word} {i}" for i in range(1, n + 1))


def test_ctrl_enter_and_shift_enter_send_from_the_keyboard(page):
    chat = page.locator(".gatecell-chat")
    box = chat.locator(".gatecell-prompt textarea")
    box.fill("What is 6 times 7?")
    box.press("Control+Enter")
    chat.locator(".gatecell-assistant", has_text="6 * 7 = 42").wait_for()
    chat.locator(".gatecell-status", has_text="completion tokens").wait_for()
    assert box.input_value() == ""  # sent, not a new line
    box.fill("What is 5 times 5?")
    box.press("Shift+Enter")
    chat.locator(".gatecell-assistant", has_text="5 * 5 = 25").wait_for()
    chat.locator(".gatecell-status", has_text="completion tokens").wait_for()
    box.fill("line one")
    box.press("Enter")  # a plain Enter is a new line, as in any text box
    assert box.input_value() == "line one\n"
    box.fill("")


class LaggingKernel:
    """The kernel's messages to the page, held back while `hold` is set (a busy or loaded
    kernel): ipywidgets then keeps a box's newest text in the page until the kernel has
    answered its last change, while a button's click goes at once."""

    def __init__(self) -> None:
        self.hold = False
        self.held: list[str | bytes] = []
        self.page_side: Any = None

    def route(self, page: Any) -> None:
        page.route_web_socket("**/api/kernels/*/channels*", self.connect)

    def connect(self, ws: Any) -> None:
        self.page_side = ws
        server = ws.connect_to_server()

        def down(message: str | bytes) -> None:
            if self.hold or self.held:
                self.held.append(message)
            else:
                ws.send(message)

        server.on_message(down)

    def release(self) -> None:
        while self.held:  # in order; what comes meanwhile queues behind
            self.page_side.send(self.held.pop(0))
        self.hold = False


def test_send_asks_with_the_text_the_page_shows_while_the_kernel_lags(browser, voila_url):
    """Under load the click reached the kernel before the box's text, and Send asked with the
    text the box had before (a page of its own: the kernel's messages are routed)."""
    kernel = LaggingKernel()
    with dashboard_page(browser, voila_url, before=kernel.route) as page:
        chat = page.locator(".gatecell-chat")
        box = chat.locator(".gatecell-prompt textarea")
        kernel.hold = True
        box.fill("What is 6 times 7?")  # goes; the kernel's answer to it is held
        box.fill("What is 5 times 5?")  # kept in the page until that answer comes
        chat.locator("button.gatecell-send").click()
        kernel.release()  # the click left the page before the box's text can
        chat.locator(".gatecell-status", has_text="completion tokens").wait_for()
        asked = chat.locator(".gatecell-user").all_inner_texts()
        assert asked == ["You\nWhat is 5 times 5?"]  # the text shown when Send was clicked
        chat.locator(".gatecell-assistant", has_text="5 * 5 = 25").wait_for()


def test_a_reply_renders_as_markdown(page, screenshots):
    chat = page.locator(".gatecell-chat")
    chat.locator(".gatecell-prompt textarea").fill(MARKDOWN)
    chat.locator("button.gatecell-send").click()
    reply = chat.locator(".gatecell-assistant").last
    reply.locator("h1", has_text="Shopping list").wait_for()
    reply.locator("pre.gatecell-code span.k", has_text="def").wait_for()
    assert reply.locator("table td").all_inner_texts() == ["eggs", "12"]
    assert reply.locator("th").first.inner_text() == "item"
    comment = reply.locator("pre.gatecell-code span.c1")
    assert comment.inner_text() == "# all of them"
    assert comment.evaluate("e => getComputedStyle(e).fontStyle") == "italic"  # the stylesheet applies
    assert "#" not in reply.locator("h1").inner_text()  # rendered, not shown as source
    reply.locator("mjx-container").wait_for()  # the formula, typeset
    page.locator(".gatecell-dashboard").screenshot(path=str(screenshots / "chat-markdown.png"))


MATH = r"repeat after me: The mean is \(\bar x = \tfrac1n \sum_i x_i\), a coffee costs $5 and tea $3."


def test_a_formula_in_a_reply_is_typeset_and_a_price_is_not(page):
    chat = page.locator(".gatecell-chat")
    chat.locator(".gatecell-prompt textarea").fill(MATH)
    chat.locator("button.gatecell-send").click()
    reply = chat.locator(".gatecell-assistant", has_text="a coffee costs $5 and tea $3.")  # the end
    reply.locator("mjx-container").wait_for()  # Voila typesets an HTMLMath widget
    assert reply.locator("mjx-container").count() == 1
    assert reply.locator("mjx-merror").count() == 0
    chat.locator("button.gatecell-send:enabled").wait_for()  # the stream has ended


def test_the_transcript_follows_the_stream_unless_scrolled_up(page):
    chat = page.locator(".gatecell-chat")
    status = chat.locator(".gatecell-status", has_text="completion tokens")
    box = chat.locator(".gatecell-follow")
    page.evaluate(WATCH_FOLLOW)
    chat.locator(".gatecell-prompt textarea").fill(lines(50, "line"))
    chat.locator("button.gatecell-send").click()
    chat.locator(".gatecell-assistant p", has_text="line 50").wait_for()
    status.wait_for()
    seen = page.evaluate("() => { clearInterval(window.__watch); return window.__follow; }")
    while_overflowing = [s["endInView"] for s in seen if s["overflow"]]
    assert len(while_overflowing) >= 5, seen  # it streamed past the box's height, and was watched
    assert all(while_overflowing), seen  # the growing end stayed in view all along

    # Scrolled up to read, the view stays where the user put it while the next reply streams.
    chat.locator(".gatecell-prompt textarea").fill(lines(50, "more"))
    chat.locator("button.gatecell-send").click()
    chat.locator(".gatecell-assistant p", has_text="more 3").wait_for()
    box.evaluate("b => { b.scrollTop = -b.scrollHeight; }")  # to the top (column-reverse)
    before = page.evaluate(FIRST_VISIBLE)
    chat.locator(".gatecell-assistant p", has_text="more 50").wait_for(state="attached")
    status.wait_for()
    after = page.evaluate(FIRST_VISIBLE)
    assert before is not None and after[0] == before[0], (before, after)
    assert abs(after[1] - before[1]) < 2, (before, after)  # in place, within sub-pixel rounding
    end = chat.locator(".gatecell-assistant p", has_text="more 50")
    assert not end.evaluate(
        "(p, box) => p.getBoundingClientRect().top < box.getBoundingClientRect().bottom",
        box.element_handle(),
    )  # the end arrived out of view, below


def test_compare_streams_two_models_side_by_side(page, screenshots):
    open_tab(page, "Compare")
    panel = page.locator(".gatecell-compare")
    panel.locator(".gatecell-compare-models select").select_option(["local-chat", "local-reasoner"])
    panel.locator(".gatecell-prompt textarea").fill("What is 12 times 7?")
    panel.locator("button.gatecell-compare-run").click()
    stats = panel.locator(".gatecell-compare-stats", has_text="first token")
    stats.nth(1).wait_for()
    assert stats.count() == 2
    columns = panel.locator(".gatecell-compare-column")
    assert columns.count() == 2
    for i, model in enumerate(["local-chat", "local-reasoner"]):
        column = columns.nth(i)
        assert model in column.inner_text()
        assert "84" in column.locator(".gatecell-compare-text").inner_text()
        assert "completion tokens" in column.locator(".gatecell-compare-stats").inner_text()
    page.locator(".gatecell-dashboard").screenshot(path=str(screenshots / "compare.png"))


def test_compare_columns_follow_their_streams(page):
    panel = page.locator(".gatecell-compare")
    panel.locator(".gatecell-compare-models select").select_option(["local-chat"])
    panel.locator(".gatecell-prompt textarea").fill(lines(40, "row"))
    panel.locator("button.gatecell-compare-run").click()
    page.wait_for_function(
        "() => { const s = document.querySelectorAll('.gatecell-compare .gatecell-compare-stats');"
        " return s.length === 1 && s[0].innerText.includes('first token'); }"
    )
    box = panel.locator(".gatecell-compare-column .gatecell-follow")
    assert box.evaluate("b => b.scrollHeight > b.clientHeight + 100")  # it overflowed
    for text, shown in (("row 40", True), ("row 1", False)):
        line = panel.locator(".gatecell-compare-text p", has_text=text).first
        inside = line.evaluate(
            "(p, b) => { const r = p.getBoundingClientRect(), v = b.getBoundingClientRect();"
            " return r.top >= v.top && r.bottom <= v.bottom; }",
            box.element_handle(),
        )
        assert inside is shown, text  # the column shows the end of the reply, not its start


def test_generated_image_is_shown(page, screenshots):
    open_tab(page, "Image")
    panel = page.locator(".gatecell-image")
    panel.locator(".gatecell-size input").fill("384x256")
    panel.locator(".gatecell-prompt textarea").fill("a lighthouse at dusk")
    panel.locator("button.gatecell-generate").click()
    image = panel.locator(".gatecell-gallery img").first
    image.wait_for()
    page.wait_for_function(
        "() => { const i = document.querySelector('.gatecell-gallery img');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    size = image.evaluate("i => [i.naturalWidth, i.naturalHeight]")
    assert size == [384, 256]
    page.locator(".gatecell-dashboard").screenshot(path=str(screenshots / "image.png"))


def test_speech_plays_in_an_audio_player(page, screenshots):
    open_tab(page, "Speech")
    panel = page.locator(".gatecell-speech")
    panel.locator(".gatecell-prompt textarea").fill("Hello from the gatecell dashboard.")
    panel.locator("button.gatecell-speak").click()
    audio = panel.locator(".gatecell-player audio")
    audio.wait_for(state="attached")
    page.wait_for_function(
        "() => { const a = document.querySelector('.gatecell-player audio');"
        " return a && a.readyState >= 1 && a.duration > 0; }"
    )
    page.locator(".gatecell-dashboard").screenshot(path=str(screenshots / "speech.png"))


def test_media_job_shows_progress_then_the_video(page, screenshots):
    open_tab(page, "Media")
    panel = page.locator(".gatecell-media")
    panel.locator(".gatecell-prompt textarea").fill("waves rolling onto a beach")
    page.evaluate(WATCH_PROGRESS)
    panel.locator("button.gatecell-submit").click()
    job = panel.locator(".gatecell-job").first
    job.locator(".gatecell-job-progress").wait_for()
    job.locator("video").wait_for(state="attached")
    seen = page.evaluate("() => { clearInterval(window.__watch); return window.__seen; }")
    assert seen[-1] == "100%" and len(seen) >= 2, seen  # the bar moved before the result
    assert "succeeded" in job.locator(".gatecell-job-title").inner_text()
    page.wait_for_function(
        "() => { const v = document.querySelector('.gatecell-job video');"
        " return v && v.readyState >= 1 && v.videoWidth > 0; }"
    )
    page.locator(".gatecell-dashboard").screenshot(path=str(screenshots / "media.png"))


def test_the_page_never_holds_the_key(page, dashboard_key):
    html = page.content()
    assert "gatecell-dashboard" in html
    assert dashboard_key not in html
    assert dashboard_key.removeprefix("sk-") not in html
