"""What ``local-chat`` can honestly say about the pictures and documents it is sent.

It is not a vision model, so it measures instead of seeing, and says so: how many pictures,
their format, size and dimensions, their dominant colours (each pixel mapped to the nearest
colour of a small named palette with Pillow's ``quantize``, then counted), and whether a
picture looks like a chart or diagram (one plain background covering much of it, few
colours) or a photo (many colours, no plain background); a document's type and length (a
PDF's pages and text through pypdf, in a worker process under the budget of
`gatecell.wire.apis.pdf`, stopped when the request's client goes away). The same bytes always
give the same words. A picture over ``GATECELL_IMAGE_MAX_PIXELS`` is described from its
header only, never decoded, and one Pillow cannot read is said to be so: the client's cap
(`gatecell.wire.apis.attachments.pixel_cap`).

`read` turns a message's content (a string, or any API's parts: `wire.conversation.neutral`
reads them) into its text and its attachments. A part it cannot read (a bad data URL, bad
base64, a type it does not know) raises `Refused`, which the gateway answers with a 400 in
the endpoint's own format. A URL is never fetched: the gateway works offline.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from typing import Any

from gatecell.wire.apis.attachments import Attachment, opened, pixel_cap, size_text
from gatecell.wire.apis.conversation import neutral
from gatecell.wire.apis.pdf import PdfError, pdf_text
from gatecell.wire.transport.errors import InvalidRequest

from . import Refused
from ._stop import current

__all__ = ["read", "turns_of", "account", "PALETTE"]

# Named colours, as a person would name them; every pixel goes to the nearest one.
PALETTE: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("white", (255, 255, 255)),
    ("black", (0, 0, 0)),
    ("grey", (128, 128, 128)),
    ("light grey", (200, 200, 200)),
    ("red", (215, 40, 40)),
    ("orange", (250, 135, 20)),
    ("yellow", (240, 220, 50)),
    ("green", (45, 160, 60)),
    ("teal", (0, 150, 150)),
    ("blue", (35, 105, 200)),
    ("navy", (20, 30, 90)),
    ("purple", (130, 60, 170)),
    ("pink", (240, 140, 180)),
    ("brown", (140, 90, 45)),
    ("beige", (225, 205, 160)),
)
_SAMPLE = 1024  # pictures are measured on a copy at most this many pixels a side
# A tool chain's parts, where they belong (the model's calls, the user's results): read by
# `tool_calls`, not here; anywhere else they are refused as any unknown part.
_TOOL_PARTS = {"assistant": ("tool_use", "functionCall"), "user": ("tool_result", "functionResponse")}


def read(content: Any) -> tuple[str, list[Attachment]]:
    """The text of a message's content, each picture or document in it marked where it
    was (``[picture 1]``, ``[document 1]``), and those pictures and documents, in order."""
    if isinstance(content, str):
        return content, []
    if content is None:  # an assistant's turn of tool calls only
        return "", []
    if not isinstance(content, list):
        raise Refused(f"message content must be a string or a list of parts, got {type(content).__name__}")
    texts: list[str] = []
    found: list[Attachment] = []
    counts: Counter[str] = Counter()
    for i, part in enumerate(content):
        try:
            item = neutral(part, f"content.{i}")
        except InvalidRequest as exc:
            raise Refused(str(exc)) from None
        if isinstance(item, str):
            if item:
                texts.append(item)
        elif isinstance(item, Attachment):
            found.append(item)
            label = "picture" if item.kind == "image" else "document"
            counts[label] += 1
            texts.append(f"[{label} {counts[label]}]")
        else:
            kind = item.get("type") if isinstance(item, dict) else None
            raise Refused(
                f"content part {i}: local-chat reads text, pictures and documents, not {kind!r} parts"
                if kind
                else f"content part {i}: not a part local-chat can read"
            )
    return "\n".join(texts), found


def turns_of(messages: Sequence[tuple[str, Any]]) -> tuple[list[tuple[str, str]], list[list[Attachment]]]:
    """(role, content) pairs as the chat stand-in's turns (role, text) and, in step with
    them, each turn's pictures and documents."""
    turns, attached = [], []
    for role, content in messages:
        text, found = read(_without_tool_parts(role, content))
        turns.append((role, text))
        attached.append(found)
    return turns, attached


def _without_tool_parts(role: str, content: Any) -> Any:
    kinds = _TOOL_PARTS.get(role)
    if not kinds or not isinstance(content, list):
        return content
    return [
        p
        for p in content
        if not (isinstance(p, dict) and (p.get("type") in kinds or any(k in p for k in kinds)))
    ]


def account(pictures: Sequence[Attachment], *, earlier: bool = False) -> str:
    """A few lines on what was sent: a count, then one line per picture or document."""
    images = [a for a in pictures if a.kind == "image"]
    documents = [a for a in pictures if a.kind != "image"]
    counted = [
        f"{len(images)} picture{'s' if len(images) != 1 else ''}" if images else "",
        f"{len(documents)} document{'s' if len(documents) != 1 else ''}" if documents else "",
    ]
    when = "Earlier in this conversation you sent" if earlier else "I received"
    lines = [
        f"{when} {' and '.join(c for c in counted if c)}. I am local-chat, an offline stand-in: "
        "I measure pictures, I do not see them.",
        "",
    ]
    for i, picture in enumerate(images, 1):
        lines.append(f"- picture {i}: {_picture(picture)}")
    for i, document in enumerate(documents, 1):
        lines.append(f"- document {i}: {_document(document)}")
    return "\n".join(lines)


# -- pictures ---------------------------------------------------------------------------------------


def _picture(picture: Attachment) -> str:
    if picture.data is None:
        return f"by URL, {picture.url} (not fetched: this gateway works offline)"
    from PIL import Image

    fmt, size = (picture.media_type or "image").rpartition("/")[2].upper(), size_text(len(picture.data))
    head = f"{fmt}, {size}"
    try:
        width, height = Image.open(io.BytesIO(picture.data)).size
    except Exception:  # whatever Pillow raises on bytes from outside
        return f"{head}, which I could not decode as a picture"
    head = f"{fmt} {width}x{height}, {size}"
    if width * height > pixel_cap():  # described from its header only (GATECELL_IMAGE_MAX_PIXELS)
        return f"{head} (too large to measure: over {pixel_cap():,} pixels)"
    try:
        decoded = opened(picture.data, "it", _SAMPLE)  # JPEG decodes at a fraction of its size
        decoded.thumbnail((_SAMPLE, _SAMPLE), Image.Resampling.NEAREST)  # NEAREST keeps colours as they are
        image = decoded.convert("RGBA")
    except (InvalidRequest, OSError, ValueError):
        return f"{head}, which I could not decode as a picture"
    plain = Image.new("RGB", image.size, (255, 255, 255))
    plain.paste(image, mask=image.getchannel("A"))  # transparency reads as white paper
    return f"{head}; {_colours(plain)}; {_looks(plain)}"


def _palette_image() -> Any:
    from PIL import Image

    flat = [v for _, rgb in PALETTE for v in rgb]
    palette = Image.new("P", (1, 1))
    palette.putpalette(flat + flat[:3] * (256 - len(PALETTE)))  # the rest repeat the first colour
    return palette


def _colours(image: Any) -> str:
    """The named colour covering most of the picture, then those covering at least 5% of the
    rest (four at most: the lines of a chart on its white are few pixels), with their shares."""
    from PIL import Image

    mapped = image.quantize(palette=_palette_image(), dither=Image.Dither.NONE)
    counts: Counter[str] = Counter()
    for count, index in mapped.getcolors(256) or []:
        counts[PALETTE[index][0] if index < len(PALETTE) else PALETTE[0][0]] += count
    total = sum(counts.values())
    (top, most), *others = counts.most_common()
    left = total - most
    rest = [f"{name} ({_share(n / total)})" for name, n in others if n >= 0.05 * left][:4]
    words = f"mostly {top} ({_share(most / total)})"
    if rest:
        words += ", then " + (", ".join(rest[:-1]) + " and " + rest[-1] if len(rest) > 1 else rest[0])
    return words


def _share(share: float) -> str:
    return f"{share:.0%}" if share >= 0.01 else "under 1%"


def _looks(image: Any) -> str:
    """Chart or diagram, photo, or neither, from the exact colours of the sample."""
    pixels = image.size[0] * image.size[1]
    colours = sorted((n for n, _ in image.getcolors(pixels) or []), reverse=True)
    background = colours[0] / pixels if colours else 0.0
    covered, needed = 0, 0
    for n in colours:
        covered += n
        needed += 1
        if covered >= 0.9 * pixels:
            break
    if background >= 0.99:
        return "it is one plain colour"
    if background >= 0.35 and needed <= 16:
        few = "one colour covers" if needed == 1 else f"{needed} colours cover"
        return (
            f"it looks like a chart or a diagram (one plain background over {background:.0%} "
            f"of it; {few} 90%)"
        )
    if background < 0.2 and needed > 64:
        return f"it looks like a photo ({len(colours):,} colours in my sample, no plain background)"
    return f"it has {len(colours):,} colours in my sample; I cannot tell a chart from a photo here"


# -- documents ------------------------------------------------------------------------------------


def _document(document: Attachment) -> str:
    if document.data is None:
        return f"by URL, {document.url} (not fetched: this gateway works offline)"
    size = size_text(len(document.data))
    if document.media_type == "application/pdf" or document.data.startswith(b"%PDF-"):
        return _pdf(document.data, size)
    if (document.media_type or "").startswith("text/") or document.kind == "text":
        text = document.data.decode("utf-8", "replace")
        lines = text.count("\n") + 1
        return f"{document.media_type or 'text'}, {size}: {lines:,} lines, {len(text):,} characters"
    return f"{document.media_type or 'a file of unknown type'}, {size}"


def _pdf(data: bytes, size: str) -> str:
    """Pages and characters, counted under the budget of `gatecell.wire.apis.pdf` (which says when
    it stopped early) and given up once the request's client has gone; a PDF pypdf cannot
    read is `Refused` (a 400: the same bytes would fail again)."""
    try:
        found = pdf_text(data, stop=current())
    except PdfError as exc:
        raise Refused(f"a PDF of {size}: {exc.message}") from None
    if found.pages is None:
        return f"PDF, {size}: {found.stopped}"
    counted = f"{found.chars:,} characters of text" + (f" ({found.stopped})" if found.stopped else "")
    return f"PDF, {size}: {found.pages} page{'s' if found.pages != 1 else ''}, {counted}"
