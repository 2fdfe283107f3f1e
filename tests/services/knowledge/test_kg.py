"""KgService: entities unique by (kind, name) per project, upserted by id or by name."""

from __future__ import annotations

import asyncio

import pytest

from services.errors import InvalidInput, ProjectNotFound, RecordNotFound, RecordVersionConflict
from services.knowledge import KgService
from services.projects import ProjectRecord
from services.store import Database


@pytest.fixture
def service(database: Database) -> KgService:
    return KgService(database)


async def test_upsert_by_name_creates_then_updates(project: ProjectRecord, service: KgService) -> None:
    """The first upsert of (kind, name) creates; the next updates the same entity, bumping its version."""
    created, was_created = await service.upsert(project.id, kind="character", name="林远",
                                                 aliases=["阿远"], description="冷静")
    assert was_created
    assert (created.version, created.aliases) == (1, ["阿远"])
    updated, was_created = await service.upsert(project.id, kind="character", name=" 林远 ",
                                                 description="冷静，寡言")
    assert not was_created
    assert (updated.id, updated.version, updated.aliases, updated.description) == (
        created.id, 2, ["阿远"], "冷静，寡言")


async def test_same_name_of_another_kind_is_another_entity(project: ProjectRecord,
                                                          service: KgService) -> None:
    """(kind, name) is the key: a location and a character may share a name; list is by kind, name."""
    await service.upsert(project.id, kind="location", name="青城")
    await service.upsert(project.id, kind="character", name="青城")
    await service.upsert(project.id, kind="character", name="阿梅")
    listed = await service.list(project.id)
    assert [(e.kind, e.name) for e in listed] == [
        ("character", "阿梅"), ("character", "青城"), ("location", "青城")]
    assert [e.name for e in await service.list(project.id, "location")] == ["青城"]


async def test_upsert_by_id_renames_and_checks_version(project: ProjectRecord,
                                                       service: KgService) -> None:
    """With an id the entity is updated (even renamed); a stale version is a conflict."""
    entity, _ = await service.upsert(project.id, kind="object", name="钥匙")
    renamed, created = await service.upsert(project.id, kind="object", name="铜钥匙",
                                            entity_id=entity.id, version=1)
    assert (created, renamed.name, renamed.version) == (False, "铜钥匙", 2)
    with pytest.raises(RecordVersionConflict) as raised:
        await service.upsert(project.id, kind="object", name="铁钥匙", entity_id=entity.id, version=1)
    assert raised.value.fields == {"currentVersion": 2}


async def test_rename_onto_a_taken_name_is_refused(project: ProjectRecord, service: KgService) -> None:
    """Renaming by id to the name of another entity of the same kind is INVALID_PARAMS, unchanged."""
    first, _ = await service.upsert(project.id, kind="group", name="北门")
    await service.upsert(project.id, kind="group", name="南门")
    with pytest.raises(InvalidInput):
        await service.upsert(project.id, kind="group", name="南门", entity_id=first.id)
    assert sorted(e.name for e in await service.list(project.id)) == ["北门", "南门"]


async def test_concurrent_upserts_of_one_name_make_one_entity(project: ProjectRecord,
                                                              service: KgService) -> None:
    """Upserts of the same new (kind, name) racing on real threads leave exactly one entity."""
    outcomes = await asyncio.gather(*(service.upsert(project.id, kind="concept", name="灵气",
                                                     description=f"v{i}") for i in range(10)))
    assert sum(created for _, created in outcomes) == 1
    assert len({entity.id for entity, _ in outcomes}) == 1
    assert len(await service.list(project.id)) == 1


async def test_another_projects_entity_is_not_found(project: ProjectRecord,
                                                    other_project: ProjectRecord,
                                                    service: KgService) -> None:
    """Upsert or delete by another project's entity id is RECORD_NOT_FOUND; by name it is separate."""
    theirs, _ = await service.upsert(other_project.id, kind="character", name="林远")
    with pytest.raises(RecordNotFound):
        await service.upsert(project.id, kind="character", name="x", entity_id=theirs.id)
    with pytest.raises(RecordNotFound):
        await service.delete(project.id, theirs.id)
    mine, created = await service.upsert(project.id, kind="character", name="林远")
    assert created
    assert mine.id != theirs.id
    assert await service.list(other_project.id) == [theirs]


async def test_delete(project: ProjectRecord, service: KgService) -> None:
    """A deleted entity is gone and its name free again."""
    entity, _ = await service.upsert(project.id, kind="character", name="林远")
    await service.delete(project.id, entity.id)
    with pytest.raises(RecordNotFound):
        await service.delete(project.id, entity.id)
    _, created = await service.upsert(project.id, kind="character", name="林远")
    assert created


@pytest.mark.parametrize("fields", [
    {"kind": "animal", "name": "x"}, {"kind": "character", "name": "  "},
    {"kind": "character", "name": "x" * 201}, {"kind": "character", "name": "x", "aliases": [""]},
    {"kind": "character", "name": "x", "aliases": ["a"] * 51},
    {"kind": "character", "name": "x", "version": 1},
])
async def test_invalid_entities_are_refused(fields: dict[str, object], project: ProjectRecord,
                                            service: KgService) -> None:
    """Unknown kinds, blank or long names, bad aliases, a version without id are INVALID_PARAMS."""
    with pytest.raises(InvalidInput):
        await service.upsert(project.id, **fields)  # type: ignore[arg-type]
    assert await service.list(project.id) == []


async def test_aliases_are_stripped_and_deduplicated(project: ProjectRecord, service: KgService) -> None:
    """Aliases keep their first order, each once, without surrounding spaces."""
    entity, _ = await service.upsert(project.id, kind="character", name="林远",
                                     aliases=["阿远", " 远哥 ", "阿远"])
    assert entity.aliases == ["阿远", "远哥"]


async def test_unknown_project(service: KgService) -> None:
    """Every method on a project that does not exist is PROJECT_NOT_FOUND."""
    for call in (service.list("nope"), service.upsert("nope", kind="concept", name="x"),
                 service.delete("nope", 1)):
        with pytest.raises(ProjectNotFound):
            await call
