"""Where the gateway is and which key to use; where gatecell keeps its files; and how a
number or a flag is read from the environment.

Resolution order for each setting: the explicit argument, then ``GATECELL_*``, then the
``OPENAI_*`` variables that most tools already set. The base address is stored without a
version suffix (SPEC 4 note 2: ``{base_url}`` and ``{base_url}/v1`` are both valid), so the
client can reach ``/v1beta`` and the unversioned job paths from the same root.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from gatecell.wire.util.secret import Secret

__all__ = [
    "Settings",
    "resolve",
    "root_url",
    "split_query",
    "home",
    "env_number",
    "env_flag",
    "env_choice",
    "ENV_BASE_URL",
    "ENV_API_KEY",
]

ENV_BASE_URL = ("GATECELL_BASE_URL", "OPENAI_BASE_URL")
ENV_API_KEY = ("GATECELL_API_KEY", "OPENAI_API_KEY")

N = TypeVar("N", int, float)

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class Settings:
    base_url: str | None  # root address, no trailing slash, no /v1
    api_key: Secret | None

    def __repr__(self) -> str:
        return f"Settings(base_url={self.base_url!r}, api_key={self.api_key!r})"


def root_url(url: str) -> str:
    """``http://h:1/v1/`` → ``http://h:1``; ``http://h:1/proxy`` stays as it is."""
    url = url.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[:-3]
    return url


def split_query(url: str) -> tuple[str, str]:
    """A root address and the query it carried (``https://h/v1?api-version=1`` → ``https://h``,
    ``api-version=1``): the query goes on every request, as Azure-style gateways need."""
    root, _, query = url.partition("?")
    return root_url(root), query.partition("#")[0]


def home() -> Path:
    """Where gatecell keeps its files: ``GATECELL_HOME``, else the platform's user data folder."""
    value = os.environ.get("GATECELL_HOME")
    if value:
        return Path(value).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("gatecell", appauthor=False))


def _first_env(names: tuple[str, ...]) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def resolve(base_url: str | None = None, api_key: str | Secret | None = None) -> Settings:
    url = base_url or _first_env(ENV_BASE_URL)
    key = api_key or _first_env(ENV_API_KEY)
    return Settings(
        base_url=root_url(url) if url else None,
        api_key=Secret(key) if key else None,
    )


def _config_error(message: str, value: str) -> Exception:
    """A `ConfigError` of ``message`` with ``value`` quoted (cut short) in place of ``{}``."""
    from gatecell.wire.transport.errors import ConfigError, echo

    return ConfigError(message.format(echo(value)))


def env_number(value: N | None, name: str, default: N) -> N:
    """An explicit number, else the environment variable ``name``, else ``default``.

    The one parser of numeric settings, for the client, the magics and the local gateway:
    the value has the type of ``default`` (an ``int`` may be written ``1e6``), and a
    malformed, negative or infinite one is a `ConfigError` naming the variable, never a
    silent default.
    """
    if value is not None:
        return value
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    kind = "whole number" if type(default) is int else "number"
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number >= 0 and (kind == "number" or number.is_integer())):
        raise _config_error(f"{name} must be a non-negative {kind}, got {{}}", raw)
    return type(default)(number)


def env_choice(value: str | None, name: str, choices: tuple[str, ...], default: str) -> str:
    """An explicit choice, else ``name`` (one of ``choices``), else ``default``; a value of
    the environment that is none of them is a `ConfigError` naming the variable."""
    if value is not None:
        return value
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() not in choices:
        raise _config_error(f"{name} must be one of {', '.join(choices)}; got {{}}", raw)
    return raw.lower()


def env_flag(value: bool | None, name: str, default: bool = False) -> bool:
    """An explicit flag, else ``name`` (1/true/yes/on or 0/false/no/off), else ``default``."""
    if value is not None:
        return value
    raw = os.environ.get(name, "").strip()
    word = raw.lower()
    if not word:
        return default
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise _config_error(f"{name} must be one of 1, true, yes, on, 0, false, no, off; got {{}}", raw)
