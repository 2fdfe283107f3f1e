"""Opening the SQL database: schema, version record, WAL, migrations, refusal, closing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, inspect
from sqlalchemy.pool import QueuePool
from sqlmodel import Session, create_engine, select

from services.store import database
from services.store.database import (
    Database,
    StrataMeta,
    open_database,
)
from services.store.precheck import SCHEMA_VERSION


def _url(path: Path) -> str:
    return f"sqlite:///{path}"


def _meta(db: Database) -> dict[str, str]:
    with db.session() as session:
        return {row.key: row.value for row in session.exec(select(StrataMeta)).all()}


def _pragma(db: Database, name: str) -> Any:
    with db.engine.connect() as conn:
        return conn.exec_driver_sql(f"PRAGMA {name}").scalar()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "strata.db"


def test_open_creates_the_schema_and_records_its_version(db_path: Path) -> None:
    """A new file gets every table and ``schema_version`` = the build's version."""
    db = open_database(_url(db_path))
    try:
        assert db.schema_version == SCHEMA_VERSION
        assert "strata_meta" in inspect(db.engine).get_table_names()
        assert _meta(db) == {"schema_version": str(SCHEMA_VERSION)}
    finally:
        db.close()
    assert db_path.is_file()


def test_sqlite_runs_in_wal_mode_with_safe_pragmas(db_path: Path) -> None:
    """Every connection uses WAL, NORMAL sync, foreign keys and a busy timeout."""
    db = open_database(_url(db_path))
    try:
        assert {
            "journal_mode": _pragma(db, "journal_mode"),
            "synchronous": _pragma(db, "synchronous"),
            "foreign_keys": _pragma(db, "foreign_keys"),
            "busy_timeout": _pragma(db, "busy_timeout"),
        } == {"journal_mode": "wal", "synchronous": 1, "foreign_keys": 1, "busy_timeout": 30000}
    finally:
        db.close()


def test_reopening_is_idempotent_and_keeps_data(db_path: Path) -> None:
    """Opening an up-to-date database again changes nothing and loses nothing."""
    first = open_database(_url(db_path))
    with first.session() as session:
        session.add(StrataMeta(key="probe", value="kept"))
        session.commit()
    first.close()

    second = open_database(_url(db_path))
    try:
        assert second.schema_version == SCHEMA_VERSION
        assert _meta(second) == {"schema_version": str(SCHEMA_VERSION), "probe": "kept"}
    finally:
        second.close()


def test_pending_migrations_run_once_in_order(
    db_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A database at version N gets exactly the steps N+1.. and records the last one."""
    open_database(_url(db_path)).close()  # at SCHEMA_VERSION now
    ran: list[int] = []

    def step(version: int) -> Callable[[Engine], None]:
        return lambda _engine: ran.append(version)

    newer = SCHEMA_VERSION + 2
    migrations = {**database.MIGRATIONS, SCHEMA_VERSION + 1: step(SCHEMA_VERSION + 1),
                  newer: step(newer)}
    monkeypatch.setattr(database, "MIGRATIONS", migrations)
    monkeypatch.setattr(database, "SCHEMA_VERSION", newer)

    db = open_database(_url(db_path))
    db.close()
    again = open_database(_url(db_path))
    try:
        assert ran == [SCHEMA_VERSION + 1, newer]
        assert (db.schema_version, again.schema_version) == (newer, newer)
        assert _meta(again) == {"schema_version": str(newer)}
    finally:
        again.close()


def test_a_newer_schema_is_refused_and_the_file_released(
    db_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A database written by a newer build raises RuntimeError and leaves no connection open."""
    db = open_database(_url(db_path))
    with db.session() as session:
        session.merge(StrataMeta(key="schema_version", value=str(SCHEMA_VERSION + 1)))
        session.commit()
    db.close()

    pools: list[QueuePool] = []

    def recording_create_engine(*args: Any, **kwargs: Any) -> Engine:
        engine = create_engine(*args, **kwargs)
        assert isinstance(engine.pool, QueuePool)
        pools.append(engine.pool)
        return engine

    monkeypatch.setattr(database, "create_engine", recording_create_engine)
    with pytest.raises(RuntimeError, match=rf"schema {SCHEMA_VERSION + 1} is newer"):
        open_database(_url(db_path))
    assert len(pools) == 1
    assert pools[0].checkedin() == 0  # disposed, not left holding the file
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["strata.db"]


def test_close_disposes_the_engine(db_path: Path) -> None:
    """close() closes every pooled connection; SQLite then folds and removes its WAL file."""
    db = open_database(_url(db_path))
    pool = db.engine.pool
    assert isinstance(pool, QueuePool)
    assert pool.checkedin() >= 1
    assert db_path.with_name("strata.db-wal").exists()
    db.close()
    assert pool.checkedin() == 0
    assert db.engine.pool is not pool
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["strata.db"]


def test_session_is_bound_to_the_engine(db_path: Path) -> None:
    """``session()`` gives a fresh Session on the database's engine."""
    db = open_database(_url(db_path))
    try:
        with db.session() as session:
            assert isinstance(session, Session)
            assert session.get_bind() is db.engine
    finally:
        db.close()
