"""The local gateway's files on disk: written whole or not at all, readable by their user alone,
and a lease that tells a job someone is rendering from one whose renderer is gone.

Folders are 0700 and files 0600, and neither may be another user's
(`gatecell.wire.util.private`): the jobs' prompts and the generated media are the user's, like
the log, and a record read back is served as the user's own job. A file is written to a
temporary name in its folder and renamed into place, so a reader (another gateway process,
the same one after a crash) sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import tempfile
import time
from pathlib import Path

from gatecell.wire.util.private import TMP_PREFIX, private_folder

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, see Lease
    fcntl = None  # type: ignore[assignment]

__all__ = ["sweep_temporary", "Lease"]

_LEASE = re.compile(r"[0-9a-f]{16}")


def sweep_temporary(folder: Path, older_than: float = 3600.0) -> None:
    """Remove temporary files a process killed mid-write left (an hour old: none is being written)."""
    cutoff = time.time() - older_than
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.name.startswith(TMP_PREFIX) and entry.stat().st_mtime < cutoff:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


class Lease:
    """A gateway's claim on the jobs it renders: ``folder/<name>.lock``, locked (``flock``)
    for as long as the process holds it. The operating system releases the lock however the
    process ends (a SIGKILL too), so `alive` tells a job another gateway is still rendering
    (leave it) from one whose gateway is gone (start it again).

    The file is locked under a temporary name and only then renamed into place, so no one
    ever sees it unlocked while its holder lives. Without ``flock`` (Windows) every other
    lease reads as gone: a job found unfinished is rendered again, at worst twice.
    """

    def __init__(self, folder: Path) -> None:
        self._folder = private_folder(folder)
        self.name = secrets.token_hex(8)
        fd, tmp = tempfile.mkstemp(dir=self._folder, prefix=TMP_PREFIX)
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.replace(tmp, self._path(self.name))
        self._fd: int | None = fd
        for entry in os.scandir(self._folder):  # leases of gateways that are gone
            name = entry.name.removesuffix(".lock")
            if entry.name.endswith(".lock") and name != self.name:
                self.alive(name)
        sweep_temporary(self._folder)

    def _path(self, name: str) -> Path:
        return self._folder / f"{name}.lock"

    def alive(self, name: str | None) -> bool:
        """Whether the gateway holding lease ``name`` still runs (removing its file if not)."""
        if name == self.name and self._fd is not None:
            return True
        if not name or not _LEASE.fullmatch(name) or fcntl is None:
            return False
        try:
            fd = os.open(self._path(name), os.O_RDWR)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        else:
            with contextlib.suppress(OSError):
                os.unlink(self._path(name))
            return False
        finally:
            os.close(fd)

    def release(self) -> None:
        """Give the lease up (the gateway stops): its unfinished jobs are free to be resumed."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._path(self.name))
        os.close(self._fd)
        self._fd = None
