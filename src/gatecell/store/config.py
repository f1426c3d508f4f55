"""The store's settings, read from the environment in one place.

| Variable | Default | Meaning |
|---|---|---|
| ``GATECELL_HOME`` | the platform's user data folder (``platformdirs``) | folder of ``gatecell.db`` |
| ``GATECELL_LOG`` | on | ``0`` / ``false`` / ``off`` / ``no``: log nothing |
| ``GATECELL_LOG_MEDIA`` | off | ``1``: keep the bytes of media replies too, not only type, size, hash |
| ``GATECELL_CACHE`` | off | ``1``: answer a request identical to a logged one from the log |
| ``GATECELL_PRICES`` | none | a TOML or JSON file of per-million-token prices, for ``usage`` costs |

A malformed switch is a `ConfigError` naming the variable, not a silent default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gatecell.wire.transport.settings import env_flag, home

__all__ = ["StoreSettings", "settings", "home", "DB_NAME"]

DB_NAME = "gatecell.db"


@dataclass(frozen=True)
class StoreSettings:
    path: Path  # the database file
    log: bool  # log exchanges and jobs
    log_media: bool  # keep media bytes in the log
    cache: bool  # answer identical requests from the log (read by the callers)
    prices: Path | None  # GATECELL_PRICES


def settings() -> StoreSettings:
    """The store's settings as the environment says now."""
    prices = os.environ.get("GATECELL_PRICES")
    return StoreSettings(
        path=home() / DB_NAME,
        log=env_flag(None, "GATECELL_LOG", True),
        log_media=env_flag(None, "GATECELL_LOG_MEDIA"),
        cache=env_flag(None, "GATECELL_CACHE"),
        prices=Path(prices).expanduser() if prices else None,
    )
