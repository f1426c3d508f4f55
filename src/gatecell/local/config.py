"""The local gateway's options, gathered in one frozen value.

Every option has an environment variable so that `gatecell serve`, the embedded gateway and
tests configure it the same way; explicit arguments win over the environment.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from gatecell.wire.secret import Secret
from gatecell.wire.settings import root_url

__all__ = [
    "Config",
    "new_key",
    "keys_from",
    "ENV_KEYS",
    "ENV_PACE",
    "ENV_JOB_SECONDS",
    "ENV_MAX_BODY",
    "ENV_MAX_RELAY",
]

ENV_KEYS = "GATECELL_LOCAL_KEYS"  # comma separated
ENV_PACE = "GATECELL_LOCAL_PACE"  # seconds between streamed tokens
ENV_JOB_SECONDS = "GATECELL_LOCAL_JOB_SECONDS"  # how long a video/imagine/music job takes
ENV_MAX_BODY = "GATECELL_LOCAL_MAX_BODY"  # bytes
ENV_MAX_RELAY = "GATECELL_LOCAL_MAX_RELAY"  # bytes of one upstream answer relayed to a client

DEFAULT_PACE = 0.008
DEFAULT_JOB_SECONDS = 4.0
DEFAULT_MAX_BODY = 10 * 1024 * 1024
DEFAULT_MAX_RELAY = 1024 * 1024 * 1024


def new_key() -> Secret:
    """A fresh random key of the SPEC 5 form ``sk-...``."""
    return Secret("sk-local-" + secrets.token_urlsafe(24))


def keys_from(api_keys: str | Secret | Sequence[str | Secret] | None) -> tuple[Secret, ...]:
    """Keys given explicitly, else from GATECELL_LOCAL_KEYS; empty when neither has any."""
    if api_keys is None:
        api_keys = os.environ.get(ENV_KEYS, "")
    items: Sequence[str | Secret]
    if isinstance(api_keys, (str, Secret)):
        raw = api_keys.reveal() if isinstance(api_keys, Secret) else api_keys
        items = raw.split(",")
    else:
        items = api_keys
    found = []
    for key in items:
        value = (key.reveal() if isinstance(key, Secret) else str(key)).strip()
        if value:
            found.append(Secret(value))
    return tuple(found)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None


@dataclass(frozen=True)
class Config:
    """What one gateway instance does. Build it with `Config.create` to get env fallbacks."""

    api_keys: tuple[Secret, ...]
    pace: float = DEFAULT_PACE
    job_seconds: float = DEFAULT_JOB_SECONDS
    max_body: int = DEFAULT_MAX_BODY
    max_relay: int = DEFAULT_MAX_RELAY
    upstream: str | None = None
    upstream_key: Secret | None = field(default=None, repr=False)
    generated_key: bool = False  # no key was configured; api_keys holds a fresh random one

    @classmethod
    def create(
        cls,
        api_keys: str | Secret | list | tuple | None = None,
        *,
        pace: float | None = None,
        job_seconds: float | None = None,
        max_body: int | None = None,
        max_relay: int | None = None,
        upstream: str | None = None,
        upstream_key_env: str = "GATECELL_UPSTREAM_KEY",
    ) -> Config:
        """Fill what is not given from the environment; generate a key when there is none."""
        keys = keys_from(api_keys)
        pace = _env_float(ENV_PACE, DEFAULT_PACE) if pace is None else pace
        job_seconds = _env_float(ENV_JOB_SECONDS, DEFAULT_JOB_SECONDS) if job_seconds is None else job_seconds
        max_body = int(_env_float(ENV_MAX_BODY, DEFAULT_MAX_BODY)) if max_body is None else max_body
        max_relay = int(_env_float(ENV_MAX_RELAY, DEFAULT_MAX_RELAY)) if max_relay is None else max_relay
        if pace < 0 or job_seconds < 0 or max_body < 1 or max_relay < 1:
            raise ValueError("pace and job_seconds must be >= 0, max_body and max_relay >= 1")
        upstream_key = os.environ.get(upstream_key_env) if upstream else None
        return cls(
            api_keys=keys or (new_key(),),
            generated_key=not keys,
            pace=pace,
            job_seconds=job_seconds,
            max_body=max_body,
            max_relay=max_relay,
            upstream=root_url(upstream) if upstream else None,
            upstream_key=Secret(upstream_key) if upstream_key else None,
        )
