"""What a magic returns as the cell's value: plain text or bytes that know how to show themselves.

A magic has already shown its result (live, while it streamed), and the cell's value
would show it a second time. So each value is created *quiet*: the display right after
the magic returns is skipped, and every later one (``reply`` in another cell) renders
normally. `settle()` runs after each cell and makes any value that was not displayed
(``r = %chat hi``) loud again. A value shows itself the way the magic did: sanitised
HTML, never Markdown a frontend would render unsanitised (see `markdown`).
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any

from IPython.display import display

from gatecell.wire.transport.results import Job

from .display import media_bundle
from .markdown import to_html

__all__ = ["Text", "MediaBytes", "ShownJob", "finished_job", "settle"]

_quiet: list[Any] = []


def settle() -> None:
    """After a cell: no value stays quiet beyond the display that follows its magic."""
    for value in _quiet:
        value._quiet = False
    _quiet.clear()


class _Shown:
    prov: dict[str, Any]
    _quiet = False

    def quiet(self) -> Any:
        self._quiet = True
        _quiet.append(self)
        return self

    def _ipython_display_(self) -> None:
        if self._quiet:
            self._quiet = False
            return
        display(self._bundle(), raw=True, metadata={"gatecell": self.prov} if self.prov else {})

    def _bundle(self) -> dict[str, Any]:
        raise NotImplementedError


class Text(_Shown, str):
    """A reply's text. ``.partial`` is True when the stream was cut or interrupted;
    ``.prov`` holds its provenance; ``.reasoning`` a reasoning summary if one came; a typed
    answer's value is ``.parsed`` (None when it did not validate: ``.parse_error`` says why);
    ``.tool_calls`` every call of a tool chain (``%%chat --tools``; empty otherwise)."""

    partial: bool
    reasoning: str | None
    parsed: Any
    parse_error: str | None
    tool_calls: Any = ()

    def __new__(
        cls,
        text: str,
        prov: dict[str, Any] | None = None,
        *,
        partial: bool = False,
        reasoning: str | None = None,
        parsed: Any = None,
        parse_error: str | None = None,
    ) -> Text:
        self = super().__new__(cls, text)
        self.prov = prov or {}
        self.partial = partial
        self.reasoning = reasoning
        self.parsed = parsed
        self.parse_error = parse_error
        return self

    def _bundle(self) -> dict[str, Any]:
        return {"text/html": to_html(self), "text/plain": str(self)}


class MediaBytes(_Shown, bytes):
    """Image, audio or video bytes; ``.mime`` says which, ``.prov`` where they came from.

    ``open(path, "wb").write(value)`` saves them; displaying the value embeds them.
    """

    mime: str

    def __new__(cls, data: bytes, mime: str, prov: dict[str, Any] | None = None) -> MediaBytes:
        self = super().__new__(cls, data)
        self.mime = mime
        self.prov = prov or {}
        return self

    def __repr__(self) -> str:
        return f"<{self.mime}, {len(self)} bytes>"

    def _bundle(self) -> dict[str, Any]:
        return media_bundle(bytes(self), self.mime)


class ShownJob(_Shown, Job):
    """A job as a magic returns it: the client's `Job`, shown as one line."""

    def _bundle(self) -> dict[str, Any]:
        line = f"{self.kind} job {self.id}: {self.status}"
        return {"text/plain": f"<{line}>", "text/html": f"<em>{html.escape(line)}</em>"}


def finished_job(job: Job) -> ShownJob:
    """``job`` as the cell's value, quiet like the other values."""
    shown = ShownJob(**{field.name: getattr(job, field.name) for field in dataclasses.fields(job)})
    shown.prov = {}
    return shown.quiet()
