"""What a batch runs over: rows of fields, pulled lazily, and the template filled from each.

`Rows` turns any input into (label, fields) pairs without copying it: a DataFrame's rows
(its columns are the fields, its index the labels), a Series (``{item}``, or its name), a
list of dicts, a list of plain values (``{item}``), or any iterable, consumed as the engine
asks for rows. `Template` fills ``{field}``: a Python name, with attributes and indexes
(``{a.b}``, ``{x[0]}``), an optional ``!r``/``!s``/``!a`` and ``:spec``, and ``{{name}}`` for
a literal ``{name}``. Every other brace goes as written: JSON, code, TeX (``e^{x}``,
``\\frac{a}{b}``: a brace TeX groups is never a placeholder), ``{{`` and ``}}`` on their own.
The magics fill ``{name}`` from the notebook's variables with the same grammar (`fields`,
used by `gatecell.notebook.template`). A field whose value is a picture (a PIL
image, picture bytes, a figure, a ``pathlib`` path: `gatecell.wire.apis.attachments.attachment_of`)
puts the picture in the prompt, which is then a list of text and pictures that each API
sends as content parts. A string stays text, whatever file or URL it names, unless its
field is one the user named as pictures (``images=``): then it is a path or URL to attach.
"""

from __future__ import annotations

import itertools
import re
import string
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from gatecell.wire.apis.attachments import attachment_of, load
from gatecell.wire.transport.errors import InvalidRequest
from gatecell.wire.util._text import joined

__all__ = ["Template", "Rows", "RowError", "FIELD", "FORMATTER", "fields"]

_NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\[\]{}]+\])*"
FIELD = re.compile(
    rf"\{{\{{(?P<escaped>{_NAME}(?:![rsa])?(?::[^{{}}]*)?)\}}\}}"
    rf"|\{{(?P<field>{_NAME})(?:!(?P<conv>[rsa]))?(?::(?P<spec>[^{{}}]*))?\}}"
)
"""A placeholder, ``{name}`` (attributes, indexes, ``!r`` and ``:spec`` allowed), or one
escaped, ``{{name}}``; `fields` says which of them are placeholders."""

# What may stand right before a brace that TeX groups: a control word (\frac, \sqrt[3],
# \sum_), a backslash (\{), a superscript's caret, a one-letter name's subscript (x_{i};
# report_{date} is a placeholder).
_TEX_BEFORE = re.compile(r"(?:\\[A-Za-z]+\*?(?:\[[^\[\]{}]*\])?_?|(?<![\w\\])[A-Za-z]_|[\\^])\Z")


def fields(text: str) -> Iterator[re.Match[str]]:
    r"""The `FIELD` matches of ``text`` that are placeholders or escapes, in order: not a
    brace TeX groups (``e^{x}``, ``\frac{a}{b}``, ``x_{i}``: after a caret, a backslash, a
    control word, a one-letter name's ``_`` or such a group). Every other brace is text,
    ``{{`` and ``}}`` included."""
    for match in FIELD.finditer(text):
        if not _tex_group(text, match.start()):
            yield match


def _tex_group(text: str, brace: int) -> bool:
    r"""Whether the ``{`` at ``brace`` opens a TeX group: after `_TEX_BEFORE`, or right after
    the ``}`` of such a group (the second argument of ``\frac{a}{b}``, ``\mathbf{v}_{i}``)."""
    if _TEX_BEFORE.search(text, max(0, brace - 80), brace):
        return True
    close = brace - 1 - text.endswith("_", 0, brace)  # \mathbf{v}_{i} as \frac{a}{b}
    if close < 0 or text[close] != "}":
        return False
    depth = 0
    for i in range(close, -1, -1):  # back to the brace that opened the group just closed
        depth += {"}": 1, "{": -1}.get(text[i], 0)
        if depth == 0:
            return _tex_group(text, i)
    return False


FORMATTER = string.Formatter()


class RowError(ValueError):
    """This row cannot fill the template (a field it lacks): the row fails, the batch goes on."""


_Part = tuple[str, str, str | None, str]  # (literal before, field, conversion, spec)


class Template:
    """A prompt with ``{field}`` placeholders, parsed once and filled per row.

    **Parameters:**

    * **text** - the prompt; ``{{`` and ``}}`` write braces.
    * **images** - the fields whose strings are paths or URLs of pictures to attach (the
      user's word for it: any other string stays text). Each must be a field of ``text``.
    """

    def __init__(self, text: str, images: tuple[str, ...] = ()) -> None:
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequest("template", "must be a non-empty prompt with {field} placeholders")
        self.text = text
        parts: list[_Part] = []
        pos = 0
        literal: list[str] = []
        for match in fields(text):
            literal.append(text[pos : match.start()])
            pos = match.end()
            if match.group("escaped") is not None:
                literal.append("{" + match.group("escaped") + "}")
                continue
            parts.append(
                ("".join(literal), match.group("field"), match.group("conv"), match.group("spec") or "")
            )
            literal = []
        literal.append(text[pos:])
        self._parts = parts
        self._tail = "".join(literal)
        # The names each field starts with: what a row must have.
        self.names = tuple(dict.fromkeys(re.match(r"\w+", p[1]).group(0) for p in parts))  # type: ignore[union-attr]
        if not parts:
            raise InvalidRequest(
                "template",
                "has no {field}: every row would send the same prompt (see the help for the fields)",
            )
        unused = [name for name in images if name not in self.names]
        if unused:
            raise InvalidRequest(
                "images",
                f"names {unused[0]!r}, which the template does not use: put {{{unused[0]}}} where "
                "the picture goes",
            )
        self.images = frozenset(images)
        self._named = [re.match(r"\w+", p[1]).group(0) in self.images for p in parts]  # type: ignore[union-attr]

    @overload
    def fill(self, fields: Mapping[str, Any]) -> str: ...
    @overload
    def fill(self, fields: Mapping[str, Any], *, pictures: bool) -> str | list[Any]: ...
    def fill(self, fields: Mapping[str, Any], *, pictures: bool = False) -> str | list[Any]:
        """The prompt of one row: its text; with ``pictures``, its text and pictures in order
        when a field's value is a picture (module docstring)."""
        out: list[Any] = []
        found = False
        for (literal, field, conv, spec), named in zip(self._parts, self._named, strict=True):
            try:
                value, _ = FORMATTER.get_field(field, (), fields)
            except KeyError:
                name = re.match(r"\w+", field).group(0)  # type: ignore[union-attr]
                raise RowError(f"{{{field}}}: this row has no field {name!r}") from None
            except (AttributeError, IndexError, TypeError) as exc:
                raise RowError(f"{{{field}}}: {exc}") from None
            if pictures and not conv and not spec:
                try:
                    picture = _marked(value) if named else attachment_of(value)
                except InvalidRequest as exc:
                    raise RowError(f"{{{field}}}: {exc.message}") from None
                if picture is not None:
                    out += (literal, picture)
                    found = True
                    continue
            try:
                text = FORMATTER.format_field(FORMATTER.convert_field(value, conv), spec)
            except (ValueError, TypeError) as exc:
                raise RowError(f"{{{field}}}: {exc}") from None
            out.append(literal)
            out.append(text)
        out.append(self._tail)
        return joined(out) if found else "".join(out)

    def __repr__(self) -> str:
        return f"Template({self.text!r})"


def _marked(value: Any) -> Any:
    """The value of a field the user named as pictures: a path or URL (a string), a picture
    or a ``pathlib`` path, as an attachment; anything else is a row's error."""
    found = load(value) if isinstance(value, str) else attachment_of(value)
    if found is None:
        raise InvalidRequest("images", f"{type(value).__name__} is not a picture, a path or a URL")
    return found


def _is_pandas(data: Any, kind: str) -> bool:
    cls = type(data)
    return cls.__module__.startswith("pandas") and any(c.__name__ == kind for c in cls.__mro__)


class Rows:
    """The rows of ``data`` as ``(label, fields)`` pairs, pulled one at a time.

    ``total`` is the number of rows when the input knows it (None for a generator);
    ``index`` the pandas index to align results to (None for other inputs); ``names`` the
    fields every row has, when the input says so up front (columns, ``item``).
    """

    def __init__(self, data: Any) -> None:
        self.index: Any = None
        self.names: frozenset[str] | None = None
        self.total: int | None = None
        self.pandas = False
        if _is_pandas(data, "DataFrame"):
            self.pandas = True
            self.index = data.index
            columns = [str(c) for c in data.columns]
            self.names = frozenset(columns)
            self.total = len(data)
            self._pairs: Iterator[tuple[Any, Mapping[str, Any]]] = (
                (label, dict(zip(columns, values, strict=True)))
                for label, values in zip(data.index, data.itertuples(index=False, name=None), strict=True)
            )
        elif _is_pandas(data, "Series"):
            self.pandas = True
            self.index = data.index
            name = data.name if isinstance(data.name, str) and data.name.isidentifier() else None
            self.names = frozenset(("item", name) if name else ("item",))
            self.total = len(data)
            self._pairs = (
                (label, {"item": v, name: v} if name else {"item": v})
                for label, v in zip(data.index, data.to_numpy(), strict=True)
            )
        elif isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Iterable):
            what = "a dict" if isinstance(data, Mapping) else type(data).__name__
            raise InvalidRequest(
                "data",
                "must be a DataFrame, a Series, a list of dicts or values, or an iterable of them; "
                f"got {what}",
            )
        else:
            try:
                self.total = len(data)  # type: ignore[arg-type]
            except TypeError:
                self.total = None
            self._pairs = (
                (i, item if isinstance(item, Mapping) else {"item": item}) for i, item in enumerate(data)
            )

    def check(self, template: Template) -> None:
        """Refuse, before any request, a template naming a field the rows do not have: the
        declared ones (columns, ``item``), else the first row's."""
        names = self.names
        if names is None:
            first = next(self._pairs, None)
            if first is None:
                return
            self._pairs = itertools.chain((first,), self._pairs)
            names = frozenset(first[1])
        missing = [n for n in template.names if n not in names]
        if missing:
            have = ", ".join(sorted(names)[:12]) or "none"
            raise InvalidRequest(
                "template",
                f"{{{missing[0]}}} is not a field of the rows (they have: {have}); "
                f"write {{{{{missing[0]}}}}} to send {{{missing[0]}}} as written",
            )

    def __iter__(self) -> Iterator[tuple[Any, Mapping[str, Any]]]:
        return self._pairs
