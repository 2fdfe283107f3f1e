"""A look at the SQLite file before the database's libraries load (the server's ready line waits
for it, not for them): the file opens, is a database, and its schema is not newer than this build's.

:func:`services.store.database.open_database` then opens it for good, after the ready line, and
runs what migrations it needs.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

# The schema this build reaches (services/store/database.py's MIGRATIONS, checked by its tests).
SCHEMA_VERSION = 8
BUSY_TIMEOUT_S = 30.0  # how long a look waits for another writer; the store's own busy timeout too


class SchemaTooNew(RuntimeError):
    """The database was written by a newer build: this one would not know its tables."""

    def __init__(self, found: int) -> None:
        super().__init__(f"database schema {found} is newer than this build ({SCHEMA_VERSION})")
        self.found = found


def stored_version(path: Path) -> int:
    """The schema version the SQLite file at ``path`` records (0 for a new or empty file, which is
    created). Raises ``sqlite3.DatabaseError`` for a file that is not a database."""
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
    try:
        # Reading the schema is what tells a database from another file.
        known = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'strata_meta'").fetchone()
        if known is None:
            return 0
        row = connection.execute("SELECT value FROM strata_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row is not None else 0
    finally:
        connection.close()


def check_sqlite(path: Path) -> None:
    """Refuse, before anything else loads, a file the store could not open."""
    found = stored_version(path)
    if found > SCHEMA_VERSION:
        raise SchemaTooNew(found)
