"""Plain-text helpers every layer shares: a text cut to a budget, a text fenced as code, a
prompt's items joined.

A prompt's values (`notebook.summary`), a file put in a prompt (`attachments`) and the
replies shown (`notebook.markdown`) are cut and fenced by the same rules. Standard library
only.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["clip", "fence", "joined"]


def clip(text: str, chars: int, *, ends: bool = False) -> str:
    """``text`` cut to at most ``chars`` characters, ending in "… N more characters" when cut
    (at a line break when there is one in the second half). With ``ends``, its first and
    last halves are kept and the middle is counted (the end of a log says most)."""
    if len(text) <= chars:
        return text
    keep = max(0, chars - 40)  # room for the marker
    if ends:
        head, tail = text[: keep // 2], text[len(text) - keep // 2 :]
        return f"{head}\n… {len(text) - len(head) - len(tail):,} characters left out …\n{tail}"
    cut = text.rfind("\n", keep // 2, keep)
    head = text[: cut if cut > 0 else keep]
    separator = "\n" if cut > 0 else ""
    return f"{head}{separator}… {len(text) - len(head):,} more characters"


def fence(body: str, lang: str = "") -> str:
    """``body`` as a fenced code block that nothing in it can close."""
    ticks = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", body)), default=0))
    return f"{ticks}{lang}\n{body}\n{ticks}"


def joined(items: list[Any]) -> str | list[Any]:
    """A prompt's items (text, and pictures or files) with adjacent texts joined and empty
    ones dropped; the text alone when there is nothing else."""
    if all(isinstance(item, str) for item in items):
        return "".join(items)
    out: list[Any] = []
    for item in items:
        if isinstance(item, str) and out and isinstance(out[-1], str):
            out[-1] += item
        elif not (isinstance(item, str) and not item):
            out.append(item)
    return out
