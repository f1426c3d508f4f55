"""The local gateway inside this process: one per process, on a free loopback port.

The notebook layer and the CLI call `start()` when no gateway is configured. The server runs
in a daemon thread with its own event loop; `start()` returns once it accepts connections,
and the server shuts down cleanly at interpreter exit. Its port changes at every start, but
not its jobs and files: they are kept in ``GATECELL_HOME/local`` and owned through the key
of ``GATECELL_HOME/local-key`` (`Config.lasting`), so the next kernel's gateway serves them.
"""

from __future__ import annotations

import asyncio
import atexit
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gatecell.wire.util.secret import Secret

__all__ = ["EmbeddedGateway", "start", "running", "run_in_thread"]

_lock = threading.Lock()
_current: EmbeddedGateway | None = None


@dataclass(frozen=True)
class EmbeddedGateway:
    base_url: str  # root address, e.g. http://127.0.0.1:54321 (no /v1)
    api_key: Secret
    _stop: Callable[[], None] = field(repr=False)

    def stop(self) -> None:
        """Shut the server down (waits for it); safe to call twice."""
        self._stop()


def run_in_thread(
    app: Any, *, host: str = "127.0.0.1", log_level: str = "warning", timeout: float = 20.0
) -> tuple[str, Callable[[], None]]:
    """Serve an ASGI app from a daemon thread on a free port; (base_url, stop).

    A local gateway app (from `create_app`) gets its connection limits and timeouts
    (`listener.uvicorn_config`); any other app, plain uvicorn settings."""
    import uvicorn

    from .listener import uvicorn_config

    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on sockets whose proto says TCP, and
    # without it small writes wait for delayed ACKs (~40 ms per response on loopback).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    runtime = getattr(getattr(app, "state", None), "runtime", None)
    if runtime is not None:
        config = uvicorn_config(app, runtime.config, log_level=log_level)
    else:
        config = uvicorn.Config(
            app, log_level=log_level, access_log=False, backlog=2048, timeout_keep_alive=30
        )
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # reported to the caller of run_in_thread
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"gatecell-local-{port}", daemon=True)
    thread.start()
    waited = 0.0
    while not server.started and thread.is_alive() and waited < timeout:
        thread.join(0.02)
        waited += 0.02
    if not server.started:
        server.should_exit = True
        sock.close()
        raise RuntimeError(f"the local gateway did not start: {failure[0] if failure else 'timed out'}")

    def stop() -> None:
        server.should_exit = True
        if thread is not threading.current_thread():
            thread.join(10)
        sock.close()

    return f"http://{host}:{port}", stop


def start(**options: Any) -> EmbeddedGateway:
    """The process's embedded gateway, started on first call; later calls return the same one.

    `options` are those of `gatecell.local.config.Config.create` (api_keys, pace, job_seconds,
    max_body, max_relay, upstream, upstream_key_env, data, the limits...); they only apply to the first
    call. Jobs and files outlive the process (`Config.lasting`).
    """
    global _current
    with _lock:
        if _current is not None:
            return _current
        from .app import create_app
        from .config import Config

        config = Config.lasting(**options)
        base_url, stop = run_in_thread(create_app(config))
        _current = EmbeddedGateway(base_url, config.api_keys[0], stop)
        atexit.register(_shutdown)
        return _current


def running() -> EmbeddedGateway | None:
    """The process's embedded gateway, when one was started and still runs."""
    return _current


def _shutdown() -> None:
    global _current
    with _lock:
        gateway, _current = _current, None
    if gateway is not None:
        gateway.stop()
