"""atomic_write: temp file beside the target, fsynced, renamed over it, folder fsynced."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.projects.atomic import STALE_AFTER, TEMP_PREFIX, atomic_write, remove_stale_temps


def test_creates_and_replaces(tmp_path: Path) -> None:
    """A new file is created with the bytes; an existing one is replaced whole."""
    target = tmp_path / "a.md"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["a.md"]


def test_new_files_follow_the_umask_and_existing_keep_their_mode(tmp_path: Path) -> None:
    """New files get 0o666 minus the umask (not mkstemp's 0o600); replaced files keep their mode."""
    old_umask = os.umask(0o022)
    try:
        atomic_write(tmp_path / "new.md", b"x")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "new.md").stat().st_mode) == 0o644
    (tmp_path / "old.md").write_bytes(b"x")
    (tmp_path / "old.md").chmod(0o600)
    atomic_write(tmp_path / "old.md", b"y")
    assert stat.S_IMODE((tmp_path / "old.md").stat().st_mode) == 0o600


def test_file_and_folder_are_fsynced_before_and_after_the_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The data is fsynced before the rename and the folder after it, so a crash keeps old or new."""
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write(tmp_path / "a.md", b"x")
    assert events == ["fsync-file", "replace", "fsync-dir"]


def test_a_failed_write_removes_its_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When writing the temp file fails, it is deleted and the target is untouched."""
    (tmp_path / "a.md").write_bytes(b"old")

    def fail(fd: int) -> None:
        raise OSError("no space")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="no space"):
        atomic_write(tmp_path / "a.md", b"new")
    assert (tmp_path / "a.md").read_bytes() == b"old"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_temp_names_are_hidden_and_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temp file is hidden (never listed) and short, so a 255-byte document name still works."""
    seen: list[str] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        seen.append(Path(src).name)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    atomic_write(tmp_path / ("x" * 252 + ".md"), b"x")
    assert seen[0].startswith(".")
    assert len(seen[0]) < 40


def dead_pid() -> int:
    """The pid of a child that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temp_names_carry_the_writers_pid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temp file is .strata-<pid>-<random>.tmp, so a leftover's writer can be told apart."""
    seen: list[str] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        seen.append(Path(src).name)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    atomic_write(tmp_path / "a.md", b"x")
    assert seen[0].startswith(f"{TEMP_PREFIX}{os.getpid()}-")
    assert seen[0].endswith(".tmp")


def test_stale_temps_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    """Leftovers of a dead process, or of this one, go; a live process's fresh temp, links, documents stay."""
    dead = f"{TEMP_PREFIX}{dead_pid()}-00000000000000aa.tmp"
    ours = f"{TEMP_PREFIX}{os.getpid()}-00000000000000bb.tmp"
    live = f"{TEMP_PREFIX}1-00000000000000cc.tmp"  # pid 1 always runs
    old_live = f"{TEMP_PREFIX}1-00000000000000dd.tmp"
    legacy = f"{TEMP_PREFIX}00000000000000ee.tmp"  # no pid: judged by age only
    for name in (dead, ours, live, old_live, legacy, "doc.md"):
        (tmp_path / name).write_bytes(b"partial")
    long_ago = time.time() - STALE_AFTER - 60
    os.utime(tmp_path / old_live, (long_ago, long_ago))
    (tmp_path / f"{TEMP_PREFIX}99999999-link.tmp").symlink_to(tmp_path / "doc.md")

    assert remove_stale_temps(tmp_path) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live, legacy, "doc.md", f"{TEMP_PREFIX}99999999-link.tmp"])
    assert (tmp_path / "doc.md").read_bytes() == b"partial"


def test_a_temp_file_being_written_is_never_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep running while this process writes (another thread) leaves the write's temp file alone."""
    real_fsync = os.fsync
    swept: list[int] = []

    def fsync(fd: int) -> None:
        swept.append(remove_stale_temps(tmp_path))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_write(tmp_path / "a.md", b"new text")
    assert swept[0] == 0
    assert (tmp_path / "a.md").read_bytes() == b"new text"
