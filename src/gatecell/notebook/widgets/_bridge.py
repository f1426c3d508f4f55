"""An `AsyncGateway` for the panels, which call a gateway from their threads.

Its coroutines run on an event loop of the bridge's own, in a daemon thread of its own: the
kernel's loop is never used, so nothing a panel does waits on the cells the notebook runs
(or makes them wait). httpx's async connections belong to the loop that opened them, so
the bridge drives a copy of the gateway with a pool of its own: the notebook may go on
awaiting the same `AsyncGateway` on its loop meanwhile. The copy has the same address,
key and settings as when the panel was made.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from gatecell.gateway import AsyncGateway

__all__ = ["SyncGateway"]

T = TypeVar("T")


class SyncGateway:
    """The methods of an `AsyncGateway`, called like a `Gateway`'s: each blocks its caller
    (a panel's thread) until its coroutine, run on the bridge's loop, is done. A stream comes
    back as an iterator (`SyncStream`); the media of a result (images, a job's files) come
    fetched, since the bytes of an async result are only had by awaiting them."""

    def __init__(self, gateway: AsyncGateway) -> None:
        self.gateway = gateway.clone()  # the same gateway and key, in a pool of the bridge's loop
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gatecell-async-panel", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The result of ``coroutine``, run on the bridge's loop."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.gateway, name)
        if name.startswith("_") or not callable(found):
            return found  # base_url, api_key, ...

        def call(*args: Any, **kwargs: Any) -> Any:
            result = found(*args, **kwargs)
            if asyncio.iscoroutine(result):
                result = self.run(result)
            if hasattr(result, "__aiter__"):
                return SyncStream(result, self)
            for media in (*getattr(result, "images", ()), *getattr(result, "media", ())):
                if not media.loaded:
                    self.run(media.aread())
            return result

        return call

    def close(self) -> None:
        """Close the connections and stop the loop."""
        if self.loop.is_running():
            self.run(self.gateway.aclose())
            self.loop.call_soon_threadsafe(self.loop.stop)

    def __repr__(self) -> str:
        return f"SyncGateway({self.gateway!r})"


class SyncStream:
    """An async stream read from another thread: iterate it for the fragments; its other
    attributes (``text``, ``usage``...) are the stream's own. `close` may come from any
    thread while another one waits for the next fragment: that wait ends at once."""

    def __init__(self, stream: Any, bridge: SyncGateway) -> None:
        self.stream = stream
        self.bridge = bridge
        self._fragments = stream.__aiter__()
        self._waiting: concurrent.futures.Future[Any] | None = None
        self._closed = False

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        self._waiting = self.bridge.submit(_next(self._fragments))
        try:
            fragment = self._waiting.result()
        except concurrent.futures.CancelledError:
            raise StopIteration from None
        if fragment is _END:
            raise StopIteration
        return fragment

    def close(self) -> None:
        self._closed = True
        if self._waiting is not None:
            self._waiting.cancel()
        self.bridge.submit(self.stream.aclose()).result(timeout=10)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


_END = object()


async def _next(fragments: Any) -> Any:
    try:
        return await fragments.__anext__()
    except StopAsyncIteration:
        return _END
