"""A row's picture in a `gw.map` template: `Template.fill(fields, pictures=True)` puts it in
the prompt, which `conversation.for_api` makes each API's parts (the engine's integration
switches ``pictures`` on)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from gatecell.batch.rows import RowError, Template
from gatecell.wire.apis.attachments import Attachment
from gatecell.wire.apis.conversation import for_api


def test_a_picture_field_becomes_a_picture(tmp_path):
    Image.new("RGB", (20, 10), "grey").save(tmp_path / "dent.png")
    buffer = io.BytesIO()
    Image.new("RGB", (5, 5)).save(buffer, format="PNG")
    template = Template("Describe the damage in {photo} (claim {claim:>4})")
    for photo in (
        tmp_path / "dent.png",
        Image.new("RGB", (20, 10)),
        buffer.getvalue(),
    ):
        prompt = template.fill({"photo": photo, "claim": 7}, pictures=True)
        assert isinstance(prompt, list) and len(prompt) == 3
        assert prompt[0] == "Describe the damage in " and prompt[2] == " (claim    7)"
        assert isinstance(prompt[1], Attachment) and prompt[1].kind == "image"
    method, arguments = for_api("chat", "m", [{"role": "user", "content": prompt}])
    assert [p["type"] for p in arguments["messages"][0]["content"]] == ["text", "image_url", "text"]


def test_without_pictures_or_with_a_spec_a_field_stays_text(tmp_path):
    Image.new("RGB", (4, 4)).save(tmp_path / "a.png")
    path = str(tmp_path / "a.png")
    assert Template("Look: {p}").fill({"p": path}) == f"Look: {path}"
    assert Template("Look: {p!s}").fill({"p": path}, pictures=True) == f"Look: {path}"
    assert Template("Note: {p}").fill({"p": "no picture here"}, pictures=True) == "Note: no picture here"
    assert Template("Look: {p}").fill({"p": path}, pictures=True) == f"Look: {path}"  # a string is text


def test_a_column_named_as_images_attaches_its_paths(tmp_path):
    Image.new("RGB", (4, 4)).save(tmp_path / "a.png")
    prompt = Template("Look: {p}", images=("p",)).fill({"p": str(tmp_path / "a.png")}, pictures=True)
    assert isinstance(prompt, list) and prompt[1].kind == "image"


def test_a_row_naming_a_missing_file_fails_alone():
    with pytest.raises(RowError, match=r"\{photo\}: .*gone\.png: no such file"):
        Template("Describe {photo}").fill({"photo": Path("gone.png")}, pictures=True)
