"""Folders and files of this user alone: the log, the local gateway's jobs and files, key files.

What gatecell keeps on disk is private (prompts, replies, keys), and what it reads back it
trusts: a cached answer is shown as the gateway's, a logged conversation is sent again, a job
record is served as the user's own. So on a machine shared with other users (a JupyterHub
node, a CI runner) neither may be another user's:

- a folder is made 0700 (its missing parents too), in a folder of this user's or of the
  system's (root's, that others may not write unless it is sticky, as /tmp); one that exists
  is used if this user owns it, and tightened to 0700 if others may read or write it; a
  symbolic link to it counts only if this user made the link;
- a file is made 0600 (``O_EXCL``: never one that appeared meanwhile); one that exists is
  used if it is a regular file (never a symbolic link, which is not followed), this user
  owns it and no one else may write it (another user may have written into it); one that
  others may only read is tightened to 0600.

Anything else raises `Untrusted`, an `OSError` whose message is the one line a caller shows:
the log turns itself off, the local gateway keeps its jobs in memory, a key file is refused.
Parents of the folder are not checked. On systems without user ids (Windows) only the
symbolic links are checked.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "Untrusted",
    "TMP_PREFIX",
    "private_folder",
    "private_file",
    "create_private",
    "read_private",
    "write_private",
    "write_whole",
    "open_output",
    "write_output",
]

_POSIX = hasattr(os, "getuid")


class Untrusted(PermissionError):
    """A folder or file another user owns or may write, or a symbolic link: not used."""


def _owner(st: os.stat_result, path: Path) -> None:
    if _POSIX and st.st_uid != os.getuid():
        raise Untrusted(f"{path} belongs to another user (uid {st.st_uid}); gatecell uses only its own files")


def private_folder(path: str | os.PathLike[str]) -> Path:
    """``path``, made 0700 if missing (with its missing parents, which ``mkdir -p`` would
    make with the default mode, letting others list them), else checked and tightened."""
    path = Path(path)
    missing = [folder for folder in (path, *path.parents) if not os.path.lexists(folder)]
    if missing and _POSIX:
        _may_hold(missing[-1].parent)
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        _owner(st, path)  # the user's own link: its target is checked below
        st = path.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"{path} is not a folder")
    _owner(st, path)
    if _POSIX and st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _may_hold(folder: Path) -> None:
    """Whether gatecell may make a folder in ``folder``: one of this user's, or the system's
    that no other user may write into, save a sticky one (/tmp), where no one can take it over."""
    st = folder.stat()
    if st.st_uid == os.getuid() or (st.st_uid == 0 and (not st.st_mode & 0o022 or st.st_mode & stat.S_ISVTX)):
        return
    why = "may be written by other users" if st.st_uid == 0 else f"belongs to another user (uid {st.st_uid})"
    raise Untrusted(f"{folder} {why}; gatecell makes no folder in it")


def private_file(path: str | os.PathLike[str], st: os.stat_result | None = None) -> bool:
    """Whether ``path`` exists, having checked that it may be used (see the module
    docstring) and tightened it to 0600; `Untrusted` if it may not."""
    path = Path(path)
    if st is None:
        try:
            st = path.lstat()
        except FileNotFoundError:
            return False
    if stat.S_ISLNK(st.st_mode):
        raise Untrusted(f"{path} is a symbolic link; gatecell does not follow it")
    if not stat.S_ISREG(st.st_mode):
        raise Untrusted(f"{path} is not a regular file")
    _owner(st, path)
    if _POSIX and st.st_mode & 0o022:
        raise Untrusted(f"{path} may be written by other users (mode {stat.S_IMODE(st.st_mode):o}); not used")
    if _POSIX and st.st_mode & 0o077:
        os.chmod(path, 0o600)
    return True


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def read_private(path: str | os.PathLike[str], *, tighten: bool = True) -> bytes:
    """The bytes of ``path``, read never through a symbolic link, once `private_file` accepts
    what was opened (``FileNotFoundError`` when there is none). With ``tighten=False`` a file
    others may read is refused rather than tightened (a key file: the key may have leaked)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as exc:
        if _NOFOLLOW and os.path.islink(path):
            raise Untrusted(f"{path} is a symbolic link; gatecell does not follow it") from None
        raise exc
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not tighten and _POSIX and st.st_mode & 0o077 and stat.S_ISREG(st.st_mode):
            _owner(st, Path(path))
            raise Untrusted(
                f"{path} may be read by other users (mode {stat.S_IMODE(st.st_mode):o}): chmod 600 it"
            )
        private_file(path, st)
        return f.read()


def create_private(path: str | os.PathLike[str]) -> bool:
    """Make ``path`` an empty 0600 file if there is none (True), never through a symbolic link;
    an existing one is checked by `private_file` (False)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    except FileExistsError:
        private_file(path)
        return False
    os.close(fd)
    return True


TMP_PREFIX = ".tmp-"  # of a file being written


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` at once in a private folder (`private_folder`, `write_whole`)."""
    private_folder(Path(path).parent)
    write_whole(path, data)


def write_whole(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` at once: a 0600 temporary file in its folder, renamed into
    place, so a reader sees the old file or the new one, never half of one (and a rename
    replaces a symbolic link, never writes through it)."""
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, prefix=TMP_PREFIX)  # 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- a command's output: a file the user named -------------------------------------------------


def open_output(path: str | os.PathLike[str], *, force: bool = False) -> BinaryIO:
    """``path`` opened to write a command's output into (``gatecell map -o``, ``--save``,
    ``%gatecell export``), never through a symbolic link: a new 0600 file; with ``force``, an
    existing regular file as it is (the caller empties it once it has something to write, so
    a refusal before then loses nothing). `FileExistsError` for an existing file without
    ``force``, `IsADirectoryError` for a folder, `Untrusted` for a symbolic link or a special
    file (a FIFO would block the open), and the `OSError` of the open itself; each one's
    ``strerror`` is the reason to show after the path."""
    path = Path(path)
    try:
        st: os.stat_result | None = path.lstat()
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise Untrusted(errno.ELOOP, "it is a symbolic link (not followed)")
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(errno.EPERM, "it is not a regular file")
        if not force:
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
    # O_EXCL for a new file: one that appears meanwhile (a link put there) is not opened.
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | (0 if st is not None else os.O_EXCL)
    return os.fdopen(os.open(path, flags, 0o600), "wb")


def write_output(path: str | os.PathLike[str], data: bytes, *, force: bool = False) -> None:
    """``data`` as the whole of ``path`` (`open_output`); with ``force`` an existing regular
    file is replaced whole (`write_whole`: a new 0600 file renamed over it)."""
    if force and os.path.isfile(path) and not os.path.islink(path):
        write_whole(path, data)
        return
    with open_output(path) as out:
        out.write(data)
