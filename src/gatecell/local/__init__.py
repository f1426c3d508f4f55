"""The embedded local gateway: SPEC's endpoints (docs/SPEC.md) served offline by stand-in backends.

`app.create_app` builds the Starlette app, `embedded.start` runs one in this process,
`server.serve` runs one as ``gatecell serve``. Nothing heavy is imported here: the names
below load their module when first asked for.
"""

from __future__ import annotations

from gatecell._lazy import exports

__all__ = ["Config", "create_app", "start", "run_in_thread"]

_LAZY = {
    "Config": "gatecell.local.config",
    "create_app": "gatecell.local.app",
    "start": "gatecell.local.embedded",
    "run_in_thread": "gatecell.local.embedded",
}


__getattr__ = exports(__name__, _LAZY)
