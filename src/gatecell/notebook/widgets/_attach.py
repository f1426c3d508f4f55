"""Files a user attaches in a panel, and a turn's pictures and documents in a transcript.

The files come from the browser through an ipywidgets ``FileUpload``: their bytes travel in
the widget's comm message, and their names are data (shown escaped, used for the file's type
and label, never opened as a path). Each file becomes an `Attachment` through
`gatecell.wire.apis.attachments.from_data`, as ``--file`` and ``--image`` make theirs: a picture
encoded once (downscaled past ``GATECELL_IMAGE_MAX_SIDE`` or ``GATECELL_IMAGE_MAX_BYTES``), a
PDF as a document, a text file fenced. A file over ``GATECELL_FILE_MAX_BYTES``, a picture
over ``GATECELL_IMAGE_MAX_PIXELS`` (refused from its header, before it is decoded), or a file
with no form a prompt can hold, is refused in one line. That work (Pillow may decode and shrink a
large photo) runs in a thread of its own, so the kernel keeps answering meanwhile.

A file waits for the next message as a thumbnail (a picture) or a chip (a document) with a
Remove button. `content_html` shows a turn in a transcript the same way: its text as typed,
its pictures as thumbnails made from their own bytes, its documents as chips.
"""

from __future__ import annotations

import datetime
import functools
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

import ipywidgets as widgets

from ._base import Panel, button, panel_error, start_thread, text_html

__all__ = ["Attachments", "content_html", "upload_limit"]

_NAME_CHARS = 120  # of a file name shown and sent; a name is a label, not a payload


class Attachments:
    """The attach button of a panel and the files waiting to go with its next message.

    ``upload`` (the button) and ``row`` (the files waiting, each with a Remove button) are
    the widgets a panel places. The files come through the button's value, or (in a panel with
    a `keyed` listener, which opens the chooser itself) through `receive`; `too_big` says
    why files over ``limit`` bytes did not. `take` hands the files to a message, `put_back` returns
    them when the message is taken back.

    **Parameters:**

    * **panel** - the panel whose status line says what was attached, or why a file was not.
    * **on_change** - called when files start or stop being read (from any thread).
    """

    def __init__(self, panel: Panel, on_change: Callable[[], None]) -> None:
        from gatecell.wire.apis.attachments import FILE_SUFFIXES

        self._panel = panel
        self._on_change = on_change
        self._lock = threading.Lock()
        self._items: list[Any] = []  # Attachment values, in the order they were attached
        self._readers: list[threading.Thread] = []
        self._unread = 0  # uploads whose files are still being read
        self._showing = threading.Lock()  # one update of the row at a time, each from the latest items
        self._shown: dict[int, tuple[Any, widgets.Widget]] = {}  # id(item) -> (item, its widget)
        self.accept = ",".join(["image/*", *sorted(FILE_SUFFIXES)])
        self.limit = upload_limit()
        """The most bytes the browser sends at once (`upload_limit`)."""
        self.upload = widgets.FileUpload(
            accept=self.accept, multiple=True, description="Attach", icon="paperclip", tooltip="attach files"
        ).add_class("gatecell-attach")
        self.upload.observe(self._uploaded, "value")
        self.row = widgets.HBox(layout=widgets.Layout(flex_flow="row wrap")).add_class("gatecell-attachments")

    def too_big(self, files: list[tuple[str, int]]) -> None:
        """Files picked in the browser, by name and size, too big to come: over the Jupyter
        server's websocket message limit, which drops such a message without a word. The
        status says so, and how to raise the limit."""
        over = [(name, size) for name, size in files if size > self.limit]
        name, size = over[0] if over else (f"{_count(len(files))} together", sum(s for _, s in files))
        self._panel.show_error(
            f"not attached: {_file_name(name) or 'a file'} ({_megabytes(size)}) is over the Jupyter "
            f"server's websocket message limit ({_megabytes(self.limit)}), so the browser cannot send it; "
            "raise it (jupyter lab --ServerApp.tornado_settings=\"{'websocket_max_message_size': "
            '104857600}", voila --Voila.tornado_settings=...) and set GATECELL_UPLOAD_MAX_BYTES to match'
        )

    @property
    def items(self) -> tuple[Any, ...]:
        """The files waiting for the next message, as `Attachment` values."""
        with self._lock:
            return tuple(self._items)

    @property
    def reading(self) -> bool:
        """Whether files the browser sent are still being read."""
        with self._lock:
            return self._unread > 0

    def take(self) -> list[Any]:
        """The files waiting, for a message that goes now; none wait afterwards."""
        with self._lock:
            found, self._items = self._items, []
        self._show()
        return found

    def put_back(self, items: Iterable[Any]) -> None:
        """Return the files of a message taken back, ahead of any attached since."""
        with self._lock:
            self._items[:0] = list(items)
        self._show()

    def remove(self, item: Any) -> None:
        """Let a file wait no more (its Remove button); the status says what still waits."""
        with self._lock:
            self._items = [i for i in self._items if i is not item]
            left = len(self._items)
        self._show()
        self._panel.show_info(_waiting_line(left) if left else "nothing attached")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the files the browser sent are read (for scripts and tests)."""
        with self._lock:
            readers = list(self._readers)
        for reader in readers:
            reader.join(timeout)
        return not self.reading

    def _uploaded(self, change: dict[str, Any]) -> None:
        # Runs in the kernel's message handler: take the files and return at once. The button's
        # value becomes the files waiting, without their bytes (`_show`): the button counts
        # them, and the same file can be attached again.
        files = [(f.get("name"), f.get("content")) for f in change["new"] if f.get("type") != _WAITING]
        if files:
            self.upload.value = ()
            self.receive(files)

    def receive(self, files: list[tuple[Any, Any]]) -> None:
        """Files from the browser, as (name, bytes): read in a thread of their own."""
        if not files:
            return
        self._panel.show_info(f"reading {_count(len(files))}…")
        with self._lock:
            self._unread += 1
            self._readers = [t for t in self._readers if t.is_alive()]
            self._readers.append(start_thread(lambda: self._read(files), "attach"))
        self._on_change()

    def _read(self, files: list[tuple[Any, Any]]) -> None:
        from gatecell.wire.apis.attachments import from_data
        from gatecell.wire.transport.errors import InvalidRequest

        refused: list[str] = []
        read = 0
        try:
            for name, content in files:
                label = _file_name(name)
                try:
                    item = from_data(bytes(content or b""), name=label)
                except InvalidRequest as exc:
                    refused.append(exc.message)
                    continue
                except Exception as err:  # said in the panel; a thread has nobody to raise to
                    refused.append(f"{label or 'a file'}: {panel_error(err)}")
                    continue
                with self._lock:
                    self._items.append(item)
                read += 1
        finally:
            with self._lock:
                self._unread -= 1
            self._show()
            if refused:
                more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
                self._panel.show_error(f"not attached: {refused[0]}{more}")
            else:
                self._panel.show_info(_waiting_line(read))
            self._on_change()

    def _show(self) -> None:
        """The row shows the files waiting (a file's thumbnail is made once), and the button
        counts them: its value lists them by name and size, with no bytes."""
        with self._showing:
            with self._lock:
                items = list(self._items)
            shown = {id(item): self._shown.get(id(item)) or (item, self._waiting(item)) for item in items}
            self._shown = shown
            self.row.children = tuple(widget for _, widget in shown.values())
            self.upload.value = tuple(_placeholder(item) for item in items)

    def _waiting(self, item: Any) -> widgets.Widget:
        from gatecell.notebook.display import attachment_html

        remove = button("Remove", "gatecell-attachment-remove", functools.partial(self.remove, item))
        remove.tooltip = f"do not send {item.name or item.description}"
        remove.layout.width = "auto"
        return widgets.HBox(
            [widgets.HTML(attachment_html(item)), remove],
            layout=widgets.Layout(align_items="center", margin="0 12px 0 0"),
        ).add_class("gatecell-attachment")


def upload_limit() -> int:
    """The most bytes the browser sends at once: a Jupyter server's websocket message limit,
    10 MiB unless raised (``GATECELL_UPLOAD_MAX_BYTES``)."""
    from gatecell.wire.transport.settings import env_number

    return env_number(None, "GATECELL_UPLOAD_MAX_BYTES", 10 * 2**20)


def _megabytes(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def _count(n: int) -> str:
    return f"{n} file{'s' if n != 1 else ''}"


def _waiting_line(n: int) -> str:
    return f"{_count(n)} attached: {'it goes' if n == 1 else 'they go'} with the next message"


_WAITING = "application/x-gatecell-waiting"  # the type of a file the button lists as waiting
_EPOCH = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)


def _placeholder(item: Any) -> dict[str, Any]:
    """A file waiting, as the button's value lists it: its name and size, no bytes."""
    size = len(item.data) if item.data else 0
    return {
        "name": item.name or item.description,
        "type": _WAITING,
        "size": size,
        "content": b"",
        "last_modified": _EPOCH,
    }


def _file_name(name: Any) -> str | None:
    """A file name as the browser gave it, made a plain label: its last path segment, no
    control characters, at most `_NAME_CHARS` characters (the suffix kept)."""
    if not isinstance(name, str):
        return None
    name = re.sub(r"[\x00-\x1f\x7f]", "", name.replace("\\", "/").rsplit("/", 1)[-1]).strip()
    if len(name) > _NAME_CHARS:
        stem, dot, suffix = name.rpartition(".")
        keep = f".{suffix}" if dot and len(suffix) <= 10 else ""
        name = name[: _NAME_CHARS - len(keep) - 1] + "…" + keep
    return name or None


def content_html(content: Any) -> str:
    """A user's turn for a transcript: its text as typed, each picture as a thumbnail, each
    document as a chip with its name and size; anything else (a part of another kind, one
    that cannot be read) as the line `content_text` gives it. Every word escaped."""
    if isinstance(content, str):
        return text_html(content)
    from gatecell.notebook.display import attachment_html
    from gatecell.wire.apis.attachments import Attachment
    from gatecell.wire.apis.conversation import content_text, neutral
    from gatecell.wire.transport.errors import InvalidRequest

    pieces = []
    for item in content if isinstance(content, (list, tuple)) else [content]:
        try:
            found = neutral(item) if isinstance(item, dict) else item
        except InvalidRequest:
            found = None
        if isinstance(found, str):
            pieces.append(text_html(found) if found.strip() else "")
        elif isinstance(found, Attachment):
            pieces.append(attachment_html(found))
        else:
            pieces.append(text_html(content_text([item])))
    return "".join(pieces)
