"""Running CPU-heavy work off the event loop, in capacities that keep callers from waiting on jobs.

Three kinds of work leave the loop. Renders a caller waits for (images, speech) share one
capacity; job renders (video, imagine, music), which are polled later, have another of their
own, so a queue of jobs never delays an image. Work whose cost grows with the request
(parsing a big body, composing a chat reply) goes to the default worker threads: it is linear
in its input, but on the loop even linear work on a 10 MiB prompt would hold every other
request up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

__all__ = ["Renders", "off_loop"]

T = TypeVar("T")


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking function in a worker thread and wait for it."""
    return await anyio.to_thread.run_sync(fn, *args)


class Renders:
    """The capacities of one gateway (each app has its own, bound to its own event loop)."""

    def __init__(self, waiting: int = 2, jobs: int = 1) -> None:
        # On a small machine two renders at a time plus one job keep the loop responsive.
        self._waiting = anyio.CapacityLimiter(waiting)
        self._jobs = anyio.CapacityLimiter(jobs)

    async def now(self, fn: Callable[..., T], *args: Any) -> T:
        """A render a caller is waiting for."""
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._waiting)

    async def job(self, fn: Callable[..., T], *args: Any) -> T:
        """A job's render; cancelling the awaiting task before it starts means it never runs."""
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._jobs)
