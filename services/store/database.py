"""The SQL database: SQLite in WAL mode by default, any SQLAlchemy URL allowed.

The schema is versioned in the ``strata_meta`` table; :data:`MIGRATIONS` maps
each version to the step that brings the previous one up to it, and opening a
database runs every step it has not seen yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy import Engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlmodel import Field, Session, SQLModel, create_engine, select

from services.concurrency.snapshots import Snapshots
from services.store import tables  # noqa: F401  (registers every table with SQLModel.metadata)
from services.store.precheck import BUSY_TIMEOUT_S, SCHEMA_VERSION, SchemaTooNew

_log = structlog.get_logger("store")


class StrataMeta(SQLModel, table=True):
    """Key/value facts about the database itself, such as its schema version."""

    __tablename__ = "strata_meta"
    key: str = Field(primary_key=True, max_length=64)
    value: str = Field(max_length=256)


def _create_tables(engine: Engine) -> None:
    SQLModel.metadata.create_all(engine)


def _add_reading_page_tokens(engine: Engine) -> None:
    """Schema 8: the project setting ``reading_page_tokens`` (a column of ``project_settings``)."""
    if "reading_page_tokens" in {c["name"] for c in inspect(engine).get_columns("project_settings")}:
        return  # made by create_all with this build's tables
    with engine.begin() as connection:
        connection.execute(text("ALTER TABLE project_settings "
                                "ADD COLUMN reading_page_tokens INTEGER NOT NULL DEFAULT 400"))


# version -> migration step; tables added by later versions are created by
# create_all, so a step holds only what create_all cannot do (e.g. ALTER).
# 1: strata_meta; 2: projects, settings, constraints, kg, memories, budget profiles;
# 3: the retrieval index (state, documents, chunks); 4: per-project assembly profiles;
# 5: prompt segments (the game-master profile's stored scopes); 6: character conversations, their
# messages and typed memories; 7: reading summaries; 8: the reading page size in project settings.
# SCHEMA_VERSION (services/store/precheck.py, read before these libraries load) is the last of them.
MIGRATIONS: dict[int, Callable[[Engine], None]] = {1: _create_tables, 2: _create_tables, 3: _create_tables,
                                                   4: _create_tables, 5: _create_tables,
                                                   6: _create_tables, 7: _create_tables,
                                                   8: _add_reading_page_tokens}


BUSY_TIMEOUT_MS = int(BUSY_TIMEOUT_S * 1000)  # the precheck's wait, as SQLite's pragma takes it


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL keeps every committed write across a crash of the process and lets
    # readers run while one writer commits.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    # The server's own threads are the only writers, but SQLite's busy handler is not fair: a writer
    # backing off can lose the lock to others many times in a row on a loaded machine.
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.close()


@dataclass
class Database:
    """One opened database, and the one :class:`Snapshots` of what its services read.

    Every service on this database reads and writes through ``snapshots``, so each sees the
    others' writes; another database has its own.
    """

    engine: Engine
    schema_version: int
    snapshots: Snapshots = field(default_factory=Snapshots, repr=False, compare=False)

    def session(self) -> Session:
        return Session(self.engine)

    def close(self) -> None:
        self.engine.dispose()
        _log.info("store.closed")


def _schema_version(engine: Engine) -> int:
    StrataMeta.__table__.create(engine, checkfirst=True)  # type: ignore[attr-defined]
    with Session(engine) as session:
        row = session.exec(select(StrataMeta).where(StrataMeta.key == "schema_version")).first()
    return int(row.value) if row else 0


def migrate(engine: Engine) -> int:
    """Bring the schema up to :data:`SCHEMA_VERSION`; return the version reached."""
    current = _schema_version(engine)
    if current > SCHEMA_VERSION:
        raise SchemaTooNew(current)
    for version in range(current + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[version](engine)
        with Session(engine) as session:
            session.merge(StrataMeta(key="schema_version", value=str(version)))
            session.commit()
        _log.info("store.migrated", version=version)
    _create_tables(engine)
    return SCHEMA_VERSION


def open_database(url: str) -> Database:
    """Open (creating or migrating as needed) the database at ``url``."""
    is_sqlite = make_url(url).get_backend_name() == "sqlite"
    connect_args = {"check_same_thread": False} if is_sqlite else {}
    engine = create_engine(url, connect_args=connect_args)
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    try:
        version = migrate(engine)
    except Exception:
        engine.dispose()  # a refused or failed open must not keep the file open
        raise
    _log.info("store.opened", backend=engine.dialect.name, schema_version=version)
    return Database(engine=engine, schema_version=version)
