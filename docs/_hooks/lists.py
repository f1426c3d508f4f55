"""A list may follow a line of text directly, as on GitHub (CommonMark); Python-Markdown
needs a blank line before it, or reads the items as more of the paragraph. SPEC.md and
WIRE-NOTES.md are exact copies of shared files written that way, so the blank line is added
here, when the page is read, outside fenced code."""

from __future__ import annotations

import re
from typing import Any

_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d+[.)])\s")
_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})")


def on_page_markdown(markdown: str, **_: Any) -> str:
    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _ITEM.match(line) and out:
            previous = out[-1]
            if (
                previous.strip()
                and not previous.startswith((" ", "\t", "#", "|", ">"))
                and not _ITEM.match(previous)
            ):
                out.append("")
        out.append(line)
    return "\n".join(out)
