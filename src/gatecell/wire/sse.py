"""Server-sent events, sans-IO: bytes in, events out; and `encode` for servers.

The parser works on bytes, not decoded lines, because it sits on the hot path of every
stream: one ``split`` per network read finds whole events, and the common event (a single
``data: ...`` line) takes no further line handling. It follows the SSE framing rules that
real gateways exercise (WIRE-NOTES): LF, CRLF or CR line ends (a CR may end one read and
its LF start the next), ``:`` comments (keep-alives), ``field: value`` with one optional
space, several ``data`` lines joined by ``\\n``, and ``event``, ``id`` and ``retry``.
Unicode line separators inside JSON are left alone since only bytes CR and LF end lines.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["Event", "SSEParser", "encode", "comment"]

_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(r"\r\n|\r|\n")


class Event:
    """One dispatched event. ``event`` is ``"message"`` unless the stream named it."""

    __slots__ = ("data", "event", "id", "retry")

    def __init__(self, data: str, event: str = "message", id: str | None = None, retry: int | None = None) -> None:
        self.data = data
        self.event = event
        self.id = id
        self.retry = retry

    def json(self) -> Any:
        return json.loads(self.data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.data, self.event, self.id, self.retry) == (other.data, other.event, other.id, other.retry)

    def __repr__(self) -> str:
        return f"Event(data={self.data!r}, event={self.event!r}, id={self.id!r}, retry={self.retry!r})"


class SSEParser:
    """Incremental parser: call `feed` with each read, then `close` at end of stream.

    ``last_id`` and ``retry`` keep the stream's latest ``id`` and ``retry`` values, as the
    SSE rules say they persist across events.
    """

    __slots__ = ("_buf", "_cr", "_started", "last_id", "retry")

    def __init__(self) -> None:
        self._buf = b""
        self._cr = False  # the previous read ended in CR: a leading LF now belongs to it
        self._started = False
        self.last_id: str | None = None
        self.retry: int | None = None

    def feed(self, data: bytes) -> list[Event]:
        """Parse one read; return the events it completed (possibly none)."""
        return [Event(e) if type(e) is str else e for e in self.feed_raw(data)]

    def feed_raw(self, data: bytes) -> list[str | Event]:
        """`feed` for hot loops: an unnamed event of a single ``data:`` line comes back as
        its data string, saving an object per event; any other event as an `Event`."""
        if not data:  # an empty read must not consume the pending CR of the last one
            return []
        if not self._started:
            self._started = True
            if data.startswith(_BOM):
                data = data[3:]
        if self._cr:
            self._cr = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\r" in data:
            self._cr = data[-1:] == b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._buf:
            data = self._buf + data
        blocks = data.split(b"\n\n")
        self._buf = blocks.pop()
        events: list[str | Event] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block and self.last_id is None:
                events.append(block[6:].decode("utf-8", "replace"))
            else:
                event = self._block(block)
                if event is not None:
                    events.append(event)
        return events

    @property
    def pending(self) -> int:
        """Bytes held for an event not yet complete."""
        return len(self._buf)

    def close(self) -> list[Event]:
        """End of stream. An event left without its closing blank line is still given."""
        rest, self._buf = self._buf, b""
        event = self._block(rest) if rest.strip(b"\n") else None
        return [] if event is None else [event]

    def _block(self, block: bytes) -> Event | None:
        data: list[bytes] = []
        name = b""
        for line in block.split(b"\n"):
            if not line or line[:1] == b":":
                continue
            field, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"event":
                name = value
            elif field == b"id":
                if b"\0" not in value:
                    self.last_id = value.decode("utf-8", "replace")
            elif field == b"retry" and value.isdigit():
                self.retry = int(value)
        if not data:
            return None
        return Event(
            b"\n".join(data).decode("utf-8", "replace"),
            name.decode("utf-8", "replace") or "message",
            self.last_id,
            self.retry,
        )


def encode(data: Any, event: str | None = None, id: str | None = None) -> bytes:
    """One event as bytes, for servers. Non-string data is sent as compact JSON."""
    if not isinstance(data, str):
        data = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    head = ""
    if event is not None:
        head += f"event: {event}\n"
    if id is not None:
        head += f"id: {id}\n"
    body = "".join(f"data: {line}\n" for line in _LINE_END.split(data))
    return (head + body + "\n").encode()


def comment(text: str = "") -> bytes:
    """A comment line, which clients ignore: the usual keep-alive."""
    return f": {text}\n\n".encode()
