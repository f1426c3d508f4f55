"""Running the CPU-heavy renderers (images, speech, video, music) off the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

__all__ = ["render_in_thread"]

# Renders are CPU-bound; two at a time keep the event loop responsive on a small machine.
_RENDERS = anyio.CapacityLimiter(2)


async def render_in_thread(fn: Callable[..., bytes], *args: Any) -> bytes:
    """Run a (heavy, blocking) renderer off the event loop."""
    return await anyio.to_thread.run_sync(fn, *args, limiter=_RENDERS)
