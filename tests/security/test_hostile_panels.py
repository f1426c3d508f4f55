"""Every panel against the hostile gateway: each HTML widget value is inert, and replies still
render (heading, table, highlighted code). The browser sees the same in test_hostile_browser.py."""

from __future__ import annotations

import hostile_gateway as evil
import ipywidgets as widgets
import pytest
from inert import assert_inert


def html_values(widget: widgets.Widget) -> list[str]:
    """The value of every HTML widget in a widget tree."""
    found = [widget.value] if isinstance(widget, (widgets.HTML, widgets.HTMLMath)) else []
    for child in getattr(widget, "children", ()):
        found += html_values(child)
    return found


@pytest.fixture
def gw(hostile):
    from gatecell import Gateway

    with Gateway(base_url=hostile.base_url, api_key=evil.KEY) as client:
        yield client


def test_every_panel_shows_only_inert_html(gw):
    from gatecell.notebook.widgets import Dashboard

    d = Dashboard(gw)
    d.chat.model.value = "hostile-chat"
    d.chat.ask("show me")
    assert d.chat.wait(30)
    d.compare.run("show me", ["hostile-chat", "hostile-error", evil.MODEL_ID])
    assert d.compare.wait(30)
    d.image.model.value = "hostile-image"
    d.image.generate("a picture")
    assert d.image.wait(30)
    d.speech.model.value = "hostile-tts"
    d.speech.speak("hello")
    assert d.speech.wait(30)
    for kind in ("video", "imagine", "music"):
        d.media.submit(kind, "something")
    assert d.media.wait(30)

    values = html_values(d)
    for value in values:
        assert_inert(value)
    everything = "\n".join(values)
    assert "<td>" in everything  # the test walked the panels' content, not just their frames

    bubble = d.chat.transcript.children[-1].value
    assert f"<h1>{evil.CONTROL_HEADING}</h1>" in bubble and '<span class="k">def</span>' in bubble
    assert "&lt;script&gt;" in bubble  # a reply's raw HTML is shown as text
    columns = {c.header.value: c for c in d.compare.columns.children}
    assert f"<h1>{evil.CONTROL_HEADING}</h1>" in columns["<b>hostile-chat</b>"].body.value
    assert "denied" in columns["<b>hostile-error</b>"].stats.value
    assert d.compare.results["hostile-error"]["error"].startswith("400")

    # media: the PNG (bytes decide) is an Image widget, the junk with a hostile type is a line
    kinds = [type(tile.children[0]).__name__ for tile in d.image.gallery.children]
    assert kinds == ["HTML", "Image"]
    assert d.image.gallery.children[1].children[0].format == "png"
    assert isinstance(d.speech.player.children[0], widgets.HTML)
    video, imagine, music = reversed(d.media.views)
    assert video.error is None and isinstance(video.results.children[0], widgets.Video)
    assert "x/../../../../escaped" in video.title.value  # the id is shown, as text
    assert imagine.error is None and isinstance(imagine.results.children[0], widgets.Image)
    assert music.error and "denied" in music.error and "&lt;img" in music.title.value


def test_a_link_to_a_result_must_be_a_web_link():
    from types import SimpleNamespace

    from gatecell.notebook.widgets._base import media_widget

    for url in ("javascript:alert(1)", " JavaScript:alert(1)", "data:text/html,x", "/files/x"):
        shown = media_widget(SimpleNamespace(data=b"", mime=None, url=url))
        assert "href" not in shown.value and "alert" not in shown.value, url
    shown = media_widget(SimpleNamespace(data=b"", mime="video/mp4", url="https://example.com/v.mp4"))
    assert shown.value.startswith('<a href="https://example.com/v.mp4"')
