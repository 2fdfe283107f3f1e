"""Replacing a file so that readers, and the disk after a crash, see old or new bytes, never a mix.

The temp file is named ``.strata-<pid>-<random>.tmp``: hidden, so it is never
listed as a document, and marked with the process writing it, so that a temp
file left behind by a process that was killed mid-write can be recognised and
removed later (:func:`remove_stale_temps`) without touching one that another
live process is still writing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from collections.abc import Iterable
from pathlib import Path

TEMP_PREFIX = ".strata-"  # hidden, so a crash's leftover is never listed as a document
TEMP_SUFFIX = ".tmp"
STALE_AFTER = 3600.0  # seconds: a temp file this old is stale whoever made it
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_writing: set[str] = set()  # names of the temp files this process is writing right now


class NotARegularFile(OSError):
    """The target is there but is not a regular file (a FIFO, socket, device or link): never replaced."""


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync it, rename it over ``path``, fsync the folder.

    Only a regular file (or nothing) at ``path`` is replaced: a folder is IsADirectoryError, and a
    FIFO, socket, device or link is :class:`NotARegularFile`, checked without opening or following
    it (opening a FIFO with no reader blocks), before writing and again just before the rename.
    """
    name = f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(8)}{TEMP_SUFFIX}"
    temp = path.parent / name
    mode = existing_mode(path)
    _writing.add(name)  # before the file exists, so a concurrent sweep never takes it for a leftover
    try:
        # 0o666 lets the umask decide a new file's permissions, as for any editor.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                if mode is not None and hasattr(os, "fchmod"):
                    os.fchmod(handle.fileno(), mode)  # keep an existing document's permissions
                os.fsync(handle.fileno())
            existing_mode(path)  # still nothing, or a regular file
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
    finally:
        _writing.discard(name)
    fsync_directory(path.parent)


def existing_mode(path: Path) -> int | None:
    """Permission bits of the regular file at ``path``, or None when there is none yet; anything
    else there is IsADirectoryError or :class:`NotARegularFile`. Looks without following a link."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "a folder is in the way")
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile(errno.EEXIST, "not a regular file")
    return stat.S_IMODE(info.st_mode)


def fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX; Windows cannot open folders)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_temp_name(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


def _writer_pid(name: str) -> int | None:
    owner = name[len(TEMP_PREFIX):-len(TEMP_SUFFIX)].partition("-")[0]
    return int(owner) if owner.isdigit() and owner[0] != "0" else None


def _alive(pid: int) -> bool:
    if os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process: it exists
        return True
    return True


def is_stale_temp(folder: Path, name: str, now: float | None = None) -> bool:
    """Whether ``folder/name`` is a temp file no process will ever rename: its writer is gone.

    A temp file of this process that it is not writing, or of a process that no
    longer runs, is stale; so is any temp file older than :data:`STALE_AFTER`.
    """
    if not is_temp_name(name) or name in _writing:
        return False
    try:
        info = os.lstat(folder / name)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode):  # a link or folder named like one is not ours to remove
        return False
    pid = _writer_pid(name)
    if pid is not None and (pid == os.getpid() or not _alive(pid)):
        return True
    return (time.time() if now is None else now) - info.st_mtime > STALE_AFTER


def remove_stale_temps(folder: Path, names: Iterable[str] | None = None) -> int:
    """Remove the stale temp files among ``names`` in ``folder`` (default: all of its entries).

    A process killed between creating its temp file and renaming it leaves the
    file behind; the document itself still holds the old text. Returns how
    many were removed; errors (a file already gone, no permission) are skipped.
    """
    if names is None:
        try:
            names = [entry.name for entry in os.scandir(folder) if is_temp_name(entry.name)]
        except OSError:
            return 0
    removed = 0
    now = time.time()
    for name in names:
        if is_stale_temp(folder, name, now):
            with contextlib.suppress(OSError):
                os.unlink(folder / name)
                removed += 1
    return removed
