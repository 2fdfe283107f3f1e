"""Replacing a file so that readers, and the disk after a crash, see old or new bytes, never a mix."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

TEMP_PREFIX = ".strata-"  # hidden, so a crash's leftover is never listed as a document
TEMP_SUFFIX = ".tmp"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync it, rename it over ``path``, fsync the folder."""
    temp = path.parent / f"{TEMP_PREFIX}{secrets.token_hex(8)}{TEMP_SUFFIX}"
    mode = existing_mode(path)
    # 0o666 lets the umask decide a new file's permissions, as for any editor.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None and hasattr(os, "fchmod"):
                os.fchmod(handle.fileno(), mode)  # keep an existing document's permissions
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    fsync_directory(path.parent)


def existing_mode(path: Path) -> int | None:
    """Permission bits of the file at ``path``, or None when there is none yet."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX; Windows cannot open folders)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
