"""Showing what a gateway sends back: live Markdown, media, provenance, job progress.

The pieces are small and public so that the widgets can reuse them:

- `LiveMarkdown` renders a streaming reply through ONE display updated in place. Updates
  are coalesced by time: a Jupyter server silently drops iopub messages above 1,000/s,
  so a 20,000-token stream must not become 20,000 updates. The final render always holds
  the complete text. In a terminal the fragments go straight to stdout.
- `media_bundle` / `show_media` embed images and audio as base64 in the output itself,
  so a saved notebook shows them offline; a video is embedded up to a size limit, else
  saved next to the notebook and shown from the file.
- `provenance` / `footer_text` describe where an output came from (model, endpoint,
  latency, usage, request id). It travels in the display metadata of every output under
  the key ``"gatecell"``; never a header, never the key: every string in it is redacted
  (`gatecell.wire.util.secret.redact_data`), as a gateway chose the model name and request id.
- `JobProgress` is a progress bar for jobs: an ipywidgets bar in a kernel, text elsewhere.

Nothing a gateway sends reaches HTML as it came: text goes through
`gatecell.notebook.markdown` (Markdown rendered here, then sanitised), a media type
through `media_type` (a known type or a download), a file name through `safe_name`, and
every other string (ids, errors, footers) through ``html.escape``.
"""

from __future__ import annotations

import base64
import html
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import IO, Any

from IPython.display import display

from .markdown import MUTED, NOT_MATH, escape, to_html

__all__ = [
    "rich_output",
    "provenance",
    "footer_text",
    "limit_note",
    "LiveMarkdown",
    "SHOWN",
    "DOWNLOAD",
    "media_type",
    "safe_name",
    "media_bundle",
    "show_media",
    "show_markdown",
    "show_prompt",
    "show_note",
    "attachment_html",
    "show_table",
    "JobProgress",
]


def rich_output(mode: str = "auto") -> bool:
    """True when outputs go to a frontend that renders displays (a kernel), not a terminal."""
    if mode != "auto":
        return mode == "rich"
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


# -- provenance --------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Usage may be a pydantic model, a dict or None; metadata must be plain JSON."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def provenance(meta: Any = None, **extra: Any) -> dict[str, Any]:
    """Model, endpoint, latency (s), usage, request id and, when known, cost (US dollars) and
    its source of a response, as plain JSON, and ``"cached": true`` for an answer from the log.

    ``meta`` is the client's ResponseMeta (or anything with those attributes, or None);
    ``extra`` fills or overrides fields (``model=...``, ``job_id=...``). Empty fields are
    left out.
    """
    prov: dict[str, Any] = {}
    for field in ("model", "endpoint", "latency", "usage", "request_id", "cost", "cost_source"):
        value = getattr(meta, field, None)
        if field == "latency" and isinstance(value, (int, float)):
            value = round(float(value), 3)
        prov[field] = _plain(value)
    if getattr(meta, "cached", False) is True:  # answered from the log: no request was sent
        prov["cached"] = True
    prov.update({k: _plain(v) for k, v in extra.items()})
    from gatecell.wire.util.secret import redact_data

    return redact_data({k: v for k, v in prov.items() if v not in (None, "", {})})


def _tokens(usage: Any) -> str:
    if not isinstance(usage, dict):
        return ""
    inp = usage.get("prompt_tokens", usage.get("input_tokens"))
    out = usage.get("completion_tokens", usage.get("output_tokens"))
    if inp is None and out is None:
        total = usage.get("total_tokens")
        return f"{total} tokens" if total is not None else ""
    return f"{inp or 0} in / {out or 0} out tokens"


def footer_text(prov: dict[str, Any]) -> str:
    """One line: ``local-chat · /v1/chat/completions · 0.42 s · 12 in / 80 out tokens ·
    $0.00042 (gateway) · request id · 2 placeholders filled``."""
    parts = [prov.get("model"), prov.get("endpoint")]
    if isinstance(prov.get("latency"), (int, float)):
        parts.append(f"{prov['latency']:.2f} s")
    parts.append(_tokens(prov.get("usage")))
    cost = prov.get("cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        dollars = f"{cost:.6f}".rstrip("0").rstrip(".")
        parts.append(f"${dollars} ({prov['cost_source']})" if prov.get("cost_source") else f"${dollars}")
    if prov.get("request_id"):
        parts.append(f"request {prov['request_id']}")
    if prov.get("placeholders"):
        count = prov["placeholders"]
        parts.append(f"{count} placeholder{'s' if count != 1 else ''} filled")
    if prov.get("cached"):
        parts.append("cached")
    return " · ".join(str(p) for p in parts if p)


def limit_note(result: Any) -> str | None:
    """ "cut at the token limit (finish reason: length)" when a reply (a stream, a chat
    completion, a native reply) says it stopped at its max tokens; else None."""
    from gatecell.wire.transport.results import cut_by_limit, reply_finish

    reason = getattr(result, "finish_reason", None)  # a stream
    if reason is None and getattr(result, "choices", None):
        reason = getattr(result.choices[0], "finish_reason", None)
    if reason is None:
        reason = reply_finish(getattr(result, "raw", None))
    return f"cut at the token limit (finish reason: {reason})" if cut_by_limit(reason) else None


def _meta(prov: dict[str, Any] | None) -> dict[str, Any]:
    return {"gatecell": prov} if prov else {}


# -- live markdown -----------------------------------------------------------------------


class LiveMarkdown:
    """A streaming reply rendered as Markdown in one display that is updated in place.

    Call `append` with each fragment and `finish` once. Each render is sanitised HTML
    (see `gatecell.notebook.markdown`) plus the raw text as ``text/plain``; never
    ``text/markdown``, which JupyterLab would render itself, unsanitised. Between two
    renders at least ``interval`` seconds pass, plus 1 ms per 1,000 characters already
    shown (long replies re-send their text less often), and never less than five times
    what the last render cost, so rendering takes at most a fifth of the time whatever
    the length; `finish` always renders the complete text. With ``rich=False`` (a
    terminal) fragments are written to ``out`` as they arrive. ``updates`` counts the
    display messages sent, for tests and benchmarks.
    """

    def __init__(
        self, *, rich: bool | None = None, interval: float = 0.1, out: IO[str] | None = None
    ) -> None:
        self.rich = rich_output() if rich is None else rich
        self.interval = interval
        self.text = ""
        self.updates = 0
        self._out = out
        self._handle: Any = None
        self._shown = 0  # characters rendered (rich) or written (text)
        self._last = float("-inf")
        self._cost = 0.0  # seconds the last render took

    def append(self, fragment: str) -> None:
        if not fragment:
            return
        self.text += fragment
        if not self.rich:
            self._write(fragment)
            return
        now = time.monotonic()
        if now - self._last >= max(self.interval + len(self.text) / 1_000_000, 5 * self._cost):
            self._render(self.text, {})
            self._last = now
            self._cost = time.monotonic() - now

    def finish(
        self,
        text: str | None = None,
        *,
        prov: dict[str, Any] | None = None,
        footer: bool = False,
        note: str | None = None,
        aside: tuple[str, str] | None = None,
    ) -> None:
        """Render the complete ``text`` (default: what was appended), then a note in italics,
        an ``aside`` (title, body) folded away (a reasoning summary, say) and the footer."""
        if text is not None:
            self.text = text
        tail: list[tuple[str, str]] = []  # (html, plain) of each line under the text
        if note:
            tail.append((f'<p class="{NOT_MATH}"><em>{html.escape(note)}</em></p>', note))
        if aside:
            title, body = aside
            summary = f"<details><summary>{html.escape(title)}</summary>{to_html(body)}</details>"
            tail.append((summary, f"{title}: {body}"))
        if footer and prov:
            tail.append(_footer(prov))
        if self.rich:
            self._render(self.text, _meta(prov), tail)
            return
        self._write(self.text[self._shown :])
        end = "" if not self.text or self.text.endswith("\n") else "\n"
        self._write(end + "".join(f"{plain}\n" for _, plain in tail))

    def _render(self, text: str, metadata: dict[str, Any], tail: Sequence[tuple[str, str]] = ()) -> None:
        bundle = {
            "text/html": to_html(text) + "".join(h for h, _ in tail),
            "text/plain": "\n\n".join(t for t in [text, *(p for _, p in tail)] if t),
        }
        if self._handle is None:
            self._handle = display(bundle, raw=True, metadata=metadata, display_id=True)
        else:
            self._handle.update(bundle, raw=True, metadata=metadata)
        self.updates += 1

    def _write(self, text: str) -> None:
        if text:
            from gatecell.wire.util._terminal import printable

            out = self._out or sys.stdout
            out.write(printable(text))  # a terminal: control sequences escaped, never obeyed
            out.flush()
        self._shown = len(self.text)


def _muted(line: str, kind: str = "") -> str:
    return f'<div class="{kind}{NOT_MATH}" style="color:{MUTED}"><sub>{html.escape(line)}</sub></div>'


def _footer(prov: dict[str, Any]) -> tuple[str, str]:
    line = footer_text(prov)
    return _muted(line, "gatecell-footer "), f"-- {line}"


def show_note(line: str) -> None:
    """One muted line in the output (a frontend's, or plain text in a terminal)."""
    display({"text/html": _muted(line), "text/plain": line}, raw=True)


def show_markdown(markdown: str, *, prov: dict[str, Any] | None = None, footer: bool = False) -> None:
    """Show a finished Markdown text once (non-streamed replies, notes, history), sanitised.

    A gateway's strings inside Markdown that gatecell composes go through
    `gatecell.notebook.markdown.escape` first, so that they read as written.
    """
    live = LiveMarkdown(rich=True)
    live.finish(markdown, prov=prov, footer=footer)


THUMBNAIL = 160
"""The largest side of a picture's thumbnail in ``--show-prompt``, in pixels."""


def show_prompt(content: Any, *, filled: Sequence[str] = ()) -> None:
    """The prompt as sent (``--show-prompt``): its text fenced (a plain prompt as Markdown,
    through `show_markdown`), headed by the placeholders ``filled`` in it; each picture as a
    thumbnail made here from its own bytes (a small PNG in a data URL: never the picture's
    base64), with its format, dimensions and size; each file and URL by name and size."""
    from gatecell.wire.apis.conversation import content_text
    from gatecell.wire.util._text import fence

    items = [content] if isinstance(content, str) else list(content)
    texts = [item for item in items if isinstance(item, str)]
    others = [item for item in items if not isinstance(item, str)]
    chars = sum(len(t) for t in texts)
    counted = f"{chars:,} characters" + (
        f", {len(others)} attachment{'s' if len(others) != 1 else ''}" if others else ""
    )
    names = ", ".join(filled)
    if isinstance(content, str):
        named = f"; filled {escape(names)}" if names else ""
        show_markdown(f"*prompt sent ({counted}{named}):*\n\n{fence(content, 'text')}")
        return
    if names:
        counted += f"; filled {names}"
    parts = [f"<p><em>prompt sent ({html.escape(counted)}):</em></p>"]
    for item in items:
        if isinstance(item, str):
            parts.append(to_html(fence(item, "text")))
        elif item.kind == "text" and item.text:
            parts.append(f"<p><sub>{html.escape(item.description)}</sub></p>" + to_html(item.text))
        else:
            parts.append(attachment_html(item))
    plain = f"prompt sent ({counted}):\n{content_text(content)}"
    display({"text/html": "".join(parts), "text/plain": plain}, raw=True)


def attachment_html(item: Any, side: int = THUMBNAIL) -> str:
    """A picture as a thumbnail at most ``side`` pixels a side, with its caption; a document
    or a URL as a chip with its name and size. The thumbnail is a PNG made here from the
    picture's own bytes (never the bytes as they came); every word is escaped. For
    ``--show-prompt`` and the chat panel's transcript."""
    caption = item.description
    if item.name and item.name not in caption:
        caption = f"{item.name} · {caption}"
    caption = html.escape(caption)
    if item.url is not None:
        return _chip(f"{caption} (passed on to the gateway, not fetched here)")
    thumbnail = _thumbnail(item.data, side) if item.kind == "image" and item.data else None
    if thumbnail is None:
        return _chip(caption)
    data, width, height = thumbnail
    return (
        '<figure class="gatecell-thumbnail" style="display:inline-block;margin:4px 8px 4px 0">'
        f'<img src="{_data_uri(data, "image/png")}" width="{width}" height="{height}" alt="{caption}"/>'
        f"<figcaption><sub>{caption}</sub></figcaption></figure>"
    )


def _chip(text: str) -> str:
    style = (
        "display:inline-block;margin:4px 8px 4px 0;padding:1px 8px;border-radius:10px;"
        "border:1px solid rgba(127,127,127,.4)"
    )
    return f'<span class="gatecell-chip" style="{style}"><sub>{text}</sub></span>'


def _thumbnail(data: bytes, side: int) -> tuple[bytes, int, int] | None:
    """A PNG at most ``side`` pixels a side of a picture's bytes, decoded within the pixel
    cap (`attachments.opened`); None when it is over it or Pillow cannot read it."""
    import io

    from gatecell.wire.apis.attachments import opened
    from gatecell.wire.transport.errors import InvalidRequest

    try:
        image = opened(data, "the picture", side)
        image.thumbnail((side, side))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
    except (InvalidRequest, OSError, ValueError):  # OSError: a mode PNG cannot hold (CMYK)
        return None
    return buffer.getvalue(), image.size[0], image.size[1]


def show_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, note: str = "") -> None:
    """A table of values a gateway or the user chose (model ids, settings), each cell shown
    as written: HTML for frontends, aligned columns as ``text/plain``; text columns to the
    left, columns of numbers to the right. ``note`` is Markdown."""
    table = [list(headers), *([str(cell) for cell in row] for row in rows)]
    numeric = [
        bool(table[1:]) and all(_NUMBER.fullmatch(row[i]) for row in table[1:]) for i in range(len(headers))
    ]
    markdown = "\n".join(
        [_row(escape(h) for h in headers), _row("---:" if n else ":---" for n in numeric)]
        + [_row(escape(cell) for cell in row) for row in table[1:]]
    )
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    plain = [
        "  ".join(
            cell.rjust(w) if n else cell.ljust(w) for cell, w, n in zip(row, widths, numeric, strict=True)
        ).rstrip()
        for row in table
    ]
    if note:
        markdown += f"\n\n{note}"
        plain += ["", note]
    display({"text/html": to_html(markdown), "text/plain": "\n".join(plain)}, raw=True)


# A cell that reads as a number (a count, tokens, a price, a share): or empty, or a dash
_NUMBER = re.compile(r"|-|[-+]?[$€£]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?\s*(?:%|s|ms|[kKMG]B?)?", re.I)


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


# -- media -------------------------------------------------------------------------------

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_MEDIA_TYPE = re.compile(rf"{_TOKEN}/{_TOKEN}")  # RFC 9110 §8.3.1, without parameters

SHOWN = frozenset(
    {
        *("image/png", "image/jpeg", "image/gif", "image/webp"),
        *("audio/wav", "audio/x-wav", "audio/wave", "audio/mpeg", "audio/ogg", "audio/flac"),
        *("audio/aac", "audio/webm", "audio/mp4"),
        *("video/mp4", "video/webm", "video/ogg"),
    }
)
"""The media types the display embeds in HTML; anything else is offered as a download."""

DOWNLOAD = "application/octet-stream"


def media_type(data: bytes, declared: str | None = None) -> str:
    """The media type to show ``data`` as: from its first bytes (headers of gateways lie),
    else ``declared`` when it is a plain ``type/subtype`` token pair (RFC 9110; parameters
    dropped) of `SHOWN`, else `DOWNLOAD`. Only these three ever reach HTML."""
    from gatecell.wire.transport.results import sniff

    found = sniff(data)
    if found:
        return found[1]
    mime = (declared or "").split(";", 1)[0].strip().lower()
    return mime if _MEDIA_TYPE.fullmatch(mime) and mime in SHOWN else DOWNLOAD


_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, fallback: str = "media") -> str:
    """A file name that stays in its folder whatever a gateway put in ``name`` (a job id,
    say): letters, digits, ``.``, ``-`` and ``_`` only, no leading dot, 100 characters at most."""
    return _SAFE_NAME.sub("_", name).lstrip(".")[:100] or fallback


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{max(1, round(n / 1000))} kB"


def _data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _extension(mime: str) -> str:
    if mime == DOWNLOAD:
        return "bin"
    sub = mime.split("/", 1)[-1]
    return {"mpeg": "mp3", "jpeg": "jpg", "x-wav": "wav", "wave": "wav"}.get(sub, sub)


def media_bundle(
    data: bytes,
    mime: str | None = None,
    *,
    autoplay: bool = False,
    embed_limit: int = 20_000_000,
    media_dir: str = "gatecell-media",
    name: str = "media",
) -> dict[str, Any]:
    """A display bundle for image, audio or video bytes, embedded as base64.

    The type comes from `media_type`: ``mime`` is only a hint. A picture is shown at its
    natural size up to `PICTURE_SIDE` pixels wide (`_picture_bundle`: a bigger one is shown
    at that width, and a click shows it full size); PNG, JPEG and GIF within it use their own
    mime type (every frontend renders them);
    audio and video are HTML5 players with a data URI; anything else is a download link.
    A video or download above ``embed_limit`` bytes is written to
    ``media_dir/<safe_name(name)>.ext`` and the output points at that file.
    ``text/plain`` always says what it is, for terminals.
    """
    mime = media_type(data, mime)
    kind = mime.split("/", 1)[0]
    plain = f"<{mime}, {_size(len(data))}>"
    if kind == "image":
        return _picture_bundle(data, mime, plain)
    auto = " autoplay" if autoplay else ""
    if kind == "audio":
        player = f'<audio controls{auto} src="{_data_uri(data, mime)}"></audio>'
        return {"text/html": player, "text/plain": plain}
    file_name = f"{safe_name(name)}.{_extension(mime)}"
    if len(data) <= embed_limit:
        src = _data_uri(data, mime)
    else:
        os.makedirs(media_dir, exist_ok=True)
        path = os.path.join(media_dir, file_name)
        with open(path, "wb") as fh:
            fh.write(data)
        plain = f"<{mime}, {_size(len(data))}, saved to {path}>"
        src = urllib.parse.quote(path.replace(os.sep, "/"))
    src = html.escape(src)
    if kind == "video":
        return {"text/html": f'<video controls{auto} src="{src}"></video>', "text/plain": plain}
    link = f'<a download="{file_name}" href="{src}">download {file_name}</a> ({_size(len(data))})'
    return {"text/html": link, "text/plain": plain}


PICTURE_SIDE = 512
"""The widest a picture is shown in an output, in CSS pixels; a click shows a wider one whole."""

# A <details> whose summary is the picture: opening it (a click, or Enter) lets the picture
# take its natural width; no script, and one copy of the bytes.
_PICTURE_CSS = (
    "<style>details.gatecell-picture>summary{list-style:none;display:block;cursor:zoom-in}"
    "details.gatecell-picture>summary::-webkit-details-marker{display:none}"
    "details.gatecell-picture[open]>summary{cursor:zoom-out}"
    "details.gatecell-picture[open] img{width:auto;max-width:none}</style>"
)


def _picture_bundle(data: bytes, mime: str, plain: str) -> dict[str, Any]:
    """A picture at its natural size, or `PICTURE_SIDE` wide with a click to see it whole."""
    size = _dimensions(data)
    if (size is None or size[0] <= PICTURE_SIDE) and mime in ("image/png", "image/jpeg", "image/gif"):
        return {mime: base64.b64encode(data).decode("ascii"), "text/plain": plain}
    if size is None or size[0] <= PICTURE_SIDE:
        return {"text/html": f'<img src="{_data_uri(data, mime)}"/>', "text/plain": plain}
    width, height = size
    shown = f'width="{PICTURE_SIDE}" height="{round(height * PICTURE_SIDE / width)}"'
    title = f"{width} x {height}: click for full size"
    picture = f'<img src="{_data_uri(data, mime)}" {shown} alt="{title}"/>'
    return {
        "text/html": f'{_PICTURE_CSS}<details class="gatecell-picture"><summary title="{title}">'
        f"{picture}</summary></details>",
        "text/plain": plain,
    }


def _dimensions(data: bytes) -> tuple[int, int] | None:
    """A picture's width and height from its header (nothing decoded); None when unreadable."""
    import io

    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return None


def show_media(
    data: bytes,
    mime: str | None = None,
    *,
    prov: dict[str, Any] | None = None,
    footer: bool = False,
    **bundle_options: Any,
) -> None:
    """Display media bytes (see `media_bundle`) with provenance metadata and an optional footer."""
    display(media_bundle(data, mime, **bundle_options), raw=True, metadata=_meta(prov))
    if footer and prov:
        line_html, line = _footer(prov)
        display({"text/html": line_html, "text/plain": line}, raw=True, metadata=_meta(prov))


# -- progress ----------------------------------------------------------------------------


class JobProgress:
    """Progress of a job: an ipywidgets bar in a kernel, one text line per change elsewhere.

    ``update(percent, status)`` takes a 0..100 value (None while unknown);
    ``close(status)`` shows the last state.
    """

    def __init__(self, label: str, *, rich: bool | None = None, out: IO[str] | None = None) -> None:
        self.label = label
        self._out = out
        self._last: tuple[Any, ...] | None = None
        self._bar: Any = None
        if rich_output() if rich is None else rich:
            try:
                import ipywidgets as w
            except ImportError:  # a kernel without ipywidgets: text it is
                pass
            else:
                self._bar = w.FloatProgress(value=0, min=0, max=100, description=label)
                self._status = w.Label("queued")
                display(w.HBox([self._bar, self._status]))

    def update(self, percent: float | None, status: str) -> None:
        if self._bar is not None:
            if percent is not None:
                self._bar.value = max(0.0, min(100.0, float(percent)))
            self._status.value = status if percent is None else f"{status} {percent:.0f}%"
            return
        state = (status, None if percent is None else int(percent))
        if state != self._last:
            self._last = state
            out = self._out or sys.stdout
            out.write(f"{self.label}: {status}" + ("" if percent is None else f" {percent:.0f}%") + "\n")
            out.flush()

    def close(self, status: str) -> None:
        self.update(100.0 if status == "succeeded" else None, status)
        if self._bar is not None:
            self._bar.bar_style = "success" if status == "succeeded" else "danger"
