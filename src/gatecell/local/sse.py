"""Server-sent event framing for the local gateway's streams (SPEC 6 and the native formats)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["event", "DONE"]

DONE = b"data: [DONE]\n\n"


def event(data: Any, name: str | None = None) -> bytes:
    """One SSE event: optional ``event:`` line, one compact JSON ``data:`` line, blank line."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {payload}\n\n".encode()
