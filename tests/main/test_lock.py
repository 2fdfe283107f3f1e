"""One process per data dir."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from main.lock import DataDirLock, DataDirLocked


def _hold_and_report(path: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        DataDirLock(Path(path)).acquire()
        queue.put("acquired")
    except DataDirLocked as exc:
        queue.put(f"locked:{exc.holder}")


def test_second_holder_is_refused_with_the_pid(tmp_path: Path) -> None:
    """While one process holds the lock, another is refused and told the holder's pid."""
    lock = DataDirLock(tmp_path)
    lock.acquire()
    try:
        queue: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()  # type: ignore[type-arg]
        child = multiprocessing.get_context("spawn").Process(target=_hold_and_report,
                                                             args=(str(tmp_path), queue))
        child.start()
        child.join(60)
        assert queue.get(timeout=5) == f"locked:{os.getpid()}"
    finally:
        lock.release()


def test_release_lets_the_next_one_in(tmp_path: Path) -> None:
    """After release (or the holder's death) the lock can be taken again."""
    first = DataDirLock(tmp_path)
    first.acquire()
    first.release()
    second = DataDirLock(tmp_path)
    second.acquire()
    second.release()


def test_lock_file_is_private(tmp_path: Path) -> None:
    """The lock file is readable by its owner only."""
    lock = DataDirLock(tmp_path)
    lock.acquire()
    try:
        assert (tmp_path / "strata.lock").stat().st_mode & 0o077 == 0
    finally:
        lock.release()


def test_release_twice_is_harmless(tmp_path: Path) -> None:
    """Releasing an unheld lock, or releasing twice, does nothing."""
    lock = DataDirLock(tmp_path)
    lock.release()
    lock.acquire()
    lock.release()
    lock.release()
    again = DataDirLock(tmp_path)
    again.acquire()
    again.release()
