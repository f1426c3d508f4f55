"""Issue 33, item 5: a picture over ``GATECELL_IMAGE_MAX_PIXELS`` is refused before it is
decoded (or, a JPEG, decoded reduced), on every way a picture comes in: ``--image``,
``--file``, ``{var}``, a map's picture column, a panel's upload, a thumbnail, the local
gateway's picture reader; and whatever Pillow raises on bytes from outside is one line.

The pictures are real, made here with Pillow. The first test is the issue's own: a PNG of
13000 x 13000 pixels, a few kilobytes on disk, read in a process of its own whose peak
memory (VmHWM: ru_maxrss would carry this process's over) says whether it was decoded. The
others lower the cap so that small pictures cross it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw
from probes import pointed_at
from wire_log import (
    KEY,
    picture_bytes,
    wire_fixture,  # noqa: F401  (the "wire" fixture)
)

from gatecell.gateway import Gateway
from gatecell.notebook.display import attachment_html
from gatecell.wire.apis.attachments import from_data, of_bytes
from gatecell.wire.transport.errors import InvalidRequest

SRC = Path(os.environ.get("GATECELL_TEST_SRC") or Path(__file__).resolve().parents[2] / "src")
OVER = "over the 2,000,000 a picture may have (GATECELL_IMAGE_MAX_PIXELS)"
FIELD = f"{{shown}} in the prompt: IPython Image: 3000x2000 pixels, {OVER}"


def test_a_huge_png_is_refused_before_it_is_decoded(tmp_path):
    image = Image.new("1", (13000, 13000), 1)
    ImageDraw.Draw(image).line((0, 0, 12999, 12999), fill=0)
    image.save(tmp_path / "huge.png")
    del image
    assert (tmp_path / "huge.png").stat().st_size < 2**20  # a small file...
    probe = (
        "import json, re\n"
        "from gatecell.wire.apis.attachments import load\n"
        "from gatecell.wire.transport.errors import InvalidRequest\n"
        "try:\n    load('huge.png'); said = None\n"
        "except InvalidRequest as exc:\n    said = str(exc)\n"
        "peak = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
        "print(json.dumps([said, int(peak)]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECELL_")}
    env["PYTHONPATH"] = str(SRC)
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    said, peak_kb = json.loads(done.stdout.splitlines()[-1])
    assert said == (
        "attachment: huge.png: 13000x13000 pixels, over the 16,000,000 a picture may have "
        "(GATECELL_IMAGE_MAX_PIXELS)"
    )
    assert peak_kb < 160 * 1024  # ...never decoded: its pixels alone take 169 MB


@pytest.fixture
def capped(monkeypatch, home):
    """A cap of 2,000,000 pixels, and pictures sent at most 512 pixels a side."""
    monkeypatch.setenv("GATECELL_IMAGE_MAX_PIXELS", "2000000")
    monkeypatch.setenv("GATECELL_IMAGE_MAX_SIDE", "512")


def test_bytes_over_the_cap_are_refused_and_a_jpeg_is_decoded_reduced(capped):
    with pytest.raises(InvalidRequest, match=re.escape(f"attachment: big.png: 3000x2000 pixels, {OVER}")):
        from_data(picture_bytes("PNG", (3000, 2000)), name="big.png")
    photo = from_data(picture_bytes("JPEG", (3000, 2000)), name="big.jpg")  # draft: 1500x1000
    assert (photo.width, photo.height) == (512, 341)
    assert photo.description.endswith("(downscaled from 3000x2000)")


def test_magic_options_and_fields_refuse_in_one_line(
    capped, wire, ipshell, cell_runner, monkeypatch, tmp_path
):
    from IPython.display import Image as Shown

    monkeypatch.chdir(tmp_path)
    Path("big.png").write_bytes(picture_bytes("PNG", (3000, 2000)))
    Path("big.jpg").write_bytes(picture_bytes("JPEG", (3000, 2000)))
    ipshell.user_ns["shown"] = Shown(data=picture_bytes("PNG", (3000, 2000)))
    monkeypatch.setenv("GATECELL_API_KEY", KEY)
    with pointed_at(ipshell, wire.base_url):
        for cell, said in (
            ("%%chat -m m --image big.png\nhi", f"%chat: big.png: 3000x2000 pixels, {OVER}"),
            ("%%chat -m m --file big.png\nhi", f"%chat: big.png: 3000x2000 pixels, {OVER}"),
            ("%%chat -m m\nWhat is {shown}?", FIELD),
        ):
            result, _ = cell_runner(cell)
            assert str(result.error_in_exec) == said, cell
        assert wire.raw == []  # nothing was sent
        result, _ = cell_runner("%%chat --no-stream -m m --image big.jpg\nhi")
        assert result.success, result.error_in_exec
    assert wire.parts() == ["text", "image_url"]


def test_a_map_column_of_big_pictures_fails_row_by_row(capped, wire):
    rows = [{"photo": picture_bytes("PNG", (3000, 2000))}, {"photo": picture_bytes("PNG", (40, 30))}]
    with Gateway(base_url=wire.base_url, api_key=KEY) as gw:
        batch = gw.map("Describe {photo}", rows, progress=False, cache=False)
    assert batch.errors == {0: f"{{photo}}: bytes: 3000x2000 pixels, {OVER}"}
    assert len(wire.raw) == 1


def test_a_panel_upload_over_the_cap_is_refused_in_the_panel(capped, wire):
    from gatecell.notebook.widgets import ChatPanel

    data = picture_bytes("PNG", (3000, 2000))
    with Gateway(base_url=wire.base_url, api_key=KEY) as gw:
        panel = ChatPanel(gw, model="m")
        state = {"value": [{"name": "big.png", "type": "", "size": len(data), "last_modified": 0}]}
        panel.attachments.upload.comm.handle_msg(  # as the front end sends a picked file
            {
                "content": {
                    "data": {"method": "update", "state": state, "buffer_paths": [["value", 0, "content"]]}
                },
                "buffers": [memoryview(data)],
            }
        )
        assert panel.attachments.wait(60)
    assert panel.attachments.items == ()
    assert panel.error == f"not attached: big.png: 3000x2000 pixels, {OVER}"


def test_a_thumbnail_over_the_cap_is_a_chip(capped):
    shown = attachment_html(of_bytes(picture_bytes("PNG", (3000, 2000)), "image/png", name="big.png"))
    assert "<img" not in shown and 'class="gatecell-chip"' in shown


def test_the_local_gateway_describes_a_big_picture_from_its_header(capped, make_gateway):
    local = make_gateway()
    url = "data:image/png;base64," + base64.b64encode(picture_bytes("PNG", (3000, 2000))).decode()
    part = {"type": "image_url", "image_url": {"url": url}}  # a part already formed goes as it is
    with Gateway(base_url=local.base_url, api_key=local.api_key, log=False) as gw:
        reply = gw.chat(model="local-chat", messages=[{"role": "user", "content": ["What is it?", part]}])
    assert "PNG 3000x2000" in reply.text and "too large to measure: over 2,000,000 pixels" in reply.text


def _bad_exif_webp() -> bytes:
    """A WebP Pillow made, its EXIF's TIFF header broken: Pillow raises SyntaxError on it."""
    base = Image.new("RGB", (40, 30), "red")
    exif = base.getexif()
    exif[0x0112] = 6  # rotated: the picture is turned upright on its way out
    data = picture_bytes_with(base, "WEBP", exif=exif)
    assert data.count(b"MM\x00*") == 1
    return data.replace(b"MM\x00*", b"MM\x00\xfc")


def picture_bytes_with(image: Image.Image, fmt: str, **options: object) -> bytes:
    import io

    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def test_whatever_pillow_raises_is_one_line(monkeypatch, home):
    monkeypatch.setenv("GATECELL_IMAGE_MAX_SIDE", "16")  # so that it is decoded, not kept as it is
    said = r"^attachment: x\.webp: not a readable picture \(not a TIFF file"
    with pytest.raises(InvalidRequest, match=said):
        from_data(_bad_exif_webp(), name="x.webp")
