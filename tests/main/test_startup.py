"""Claiming the data dir before the ready line (main.startup.begin)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from main.config import Config
from main.lock import DataDirLock, DataDirLocked
from main.startup import begin


def test_begin_holds_the_data_dir_until_closed(tmp_path: Path) -> None:
    """The data dir is made private, its lock held (a second claim is refused) until close()."""
    config = Config(data_dir=tmp_path / "data")
    startup = begin(config)
    try:
        assert (config.data_dir.stat().st_mode & 0o777) == 0o700
        with pytest.raises(DataDirLocked):
            DataDirLock(config.data_dir).acquire()
        assert startup.tokenizer.info.encoding
    finally:
        startup.close()
    startup.close()  # twice is harmless
    again = DataDirLock(config.data_dir)
    again.acquire()
    again.release()


def test_a_refused_database_file_releases_the_lock(tmp_path: Path) -> None:
    """A database file that fails the look before the ready line leaves the data dir free."""
    config = Config(data_dir=tmp_path / "data")
    config.data_dir.mkdir()
    (config.data_dir / "strata.db").write_bytes(b"\x00not a database" * 1000)
    with pytest.raises(sqlite3.DatabaseError):
        begin(config)
    lock = DataDirLock(config.data_dir)
    lock.acquire()
    lock.release()


def test_a_database_at_another_url_is_not_looked_at(tmp_path: Path) -> None:
    """With --database-url the default file is neither read nor created before the ready line."""
    config = Config(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'elsewhere.db'}")
    begin(config).close()
    assert not (config.data_dir / "strata.db").exists()
    assert not (tmp_path / "elsewhere.db").exists()
