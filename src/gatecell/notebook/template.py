"""``{name}`` in a prompt, filled from the notebook's variables.

Only fields that look like Python names are filled (``{name}``, ``{obj.attr}``,
``{items[0]}``, with an optional ``!r`` and ``:spec``); other braces, such as JSON in a
prompt, stay as written. ``{{`` and ``}}`` write a literal brace. A name that is not
defined is an error, never a silent blank.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError

__all__ = ["interpolate"]

_FIELD = re.compile(
    r"\{\{|\}\}"
    r"|\{(?P<field>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\[\]{}]+\])*)(?:!(?P<conv>[rsa]))?(?::(?P<spec>[^{}]*))?\}"
)

_FORMATTER = string.Formatter()


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """Fill ``{name}`` fields of ``text`` from ``namespace``; a missing name is a one-line `UsageError`."""

    def fill(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        field = match.group("field")
        try:
            value, _ = _FORMATTER.get_field(field, (), namespace)
        except KeyError:
            name = re.match(r"\w+", field).group(0)  # type: ignore[union-attr]
            raise UsageError(
                f"{{{field}}} in the prompt: no variable {name!r} in the notebook "
                "(write {{ and }} for literal braces, or pass --no-interpolate)"
            ) from None
        except (AttributeError, IndexError, TypeError) as exc:
            raise UsageError(f"{{{field}}} in the prompt: {exc}") from None
        value = _FORMATTER.convert_field(value, match.group("conv"))
        return _FORMATTER.format_field(value, match.group("spec") or "")

    return _FIELD.sub(fill, text)
