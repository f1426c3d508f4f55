"""The durable store: every exchange logged in one SQLite file, a response cache over it,
usage totals, and job records that outlive a kernel.

    from gatecell import store

    s = store.default_store()            # GATECELL_HOME/gatecell.db, switches from the environment
    s.record_exchange("/v1/chat/completions", "gpt-4o", body_bytes, text=..., usage=..., latency=...)
    key = store.cache_key("/v1/chat/completions", "gpt-4o", body_bytes, base_url)
    hit = s.lookup(key)                  # a CachedReply, or None
    s.record_job("video", job_id, gateway=base_url, prompt=..., state="queued")
    store.logs(n=5, q="lighthouse")      # newest first, as dicts

The tables are documented in `gatecell.store.tables` and ``docs/store.md``; the settings in
`gatecell.store.config`.
"""

from __future__ import annotations

import threading
from typing import Any

from .config import StoreSettings, settings
from .keys import cache_key
from .queries import CachedReply, StoredJob, UsageRow
from .store import Store, StoreError

__all__ = [
    "Store",
    "StoreError",
    "StoreSettings",
    "CachedReply",
    "StoredJob",
    "UsageRow",
    "cache_key",
    "settings",
    "default_store",
    "logs",
    "conversation",
    "usage",
    "jobs",
    "job",
]

_defaults: dict[tuple[Any, ...], Store] = {}
_defaults_lock = threading.Lock()


def default_store(*, log: bool | None = None) -> Store:
    """The store the settings name now (``GATECELL_HOME``, ``GATECELL_LOG``,
    ``GATECELL_LOG_MEDIA``): one per file and switches in a process, shared by every caller.
    ``log`` overrides ``GATECELL_LOG``: a client that decides for itself whether to log
    (``Gateway(log=...)``) asks for a store that writes."""
    s = settings()
    log = s.log if log is None else log
    key = (s.path, log, s.log_media)
    with _defaults_lock:
        found = _defaults.get(key)
        if found is None:
            found = _defaults[key] = Store(s.path, log=log, log_media=s.log_media)
        return found


def logs(
    n: int | None = 20, q: str | None = None, model: str | None = None, conversation: str | None = None
) -> list[dict[str, Any]]:
    """The newest ``n`` logged exchanges, newest first (``gatecell.logs``); see `Store.logs`."""
    return default_store().logs(n=n, q=q, model=model, conversation=conversation)


def conversation(name: str) -> list[dict[str, Any]]:
    """The turns of a logged conversation, oldest first; see `Store.conversation`."""
    return default_store().conversation(name)


def usage(since: str | None = None) -> list[UsageRow]:
    """Requests and tokens per model per day, with costs where ``GATECELL_PRICES`` has prices."""
    return default_store().usage(since=since)


def jobs(limit: int | None = 20) -> list[StoredJob]:
    return default_store().jobs(limit)


def job(job_id: str, kind: str | None = None, gateway: str | None = None) -> StoredJob | None:
    return default_store().job(job_id, kind, gateway)
