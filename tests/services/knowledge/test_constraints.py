"""ConstraintService: the spec's constraint table, scoped to a project, at most 500 each."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from services.errors import (
    ConstraintsLimit,
    InvalidInput,
    ProjectNotFound,
    RecordNotFound,
    RecordVersionConflict,
)
from services.knowledge import ConstraintService
from services.knowledge.records import MAX_CONSTRAINTS
from services.projects import ProjectRecord
from services.store import Database


@pytest.fixture
def service(database: Database) -> ConstraintService:
    return ConstraintService(database)


async def test_create_and_list_by_priority(project: ProjectRecord, service: ConstraintService) -> None:
    """Created constraints come back with id, version 1 and defaults; list is by priority, then age."""
    first = await service.create(project.id, kind="narrative", text="  严格第一人称叙述  ")
    second = await service.create(project.id, kind="character", text="林远性格冷静", source="kg",
                                  priority=5)
    third = await service.create(project.id, kind="world", text="本世界没有魔法")
    assert (first.text, first.source, first.priority, first.version) == ("严格第一人称叙述", "user", 0, 1)
    assert first.project_id == project.id
    assert first.created_at.tzinfo is not None
    assert [c.id for c in await service.list(project.id)] == [second.id, first.id, third.id]


async def test_update_changes_given_fields_and_bumps_version(project: ProjectRecord,
                                                             service: ConstraintService) -> None:
    """An update applies only the given fields; without a version it always applies."""
    created = await service.create(project.id, kind="plot", text="主角在第五章之前不知道真相")
    updated = await service.update(project.id, created.id, priority=9)
    assert (updated.text, updated.priority, updated.version) == (created.text, 9, 2)
    again = await service.update(project.id, created.id, version=2, kind="style", text="避免感叹号")
    assert (again.kind, again.text, again.priority, again.version) == ("style", "避免感叹号", 9, 3)
    assert again.updated_at >= created.updated_at


async def test_update_with_a_stale_version_conflicts(project: ProjectRecord,
                                                     service: ConstraintService) -> None:
    """An update naming an old version changes nothing and reports the current version."""
    created = await service.create(project.id, kind="plot", text="a")
    await service.update(project.id, created.id, text="b")
    with pytest.raises(RecordVersionConflict) as raised:
        await service.update(project.id, created.id, version=1, text="c")
    assert raised.value.fields == {"currentVersion": 2}
    assert (await service.list(project.id))[0].text == "b"


async def test_delete(project: ProjectRecord, service: ConstraintService) -> None:
    """A deleted constraint is gone; deleting or updating it again is RECORD_NOT_FOUND."""
    created = await service.create(project.id, kind="plot", text="a")
    await service.delete(project.id, created.id)
    assert await service.list(project.id) == []
    with pytest.raises(RecordNotFound):
        await service.delete(project.id, created.id)
    with pytest.raises(RecordNotFound):
        await service.update(project.id, created.id, text="b")


async def test_another_projects_constraint_is_not_found(project: ProjectRecord,
                                                        other_project: ProjectRecord,
                                                        service: ConstraintService) -> None:
    """Update or delete by an id of another project is RECORD_NOT_FOUND and leaves it unchanged."""
    theirs = await service.create(other_project.id, kind="plot", text="theirs")
    with pytest.raises(RecordNotFound):
        await service.update(project.id, theirs.id, text="mine now")
    with pytest.raises(RecordNotFound):
        await service.update(project.id, theirs.id, version=1, text="mine now")
    with pytest.raises(RecordNotFound):
        await service.delete(project.id, theirs.id)
    assert await service.list(other_project.id) == [theirs]
    assert await service.list(project.id) == []


async def test_the_501st_constraint_is_refused(project: ProjectRecord, other_project: ProjectRecord,
                                               service: ConstraintService) -> None:
    """500 constraints fit; the 501st is CONSTRAINTS_LIMIT with the limit; other projects are unaffected."""
    assert MAX_CONSTRAINTS == 500
    for i in range(500):
        await service.create(project.id, kind="plot", text=f"rule {i}")
    with pytest.raises(ConstraintsLimit) as raised:
        await service.create(project.id, kind="plot", text="rule 500")
    assert raised.value.fields == {"limit": 500}
    assert len(await service.list(project.id)) == 500
    await service.create(other_project.id, kind="plot", text="elsewhere")
    await service.delete(project.id, (await service.list(project.id))[0].id)
    await service.create(project.id, kind="plot", text="room again")


async def test_concurrent_creates_never_pass_the_limit(project: ProjectRecord,
                                                       database: Database) -> None:
    """Creates racing on real threads at the limit: exactly `limit` succeed, the rest are refused."""
    service = ConstraintService(database, limit=5)
    outcomes = await asyncio.gather(*(service.create(project.id, kind="plot", text=f"r{i}")
                                      for i in range(20)), return_exceptions=True)
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 5
    assert all(isinstance(o, ConstraintsLimit) for o in outcomes if isinstance(o, BaseException))
    assert len(await service.list(project.id)) == 5


@pytest.mark.parametrize("fields", [
    {"kind": "mood", "text": "x"}, {"kind": "plot", "text": "   "}, {"kind": "plot", "text": "x" * 2001},
    {"kind": "plot", "text": "x", "source": "ai"}, {"kind": "plot", "text": "x", "priority": 10**7},
])
async def test_invalid_constraints_are_refused(fields: dict[str, object], project: ProjectRecord,
                                               service: ConstraintService) -> None:
    """Unknown kinds or sources, blank or over-long text, out-of-range priority are INVALID_PARAMS."""
    with pytest.raises(InvalidInput):
        await service.create(project.id, **fields)  # type: ignore[arg-type]
    assert await service.list(project.id) == []


async def test_unknown_project(service: ConstraintService) -> None:
    """Every method on a project that does not exist is PROJECT_NOT_FOUND."""
    for call in (service.list("nope"), service.create("nope", kind="plot", text="x"),
                 service.update("nope", 1, text="x"), service.delete("nope", 1)):
        with pytest.raises(ProjectNotFound):
            await call


async def test_logs_hold_no_constraint_text(project: ProjectRecord, service: ConstraintService) -> None:
    """Creating logs ids, kind and length, never the constraint's text."""
    with capture_logs() as logs:
        await service.create(project.id, kind="plot", text="林远是凶手")
    assert "林远" not in repr(logs)
    assert logs[-1]["chars"] == 5
