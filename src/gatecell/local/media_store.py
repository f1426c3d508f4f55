"""Generated files (images, audio, video) for ``/files/<name>``: in memory, or on disk.

Names are unguessable tokens of the gateway's own (nothing a client sent ever names a file),
and every file belongs to the owner (a key's digest, see `auth.owner_of`) whose request made
it: another key asking for it is told it does not exist. The store is bounded by a number of
files, a number of bytes and an age; the oldest files go first, and whoever holds a name (a
job) is told through `on_evict`, so that nothing keeps pointing at a file that is gone.

With a ``folder`` the files live in ``folder/<owner>/<name>`` (see `disk`) and outlive the
gateway: the index is read back from the folder at start, and a file another gateway process
wrote there (two kernels share the folder) is found when it is asked for. A name or owner is
checked against the shape the gateway gives them before it comes near a path, and a file is
served only if it is this user's own regular file (`gatecell.wire.util.private`): never through a
symbolic link, never one another user planted.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from gatecell.wire.util.private import private_file, private_folder, read_private, write_private

from .disk import sweep_temporary

__all__ = ["MediaFile", "MediaStore", "NAME", "OWNER_ID"]

NAME = re.compile(r"[A-Za-z0-9_-]{24}\.[a-z0-9]{1,5}")  # token_urlsafe(18) and an extension
OWNER_ID = re.compile(r"[0-9a-f]{32}")  # `auth.owner_of`
_MIMES = {"png": "image/png", "mp4": "video/mp4", "wav": "audio/wav", "mp3": "audio/mpeg"}
DAY = 86400.0


@dataclass(frozen=True)
class MediaFile:
    mime: str
    owner: str
    size: int
    created: float
    data: bytes | None = None  # None in the index of a folder: read on use


class MediaStore:
    """Generated files by unguessable name; the oldest are dropped beyond `limit` files,
    `max_bytes` bytes or `max_age` seconds."""

    def __init__(
        self,
        limit: int = 1000,
        max_bytes: int = 512 * 1024 * 1024,
        *,
        max_age: float = 7 * DAY,
        folder: Path | None = None,
    ) -> None:
        self._files: OrderedDict[str, MediaFile] = OrderedDict()
        self._limit = limit
        self._max_bytes = max_bytes
        self._max_age = max_age
        self._bytes = 0
        self._folder = private_folder(folder) if folder is not None else None
        self.on_evict: Callable[[str], None] = lambda name: None
        if self._folder is not None:
            self._load(self._folder)

    def _load(self, folder: Path) -> None:
        """Index the files a previous run (or another process) left, oldest first."""
        found = []
        for owner in os.scandir(folder):
            if owner.is_dir(follow_symlinks=False) and OWNER_ID.fullmatch(owner.name):
                sweep_temporary(Path(owner.path))
                for entry in os.scandir(owner.path):
                    stat = _usable(Path(entry.path)) if NAME.fullmatch(entry.name) else None
                    if stat is not None:
                        found.append((stat.st_mtime, entry.name, owner.name, stat.st_size))
        for created, name, owner_id, size in sorted(found):
            self._add(name, MediaFile(_mime(name), owner_id, size, created))
        self._evict()

    def _path(self, owner: str, name: str) -> Path:
        assert self._folder is not None
        return self._folder / owner / name

    def _add(self, name: str, entry: MediaFile) -> None:
        self._files[name] = entry
        self._bytes += entry.size

    def put(self, data: bytes, mime: str, ext: str, owner: str) -> str:
        """Keep `data` for `owner`; the newest file stays even when it alone is over the budget."""
        name = f"{secrets.token_urlsafe(18)}.{ext}"
        if self._folder is not None:
            write_private(self._path(owner, name), data)
            entry = MediaFile(mime, owner, len(data), time.time())
        else:
            entry = MediaFile(mime, owner, len(data), time.time(), data)
        self._add(name, entry)
        self._evict()
        return name

    def _evict(self) -> None:
        cutoff = time.time() - self._max_age
        while len(self._files) > 1:
            name, oldest = next(iter(self._files.items()))
            over = len(self._files) > self._limit or self._bytes > self._max_bytes
            if not over and oldest.created >= cutoff:
                return
            self._gone(name)

    def _gone(self, name: str) -> None:
        self.drop(name)
        self.on_evict(name)

    def get(self, name: str, owner: str) -> MediaFile | None:
        """The file called `name`, with its bytes, if `owner` made it and it is still kept;
        None for a missing file and another's alike."""
        entry = self._files.get(name)
        if entry is None and self._folder is not None:
            entry = self._find(name, owner)
        if entry is None or entry.owner != owner:
            return None
        if entry.created < time.time() - self._max_age:
            self._gone(name)
            return None
        if entry.data is not None:
            return entry
        try:
            return replace(entry, data=read_private(self._path(owner, name)))
        except OSError:  # another gateway sharing the folder evicted it (or it is not ours)
            self._gone(name)
            return None

    def _find(self, name: str, owner: str) -> MediaFile | None:
        """A file of the folder this process has not indexed (another process wrote it)."""
        if not (NAME.fullmatch(name) and OWNER_ID.fullmatch(owner)):
            return None
        stat = _usable(self._path(owner, name))
        if stat is None:
            return None
        entry = MediaFile(_mime(name), owner, stat.st_size, stat.st_mtime)
        self._add(name, entry)
        return entry

    def has(self, name: str, owner: str) -> bool:
        """Whether the file is still there for `owner` (in the folder: on the disk now)."""
        entry = self._files.get(name)
        if self._folder is None:
            return entry is not None and entry.owner == owner
        return (
            bool(NAME.fullmatch(name) and OWNER_ID.fullmatch(owner))
            and _usable(self._path(owner, name)) is not None
        )

    def drop(self, name: str, owner: str | None = None) -> None:
        """Forget a file (and delete it from the folder). ``owner`` finds a file of the
        folder this process never indexed."""
        found = self._files.pop(name, None)
        if found is not None:
            self._bytes -= found.size
            owner = found.owner
        if self._folder is not None and owner and NAME.fullmatch(name) and OWNER_ID.fullmatch(owner):
            self._path(owner, name).unlink(missing_ok=True)


def _usable(path: Path) -> os.stat_result | None:
    """The file's status if it is there and may be served (this user's own regular file)."""
    try:
        stat = path.lstat()
        private_file(path, stat)
    except OSError:  # gone, or another user's, or a symbolic link
        return None
    return stat


def _mime(name: str) -> str:
    return _MIMES.get(name.rsplit(".", 1)[-1], "application/octet-stream")
