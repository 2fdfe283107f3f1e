"""The look at the SQLite file that the ready line waits for, before SQLAlchemy loads."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from services.store.database import MIGRATIONS, StrataMeta, open_database
from services.store.precheck import SCHEMA_VERSION, SchemaTooNew, check_sqlite, stored_version


def _url(path: Path) -> str:
    return f"sqlite:///{path}"


def test_the_build_schema_is_the_last_migration() -> None:
    """The version the precheck compares with is the one the migrations reach."""
    assert max(MIGRATIONS) == SCHEMA_VERSION


def test_a_new_file_is_created_at_version_0_and_accepted(tmp_path: Path) -> None:
    """A missing file is created (empty), reads as version 0, and passes."""
    path = tmp_path / "strata.db"
    check_sqlite(path)
    assert path.exists()
    assert stored_version(path) == 0


def test_an_opened_database_reads_as_the_build_version(tmp_path: Path) -> None:
    """After the store opened it, the file records this build's version, and passes again."""
    path = tmp_path / "strata.db"
    open_database(_url(path)).close()
    assert stored_version(path) == SCHEMA_VERSION
    check_sqlite(path)


def test_a_newer_schema_is_refused_with_the_stores_message(tmp_path: Path) -> None:
    """A file from a newer build fails the precheck with the error the store itself would raise."""
    path = tmp_path / "strata.db"
    db = open_database(_url(path))
    with db.session() as session:
        session.merge(StrataMeta(key="schema_version", value=str(SCHEMA_VERSION + 1)))
        session.commit()
    db.close()
    with pytest.raises(SchemaTooNew, match=rf"schema {SCHEMA_VERSION + 1} is newer than this build") as err:
        check_sqlite(path)
    assert err.value.found == SCHEMA_VERSION + 1
    with pytest.raises(SchemaTooNew):
        open_database(_url(path))


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    """Another kind of file in the database's place fails before anything else loads."""
    path = tmp_path / "strata.db"
    path.write_bytes(b"\x00not a database" * 1000)
    with pytest.raises(sqlite3.DatabaseError):
        check_sqlite(path)


def test_the_precheck_does_not_load_the_databases_libraries() -> None:
    """Importing the precheck (and its package) leaves SQLAlchemy and SQLModel unloaded."""
    code = ("import sys, services.store.precheck; "
            "print(sorted(m for m in ('sqlalchemy', 'sqlmodel') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "[]"
