"""The embedded local gateway: SPEC's endpoints (docs/SPEC.md) served offline by stand-in backends.

`app.create_app` builds the Starlette app, `embedded.start` runs one in this process,
`server.serve` runs one as ``gatecell serve``. Nothing heavy is imported here: the names
below load their module when first asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Config", "create_app", "start", "run_in_thread"]

_LAZY = {
    "Config": "gatecell.local.config",
    "create_app": "gatecell.local.app",
    "start": "gatecell.local.embedded",
    "run_in_thread": "gatecell.local.embedded",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gatecell.local' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
