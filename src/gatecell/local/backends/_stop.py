"""Cooperative cancellation for the long renderers: a job that is evicted stops rendering.

A thread cannot be killed, so the video and music renderers look at a `threading.Event`
between frames or notes and give up with `Stopped` once it is set. A request's work (a
local-chat reply) runs with the event its client's going away sets (`running`), which
`current` gives to what can stop (a PDF's text extraction kills its worker).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["Stopped", "check", "current", "running"]

T = TypeVar("T")
_CURRENT: ContextVar[threading.Event | None] = ContextVar("gatecell_local_stop", default=None)


class Stopped(Exception):
    """The render was cancelled (its job is gone) before it finished."""


def check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped


def current() -> threading.Event | None:
    """The event that stops the request being served in this thread (None outside one)."""
    return _CURRENT.get()


def running(stop: threading.Event, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` with ``stop`` as `current` (called in the thread that does the work)."""
    token = _CURRENT.set(stop)
    try:
        return fn(*args)
    finally:
        _CURRENT.reset(token)
