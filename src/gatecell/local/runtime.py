"""Per-app state shared by the endpoints: options, keys, job and media stores, upstream, embedders."""

from __future__ import annotations

from dataclasses import dataclass

from .auth import Keys
from .backends.embed import Embedder, embedders
from .config import Config
from .job_store import JobStore
from .media_store import MediaStore
from .registry import EMBEDDINGS, LocalModel
from .render import Renders
from .upstream import Upstream

__all__ = ["Runtime"]


@dataclass
class Runtime:
    config: Config
    keys: Keys
    media: MediaStore
    jobs: JobStore
    renders: Renders
    upstream: Upstream | None
    embedders: dict[str, Embedder]  # the embedding models served, by id (GATECELL_LOCAL_EMBED)

    def serves(self, model: LocalModel) -> bool:
        """Whether this gateway serves `model` of the registry: an embedding model only where
        `embedders` has it (local-embed needs the embed extra)."""
        return EMBEDDINGS not in model.endpoints or model.id in self.embedders

    @classmethod
    def create(cls, config: Config) -> Runtime:
        files = config.data / "files" if config.data is not None else None
        media = MediaStore(config.jobs_kept, config.media_bytes, max_age=config.max_age, folder=files)
        renders = Renders()
        jobs = JobStore(
            config.job_seconds,
            media,
            renders,
            kept=config.jobs_kept,
            queue=config.job_queue,
            queue_per_owner=config.job_queue_per_key,
            max_age=config.max_age,
            folder=config.data,
        )
        return cls(
            config=config,
            keys=Keys(config.api_keys),
            media=media,
            jobs=jobs,
            renders=renders,
            upstream=Upstream(config.upstream, config.upstream_key, config.max_relay)
            if config.upstream
            else None,
            embedders=embedders(config.embed),
        )
