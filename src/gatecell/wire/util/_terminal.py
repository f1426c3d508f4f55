"""Text from a gateway or a model, made safe to print to a terminal.

A terminal obeys control sequences in what it prints: ``ESC ] 0`` retitles the window,
``ESC [ 2J`` clears the screen, ``ESC ] 52`` writes the clipboard (some terminals read it
back), a bare carriage return or backspaces overwrite what was printed. A reply, a model id,
an error message or a logged prompt may hold any of them, so everything gatecell prints that
the user did not write goes through `printable`: C0 controls other than tab and newline,
DEL, the C1 controls (U+0080 to U+009F, which some terminals take as ``ESC`` sequences) and
the bidirectional overrides that make text read other than it is (U+202A to U+202E, U+2066
to U+2069) are shown escaped, as ``\\u001b``; a carriage return before a newline is dropped.
The escape is character by character, so a sequence split across the fragments of a stream
is caught as well as a whole one; in JSON text the escapes are JSON's own.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_CONTROL = re.compile(r"(?P<crlf>\r)(?=\n)|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    return "" if match.group("crlf") else f"\\u{ord(match.group(0)):04x}"


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline shown escaped (see above)."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text
