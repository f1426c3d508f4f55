"""Generated files (images, audio, video) kept for ``/files/<name>``.

Names are unguessable tokens, so a URL names one file and nothing else.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict

__all__ = ["MediaStore"]


class MediaStore:
    """Generated files by unguessable name; the oldest are dropped beyond `limit`."""

    def __init__(self, limit: int = 256) -> None:
        self._files: OrderedDict[str, tuple[bytes, str]] = OrderedDict()
        self._limit = limit

    def put(self, data: bytes, mime: str, ext: str) -> str:
        name = f"{secrets.token_urlsafe(18)}.{ext}"
        self._files[name] = (data, mime)
        while len(self._files) > self._limit:
            self._files.popitem(last=False)
        return name

    def get(self, name: str) -> tuple[bytes, str] | None:
        return self._files.get(name)
