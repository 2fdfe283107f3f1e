"""Budget profiles in SQLite: default on first read, validated updates, optimistic locking."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from services.assembly.profiles import BudgetProfiles
from services.context.models import DEFAULT_PROFILE, BudgetProfile
from services.errors import BudgetConflict, InvalidInput, ProjectNotFound
from services.store import Database, open_database
from services.store.tables import BudgetProfileRow, ProjectRow

NEW = BudgetProfile(context_window=16384, output_reserve=2048, ratios=(0.2, 0.1, 0.3, 0.4),
                    minimums=(400, 100, 0, 1000))


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = open_database(f"sqlite:///{tmp_path / 'strata.db'}")
    with db.session() as session:
        for n in range(1, 3):
            session.add(ProjectRow(id=f"p{n}", path=str(tmp_path / f"book{n}"), name=f"Book {n}"))
        session.commit()
    yield db
    db.close()


@pytest.fixture
def profiles(database: Database) -> BudgetProfiles:
    return BudgetProfiles(database)


def _rows(database: Database) -> list[BudgetProfileRow]:
    with database.session() as session:
        return list(session.exec(select(BudgetProfileRow)).all())


async def test_first_get_creates_and_stores_the_default(profiles: BudgetProfiles, database: Database) -> None:
    """A project without a profile gets the documented default at version 1, stored once."""
    assert await profiles.get("p1") == DEFAULT_PROFILE
    assert await profiles.get("p1") == DEFAULT_PROFILE
    rows = _rows(database)
    assert [(r.project_id, r.version, r.context_window) for r in rows] == [("p1", 1, 8192)]


async def test_update_with_the_current_version_returns_the_next_and_persists(
        profiles: BudgetProfiles, database: Database) -> None:
    """An update naming the current version stores the profile at version + 1."""
    updated = await profiles.update("p1", 1, NEW)
    assert updated == dataclasses.replace(NEW, version=2)
    assert await BudgetProfiles(database).get("p1") == updated
    again = await profiles.update("p1", 2, DEFAULT_PROFILE)
    assert again == dataclasses.replace(DEFAULT_PROFILE, version=3)


async def test_version_in_the_profile_itself_is_ignored(profiles: BudgetProfiles) -> None:
    """Only the version argument is compared; the stored version is always the old one + 1."""
    updated = await profiles.update("p1", 1, dataclasses.replace(NEW, version=99))
    assert updated.version == 2


async def test_stale_version_conflicts_and_changes_nothing(profiles: BudgetProfiles) -> None:
    """An update naming an old version raises CONTEXT_BUDGET_CONFLICT with the current version."""
    await profiles.update("p1", 1, NEW)
    with pytest.raises(BudgetConflict) as raised:
        await profiles.update("p1", 1, DEFAULT_PROFILE)
    assert raised.value.data_code == "CONTEXT_BUDGET_CONFLICT"
    assert raised.value.fields == {"currentVersion": 2}
    assert await profiles.get("p1") == dataclasses.replace(NEW, version=2)


async def test_concurrent_updates_with_the_same_version_exactly_one_wins(profiles: BudgetProfiles) -> None:
    """Of many concurrent updates naming the same version, exactly one is stored; the rest conflict."""
    await profiles.get("p1")
    candidates = [dataclasses.replace(NEW, context_window=16384 + n) for n in range(6)]
    results = await asyncio.gather(*(profiles.update("p1", 1, c) for c in candidates),
                                   return_exceptions=True)
    winners = [r for r in results if isinstance(r, BudgetProfile)]
    conflicts = [r for r in results if isinstance(r, BudgetConflict)]
    assert (len(winners), len(conflicts)) == (1, 5)
    assert all(c.fields == {"currentVersion": 2} for c in conflicts)
    assert await profiles.get("p1") == winners[0]
    assert winners[0].version == 2


class _LockstepSession(Session):
    """A session that, after looking the project up, waits for the other writer to do the same:
    both have then seen "no profile yet" before either creates it."""

    barrier = threading.Barrier(2)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        found = super().get(*args, **kwargs)
        if args[0] is ProjectRow:
            self.barrier.wait(timeout=5)
        return found


@pytest.fixture
def lockstep(database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    _LockstepSession.barrier = threading.Barrier(2)
    monkeypatch.setattr(database, "session", lambda: _LockstepSession(database.engine))


@pytest.mark.usefixtures("lockstep")
async def test_concurrent_first_reads_create_one_default(profiles: BudgetProfiles,
                                                         database: Database) -> None:
    """Two first reads of a project without a profile both get the default; one row is stored."""
    results = await asyncio.gather(profiles.get("p2"), profiles.get("p2"), return_exceptions=True)
    assert list(results) == [DEFAULT_PROFILE, DEFAULT_PROFILE]
    assert [r.project_id for r in _rows(database)] == ["p2"]


@pytest.mark.usefixtures("lockstep")
async def test_concurrent_first_updates_exactly_one_wins(profiles: BudgetProfiles) -> None:
    """Two updates naming version 1 of a project without a profile: one wins, one conflicts."""
    results = await asyncio.gather(profiles.update("p2", 1, NEW), profiles.update("p2", 1, NEW),
                                   return_exceptions=True)
    assert sorted(type(r).__name__ for r in results) == ["BudgetConflict", "BudgetProfile"], results
    assert await profiles.get("p2") == dataclasses.replace(NEW, version=2)


@pytest.mark.parametrize("invalid", [
    dataclasses.replace(NEW, ratios=(0.2, 0.2, 0.3, 0.4)),
    dataclasses.replace(NEW, ratios=(-0.1, 0.4, 0.3, 0.4)),
    dataclasses.replace(NEW, minimums=(400, -1, 0, 1000)),
    dataclasses.replace(NEW, output_reserve=-1),
    dataclasses.replace(NEW, minimums=(400, 100, 0, 16385)),
    dataclasses.replace(NEW, output_reserve=16384),
    dataclasses.replace(NEW, output_reserve=20000),
])
async def test_invalid_profile_is_refused_and_changes_nothing(profiles: BudgetProfiles,
                                                              invalid: BudgetProfile) -> None:
    """Invalid profiles raise INVALID_PARAMS and leave the stored profile and version alone."""
    with pytest.raises(InvalidInput) as raised:
        await profiles.update("p1", 1, invalid)
    assert raised.value.data_code == "INVALID_PARAMS"
    assert await profiles.get("p1") == DEFAULT_PROFILE


async def test_unknown_project_is_not_found(profiles: BudgetProfiles, database: Database) -> None:
    """Reading or updating the profile of an unknown project raises PROJECT_NOT_FOUND and stores nothing."""
    with pytest.raises(ProjectNotFound):
        await profiles.get("nope")
    with pytest.raises(ProjectNotFound):
        await profiles.update("nope", 1, NEW)
    assert _rows(database) == []
