"""gatecell: a multi-model gateway, native in Jupyter.

Importing the package is cheap on purpose: the client, the notebook layer and the local
gateway load on first use, so ``import gatecell`` and ``%load_ext gatecell`` stay fast.
"""

from __future__ import annotations

from gatecell._version import __version__

TYPE_CHECKING = False  # typing itself costs a third of this module's import time

_LAZY = {
    "Gateway": "gatecell.gateway",
    "AsyncGateway": "gatecell.gateway",
    "Secret": "gatecell.wire.secret",
    "dashboard": "gatecell.notebook.widgets.dashboard",
    "GatecellError": "gatecell.wire.errors",
    "ConfigError": "gatecell.wire.errors",
    "InvalidRequest": "gatecell.wire.errors",
    "APIError": "gatecell.wire.errors",
    "APIConnectionError": "gatecell.wire.errors",
    "APITimeoutError": "gatecell.wire.errors",
    "RateLimitError": "gatecell.wire.errors",
    "StreamError": "gatecell.wire.errors",
    "StreamTimeoutError": "gatecell.wire.errors",
    "JobError": "gatecell.wire.errors",
    "logs": "gatecell.store",
    "tool": "gatecell.tools",
    "Toolbox": "gatecell.tools",
}

__all__ = [*_LAZY, "load_ipython_extension", "unload_ipython_extension", "__version__"]

if TYPE_CHECKING:
    from typing import Any

    from gatecell.gateway import AsyncGateway, Gateway
    from gatecell.notebook.widgets.dashboard import dashboard
    from gatecell.store import logs
    from gatecell.tools import Toolbox, tool
    from gatecell.wire.errors import (
        APIConnectionError,
        APIError,
        APITimeoutError,
        ConfigError,
        GatecellError,
        InvalidRequest,
        JobError,
        RateLimitError,
        StreamError,
        StreamTimeoutError,
    )
    from gatecell.wire.secret import Secret


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gatecell' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gatecell``: register the magics."""
    from gatecell.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from gatecell.notebook import unload_ipython_extension as unload

    unload(ipython)
