"""Image, speech and media-job panels show real results from the local gateway."""

from __future__ import annotations

import ipywidgets as widgets

from gatecell.notebook.widgets import ImagePanel, MediaPanel, SpeechPanel


def test_image_panel_shows_the_generated_image(gw):
    panel = ImagePanel(gw, size="64x64")
    assert panel.model.options == ("local-image",)
    panel.prompt.value = "a red circle"
    panel.generate_button.click()
    assert panel.wait(60)
    assert panel.error is None, panel.error
    assert panel.images and panel.images[0].mime == "image/png"
    tile = panel.gallery.children[0]
    image = tile.children[0]
    assert isinstance(image, widgets.Image) and bytes(image.value).startswith(b"\x89PNG")
    assert image.layout.max_width == "320px"
    panel.generate("a blue square")
    panel.wait(60)
    assert len(panel.gallery.children) == 2 and len(panel.images) == 2


def test_image_panel_refuses_a_bad_size(gw):
    panel = ImagePanel(gw, size="big")
    panel.generate("a cat")
    assert panel.error == "size must look like 512x512, not 'big'"
    assert panel.result is None


def test_speech_panel_plays_the_audio(gw):
    panel = SpeechPanel(gw)
    assert panel.model.options == ("local-tts",)
    panel.text.value = "hello from gatecell"
    panel.speak_button.click()
    assert panel.wait(60)
    assert panel.error is None, panel.error
    (player,) = panel.player.children
    assert isinstance(player, widgets.Audio)
    assert bytes(player.value) == panel.audio.data and len(player.value) > 1000


def test_media_panel_runs_three_kinds_of_jobs_with_progress(gw):
    panel = MediaPanel(gw, interval=0.2)
    assert panel.model.options == ("local-video",)
    seen: dict[str, list[float]] = {}
    for kind in ("video", "imagine", "music"):
        view = panel.submit(kind, f"a {kind} of the sea", style="calm" if kind == "music" else None)
        seen[kind] = []
        view.bar.observe(lambda change, k=kind: seen[k].append(change["new"]), "value")
    assert panel.wait(120)
    expected = {"video": widgets.Video, "imagine": widgets.Image, "music": widgets.Audio}
    for view in panel.views:
        assert view.error is None, (view.kind, view.error)
        assert view.job.status == "succeeded" and view.bar.value == 100
        assert view.results.children
        assert all(isinstance(w, expected[view.kind]) for w in view.results.children)
        if view.kind == "imagine":  # capped as the image panel's are, whatever the job made
            assert {w.layout.max_width for w in view.results.children} == {"320px"}
        assert seen[view.kind] == sorted(seen[view.kind])  # the bar only moves forward


def test_media_panel_job_error_is_one_line_on_its_row(gw):
    panel = MediaPanel(gw, model="no-such-video-model")
    view = panel.submit("video", "anything")
    view.wait(30)
    assert view.error and "\n" not in view.error and "404" in view.error
    assert view.bar.bar_style == "danger"
