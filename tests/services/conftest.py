"""Shared by the service tests: a fresh database and one opened project per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.projects import ProjectRecord
from services.store import Database
from tests.support.projects import make_folder, open_project, open_test_database


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = open_test_database(tmp_path / "data")
    try:
        yield db
    finally:
        db.close()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path / "novel")


@pytest.fixture
async def project(database: Database, folder: Path) -> ProjectRecord:
    return await open_project(database, folder)


@pytest.fixture
async def other_project(database: Database, tmp_path: Path) -> ProjectRecord:
    return await open_project(database, make_folder(tmp_path / "other-novel"))
