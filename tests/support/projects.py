"""Helpers for tests of the project-scoped services: a fresh database and an opened project."""

from __future__ import annotations

from pathlib import Path

from services.projects import ProjectRecord, ProjectService
from services.store import Database, open_database


def open_test_database(directory: Path) -> Database:
    """A new SQLite database (WAL, migrated) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    return open_database(f"sqlite:///{directory / 'strata.db'}")


def make_folder(path: Path) -> Path:
    """A new folder of documents, by its real path."""
    path.mkdir(parents=True)
    return path.resolve()


async def open_project(database: Database, folder: Path, name: str | None = None) -> ProjectRecord:
    """Register the existing ``folder`` as a project."""
    return await ProjectService(database).open(str(folder), name)
