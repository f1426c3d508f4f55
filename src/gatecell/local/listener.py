"""The listening side of the local gateway: uvicorn's settings and a watch on every connection.

uvicorn closes a connection that stays idle after an answer (``timeout_keep_alive``), but it
waits forever for a request head that never ends, or a body that stops half-way, and accepts
connections until the process runs out of file descriptors. `Watched` adds what is missing,
on top of uvicorn's own HTTP protocol class:

- a request head must be complete within `head_timeout` of its first byte (or of the
  connection opening), however slowly its bytes trickle in;
- a request body may not pause for more than `idle_timeout`;
- beyond `max_connections` open connections, a new one makes room by closing the connection
  that has kept the server waiting the longest (for a head or a body, or idle between
  requests); only when every connection is busy being answered is the new one refused.
  Clients that send their requests are thus served while a flood of silent ones is not.

`gatecell serve` and the embedded gateway both build their server with `uvicorn_config`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .config import Config, default_max_connections

if TYPE_CHECKING:
    import uvicorn

__all__ = ["uvicorn_config", "watched_protocol"]


def watched_protocol(config: Config) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class (httptools when installed, else h11) with the watch above."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    head_timeout, idle_timeout = config.head_timeout, config.idle_timeout
    limit = config.max_connections or default_max_connections()

    class Watched(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _timer: asyncio.TimerHandle | None = None
        _head_from: float | None = None  # when the head being waited for began; None: not waiting
        _heard: float = 0.0  # when the client last sent bytes or got a whole answer

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._heard = self._head_from = self.loop.time()
            self._watch()
            if len(self.connections) > limit:
                self._make_room()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            self._heard = self.loop.time()
            if self._head_from is None and (cycle is None or cycle.response_complete):
                self._head_from = self._heard  # the first bytes of the next request
            super().data_received(data)
            if self.cycle is not cycle:  # a head was complete: a new request started
                self._head_from = None
            self._watch()

        def on_response_complete(self) -> None:
            self._heard = self.loop.time()
            super().on_response_complete()

        def _waiting(self) -> bool:
            """The server waits on the client: for a head, for the rest of a body, or idle."""
            cycle = self.cycle
            return cycle is None or cycle.response_complete or cycle.more_body

        def _due(self) -> float | None:
            """When the client runs out of time, or None when it is not the one being waited for
            (being answered, or idle between requests: uvicorn's keep-alive timeout is on that)."""
            if self._head_from is not None:
                return self._head_from + head_timeout
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete and cycle.more_body:
                return self._heard + idle_timeout
            return None

        def _watch(self) -> None:
            """Make sure a timer fires by the time the client runs out of time. A later deadline
            is left to `_check`, which re-arms: each chunk of a body costs no timer."""
            due = self._due()
            if due is not None and (self._timer is None or due < self._timer.when()):
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = self.loop.call_at(due, self._check)

        def _check(self) -> None:
            self._timer = None
            due = self._due()
            if due is None or self.transport.is_closing():
                return
            if self.loop.time() >= due:
                self.transport.close()
            else:
                self._timer = self.loop.call_at(due, self._check)

        def _make_room(self) -> None:
            waiting = [
                c
                for c in self.connections
                if isinstance(c, Watched) and c is not self and c._waiting() and not c.transport.is_closing()
            ]
            victim = min(waiting, key=lambda c: c._heard, default=self)
            victim.transport.close()

    return Watched


def uvicorn_config(app: Any, config: Config, **options: Any) -> uvicorn.Config:
    """uvicorn's settings for the local gateway `app`; `options` (host, port, log_level...) win.

    Proxy headers are off: every client is on loopback, where uvicorn would trust a forged
    ``X-Forwarded-Proto`` or ``X-Forwarded-For`` from any of them.
    """
    import uvicorn

    settings: dict[str, Any] = {
        "http": watched_protocol(config),
        "timeout_keep_alive": config.idle_timeout,
        "proxy_headers": False,
        "backlog": 2048,
        "access_log": False,
        **options,
    }
    return uvicorn.Config(app, **settings)
