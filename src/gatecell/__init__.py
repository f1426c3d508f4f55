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
    "Secret": "gatecell.wire.util.secret",
    "dashboard": "gatecell.notebook.widgets.dashboard",
    **dict.fromkeys(
        ("ChatPanel", "ComparePanel", "ImagePanel", "SpeechPanel", "MediaPanel", "Dashboard"),
        "gatecell.notebook.widgets",
    ),
    "GatecellError": "gatecell.wire.transport.errors",
    "ConfigError": "gatecell.wire.transport.errors",
    "InvalidRequest": "gatecell.wire.transport.errors",
    "APIError": "gatecell.wire.transport.errors",
    "APIConnectionError": "gatecell.wire.transport.errors",
    "APITimeoutError": "gatecell.wire.transport.errors",
    "RateLimitError": "gatecell.wire.transport.errors",
    "StreamError": "gatecell.wire.transport.errors",
    "StreamTimeoutError": "gatecell.wire.transport.errors",
    "JobError": "gatecell.wire.transport.errors",
    "logs": "gatecell.store",
    # what the clients hand back, for annotations and isinstance
    "Answer": "gatecell.wire.transport.results",
    "ChatCompletion": "gatecell.wire.apis.spec",
    "Reply": "gatecell.wire.transport.results",
    "ResponseMeta": "gatecell.wire.transport.results",
    "ImageResult": "gatecell.wire.transport.results",
    "Audio": "gatecell.wire.transport.results",
    "Media": "gatecell.wire.transport.results",
    "ModelList": "gatecell.wire.transport.results",
    "Job": "gatecell.wire.transport.results",
    "ChatStream": "gatecell.wire.apis.streams",
    "TextStream": "gatecell.wire.apis.streams",
    "AsyncChatStream": "gatecell.wire.apis.streams",
    "AsyncTextStream": "gatecell.wire.apis.streams",
    "Proxy": "gatecell.wire.transport.proxies",
    # map: its result and options
    "Batch": "gatecell.batch",
    "BatchError": "gatecell.batch",
    "Row": "gatecell.batch",
    "MapOptions": "gatecell.batch",
    "tool": "gatecell.tools",
    "Toolbox": "gatecell.tools",
}

__all__ = [*_LAZY, "load_ipython_extension", "unload_ipython_extension", "__version__"]

if TYPE_CHECKING:
    from typing import Any

    from gatecell.batch import Batch, BatchError, MapOptions, Row
    from gatecell.gateway import AsyncGateway, Gateway
    from gatecell.notebook.widgets import (
        ChatPanel,
        ComparePanel,
        Dashboard,
        ImagePanel,
        MediaPanel,
        SpeechPanel,
    )
    from gatecell.notebook.widgets.dashboard import dashboard
    from gatecell.store import logs
    from gatecell.tools import Toolbox, tool
    from gatecell.wire.apis.spec import ChatCompletion
    from gatecell.wire.apis.streams import AsyncChatStream, AsyncTextStream, ChatStream, TextStream
    from gatecell.wire.transport.errors import (
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
    from gatecell.wire.transport.proxies import Proxy
    from gatecell.wire.transport.results import (
        Answer,
        Audio,
        ImageResult,
        Job,
        Media,
        ModelList,
        Reply,
        ResponseMeta,
    )
    from gatecell.wire.util.secret import Secret


__getattr__ = exports(__name__, _LAZY)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gatecell``: register the magics."""
    from gatecell.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from gatecell.notebook import unload_ipython_extension as unload

    unload(ipython)
