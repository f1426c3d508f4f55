"""What a call is part of, as the caller knows it: the one way the notebook layer tells the
client which conversation and which notebook a request belongs to, and asks for the cache.

A `contextvars` variable, not a global: it is set around a call (``with call_context(...)``)
and read by the client when the call starts, so concurrent cells, panels and tasks each see
their own. Threads start with an empty context: whoever starts one copies the context it
needs (`contextvars.copy_context().run`), as the panels do.

The log reads the notebook's path from here, else from ``JPY_SESSION_NAME``, which Jupyter
Server sets for the kernels of notebooks it opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

__all__ = ["CallContext", "current", "call_context", "notebook_of", "ENV_NOTEBOOK"]

ENV_NOTEBOOK = "JPY_SESSION_NAME"


@dataclass(frozen=True)
class CallContext:
    conversation: str | None = None  # the conversation's name (``%%chat -c NAME``)
    notebook: str | None = None  # the notebook's path, when the caller knows it
    cache: bool | None = None  # answer from the log for this call (None: the client's setting)


_EMPTY = CallContext()
_current: ContextVar[CallContext] = ContextVar("gatecell_call_context", default=_EMPTY)


def current() -> CallContext:
    return _current.get()


@contextmanager
def call_context(**fields: str | bool | None) -> Iterator[CallContext]:
    """Calls made inside the block carry these fields (the others as around it)."""
    context = replace(_current.get(), **fields)  # type: ignore[arg-type]
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def notebook_of(context: CallContext) -> str | None:
    """The notebook a call came from: the context's, else Jupyter Server's session name."""
    return context.notebook or os.environ.get(ENV_NOTEBOOK) or None
