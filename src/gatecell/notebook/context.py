"""What the notebook itself can tell a model: recent cells, what they printed, the last error.

What a kernel honestly has, and so what gatecell sends:

- every cell's source (IPython's input history, ``In``) and the value a cell showed as its
  result (``Out``), summarised like ``{name}`` (see `summary`);
- what a cell printed to stdout and stderr, and the error it raised, where IPython keeps
  them: IPython 9 records both per cell (``history_manager.outputs`` and ``.exceptions``);
  IPython 8 keeps neither, and then cells go without them. Output written straight to the
  file descriptors (C extensions, subprocesses) never passes through Python's streams, and
  rich displays (plots, HTML, widgets) are not text: neither is sent;
- the last exception with its traceback (``sys.last_value``, set by IPython's traceback
  display and by gatecell's one-line error handler alike).

Everything gathered here is redacted before it is sent, by the one redaction of
`gatecell.wire.util.secret.redact` (the magics apply it to the whole prompt): keys of this process
and of other services, credentials, values assigned to names such as ``api_key``,
``password`` or ``token``.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["recent_cells", "last_error", "EXPLAIN"]

EXPLAIN = (
    "Explain the error above: what went wrong and why. Then suggest a fix, as code when code is the fix."
)
"""The question of ``%gatecell explain`` (and of ``%%chat --error`` with no prompt)."""


# -- recent cells ------------------------------------------------------------------------


def recent_cells(shell: Any, n: int, *, rows: int, chars: int) -> str:
    """The last ``n`` cells run before the current one, labelled: each one's source, what it
    printed and the error it raised (where IPython keeps them), and its ``Out`` value."""
    from gatecell.wire.util._text import fence

    from .summary import clip, summarize

    history = shell.history_manager
    sources = history.input_hist_raw
    printed = getattr(history, "outputs", {})
    errors = getattr(history, "exceptions", {})
    current = len(sources) - 1  # the cell asking: the newest of the history (cells run by notebooks are kept)
    numbers = list(range(max(current - n, 1), current))
    if not numbers:
        return ""
    noun = "cell" if len(numbers) == 1 else f"{len(numbers)} cells"
    blocks = [f"Notebook context: the last {noun} run before this message."]
    for k in numbers:
        block = [f"In[{k}]:", fence(clip(sources[k].rstrip("\n"), chars), "python")]
        for name, kind in (("stdout", "out_stream"), ("stderr", "err_stream")):
            text = "".join(
                "".join(o.bundle.get("stream", [])) for o in printed.get(k, ()) if o.output_type == kind
            )
            if text.strip():
                block += [f"printed to {name}:", fence(clip(text.rstrip("\n"), chars, ends=True), "text")]
        if k in errors:
            block.append(f"raised: {errors[k].get('ename')}: {clip(str(errors[k].get('evalue')), chars)}")
        if k in history.output_hist:
            block += [f"Out[{k}]:", summarize(history.output_hist[k], rows=rows, chars=chars)]
        blocks.append("\n".join(block))
    return "\n\n".join(blocks)


# -- the last error ----------------------------------------------------------------------

_FRAMES = (4, 6)  # frames kept from the start and the end of a long traceback


def last_error(shell: Any, *, chars: int) -> str | None:
    """The last exception of the session for a model: the cell that raised it (its source),
    the exception's type and message, and the traceback from that cell on, trimmed. None when
    there has been none."""
    exc = getattr(sys, "last_exc", None)
    exc = exc if exc is not None else getattr(sys, "last_value", None)
    if not isinstance(exc, BaseException):
        return None
    from gatecell.wire.util._text import fence

    from .summary import clip

    frames = list(traceback.extract_tb(exc.__traceback__))
    cell_of = _cell_number(shell)
    first = next((i for i, f in enumerate(frames) if cell_of(f.filename) is not None), None)
    # from the cell on; a cell that did not compile has no frame of its own: its message says where
    frames = frames[first:] if first is not None else [] if isinstance(exc, SyntaxError) else frames
    number = cell_of(frames[0].filename) if frames else None
    if number is None and isinstance(exc, SyntaxError) and exc.filename:
        number = cell_of(exc.filename)
    parts = [f"The last error in this notebook{f', raised by cell In[{number}]' if number else ''}:"]
    sources = shell.history_manager.input_hist_raw
    if number is not None and number < len(sources):
        parts.append(fence(clip(sources[number].rstrip("\n"), chars), "python"))
    lines = ["Traceback (most recent call last, trimmed):"] if frames else []
    lines += _frame_lines(frames, cell_of)
    lines += [line.rstrip("\n") for line in traceback.format_exception_only(type(exc), exc)]
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    for _ in range(3):
        if cause is None:
            break
        lines.append(f"(raised while handling: {_exception_line(cause)})")
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    parts.append(fence(clip("\n".join(_label_cells(lines, cell_of)), chars), "text"))
    return "\n\n".join(parts)


def _cell_number(shell: Any) -> Callable[[str], int | None]:
    """filename -> the execution count of the cell compiled under that name, if it is one."""

    def number(filename: str) -> int | None:
        label = shell.compile.format_code_name(filename) if shell is not None else None
        found = re.fullmatch(r"In\[(\d+)\]", label[1]) if label else None
        if found is None:
            found = re.match(r"<ipython-input-(\d+)-", filename)
        return int(found.group(1)) if found else None

    return number


def _frame_lines(frames: list[traceback.FrameSummary], cell_of: Callable[[str], int | None]) -> list[str]:
    keep_head, keep_tail = _FRAMES
    shown: list[traceback.FrameSummary | int] = list(frames)
    if len(frames) > keep_head + keep_tail + 1:
        shown = [*frames[:keep_head], len(frames) - keep_head - keep_tail, *frames[-keep_tail:]]
    lines = []
    for frame in shown:
        if isinstance(frame, int):
            lines.append(f"  … {frame} frames left out …")
            continue
        number = cell_of(frame.filename)
        where = f"Cell In[{number}]" if number is not None else f'File "{_short_path(frame.filename)}"'
        lines.append(f"  {where}, line {frame.lineno}, in {frame.name}")
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return lines


def _label_cells(lines: list[str], cell_of: Callable[[str], int | None]) -> Iterator[str]:
    """A SyntaxError names the cell's file: name the cell instead."""
    for line in lines:
        found = re.match(r'\s*File "([^"]+)", line', line)
        number = cell_of(found.group(1)) if found else None
        yield line.replace(f'File "{found.group(1)}"', f"Cell In[{number}]") if found and number else line


def _short_path(path: str) -> str:
    """A library's path from its import root (no home folder in a prompt); else from the
    working folder; else as it is."""
    roots = sorted((p for p in sys.path if p and os.path.isabs(p)), key=len, reverse=True)
    for root in [*roots, os.getcwd()]:
        if path.startswith(root.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, root)
    return path


def _exception_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
