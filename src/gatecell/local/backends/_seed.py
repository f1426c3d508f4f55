"""One stable seed per input, so every offline renderer is a pure function of its arguments.

`hash()` is salted per process, so renderers derive their randomness from SHA-256 instead:
the same prompt gives the same picture, voice-over, clip or tune in every process.
"""

from __future__ import annotations

import hashlib

__all__ = ["seed"]


def seed(*parts: object) -> int:
    """A 64-bit integer determined only by `parts` (joined by their ``str``)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
