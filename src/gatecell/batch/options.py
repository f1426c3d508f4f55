"""The options of a map, written once for ``Gateway.map``, ``AsyncGateway.map`` and
``gatecell.dask.map``: `MapOptions` types their keyword arguments, `resolve` fills the
defaults (some from the environment) and refuses a bad value in one line before any request."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from gatecell.wire.apis.conversation import TEXT_APIS
from gatecell.wire.transport.errors import InvalidRequest, echo
from gatecell.wire.transport.settings import env_number
from gatecell.wire.typed.structured import Schema
from gatecell.wire.typed.typed_calls import typed_request

__all__ = ["MapOptions", "MapSettings", "resolve", "from_flags", "positive", "rate_limits"]

_DEFAULT_MODEL = "local-chat"


class MapOptions(TypedDict, total=False):
    """Keyword arguments of a map; all optional."""

    model: str | None  # default: GATECELL_MODEL, else local-chat
    api: str  # chat (default), messages, generate-content or responses
    system: str | None  # a system prompt for every row
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    concurrency: int | None  # requests in flight: GATECELL_MAP_CONCURRENCY, else 8
    rpm: float | None  # requests per minute at most: GATECELL_RPM, else no limit
    tpm: float | None  # tokens per minute at most: GATECELL_TPM, else no limit
    max_retries: int | None  # retries of a row's 5xx and connection errors: the client's
    patience: float | None  # seconds 429 pauses may add up to: GATECELL_MAP_PATIENCE, else 600
    cache: bool  # answer rows from the log (default True)
    on_error: str  # "record" (default): failed rows keep their error; "raise": BatchError
    schema: Any  # a typed answer per row: a pydantic model class, a TypedDict, a JSON Schema dict...
    choices: Any  # or one of these labels per row (a list, an Enum class, a Literal[...])
    repairs: int  # rounds that show an answer that did not validate its problem (default 1)
    images: str | Sequence[str] | None  # columns whose strings are picture paths or URLs to attach


@dataclass(frozen=True)
class MapSettings:
    """`MapOptions` with their defaults, checked."""

    model: str
    api: str = "chat"
    system: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    concurrency: int = 8
    rpm: float | None = None
    tpm: float | None = None
    max_retries: int | None = None
    patience: float = 600.0
    cache: bool = True
    on_error: str = "record"
    schema: Schema | None = None  # from ``schema`` or ``choices``
    repairs: int = 1
    images: tuple[str, ...] = ()


def positive(name: str, value: Any, whole: bool = False) -> None:
    """Refuse, in one line, a value that is not a positive number (whole, if asked)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    if not ok or (whole and int(value) != value):
        kind = "whole number" if whole else "number"
        raise InvalidRequest(name, f"must be a positive {kind}; got {echo(value)}")


def _names(option: str, value: Any) -> tuple[str, ...]:
    """A column name or a list of them, as a tuple; anything else is one line."""
    names = (value,) if isinstance(value, str) else value or ()
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
        raise InvalidRequest(option, f"must be a column name or a list of them; got {echo(value)}")
    return tuple(names)


def resolve(options: MapOptions | dict[str, Any]) -> MapSettings:
    """The options with their defaults; an unknown name or a value out of range is an
    `InvalidRequest` (before any request)."""
    known = [*MapSettings.__dataclass_fields__, "choices"]
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, 1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InvalidRequest(name, f"is not an option of map{hint}")
    given: dict[str, Any] = {k: v for k, v in options.items() if v is not None and k != "choices"}
    repairs = options.get("repairs")
    typed = typed_request(
        options.get("schema"), options.get("choices"), 1 if repairs is None else repairs, False
    )
    given["schema"] = typed.schema if typed is not None else None
    given["images"] = _names("images", options.get("images"))
    given["model"] = options.get("model") or os.environ.get("GATECELL_MODEL") or _DEFAULT_MODEL
    given["concurrency"] = env_number(options.get("concurrency"), "GATECELL_MAP_CONCURRENCY", 8)
    given["patience"] = env_number(options.get("patience"), "GATECELL_MAP_PATIENCE", 600.0)
    given.update(rate_limits(options))
    resolved = MapSettings(**given)
    if resolved.api not in TEXT_APIS:
        raise InvalidRequest("api", f"must be one of {', '.join(TEXT_APIS)}; got {echo(resolved.api)}")
    if resolved.on_error not in ("record", "raise"):
        raise InvalidRequest("on_error", f"must be 'record' or 'raise'; got {echo(resolved.on_error)}")
    positive("concurrency", resolved.concurrency, whole=True)
    patience = resolved.patience
    if not isinstance(patience, (int, float)) or isinstance(patience, bool) or not patience >= 0:
        raise InvalidRequest("patience", f"must be a number of seconds >= 0; got {echo(patience)}")
    retries = resolved.max_retries
    if retries is not None and (not isinstance(retries, int) or isinstance(retries, bool) or retries < 0):
        raise InvalidRequest("max_retries", f"must be a whole number >= 0; got {echo(retries)}")
    return resolved


def rate_limits(options: Any) -> dict[str, float | None]:
    """``rpm`` and ``tpm`` as given, else the environment's (``GATECELL_RPM``,
    ``GATECELL_TPM``; 0 is no limit); positive or None, else an `InvalidRequest`."""
    limits: dict[str, float | None] = {}
    for name in ("rpm", "tpm"):
        value = options.get(name)
        if value is None:
            value = env_number(None, f"GATECELL_{name.upper()}", 0.0) or None
        if value is not None:
            positive(name, value)
        limits[name] = value
    return limits


def from_flags(ns: Any) -> MapOptions:
    """The map options of a parsed ``%%chat --over`` or ``gatecell map`` line (``-m``,
    ``--api``, ``-s``, ``-t``, ``--top-p``, ``--max-tokens``, ``-j``, ``--rpm``, ``--tpm``); a
    `ValueError` naming the flag for a limit that is not positive, before any request."""
    for flag, value in (("-j/--jobs", ns.jobs), ("--rpm", ns.rpm), ("--tpm", ns.tpm)):
        if value is not None and not value > 0:
            raise ValueError(f"{flag} must be a positive number, got {value:g}")
    return MapOptions(
        model=ns.model,
        api=ns.api,
        system=ns.system,
        temperature=ns.temperature,
        top_p=ns.top_p,
        max_tokens=ns.max_tokens,
        concurrency=ns.jobs,
        rpm=ns.rpm,
        tpm=ns.tpm,
    )
