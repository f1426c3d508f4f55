"""Values as a model should read them: compact and bounded, for ``{name}`` in a prompt.

A model reads a prompt within a context limit and at a price per token, so a value goes in
as a person would paste it: a DataFrame as its shape, its column types and its first rows
as a Markdown table, never its 10,000-row repr. Every summary stays within ``chars``
characters; what is left out is said, never silently dropped ("… 9,995 more rows").

The first that applies: a str as it is; the object's own ``_repr_llm_()`` (the convention
proposed for Jupyter) or ``_repr_markdown_()``; a pandas DataFrame or Series; a numpy
array; a dict, list, tuple or set, item by item (a million-item dict is never repr'd
whole); anything else as ``str()``. pandas and numpy are never imported here unless the
value is one of theirs (its type's module says so), so ``%load_ext gatecell`` stays light.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from gatecell.wire.util._text import clip

__all__ = ["summarize", "clip", "ROWS", "CHARS"]

ROWS = 5
"""Rows of a table (and edge items of an array) shown by default."""
CHARS = 4000
"""The default cap of one value, in characters (about 1,000 tokens)."""

_COLUMNS = 20  # columns of a DataFrame shown; the rest are counted
_CELL = 40  # characters of one table cell


def summarize(value: Any, *, rows: int = ROWS, chars: int = CHARS) -> str:
    """``value`` as text for a prompt: at most ``chars`` characters, tables of at most ``rows`` rows."""
    if isinstance(value, str):
        return clip(value, chars)
    own = _own_repr(value)
    if own is not None:
        return clip(own, chars)
    library = {"pandas": _pandas, "numpy": _numpy}.get(type(value).__module__.partition(".")[0])
    text = library(value, rows) if library is not None else None
    if text is not None:
        return clip(text, chars)
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        return clip(_container(value, chars), chars)
    return clip(str(value), chars)


def _own_repr(value: Any) -> str | None:
    """What the object says of itself for a model, or as Markdown; None when it says nothing."""
    from IPython.utils.dir2 import get_real_method  # ignores classes and catch-all __getattr__

    for name in ("_repr_llm_", "_repr_markdown_"):
        method = get_real_method(value, name)
        if method is None:
            continue
        found = method()
        if isinstance(found, tuple):  # (data, metadata), as IPython's formatters allow
            found = found[0] if found else None
        if isinstance(found, str):
            return found
    return None


# -- pandas and numpy, imported only for their own values ---------------------------------


def _pandas(value: Any, rows: int) -> str | None:
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        return _frame(value, rows)
    if isinstance(value, pd.Series):
        return _series(value, rows)
    return None


def _frame(df: Any, rows: int) -> str:
    n, m = df.shape
    shown = min(m, _COLUMNS)
    dtypes = ", ".join(f"{_cell(df.columns[i])} {df.dtypes.iloc[i]}" for i in range(shown))
    lines = [f"pandas DataFrame: {n:,} rows × {m:,} columns"]
    if m:
        lines.append(f"columns: {dtypes}{_more(m - shown, 'column')}")
    if n and m:
        head = df.iloc[:rows, :shown]
        index = "" if df.index.name is None else _cell(df.index.name)
        header = [index, *(_cell(c) for c in head.columns)]
        body = ([_cell(x) for x in row] for row in head.itertuples(index=True, name=None))
        lines += ["", f"first {min(n, rows)} rows:", "", *_table(header, body)]
        if n > rows:
            lines.append(f"… {n - rows:,} more rows")
    return "\n".join(lines)


def _series(s: Any, rows: int) -> str:
    name = "" if s.name is None else f" {_cell(s.name)}"
    lines = [f"pandas Series{name}: {len(s):,} values, dtype {s.dtype}"]
    if len(s):
        header = ["" if s.index.name is None else _cell(s.index.name), _cell(s.name) if name else "value"]
        body = ([_cell(i), _cell(v)] for i, v in s.iloc[:rows].items())
        lines += ["", *_table(header, body)]
        if len(s) > rows:
            lines.append(f"… {len(s) - rows:,} more values")
    return "\n".join(lines)


def _numpy(value: Any, rows: int) -> str | None:
    import numpy as np

    if not isinstance(value, np.ndarray):
        return None
    body = np.array2string(value, separator=", ", threshold=rows * 20, edgeitems=rows, max_line_width=100)
    return f"numpy array: shape {value.shape}, dtype {value.dtype}\n{body}"


def _table(header: list[str], body: Iterable[list[str]]) -> Iterator[str]:
    yield "| " + " | ".join(header) + " |"
    yield "|" + "---|" * len(header)
    for row in body:
        yield "| " + " | ".join(row) + " |"


def _cell(value: Any) -> str:
    """One table cell: on one line, pipes escaped, at most `_CELL` characters, floats to 6 digits."""
    text = format(value, ".6g") if isinstance(value, float) else str(value)
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= _CELL else text[: _CELL - 1] + "…"


def _more(count: int, what: str) -> str:
    return f" … {count:,} more {what}{'s' if count != 1 else ''}" if count > 0 else ""


# -- containers --------------------------------------------------------------------------

_BRACKETS = {dict: ("{", "}"), list: ("[", "]"), tuple: ("(", ")"), set: ("{", "}"), frozenset: ("{", "}")}


def _container(value: Any, chars: int) -> str:
    """A repr built item by item until ``chars`` is reached; the rest counted."""
    opening, closing = next(b for t, b in _BRACKETS.items() if isinstance(value, t))
    items: Iterable[Any] = value.items() if isinstance(value, dict) else value
    parts: list[str] = []
    used = 2 + 30  # the brackets and the room for the marker
    for i, item in enumerate(items):
        budget = chars - used
        if parts and budget <= 0:
            text = ""
        elif isinstance(value, dict):
            key = clip(repr(item[0]), max(budget // 2, 1))
            text = f"{key}: {_item(item[1], budget - len(key) - 2)}"
        else:
            text = _item(item, budget)
        if parts and used + len(text) > chars:  # the first item always goes in, clipped
            return f"{opening}{', '.join(parts)}, … {len(value) - i:,} more items{closing}"
        parts.append(text)
        used += len(text) + 2
    if isinstance(value, tuple) and len(parts) == 1:
        return f"({parts[0]},)"
    if not parts and isinstance(value, (set, frozenset)):
        return repr(value)
    return f"{opening}{', '.join(parts)}{closing}"


def _item(value: Any, budget: int) -> str:
    budget = max(budget, 1)
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        return _container(value, budget)
    return clip(repr(value), budget)
