"""Every magic against a hostile gateway, in a real IPython shell: what reaches a frontend is inert.

JupyterLab trusts the outputs a running notebook makes: it renders trusted ``text/markdown``
unsanitised and runs the scripts of trusted ``text/html``. So no output of gatecell may carry
``text/markdown``, and every ``text/html`` must pass `inert.assert_inert`. The browser tests
(test_hostile_browser.py) then show the same outputs doing nothing in JupyterLab itself.
"""

from __future__ import annotations

import base64

import hostile_gateway as evil
from inert import assert_inert

from gatecell.notebook.markdown import NOT_MATH


def shown(captured) -> list[dict]:
    return [o.data for o in captured.outputs]


def test_every_magic_output_is_inert(run, victim):
    victim.session.config.video_embed_limit = 100
    for cell in evil.CELLS:
        result, captured = run(cell)
        assert captured.outputs or captured.stderr, cell  # something was shown: the check saw it
        for data in shown(captured):
            assert "text/markdown" not in data, (cell, data)
            if "text/html" in data:
                assert_inert(data["text/html"])
    assert len(victim.session.memory.get().turns) == 12  # six chats really ran


def test_a_hostile_error_explained_shows_its_prompt_as_text(run, victim):
    run("%chat -m hostile-error hi")
    result, captured = run("%gatecell explain --show-prompt")
    assert result.success, result.error_in_exec
    prompt = shown(captured)[0]
    assert "&lt;script&gt;window.__pwned" in prompt["text/html"] and "<script" not in prompt["text/html"]
    assert_inert(prompt["text/html"])
    assert evil.ERROR in prompt["text/plain"]  # the message went as it came, in a code block


def test_a_hostile_reply_keeps_its_form_and_shows_its_html_as_text(run):
    result, captured = run("%%chat --footer\nshow me")
    assert result.success, result.error_in_exec
    final = shown(captured)[-1]
    html = final["text/html"]
    assert f"<h1>{evil.CONTROL_HEADING}</h1>" in html and "<table>" in html
    assert '<span class="k">def</span>' in html  # the code block is highlighted
    assert "&lt;script&gt;" in html and "&lt;svg onload=" in html  # raw HTML shown as text
    assert "hostile-model" in html and "&lt;img src=x" in html  # the footer's model id, escaped
    assert final["text/plain"].startswith(f"# {evil.CONTROL_HEADING}")
    assert str(result.result) == evil.REPLY


def test_the_reasoning_summary_is_rendered_by_the_same_renderer(run):
    result, captured = run("%%reason --no-stream\nthink")
    html = shown(captured)[-1]["text/html"]
    summary = html.split("<details><summary>Reasoning summary</summary>", 1)[1]
    assert summary.startswith(
        f'<div class="gatecell-md {NOT_MATH}"><p>thinking "\'&gt;&lt;img src=x onerror='
    )
    assert_inert(html)


def test_models_table_shows_each_id_as_written(run):
    _, captured = run("%gatecell models")
    data = shown(captured)[0]
    assert_inert(data["text/html"])
    assert evil.MODEL_ID in data["text/plain"]  # the terminal sees it as it came
    assert '<td style="text-align:left">hostile-model"\'&gt;&lt;img src=x onerror=' in data["text/html"]


def test_media_types_from_headers_never_reach_html(run, ipshell):
    result, captured = run("%image -m hostile-image -o pics a picture")
    assert result.success, result.error_in_exec
    junk, png = shown(captured)
    assert set(junk) == {"text/html", "text/plain"} and "download image-0.bin" in junk["text/html"]
    assert base64.b64decode(png["image/png"]) == evil.PNG  # the bytes said PNG, whatever the header
    assert [p.mime for p in ipshell.user_ns["pics"]] == ["application/octet-stream", "image/png"]
    result, captured = run("%speak -m hostile-tts -o sound hello")
    (audio,) = shown(captured)
    assert "download speech-0.bin" in audio["text/html"] and "audio-type" not in audio["text/html"]
    assert ipshell.user_ns["sound"].mime == "application/octet-stream"
    result, captured = run("%speak -m hostile-tts -v params hello")
    (audio,) = shown(captured)
    assert audio["text/html"].startswith('<audio controls src="data:audio/wav;base64,')


def test_a_hostile_job_id_never_writes_outside_the_media_folder(run, victim, tmp_path):
    victim.session.config.video_embed_limit = 100
    media = tmp_path / "a" / "b" / "work" / "gatecell-media"
    (media / "video-x").mkdir(parents=True)  # a folder the id can walk through, as a user's might
    result, captured = run("%video -m hostile-video a clip")
    assert result.success, result.error_in_exec
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert [p.parent for p in files] == [media], files
    assert files[0].read_bytes() == evil.MP4 and files[0].name == "video-x_.._.._.._.._escaped-0.mp4"
    html = shown(captured)[-1]["text/html"]
    assert html == '<video controls src="gatecell-media/video-x_.._.._.._.._escaped-0.mp4"></video>'


def test_errors_and_failed_jobs_are_one_line_of_text(run):
    result, captured = run("%chat -m hostile-error hi")
    assert not result.success and captured.outputs == []
    assert captured.stderr.count("\n") == 1 and "denied" in captured.stderr
    result, captured = run("%music a tune")
    assert not result.success
    assert captured.stderr.startswith("gatecell: music job tune") and captured.stderr.count("\n") == 1
