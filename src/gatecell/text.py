"""Plain-text helpers every layer shares: a text cut to a budget, a text fenced as code.

They sit below `wire` and `notebook` alike: a prompt's values (`notebook.summary`), a file
put in a prompt (`wire.attachments`) and the replies shown (`notebook.markdown`) are cut
and fenced by the same rules. Standard library only.
"""

from __future__ import annotations

import re

__all__ = ["clip", "fence"]


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
