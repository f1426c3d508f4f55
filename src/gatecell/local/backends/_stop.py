"""Cooperative cancellation for the long renderers: a job that is evicted stops rendering.

A thread cannot be killed, so the video and music renderers look at a `threading.Event`
between frames or notes and give up with `Stopped` once it is set.
"""

from __future__ import annotations

import threading

__all__ = ["Stopped", "check"]


class Stopped(Exception):
    """The render was cancelled (its job is gone) before it finished."""


def check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped
