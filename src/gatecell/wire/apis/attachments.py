"""Pictures and files in a prompt: a notebook value, a file or a URL as one `Attachment`.

SPEC shows plain-string message content only; the gateways of the family take pictures and
documents as content parts (WIRE-NOTES "Content beyond a plain string"). This module turns
what a user hands over into one API-neutral value, encoded once; `conversation` makes each
API's parts of it.

**What is recognised** (`attachment_of`): a matplotlib ``Figure`` (or ``Axes``: its figure),
a PIL ``Image``, a numpy array of picture shape and dtype (HxW, HxWx3, HxWx4, at least
`MIN_SIDE` a side, so that a small matrix stays a table; uint8, or float within [0, 1]), an
``IPython.display.Image``, bytes that begin like a PNG, JPEG, GIF or WebP, and a ``pathlib``
path. Anything else is None, and a string above all: the caller shows it as text, whatever
file or URL it names. `load` is for a path or URL the user marked as a file: typed after
``--image``/``--file``, or in a column named by ``images=``/``--image-column``.

**What happens to a picture.** Encoded once, here: a figure as PNG at its own DPI, an
array or a PIL image as PNG, or JPEG when it is a photo (no transparency, many colours)
larger than `PHOTO_PIXELS`; picture bytes as they are when they fit. Larger than
``GATECELL_IMAGE_MAX_SIDE`` (2048) pixels a side or ``GATECELL_IMAGE_MAX_BYTES`` (5 MiB),
it is downscaled with Pillow, and `Attachment.description` says so ("PNG 640x480, 23 KB
(downscaled from 4000x3000)"). Files: a picture as above; a PDF as its bytes (each API's
file part), or as its text (`Attachment.as_text`, pypdf); a text file (by its suffix, or
bytes that are UTF-8 with no NUL) as a fenced block cut to ``chars``. Nothing larger than
``GATECELL_FILE_MAX_BYTES`` (32 MiB) is read.

**Who may name a path.** Only the user: a path is read when it is a ``pathlib`` value, a
``--image``/``--file`` option typed in the cell, or a value of a column the user named as
pictures (``images="photo"``, ``--image-column photo``). A string anywhere else (a row's
cell, a variable holding a model's reply, a template field) stays text, even when it names
an existing picture or an ``http(s)`` URL: whoever writes the data, or a model, cannot make
the client read a file or hand the gateway a URL to fetch. A URL is passed on as a URL; the
client never fetches it. Nothing a model or a gateway sent reaches this module as a path.

**Pictures are bounded before they are decoded** (`opened`): one of more than
``GATECELL_IMAGE_MAX_PIXELS`` (16,000,000) pixels, as its header says, is decoded at a
fraction of its size where the format allows it (JPEG's draft mode), and refused in one line
otherwise; whatever Pillow raises on bytes it cannot read is that one line too. The local
gateway's picture reader and the notebook's thumbnails use the same cap.

**Errors** are one `InvalidRequest` line, raised before any request: a path that does not
exist, a file over the cap, a file that is neither a picture, a PDF nor text.

Pillow, numpy, matplotlib and pypdf are imported only when a value of theirs shows up:
``import gatecell`` imports none of them.
"""

from __future__ import annotations

import base64
import hashlib
import io
import mimetypes
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Literal

from gatecell.wire.transport.errors import InvalidRequest, first_line
from gatecell.wire.transport.settings import env_number

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

__all__ = [
    "Attachment",
    "attachment_of",
    "load",
    "from_data",
    "of_bytes",
    "of_url",
    "sniff",
    "size_text",
    "opened",
    "pixel_cap",
    "FILE_SUFFIXES",
    "MIN_SIDE",
    "PHOTO_PIXELS",
]

Kind = Literal["image", "document", "text"]

MIN_SIDE = 16
"""An array smaller than this on a side is data, not a picture."""
PHOTO_PIXELS = 640 * 480
"""A photo with more pixels than this goes as JPEG rather than PNG."""
_PHOTO_COLOURS = 4096  # a picture with more distinct colours (and no alpha) is a photo
_JPEG_QUALITY = 90

# Signatures of the picture formats every API of the family takes.
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
PICTURE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})
_TEXT_SUFFIXES = {
    ".txt": "",
    ".md": "markdown",
    ".rst": "rst",
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "json",
    ".jsonl": "json",
    ".py": "python",
    ".ipynb": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".ini": "ini",
    ".cfg": "ini",
    ".xml": "xml",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".js": "javascript",
    ".ts": "typescript",
    ".sql": "sql",
    ".sh": "sh",
    ".r": "r",
    ".tex": "latex",
    ".log": "",
}
FILE_SUFFIXES = frozenset({*PICTURE_SUFFIXES, ".pdf", *_TEXT_SUFFIXES})
"""The suffixes of the files `load` takes by their name (a file picker's ``accept``); other
pictures Pillow reads, and UTF-8 text of any name, are taken too."""
_URL = re.compile(r"https?://[^\s]+", re.I)


def _limits() -> tuple[int, int]:
    """(largest side in pixels, largest encoding in bytes) of a picture sent."""
    return (
        env_number(None, "GATECELL_IMAGE_MAX_SIDE", 2048),
        env_number(None, "GATECELL_IMAGE_MAX_BYTES", 5 * 2**20),
    )


def size_text(n: int) -> str:
    """``23 KB``, ``1.4 MB``, ``512 bytes``: a size as a person reads it (1 KB = 1024 bytes)."""
    if n < 1024:
        return f"{n} bytes"
    if n < 1024**2:
        return f"{n / 1024:.0f} KB"
    return f"{n / 1024**2:.1f} MB"


@dataclass(frozen=True, eq=False)
class Attachment:
    """A picture or a document, ready to go in a prompt (see the module docstring).

    **Parameters:**

    * **kind** - ``"image"``, ``"document"`` (a PDF) or ``"text"`` (a text file).
    * **media_type** - ``image/png``, ``application/pdf``, ``text/csv``...; None for a URL
      whose type its name does not say.
    * **data** - the bytes sent; None for a URL.
    * **url** - the ``http(s)`` URL sent instead of bytes, for the gateway to fetch.
    * **name** - the file name, when it came from a file.
    * **width**, **height** - of a picture, in pixels (None when not known: a URL).
    * **description** - one line for the provenance: ``PNG 640x480, 23 KB (downscaled from 4000x3000)``.
    * **source** - what it was made from: ``matplotlib figure``, ``numpy array``, ``file a.png``...
    * **text** - what a text file (or a PDF made text) puts in the prompt: a fenced block.
    """

    kind: Kind
    media_type: str | None
    data: bytes | None = field(default=None, repr=False)
    url: str | None = None
    name: str | None = None
    width: int | None = None
    height: int | None = None
    description: str = ""
    source: str = ""
    text: str | None = field(default=None, repr=False)

    @property
    def size(self) -> int | None:
        """Bytes of ``data`` (None for a URL)."""
        return None if self.data is None else len(self.data)

    @property
    def sha256(self) -> str | None:
        """Hex sha256 of ``data`` (None for a URL), computed once."""
        if self.data is None:
            return None
        found = self.__dict__.get("_sha256")
        if found is None:
            found = hashlib.sha256(self.data).hexdigest()
            object.__setattr__(self, "_sha256", found)
        return found

    def base64(self) -> str:
        """``data`` in base64 (what the native APIs carry)."""
        if self.data is None:
            raise InvalidRequest("attachment", f"{self.description} is a URL and has no bytes to encode")
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        """``data:<media type>;base64,...`` (what chat and responses carry), or the URL itself."""
        if self.url is not None:
            return self.url
        return f"data:{self.media_type or 'application/octet-stream'};base64,{self.base64()}"

    def summary(self) -> dict[str, Any]:
        """Type, size and sha256 (never the bytes): for the log, the provenance, --show-prompt."""
        found: dict[str, Any] = {"kind": self.kind, "media_type": self.media_type}
        for name in ("name", "url", "width", "height", "size", "sha256", "description", "source"):
            value = getattr(self, name)
            if value is not None and value != "":
                found[name] = value
        return found

    def as_text(self, chars: int | None = None) -> Attachment:
        """This document as text in the prompt: a PDF's text extracted with pypdf (said in the
        description), cut to ``chars`` (``GATECELL_CONTEXT_CHARS``, 4000). A text file is
        itself; a picture has no text form."""
        if self.kind == "text":
            return self
        if self.kind != "document" or self.data is None:
            raise InvalidRequest("attachment", f"{self.description} has no text form")
        text, stopped = _pdf_text(self.data, self.name)
        label = f"{self.name or 'document.pdf'}: text extracted from a PDF of {size_text(len(self.data))}"
        fenced = _fenced(label, text, "", chars)
        return replace(
            self,
            kind="text",
            media_type="text/plain",
            text=f"{fenced}\n({stopped})" if stopped else fenced,
            description=f"{self.description}, sent as its text ({len(text):,} characters"
            + (f"; {stopped})" if stopped else ")"),
        )

    def redacted(self, *secrets: Any) -> Attachment:
        """This attachment with every text it sends or shows through the one redaction
        (`gatecell.wire.util.secret.redact`): a text file's or a PDF's text, its name, its URL, its
        description; itself when nothing changes. A picture's or a PDF's bytes go as they are."""
        from gatecell.wire.util.secret import redact

        changed: dict[str, Any] = {}
        for name in ("text", "name", "url", "description", "source"):
            value = getattr(self, name)
            if value:
                clean = redact(value, *secrets)
                if clean != value:
                    changed[name] = clean
        return replace(self, **changed) if changed else self

    def __repr__(self) -> str:
        digest = f" sha256 {self.sha256[:12]}…" if self.sha256 else ""
        return f"<Attachment {self.description}{digest}>"


# -- recognising a value ---------------------------------------------------------------------


def attachment_of(value: Any) -> Attachment | None:
    """``value`` as an `Attachment` when it is a picture or a ``pathlib`` path (module
    docstring); None for anything else, a string above all (it is text, whatever it names).
    A ``pathlib`` path that does not exist is an error, as is a file over the cap or with no
    form a prompt can hold."""
    if isinstance(value, Attachment):
        return value
    if isinstance(value, str):
        return None
    if isinstance(value, PurePath):
        return load(value)
    return _picture(value)


def _picture(value: Any) -> Attachment | None:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return _from_bytes(data, "bytes") if sniff(data) else None
    module = type(value).__module__.partition(".")[0]
    if module == "matplotlib":
        return _figure(value)
    if module == "PIL":
        from PIL import Image

        if isinstance(value, Image.Image):
            return _encode(value, "PIL image")
        return None
    if module == "numpy":
        return _array(value)
    if module == "IPython":
        from IPython.display import Image as ShownImage

        if isinstance(value, ShownImage):
            return _shown_image(value)
    return None


def _figure(value: Any) -> Attachment | None:
    """A Figure (or an Axes, or a SubFigure: its figure) as PNG at the figure's own DPI.
    ``savefig`` draws with the Agg renderer whatever the backend, so no display is needed."""
    figure = getattr(value, "figure", None) if not hasattr(value, "savefig") else value
    figure = getattr(figure, "figure", figure)  # a SubFigure's own figure
    if figure is None or not hasattr(figure, "savefig") or not hasattr(figure, "dpi"):
        return None
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    return _from_bytes(buffer.getvalue(), "matplotlib figure")


def _array(value: Any) -> Attachment | None:
    import numpy as np

    if not isinstance(value, np.ndarray):
        return None
    shape = value.shape
    if not (value.ndim == 2 or (value.ndim == 3 and shape[2] in (3, 4))):
        return None
    if min(shape[0], shape[1]) < MIN_SIDE:
        return None
    if value.dtype == np.uint8:
        pixels = value
    elif np.issubdtype(value.dtype, np.floating):
        if value.size == 0 or not np.isfinite(value).all() or value.min() < 0 or value.max() > 1:
            return None
        pixels = (value * 255 + 0.5).astype(np.uint8)
    else:
        return None
    from PIL import Image

    return _encode(Image.fromarray(np.ascontiguousarray(pixels)), "numpy array")


def _shown_image(value: Any) -> Attachment | None:
    data = value.data
    if isinstance(data, (bytes, bytearray)) and sniff(bytes(data)):
        return _from_bytes(bytes(data), "IPython Image")
    url = getattr(value, "url", None)
    if isinstance(url, str) and _URL.fullmatch(url):
        return load(url)
    return None


def sniff(data: bytes) -> str | None:
    """The picture type the bytes begin with: PNG, JPEG, GIF or WebP; else None."""
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


# -- files and URLs ------------------------------------------------------------------------------


def load(source: str | os.PathLike[str], *, chars: int | None = None) -> Attachment:
    """A file the user named (a path, or an ``http(s)`` URL passed on as it is): a picture,
    a PDF or a text file (module docstring). Text is cut to ``chars``
    (``GATECELL_CONTEXT_CHARS``, 4000)."""
    if isinstance(source, str) and _URL.fullmatch(source.strip()):
        return of_url(source.strip())
    path = Path(source).expanduser()
    shown = os.fspath(source)
    if not path.exists():
        raise InvalidRequest("attachment", f"{shown}: no such file")
    if not path.is_file():
        raise InvalidRequest("attachment", f"{shown}: not a file")
    _within_cap(shown, path.stat().st_size)  # before reading it
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidRequest("attachment", f"{shown}: {exc.strerror or exc}") from None
    return from_data(data, name=path.name, chars=chars)


def from_data(data: bytes, *, name: str | None = None, chars: int | None = None) -> Attachment:
    """The bytes of a file (``name`` is its file name, never read as a path) as an
    attachment: a picture, a PDF or text; anything else, or bytes over
    ``GATECELL_FILE_MAX_BYTES``, is an error naming it."""
    label = name or "the file"
    _within_cap(label, len(data))
    if sniff(data):
        return _from_bytes(data, f"file {name}" if name else "bytes", name)
    if data.startswith(b"%PDF-"):
        return Attachment(
            "document",
            "application/pdf",
            data,
            name=name,
            description=f"PDF {name + ', ' if name else ''}{size_text(len(data))}",
            source=f"file {name}" if name else "bytes",
        )
    suffix = PurePath(name or "").suffix.lower()
    text = _decoded(data) if suffix in _TEXT_SUFFIXES or b"\0" not in data[:8192] else None
    if text is not None:
        media_type = mimetypes.guess_type(name or "")[0] or "text/plain"
        kept = min(len(text), env_number(chars, "GATECELL_CONTEXT_CHARS", 4000))
        sent = f", {kept:,} of {len(text):,} characters" if kept < len(text) else ""
        return Attachment(
            "text",
            media_type,
            data,
            name=name,
            text=_fenced(f"{label} ({size_text(len(data))})", text, _TEXT_SUFFIXES.get(suffix, ""), chars),
            description=f"text file {label}, {size_text(len(data))}{sent}",
            source=f"file {name}" if name else "bytes",
        )
    picture = _other_picture(data, name)
    if picture is not None:
        return picture
    raise InvalidRequest(
        "attachment", f"{label}: not a picture, a PDF or text, so it has no form a prompt can hold"
    )


def file_cap() -> int:
    """The most bytes a file put in a prompt may have (``GATECELL_FILE_MAX_BYTES``, 32 MiB)."""
    return env_number(None, "GATECELL_FILE_MAX_BYTES", 32 * 2**20)


def _within_cap(shown: str, size: int) -> None:
    cap = file_cap()
    if size > cap:
        raise InvalidRequest(
            "attachment",
            f"{shown}: {size_text(size)}, over the {size_text(cap)} a file may have "
            "(GATECELL_FILE_MAX_BYTES)",
        )


def of_url(url: str) -> Attachment:
    """A URL stays a URL: its type from its name (a picture unless it says PDF), never fetched."""
    guessed = mimetypes.guess_type(url.split("?", 1)[0].split("#", 1)[0])[0]
    kind: Kind = "document" if guessed == "application/pdf" else "image"
    media_type = guessed if guessed and guessed.startswith(("image/", "application/pdf")) else None
    return Attachment(kind, media_type, url=url, description=f"URL {url}", source="URL")


def _decoded(data: bytes) -> str | None:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def _fenced(label: str, text: str, lang: str, chars: int | None) -> str:
    from gatecell.wire.util._text import clip, fence

    body = clip(text.rstrip("\n"), env_number(chars, "GATECELL_CONTEXT_CHARS", 4000))
    return f"{label}:\n{fence(body, lang)}"


def _pdf_text(data: bytes, name: str | None) -> tuple[str, str | None]:
    """The text of a PDF's pages, and the line naming the budget that stopped it early
    (`gatecell.wire.apis.pdf`: a worker process, stopped at its budget)."""
    from .pdf import PdfError, pdf_text

    try:
        found = pdf_text(data)
    except PdfError as exc:
        raise InvalidRequest("attachment", f"{name or 'the PDF'}: {exc.message}") from None
    text = "\n\n".join(f"[page {i}]\n{text.strip()}" for i, text in enumerate(found.texts, 1))
    return text, found.stopped


# -- encoding pictures ------------------------------------------------------------------------------


def pixel_cap() -> int:
    """The most pixels picture bytes from outside may decode to (``GATECELL_IMAGE_MAX_PIXELS``,
    16,000,000): the attachments, the notebook's thumbnails and the local gateway's picture
    reader hold to it."""
    return env_number(None, "GATECELL_IMAGE_MAX_PIXELS", 16_000_000)


@contextmanager
def _untrusted(label: str) -> Iterator[None]:
    """Whatever Pillow raises on bytes from outside (any class: its decoders are many) as one
    `InvalidRequest` line naming them."""
    try:
        yield
    except InvalidRequest:
        raise
    except Exception as exc:
        raise InvalidRequest("attachment", f"{label}: not a readable picture ({first_line(exc)})") from None


def _within_pixels(image: PILImage, label: str, side: int | None = None) -> PILImage:
    """``image``, opened but not decoded yet, decoded within `pixel_cap`: at about ``side``
    pixels a side (the largest side sent, when it is over the cap) where the format decodes
    reduced (JPEG's draft mode), refused in one line when it is still over the cap."""
    cap = pixel_cap()
    width, height = image.size
    target = side or (_limits()[0] if width * height > cap else None)
    if target and max(width, height) > target:
        image.draft(None, (target, target))
    if image.size[0] * image.size[1] > cap:
        raise InvalidRequest(
            "attachment",
            f"{label}: {width}x{height} pixels, over the {cap:,} a picture may have "
            "(GATECELL_IMAGE_MAX_PIXELS)",
        )
    image.load()
    return image


def opened(data: bytes, label: str, side: int | None = None) -> PILImage:
    """Picture bytes from outside, decoded within `pixel_cap` (see `_within_pixels`; ``side``:
    about the size wanted, for a thumbnail); a picture over the cap, or bytes Pillow cannot
    read, is one `InvalidRequest` line naming ``label``."""
    from PIL import Image

    with _untrusted(label):
        return _within_pixels(Image.open(io.BytesIO(data)), label, side)


def _from_bytes(data: bytes, source: str, name: str | None = None) -> Attachment:
    """Picture bytes, kept as they are when they fit the limits (only their header read);
    else decoded within the pixel cap and encoded again."""
    from PIL import Image

    label = name or source
    with _untrusted(label):
        image = Image.open(io.BytesIO(data))
        width, height = image.size
        max_side, max_bytes = _limits()
        media_type = sniff(data) or Image.MIME.get(image.format or "", "image/png")
        if max(width, height) <= max_side and len(data) <= max_bytes and media_type in _KEPT:
            fmt = image.format or media_type.rpartition("/")[2].upper()
            return Attachment(
                "image",
                media_type,
                data,
                name=name,
                width=width,
                height=height,
                description=f"{fmt} {width}x{height}, {size_text(len(data))}",
                source=source,
            )
        return _encode(_within_pixels(image, label), source, name, (width, height))


_KEPT = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def _other_picture(data: bytes, name: str | None) -> Attachment | None:
    """A picture in another format Pillow reads (TIFF, BMP...), sent as PNG or JPEG; None
    when Pillow does not take the bytes for a picture at all."""
    from PIL import Image

    try:
        image = Image.open(io.BytesIO(data))
    except Exception:  # no picture Pillow knows: the caller says what the file is not
        return None
    label, size = name or "the file", image.size
    with _untrusted(label):
        return _encode(_within_pixels(image, label), f"file {name}" if name else "bytes", name, size)


def _encode(
    image: PILImage, source: str, name: str | None = None, original: tuple[int, int] | None = None
) -> Attachment:
    """A picture as PNG (JPEG for a large photo), downscaled to fit the limits; ``original``
    is its size before a reduced decoding (`_within_pixels`)."""
    from PIL import Image, ImageOps

    max_side, max_bytes = _limits()
    original = original or image.size
    image = ImageOps.exif_transpose(image) or image
    if image.mode not in ("1", "L", "LA", "P", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    if max(image.size) > max_side:
        image = image.copy()
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    photo = _is_photo(image)
    data = _saved(image, photo)
    while len(data) > max_bytes and min(image.size) > 1:
        scale = max(0.1, min(0.9, (max_bytes / len(data)) ** 0.5 * 0.95))
        smaller = (max(1, int(image.size[0] * scale)), max(1, int(image.size[1] * scale)))
        image = image.resize(smaller, Image.Resampling.LANCZOS)
        data = _saved(image, photo)
    width, height = image.size
    fmt = "JPEG" if photo else "PNG"
    note = f" (downscaled from {original[0]}x{original[1]})" if image.size != original else ""
    return Attachment(
        "image",
        f"image/{fmt.lower()}",
        data,
        name=name,
        width=width,
        height=height,
        description=f"{fmt} {width}x{height}, {size_text(len(data))}{note}",
        source=source,
    )


def _is_photo(image: PILImage) -> bool:
    """Large, without transparency, and with many colours: JPEG carries it far smaller."""
    if image.size[0] * image.size[1] <= PHOTO_PIXELS or image.mode not in ("RGB", "L"):
        return False
    return image.getcolors(maxcolors=_PHOTO_COLOURS) is None


def _saved(image: PILImage, photo: bool) -> bytes:
    buffer = io.BytesIO()
    if photo:
        image.save(buffer, format="JPEG", quality=_JPEG_QUALITY, optimize=True)
    else:
        image.save(buffer, format="PNG", optimize=image.size[0] * image.size[1] <= PHOTO_PIXELS)
    return buffer.getvalue()


def of_bytes(data: bytes, media_type: str | None, *, name: str | None = None) -> Attachment:
    """Bytes that arrived as a content part (a data URL, a base64 field), as they are: never
    encoded again, nor decoded (so no picture library is needed: the log's writer reads
    parts with it). The type is the bytes' own when they begin like a picture."""
    media_type = sniff(data) or media_type or "application/octet-stream"
    kind: Kind = "image" if media_type.startswith("image/") else "document"
    what = "PDF" if media_type == "application/pdf" else media_type.rpartition("/")[2].upper()
    return Attachment(
        kind,
        media_type,
        data,
        name=name,
        description=f"{what} {name + ', ' if name else ''}{size_text(len(data))}",
        source="content part",
    )
