"""Per-app state shared by the endpoints: options, keys, job and media stores, upstream."""

from __future__ import annotations

from dataclasses import dataclass

from .auth import Keys
from .config import Config
from .job_store import JobStore
from .media_store import MediaStore
from .upstream import Upstream

__all__ = ["Runtime"]


@dataclass
class Runtime:
    config: Config
    keys: Keys
    media: MediaStore
    jobs: JobStore
    upstream: Upstream | None

    @classmethod
    def create(cls, config: Config) -> Runtime:
        media = MediaStore()
        return cls(
            config=config,
            keys=Keys(config.api_keys),
            media=media,
            jobs=JobStore(config.job_seconds, media),
            upstream=Upstream(config.upstream, config.upstream_key, config.max_relay)
            if config.upstream
            else None,
        )
