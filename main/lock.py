"""One process per data dir: SQLite and Chroma must never be opened by two writers."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class DataDirLocked(RuntimeError):
    """Another live process holds the data dir."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"another Strata process (pid {holder or 'unknown'}) is using this data dir")
        self.holder = holder


class DataDirLock:
    """An advisory lock on ``DATA_DIR/strata.lock``, held for the life of the process.

    The kernel releases it when the process dies, even by kill -9, so a stale
    lock file never blocks a restart.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "strata.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise DataDirLocked(holder) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
