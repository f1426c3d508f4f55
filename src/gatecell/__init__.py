"""gatecell: a multi-model gateway, native in Jupyter.

Importing the package is cheap on purpose: the client, the notebook layer and the local
gateway load on first use, so ``import gatecell`` and ``%load_ext gatecell`` stay fast.
"""

from __future__ import annotations

from gatecell._lazy import exports
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
    # what the clients hand back, for annotations and isinstance
    "Answer": "gatecell.wire.results",
    "ChatCompletion": "gatecell.wire.schemas",
    "Reply": "gatecell.wire.results",
    "ResponseMeta": "gatecell.wire.results",
    "ImageResult": "gatecell.wire.results",
    "Audio": "gatecell.wire.results",
    "Media": "gatecell.wire.results",
    "ModelList": "gatecell.wire.results",
    "Job": "gatecell.wire.results",
    "ChatStream": "gatecell.wire.streams",
    "TextStream": "gatecell.wire.streams",
    "AsyncChatStream": "gatecell.wire.streams",
    "AsyncTextStream": "gatecell.wire.streams",
    "Proxy": "gatecell.wire.proxies",
    # map: its result and options
    "Batch": "gatecell.batch",
    "BatchError": "gatecell.batch",
    "Row": "gatecell.batch",
    "MapOptions": "gatecell.batch",
}

__all__ = [*_LAZY, "load_ipython_extension", "unload_ipython_extension", "__version__"]

if TYPE_CHECKING:
    from typing import Any

    from gatecell.batch import Batch, BatchError, MapOptions, Row
    from gatecell.gateway import AsyncGateway, Gateway
    from gatecell.notebook.widgets.dashboard import dashboard
    from gatecell.store import logs
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
    from gatecell.wire.proxies import Proxy
    from gatecell.wire.results import Answer, Audio, ImageResult, Job, Media, ModelList, Reply, ResponseMeta
    from gatecell.wire.schemas import ChatCompletion
    from gatecell.wire.secret import Secret
    from gatecell.wire.streams import AsyncChatStream, AsyncTextStream, ChatStream, TextStream


__getattr__ = exports(__name__, _LAZY)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gatecell``: register the magics."""
    from gatecell.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from gatecell.notebook import unload_ipython_extension as unload

    unload(ipython)
