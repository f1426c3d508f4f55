"""Generated files (images, audio, video) kept in memory for ``/files/<name>``.

Names are unguessable tokens, and every file belongs to the owner (a key's digest, see
`auth.owner_of`) whose request made it: another key asking for it is told it does not
exist. The store is bounded by a number of files and a number of bytes; the oldest files
go first, and whoever holds a name (a job) is told through `on_evict`, so that nothing keeps
pointing at a file that is gone.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MediaFile", "MediaStore"]


@dataclass(frozen=True)
class MediaFile:
    data: bytes
    mime: str
    owner: str


class MediaStore:
    """Generated files by unguessable name; the oldest are dropped beyond `limit` or `max_bytes`."""

    def __init__(self, limit: int = 1000, max_bytes: int = 512 * 1024 * 1024) -> None:
        self._files: OrderedDict[str, MediaFile] = OrderedDict()
        self._limit = limit
        self._max_bytes = max_bytes
        self._bytes = 0
        self.on_evict: Callable[[str], None] = lambda name: None

    def put(self, data: bytes, mime: str, ext: str, owner: str) -> str:
        """Keep `data` for `owner`; the newest file stays even when it alone is over the budget."""
        name = f"{secrets.token_urlsafe(18)}.{ext}"
        self._files[name] = MediaFile(data, mime, owner)
        self._bytes += len(data)
        while len(self._files) > 1 and (len(self._files) > self._limit or self._bytes > self._max_bytes):
            old = next(iter(self._files))
            self.drop(old)
            self.on_evict(old)
        return name

    def get(self, name: str, owner: str) -> MediaFile | None:
        """The file called `name` if `owner` made it; None for a missing file and another's alike."""
        found = self._files.get(name)
        return found if found is not None and found.owner == owner else None

    def drop(self, name: str) -> None:
        found = self._files.pop(name, None)
        if found is not None:
            self._bytes -= len(found.data)
