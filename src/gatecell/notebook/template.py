r"""``{name}`` in a prompt, filled from the notebook's variables.

A prompt keeps its braces: LaTeX, JSON and code reach the model byte for byte. Only a
placeholder is filled: a field that looks like a Python name (``{name}``, ``{obj.attr}``,
``{items[0]}``, ``{In[3]}``, ``{Out[3]}``, ``{_}``, with an optional ``!r`` and ``:spec``)
whose name is a variable of the notebook. A field whose name is not a variable is sent as
written, and `Filled.unknown` names it (the magics say so in one muted line); a brace TeX
groups (``e^{x}``, ``\frac{a}{b}``) is never a placeholder; ``{{name}}`` writes ``{name}``,
and ``{{`` or ``}}`` anywhere else is sent as it is (`gatecell.batch.rows.fields`).

Code stays code: nothing inside a fenced code block or an inline code span is touched, so
pasted code with f-strings or dict literals goes as written (where code starts and ends is
markdown-it's word, as for rendering).

A field with neither conversion nor spec is filled with the value summarised for a model
(see `summary`: a DataFrame as its shape, dtypes and first rows, every value within a cap),
or, in a text magic (``pictures=True``), with the value itself when it is a picture (a
matplotlib figure, a PIL image, an image-shaped array, picture bytes, a ``pathlib`` path:
`gatecell.wire.apis.attachments.attachment_of`): the prompt is then a list of its text and
those pictures, in order, which each API sends as content parts. A string is text, always:
a variable holding a model's reply that names a file or a URL puts those words in the
prompt, never the file;
``!r``, ``!s`` or a spec format it as Python would, within the same cap. ``{In[3]}`` is a
cell's source, so it goes in as a fenced Python block. A summary of several lines is put on
lines of its own, so a table stays a table. A placeholder whose item or attribute is missing
(``{Out[1]}`` of a cell that showed nothing) is a one-line error: its name says it was meant.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from IPython.core.error import UsageError

from gatecell.batch.rows import FORMATTER, fields
from gatecell.wire.util._text import joined

from .summary import CHARS, ROWS, clip, summarize

__all__ = ["fill", "interpolate", "Filled", "code_ranges", "Prompt"]

Prompt = str | list[Any]
"""A prompt: its text, or its text and pictures in order (str and `Attachment` items)."""


class Filled(NamedTuple):
    """What `fill` made of a prompt: the ``prompt`` to send, the placeholders it ``filled``
    and the ``unknown`` ones sent as written (their names are not variables), as written."""

    prompt: Prompt
    filled: tuple[str, ...]
    unknown: tuple[str, ...]


def fill(
    text: str,
    namespace: Mapping[str, Any],
    *,
    rows: int = ROWS,
    chars: int = CHARS,
    pictures: bool = False,
) -> Filled:
    """Fill the placeholders of ``text`` from ``namespace``, outside code (module docstring);
    a value that cannot be shown is a one-line `UsageError`. With ``pictures``, a field whose
    value is a picture puts the picture in: the prompt is then a list."""
    code = code_ranges(text)
    starts = [start for start, _ in code]
    out: list[Any] = []
    filled: list[str] = []
    unknown: list[str] = []
    pos = 0
    for match in fields(text):
        i = bisect.bisect_right(starts, match.start()) - 1
        if (i >= 0 and match.start() < code[i][1]) or (i + 1 < len(code) and code[i + 1][0] < match.end()):
            continue  # in code, or reaching into it: as written
        token = match.group(0)
        if match.group("escaped") is not None:
            replacement: Any = token[1:-1]
        elif _name(match) not in namespace:
            unknown.append(token)
            continue
        else:
            value = _value(match, namespace)
            picture = _picture(match, value) if pictures else None
            replacement = picture if picture is not None else _fill(match, value, text, rows, chars)
            filled.append(token)
        out += (text[pos : match.start()], replacement)
        pos = match.end()
    out.append(text[pos:])
    return Filled(joined(out), tuple(filled), tuple(dict.fromkeys(unknown)))


def interpolate(text: str, namespace: Mapping[str, Any], **options: Any) -> Prompt:
    """The prompt `fill` makes of ``text`` (same options)."""
    return fill(text, namespace, **options).prompt


def _picture(match: re.Match[str], value: Any) -> Any:
    """The field's value as an `Attachment` when it is a picture (and has no !conv or :spec)."""
    if match.group("conv") or match.group("spec") or _name(match) == "In":
        return None
    from gatecell.wire.apis.attachments import attachment_of
    from gatecell.wire.transport.errors import InvalidRequest

    try:
        return attachment_of(value)
    except InvalidRequest as exc:
        raise UsageError(f"{{{match.group('field')}}} in the prompt: {exc.message}") from None


def _name(match: re.Match[str]) -> str:
    return re.match(r"\w+", match.group("field")).group(0)  # type: ignore[union-attr]


def _value(match: re.Match[str], namespace: Mapping[str, Any]) -> Any:
    field, name = match.group("field"), _name(match)
    try:
        value, _ = FORMATTER.get_field(field, (), namespace)
    except KeyError as exc:
        hint = " (Out keeps the value of each cell that showed one)" if name == "Out" else ""
        raise UsageError(f"{{{field}}} in the prompt: {name} has no item {exc.args[0]!r}{hint}") from None
    except IndexError as exc:
        hint = f" (In holds cells 1 to {len(namespace['In']) - 1})" if name == "In" else ""
        raise UsageError(f"{{{field}}} in the prompt: {exc}{hint}") from None
    except (AttributeError, TypeError, ValueError) as exc:
        raise UsageError(f"{{{field}}} in the prompt: {exc}") from None
    return value


def _fill(match: re.Match[str], value: Any, text: str, rows: int, chars: int) -> str:
    field, name = match.group("field"), _name(match)
    conv, spec = match.group("conv"), match.group("spec")
    try:
        if conv or spec:
            filled = clip(FORMATTER.format_field(FORMATTER.convert_field(value, conv), spec or ""), chars)
        elif name == "In" and isinstance(value, str):
            from gatecell.wire.util._text import fence

            filled = fence(clip(value.rstrip("\n"), chars), "python")
        else:
            filled = summarize(value, rows=rows, chars=chars)
    except Exception as exc:  # the value's own formatting failed: say so, send nothing
        why = f"{type(exc).__name__}: {exc}"
        raise UsageError(f"{{{field}}} in the prompt: cannot show its value: {why}") from None
    if "\n" not in filled:
        return filled
    before = text[: match.start()].rpartition("\n")[2]
    after = text[match.end() :].partition("\n")[0]
    return ("\n\n" if before.strip() else "") + filled + ("\n\n" if after.strip() else "")


def code_ranges(text: str) -> list[tuple[int, int]]:
    """Sorted (start, end) character ranges of the fenced code blocks and inline code spans of
    ``text``, as markdown-it parses it."""
    if "`" not in text and "~" not in text:
        return []
    from .markdown import tokens

    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))

    def span(lines: list[int]) -> tuple[int, int]:
        first, last = lines
        return offsets[min(first, len(offsets) - 1)], offsets[min(last, len(offsets) - 1)]

    ranges: list[tuple[int, int]] = []
    inline: set[tuple[int, int]] = set()
    for token in tokens(text):
        if token.map is None:
            continue
        if token.type == "fence":
            ranges.append(span(token.map))
        elif token.type == "inline" and "`" in token.content:
            inline.add(span(token.map))
    for start, end in sorted(inline):
        ranges += [(start + a, start + b) for a, b in _code_spans(text[start:end])]
    return sorted(ranges)


_BACKTICKS = re.compile(r"`+")


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Code spans of one block of inline text (CommonMark 6.1): a run of backticks opens one,
    the next run of the same length closes it; a run that nothing closes is literal, and a
    backslash before a run escapes its first backtick."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    spans = []
    i = 0
    while i < len(runs):
        start, end = runs[i]
        before = start
        while before and text[before - 1] == "\\":
            before -= 1
        if (start - before) % 2:
            start += 1
        length = end - start
        close = next((j for j in range(i + 1, len(runs)) if runs[j][1] - runs[j][0] == length), None)
        if length == 0 or close is None:
            i += 1
            continue
        spans.append((start, runs[close][1]))
        i = close + 1
    return spans
