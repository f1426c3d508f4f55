"""The API key as a value that cannot leak by accident.

A `Secret` has no `__str__` that reveals it: repr, str, format and pickling-by-accident all
show a mask. Code that must send the key calls `.reveal()` at the last moment.
`redact()` scrubs a key (and anything shaped like one, in any case) out of text that came
back from a gateway, because gateways do echo keys in error messages and headers; and
`protect_logs()` does the same to every log record of httpx, httpcore and gatecell, since
httpcore's DEBUG lines carry response headers verbatim.
"""

from __future__ import annotations

import logging
import re

__all__ = ["Secret", "redact", "protect_logs", "LOGGERS"]

# "sk-" and a secret part (SPEC 5), in any case, not inside a longer word ("task-...").
_KEY_SHAPE = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{8,}", re.IGNORECASE)


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


def _mask_shape(match: re.Match[str]) -> str:
    return Secret(match.group(0)).masked


def redact(text: str, *secrets: Secret | str | None) -> str:
    """Replace every given key and every ``sk-…`` shaped token, whatever their case, with a mask."""
    # ASCII text (nearly all of it) is first searched in lower case, which costs far less than
    # the patterns; other text may match a key by a Unicode case rule, so it always goes through.
    lower = text.lower() if text.isascii() else None
    for s in secrets:
        if s:
            secret = s if isinstance(s, Secret) else Secret(s)
            value = secret.reveal()
            if lower is None or value.lower() in lower:
                text = re.sub(re.escape(value), secret.masked, text, flags=re.IGNORECASE)
    if lower is not None and "sk-" not in lower:
        return text
    return _KEY_SHAPE.sub(_mask_shape, text)


# The loggers whose records may carry a key: httpcore logs response headers at DEBUG.
# Child loggers are listed too: a filter on a logger does not see its children's records.
LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.connection_pool",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "gatecell",
    "gatecell.local",
)


class _Redacting(logging.Filter):
    """Masks the keys it was given, and anything key-shaped, in a record's text.

    A filter on a logger runs only for records that logger is enabled for, so this costs
    nothing while logging is off. Arguments are merged into the message only when the
    message held a key, so formatters that read ``record.args`` keep working otherwise.
    """

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[Secret] = []

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: keep what it holds, as text
            message = f"{record.msg} {record.args!r}"
        clean = redact(message, *self.keys)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info), *self.keys)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, *self.keys)
        return True


_FILTER = _Redacting()


def protect_logs(key: Secret | None) -> None:
    """Mask ``key`` (and anything key-shaped) in every record of `LOGGERS` and their
    children that exist now. Idempotent: one filter per logger, shared by every client."""
    if key and key not in _FILTER.keys:
        _FILTER.keys.append(key)
    names = set(LOGGERS)
    names.update(
        n for n in list(logging.root.manager.loggerDict) if n.startswith(("httpx.", "httpcore.", "gatecell."))
    )
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
