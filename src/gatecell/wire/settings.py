"""Where the gateway is and which key to use.

Resolution order for each setting: the explicit argument, then ``GATECELL_*``, then the
``OPENAI_*`` variables that most tools already set. The base address is stored without a
version suffix (SPEC 4 note 2: ``{base_url}`` and ``{base_url}/v1`` are both valid), so the
client can reach ``/v1beta`` and the unversioned job paths from the same root.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .secret import Secret

__all__ = ["Settings", "resolve", "root_url", "env_number", "ENV_BASE_URL", "ENV_API_KEY"]

ENV_BASE_URL = ("GATECELL_BASE_URL", "OPENAI_BASE_URL")
ENV_API_KEY = ("GATECELL_API_KEY", "OPENAI_API_KEY")


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


def env_number(value: float | None, name: str, default: float) -> float:
    """An explicit number, else the environment variable ``name``, else ``default``.

    A malformed variable is a `ConfigError` naming it, not a silent default.
    """
    if value is not None:
        return value
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return type(default)(raw)
    except ValueError:
        from .errors import ConfigError

        raise ConfigError(f"{name} must be a {type(default).__name__}, got {raw!r}") from None
