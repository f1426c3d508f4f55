"""`gatecell.wire.apis.attachments`: what becomes a picture or a file, how it is encoded, and the
one-line errors. In memory, with real matplotlib (Agg), Pillow, numpy and pypdf."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
from pictures import bomb_png
from PIL import Image

from gatecell.wire.apis.attachments import Attachment, attachment_of, from_data, load
from gatecell.wire.transport.errors import InvalidRequest


def _figure(width: float = 6.4, height: float = 4.8, dpi: int = 100):
    fig, ax = plt.subplots(figsize=(width, height), dpi=dpi)
    x = np.linspace(0, 6, 200)
    ax.plot(x, np.sin(x))
    return fig, ax


def _decoded(attachment: Attachment) -> Image.Image:
    image = Image.open(io.BytesIO(attachment.data))
    image.load()
    return image


def _photo(width: int, height: int) -> np.ndarray:
    """Noise: many colours, no plain background (what a photo looks like to the encoder)."""
    return (np.random.default_rng(7).random((height, width, 3)) * 255).astype(np.uint8)


def test_a_figure_is_a_png_at_its_own_dpi():
    fig, ax = _figure(4, 3, dpi=150)
    found = attachment_of(fig)
    assert found.kind == "image" and found.media_type == "image/png"
    assert (found.width, found.height) == (600, 450) == _decoded(found).size
    assert found.data.startswith(b"\x89PNG")
    assert found.description == f"PNG 600x450, {round(len(found.data) / 1024)} KB"
    assert found.summary()["source"] == "matplotlib figure"
    assert attachment_of(ax).sha256 == found.sha256  # an Axes is its figure
    plt.close(fig)


def test_pil_images_and_picture_arrays():
    rgba = Image.new("RGBA", (120, 80), (255, 0, 0, 128))
    found = attachment_of(rgba)
    assert (found.media_type, found.width, found.height) == ("image/png", 120, 80)
    assert _decoded(found).mode == "RGBA"
    grey = attachment_of(np.full((40, 30), 200, dtype=np.uint8))
    assert (grey.width, grey.height) == (30, 40) and _decoded(grey).getpixel((0, 0)) == 200
    floats = attachment_of(np.full((20, 20, 3), 0.5))
    assert _decoded(floats).getpixel((5, 5)) == (128, 128, 128)
    assert attachment_of(np.zeros((20, 20, 4), dtype=np.uint8)).media_type == "image/png"


@pytest.mark.parametrize(
    "array",
    [
        np.zeros((5, 5)),  # a small matrix stays a table
        np.full((32, 32), 1.5),  # float beyond [0, 1]
        np.full((32, 32), np.nan),
        np.zeros((32, 32), dtype=np.int64),
        np.zeros((32, 32, 2), dtype=np.uint8),
        np.zeros(100, dtype=np.uint8),
    ],
    ids=["small", "over-one", "nan", "int64", "two-channels", "flat"],
)
def test_arrays_that_are_not_pictures_stay_values(array):
    assert attachment_of(array) is None


def test_large_pictures_are_downscaled_to_the_side_limit(monkeypatch):
    monkeypatch.setenv("GATECELL_IMAGE_MAX_SIDE", "256")
    found = attachment_of(Image.new("RGB", (4000, 3000), "navy"))
    assert (found.width, found.height) == (256, 192) == _decoded(found).size
    assert found.description.endswith("(downscaled from 4000x3000)")
    fig, _ = _figure(8, 4, dpi=100)  # 800x400 PNG bytes: re-encoded only because they are too large
    assert (attachment_of(fig).width, attachment_of(fig).height) == (256, 128)
    plt.close(fig)


def test_large_pictures_are_downscaled_to_the_byte_limit(monkeypatch):
    monkeypatch.setenv("GATECELL_IMAGE_MAX_BYTES", "60000")
    found = attachment_of(_photo(1600, 1200))
    assert found.size <= 60000
    assert found.width < 1600 and found.width / found.height == pytest.approx(4 / 3, abs=0.01)
    assert "downscaled from 1600x1200" in found.description


def test_a_large_photo_goes_as_jpeg_a_small_one_and_a_chart_as_png():
    assert attachment_of(_photo(800, 600)).media_type == "image/jpeg"
    assert attachment_of(_photo(200, 100)).media_type == "image/png"
    fig, _ = _figure(10, 8)  # 1000x800, few colours
    assert attachment_of(fig).media_type == "image/png"
    plt.close(fig)


def test_picture_bytes_go_as_they_are():
    buffer = io.BytesIO()
    Image.new("RGB", (50, 40), "green").save(buffer, format="JPEG", quality=70)
    data = buffer.getvalue()
    found = attachment_of(data)
    assert found.data == data  # encoded once: never again
    assert (found.media_type, found.width, found.height) == ("image/jpeg", 50, 40)
    assert attachment_of(bytearray(data)).data == data
    for fmt, media_type in (("GIF", "image/gif"), ("WEBP", "image/webp"), ("PNG", "image/png")):
        buffer = io.BytesIO()
        Image.new("RGB", (9, 7), "red").save(buffer, format=fmt)
        found = attachment_of(buffer.getvalue())
        assert (found.media_type, found.width, found.height) == (media_type, 9, 7)
    assert attachment_of(b"plain text, not a picture") is None


def test_ipython_images_by_data_and_by_url():
    from IPython.display import Image as Shown

    buffer = io.BytesIO()
    Image.new("RGB", (10, 10)).save(buffer, format="PNG")
    assert attachment_of(Shown(data=buffer.getvalue())).data == buffer.getvalue()
    by_url = attachment_of(Shown(url="https://example.org/cat.png"))
    assert by_url.url == "https://example.org/cat.png" and by_url.data is None


def test_a_url_stays_a_url():
    found = load("https://example.org/a/cat.JPG?size=large")
    assert (found.kind, found.url, found.data, found.media_type) == (
        "image",
        "https://example.org/a/cat.JPG?size=large",
        None,
        "image/jpeg",
    )
    assert found.data_url() == found.url
    assert load("https://example.org/report.pdf").kind == "document"
    with pytest.raises(InvalidRequest, match="has no bytes"):
        found.base64()


def test_anything_else_is_not_an_attachment():
    for value in (3, 2.5, None, {"a": 1}, ["x"], "some words", "ftp://example.org/x.png", object()):
        assert attachment_of(value) is None


def test_text_files_go_in_fenced_and_cut(tmp_path):
    csv = tmp_path / "prices.csv"
    csv.write_text("day,price\n" + "".join(f"{i},{i * 1.5}\n" for i in range(2000)))
    found = load(csv, chars=500)
    assert found.kind == "text" and found.media_type == "text/csv"
    assert found.text.startswith("prices.csv (") and "```csv\nday,price\n0,0.0" in found.text
    assert "more characters" in found.text and len(found.text) < 700
    assert found.description.startswith("text file prices.csv,") and "500 of" in found.description
    notes = tmp_path / "notes"  # no suffix: UTF-8 without NUL reads as text
    notes.write_text("héllo\n")
    assert load(notes).text.endswith("```\nhéllo\n```")


def test_a_pdf_is_a_document_and_has_a_text_form(tmp_path):
    fig, ax = plt.subplots()
    ax.set_title("Quarterly revenue")
    fig.savefig(tmp_path / "report.pdf")
    plt.close(fig)
    found = load(str(tmp_path / "report.pdf"))
    assert (found.kind, found.media_type, found.name) == ("document", "application/pdf", "report.pdf")
    assert found.data.startswith(b"%PDF-")
    text = found.as_text()
    assert text.kind == "text" and "Quarterly revenue" in text.text and "[page 1]" in text.text
    assert "sent as its text" in text.description
    with pytest.raises(InvalidRequest, match="no text form"):
        attachment_of(Image.new("RGB", (20, 20))).as_text()


def test_file_errors_are_one_line(tmp_path, monkeypatch):
    with pytest.raises(InvalidRequest, match=r"nope\.png: no such file"):
        load(tmp_path / "nope.png")
    with pytest.raises(InvalidRequest, match="no such file"):
        attachment_of(Path(tmp_path / "nope.png"))  # a Path is a file the user named
    with pytest.raises(InvalidRequest, match="not a file"):
        load(tmp_path)
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InvalidRequest, match="not a picture, a PDF or text"):
        load(blob)
    monkeypatch.setenv("GATECELL_FILE_MAX_BYTES", "100")
    with pytest.raises(
        InvalidRequest, match=r"over the 100 bytes a file may have \(GATECELL_FILE_MAX_BYTES\)"
    ):
        load(blob)
    with pytest.raises(InvalidRequest, match=r"^attachment: up\.txt: 101 bytes, over the 100 bytes"):
        from_data(b"x" * 101, name="up.txt")  # bytes that came another way (a panel's upload)
    monkeypatch.delenv("GATECELL_FILE_MAX_BYTES")
    bomb = r"bomb\.png: not a readable picture \(Image size \(900000000 pixels\)"
    with pytest.raises(InvalidRequest, match=bomb):
        from_data(bomb_png(), name="bomb.png")  # Pillow's decompression-bomb refusal, as one line


def test_a_string_is_never_an_attachment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Image.new("RGB", (8, 8)).save("cat.png")
    (tmp_path / "notes.txt").write_text("x")
    assert attachment_of(Path("cat.png")).width == 8  # a pathlib path is the user's word
    for text in ("cat.png", "notes.txt", "https://example.org/dog.webp", str(tmp_path / "cat.png")):
        assert attachment_of(text) is None  # stays text: words never become a file read


def test_import_gatecell_loads_no_picture_library():
    code = (
        "import sys, gatecell, gatecell.wire.apis.attachments, gatecell.wire.apis.conversation;"
        "print([m for m in ('PIL', 'numpy', 'matplotlib', 'pypdf') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
