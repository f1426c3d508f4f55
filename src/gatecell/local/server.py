"""``gatecell serve``: the local gateway as a standalone server."""

from __future__ import annotations

import logging
import sys
from typing import Any

from gatecell.wire.util.secret import redact

from .config import Config, key_file, new_key

__all__ = ["serve", "new_key"]


class _Redact(logging.Filter):
    """Masks anything key-shaped in log records (access logs carry paths and query strings)."""

    def __init__(self, *secrets: Any) -> None:
        super().__init__()
        self._secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        # Arguments are masked one by one, not merged into the message: uvicorn's access
        # formatter unpacks them.
        if isinstance(record.msg, str):
            record.msg = redact(record.msg, *self._secrets)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a, *self._secrets) if isinstance(a, str) else a for a in record.args)
        return True


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    api_keys: list[str] | str | None = None,
    api_key_file: str | None = None,
    upstream: str | None = None,
    upstream_key_env: str = "GATECELL_UPSTREAM_KEY",
    pace: float | None = None,
    max_body: int | None = None,
    max_relay: int | None = None,
    log_level: str = "info",
    job_seconds: float | None = None,
    access_log: bool = False,
    data: str | None = None,
) -> None:
    """Run until interrupted. Keys come from `api_keys` and `api_key_file`, else
    GATECELL_LOCAL_KEYS and GATECELL_LOCAL_KEY_FILE, else the local gateway's own key
    (``GATECELL_HOME/local-key``, see `config.home_key`), printed once so the user can
    configure a client with it. Jobs and files are kept in `data` (else GATECELL_LOCAL_DATA,
    else ``GATECELL_HOME/local``; ``:memory:``: in memory only) and served again after a
    restart. `pace`, `job_seconds`, `max_body` (default 10 MiB) and `max_relay` (the most of
    one upstream answer relayed, default 1 GiB) fall back to their GATECELL_LOCAL_* variables,
    as do the limits (see `gatecell.local.config`). The per-request access log is off unless
    asked for: it costs about a third of the forwarding path's CPU."""
    import uvicorn

    from .app import create_app
    from .listener import uvicorn_config

    config = Config.lasting(
        api_keys=api_keys,
        api_key_file=api_key_file,
        pace=pace,
        job_seconds=job_seconds,
        max_body=max_body,
        max_relay=max_relay,
        upstream=upstream,
        upstream_key_env=upstream_key_env,
        data=data,
    )
    shown = f"http://{'localhost' if host in ('0.0.0.0', '::') else host}:{port}"
    print(f"gatecell: local gateway at {shown} (clients use {shown}/v1)", file=sys.stderr)
    if config.generated_key:
        print(f"gatecell: API key {config.api_keys[0].reveal()} (kept in {key_file()})", file=sys.stderr)
    where = str(config.data) if config.data is not None else "memory only: they end with the server"
    print(f"gatecell: jobs and files in {where}", file=sys.stderr)
    if upstream:
        print(f"gatecell: forwarding other models to {config.upstream}", file=sys.stderr)
    guard = _Redact(*config.api_keys, config.upstream_key)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "gatecell.local"):
        logging.getLogger(name).addFilter(guard)
    settings = uvicorn_config(
        create_app(config), config, host=host, port=port, log_level=log_level, access_log=access_log
    )
    server = uvicorn.Server(settings)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:  # e.g. the port is taken: uvicorn has said why
        sys.exit(3)
