"""Server-sent events, sans-IO: bytes in, events out; and `encode` for servers.

The parser splits bytes, not decoded lines, because it sits on the hot path of every
stream: per network read it decodes the whole events once and splits them once, and when
every event is a single ``data:`` line (the usual stream) it takes no further line handling.
It follows the SSE framing rules that real gateways exercise (WIRE-NOTES): LF, CRLF or CR
line ends (a CR may end one read and its LF start the next), ``:`` comments (keep-alives),
``field: value`` with one optional space, several ``data`` lines joined by ``\\n``, and
``event``, ``id`` and ``retry``.
Unicode line separators inside JSON are left alone since only bytes CR and LF end lines.
An event still open is held as a list of reads, joined once when it ends (so a long event
costs linear time), and ``max_event`` bounds it: a sender that never ends an event cannot
make the parser hold more than that.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["Event", "SSEParser", "EventTooLarge", "encode", "comment", "DONE"]

DONE = b"data: [DONE]\n\n"  # SPEC 6: the last line of a chat completion stream

_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(r"\r\n|\r|\n")


class Event:
    """One dispatched event. ``event`` is ``"message"`` unless the stream named it."""

    __slots__ = ("data", "event", "id", "retry")

    def __init__(
        self, data: str, event: str = "message", id: str | None = None, retry: int | None = None
    ) -> None:
        self.data = data
        self.event = event
        self.id = id
        self.retry = retry

    def json(self) -> Any:
        return json.loads(self.data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.data, self.event, self.id, self.retry) == (
            other.data,
            other.event,
            other.id,
            other.retry,
        )

    def __repr__(self) -> str:
        return f"Event(data={self.data!r}, event={self.event!r}, id={self.id!r}, retry={self.retry!r})"


class EventTooLarge(ValueError):
    """An event grew past the parser's ``max_event`` bytes without ending."""


class SSEParser:
    """Incremental parser: call `feed` with each read, then `close` at end of stream.

    ``last_id`` and ``retry`` keep the stream's latest ``id`` and ``retry`` values, as the
    SSE rules say they persist across events. ``max_event`` (bytes, or None for no bound)
    caps an event still being received: past it, `feed` raises `EventTooLarge`.
    """

    __slots__ = ("_held", "_size", "_cr", "_started", "_max", "last_id", "retry")

    def __init__(self, max_event: int | None = None) -> None:
        self._held: list[bytes] = []  # the reads of an event not yet ended
        self._size = 0  # their length
        self._cr = False  # the previous read ended in CR: a leading LF now belongs to it
        self._started = False
        self._max = max_event
        self.last_id: str | None = None
        self.retry: int | None = None

    def feed(self, data: bytes) -> list[Event]:
        """Parse one read; return the events it completed (possibly none)."""
        return [e if isinstance(e, Event) else Event(e) for e in self.feed_raw(data)]

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
        if not data:
            return []
        held = self._held
        if held:
            if b"\n\n" not in data and not (data[:1] == b"\n" and held[-1][-1:] == b"\n"):
                self._hold(data)  # still inside the same event
                return []
            held.append(data)
            data = b"".join(held)
            held.clear()
            self._size = 0
        end = data.rfind(b"\n\n")
        if end < 0:
            self._hold(data)
            return []
        if end + 2 < len(data):  # the start of the next event: checked against the cap as it grows
            held.append(data[end + 2 :])
            self._size = len(data) - end - 2
        # Whole events only, so no UTF-8 sequence is cut; LF never occurs inside one.
        text = data[:end].decode("utf-8", "replace")
        if self.last_id is None:
            # The usual stream, every event one ``data: `` line, takes one split. The count
            # proves it: any other line (event:, id:, a comment, data without its space)
            # adds a newline that no split point accounts for.
            datas = ("\n\n" + text).split("\n\ndata: ")
            if datas[0] == "" and text.count("\n") == 2 * len(datas) - 4:
                del datas[0]
                return datas  # type: ignore[return-value]
        events: list[str | Event] = []
        for block in text.split("\n\n"):
            event = self._block(block)
            if event is not None:
                events.append(event)
        return events

    def _hold(self, data: bytes) -> None:
        self._held.append(data)
        self._size += len(data)
        if self._max is not None and self._size > self._max:
            raise EventTooLarge(f"an event passed {self._max} bytes without ending")

    @property
    def pending(self) -> int:
        """Bytes held for an event not yet complete."""
        return self._size

    def close(self) -> list[Event]:
        """End of stream. An event left without its closing blank line is still given."""
        rest = b"".join(self._held)
        self._held.clear()
        self._size = 0
        event = self._block(rest.decode("utf-8", "replace")) if rest.strip(b"\n") else None
        return [] if event is None else [event]

    def _block(self, block: str) -> Event | None:
        data: list[str] = []
        name = ""
        for line in block.split("\n"):
            if not line or line[0] == ":":
                continue
            field, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value
            elif field == "id":
                if "\0" not in value:
                    self.last_id = value
            elif field == "retry" and value.isdigit():
                self.retry = int(value)
        if not data:
            return None
        return Event("\n".join(data), name or "message", self.last_id, self.retry)


def encode(data: Any, event: str | None = None, id: str | None = None) -> bytes:
    """One event as bytes, for servers. Non-string data is sent as compact JSON."""
    head = ""
    if event is not None:
        head += f"event: {event}\n"
    if id is not None:
        head += f"id: {id}\n"
    if isinstance(data, str):
        body = "".join(f"data: {line}\n" for line in _LINE_END.split(data))
    else:  # compact JSON escapes every line break: one data line
        body = f"data: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n"
    return (head + body + "\n").encode()


def comment(text: str = "") -> bytes:
    """A comment line, which clients ignore: the usual keep-alive."""
    return f": {text}\n\n".encode()
