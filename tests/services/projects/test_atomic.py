"""atomic_write: temp file beside the target, fsynced, renamed over it, folder fsynced."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from services.projects.atomic import TEMP_PREFIX, atomic_write


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
