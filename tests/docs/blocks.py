"""The code examples of a Markdown page: every fenced block, its language, the line it starts
on, and the reason given for not running it (``<!-- not-run: reason -->`` on the line before
its fence, blank lines allowed between)."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

RUNNABLE = ("python", "py", "python3", "ipython", "ipython3")  # ipython: a notebook cell, magics and all
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>\S.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    not_run: str | None  # the reason, when the page says it cannot run offline

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path, root: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(root).as_posix()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        end = next(
            (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence[0] * len(fence))),
            len(lines),
        )
        body = [line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]]
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        skip = _NOT_RUN.match(before)
        found.append(
            Block(
                page=page,
                line=i + 1,
                lang=opening["info"].strip().split(" ")[0].lower(),
                code=textwrap.dedent("\n".join(body)) + "\n",
                not_run=skip["reason"] if skip else None,
            )
        )
        i = end + 1
    return found
