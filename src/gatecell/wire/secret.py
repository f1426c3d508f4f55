"""The API key as a value that cannot leak by accident.

A `Secret` has no `__str__` that reveals it: repr, str, format and pickling-by-accident all
show a mask. Code that must send the key calls `.reveal()` at the last moment.
`redact()` scrubs a key (and anything shaped like one) out of text that came back from
a gateway, because gateways do echo keys in error messages.
"""

from __future__ import annotations

import re

__all__ = ["Secret", "redact"]

_KEY_SHAPE = re.compile(r"sk-[A-Za-z0-9_\-]{8,}")


class Secret:
    """An API key. Shows as ``sk-…wxyz`` (the last four characters) and never more."""

    __slots__ = ("_value",)

    def __init__(self, value: str | Secret) -> None:
        if isinstance(value, Secret):
            value = value.reveal()
        self._value = value

    def reveal(self) -> str:
        return self._value

    @property
    def masked(self) -> str:
        v = self._value
        if len(v) < 12:
            return "***"
        return f"{v[:3]}…{v[-4:]}"

    def __repr__(self) -> str:
        return f"Secret({self.masked!r})"

    def __str__(self) -> str:
        return self.masked

    def __format__(self, spec: str) -> str:
        return format(self.masked, spec)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self):  # pickling would write the key to disk
        raise TypeError("a Secret cannot be pickled")


def redact(text: str, *secrets: Secret | str | None) -> str:
    """Replace every given key, and every ``sk-…`` shaped token, with a mask."""
    for s in secrets:
        if s:
            raw = s.reveal() if isinstance(s, Secret) else s
            masked = s.masked if isinstance(s, Secret) else Secret(s).masked
            text = text.replace(raw, masked)
    return _KEY_SHAPE.sub(lambda m: Secret(m.group(0)).masked, text)
