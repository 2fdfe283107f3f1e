"""SegmentService: a project's prompt segments, created, listed, updated at a version, deleted."""

from __future__ import annotations

from typing import Any

import pytest

from services.errors import InvalidInput, ProjectNotFound, RecordNotFound, RecordVersionConflict
from services.projects import ProjectRecord
from services.segments import SegmentService
from services.segments.records import MAX_CONTENT_BYTES, MAX_SEGMENTS
from services.store import Database


@pytest.fixture
def service(database: Database) -> SegmentService:
    return SegmentService(database)


def locs(error: InvalidInput) -> list[list[Any]]:
    return [e["loc"] for e in error.fields["errors"]]


async def test_create_fills_defaults_and_returns_the_stored_segment(project: ProjectRecord,
                                                                    service: SegmentService) -> None:
    """A new segment gets an id, version 1, tier 0, no type, priority 0, active, no locale, and
    UTC times; its content is kept exactly, Chinese included."""
    created = await service.upsert(project.id, {"scope": "core", "content": "你是一位游戏主持人。\n"})
    assert (created.scope, created.ref_id, created.content, created.tier, created.type, created.priority,
            created.active, created.locale, created.version) == (
        "core", None, "你是一位游戏主持人。\n", 0, None, 0, True, None, 1)
    assert created.project_id == project.id
    assert created.created_at.tzinfo is not None
    assert await service.list(project.id) == [created]


async def test_priority_names_are_numbers(project: ProjectRecord, service: SegmentService) -> None:
    """Priority "low", "medium" and "high" are stored as 0, 1 and 2; numbers stay numbers."""
    stored = [await service.upsert(project.id, {"scope": "npc", "refId": "npc.innkeeper", "content": name,
                                                "metadata": {"priority": name}})
              for name in ("low", "medium", "high")]
    number = await service.upsert(project.id, {"scope": "npc", "refId": "npc.innkeeper", "content": "x",
                                               "metadata": {"priority": -7}})
    assert [s.priority for s in stored] + [number.priority] == [0, 1, 2, -7]


async def test_list_orders_by_scope_ref_tier_and_id_and_filters(project: ProjectRecord,
                                                                service: SegmentService) -> None:
    """Listing is by scope in prompt order, then refId, tier and id; scope, refId and active
    filter it."""
    npc2 = await service.upsert(project.id, {"scope": "npc", "refId": "npc.guard", "content": "守卫",
                                             "metadata": {"tier": 2}})
    npc0 = await service.upsert(project.id, {"scope": "npc", "refId": "npc.guard", "content": "守卫甲"})
    world = await service.upsert(project.id, {"scope": "world", "refId": "world.mystika", "content": "世界"})
    core = await service.upsert(project.id, {"scope": "core", "content": "核心", "active": False})
    inn = await service.upsert(project.id, {"scope": "npc", "refId": "npc.alchemist", "content": "炼金师"})
    assert [s.id for s in await service.list(project.id)] == [core.id, world.id, inn.id, npc0.id, npc2.id]
    guard = await service.list(project.id, scope="npc", ref_id="npc.guard")
    assert [s.id for s in guard] == [npc0.id, npc2.id]
    assert [s.id for s in await service.list(project.id, active_only=True)] == [
        world.id, inn.id, npc0.id, npc2.id]
    assert await service.list(project.id, scope="core", active_only=True) == []


async def test_update_changes_only_what_is_given(project: ProjectRecord, service: SegmentService) -> None:
    """An update by id changes the fields and metadata keys given, keeps the rest, bumps the
    version; an explicit null clears refId, type or locale."""
    created = await service.upsert(project.id, {
        "scope": "npc", "refId": "npc.innkeeper", "content": "店主很友善。",
        "metadata": {"tier": 1, "type": "npc_description", "priority": "high"}, "locale": "zh-CN"})
    updated = await service.upsert(project.id, {"id": created.id, "content": "店主知道本地的秘密。",
                                                "metadata": {"tier": 2}})
    assert (updated.content, updated.tier, updated.type, updated.priority, updated.locale,
            updated.version) == ("店主知道本地的秘密。", 2, "npc_description", 2, "zh-CN", 2)
    assert updated.updated_at >= created.updated_at
    assert updated.created_at == created.created_at
    cleared = await service.upsert(project.id, {"id": created.id, "locale": None,
                                                "metadata": {"type": None}}, version=2)
    assert (cleared.locale, cleared.type, cleared.tier, cleared.version) == (None, None, 2, 3)


async def test_update_at_a_stale_version_conflicts(project: ProjectRecord, service: SegmentService) -> None:
    """An update naming an old version changes nothing and reports the current version."""
    created = await service.upsert(project.id, {"scope": "core", "content": "a"})
    await service.upsert(project.id, {"id": created.id, "content": "b"})
    with pytest.raises(RecordVersionConflict) as raised:
        await service.upsert(project.id, {"id": created.id, "content": "c"}, version=1)
    assert raised.value.fields == {"currentVersion": 2}
    assert [s.content for s in await service.list(project.id)] == ["b"]


async def test_delete_with_and_without_version(project: ProjectRecord, service: SegmentService) -> None:
    """Delete at a stale version conflicts and keeps the segment; at the current one or without
    a version it is gone, and then deleting or updating it is RECORD_NOT_FOUND."""
    first = await service.upsert(project.id, {"scope": "core", "content": "a"})
    second = await service.upsert(project.id, {"scope": "core", "content": "b"})
    await service.upsert(project.id, {"id": first.id, "content": "a2"})
    with pytest.raises(RecordVersionConflict) as raised:
        await service.delete(project.id, first.id, version=1)
    assert raised.value.fields == {"currentVersion": 2}
    await service.delete(project.id, first.id, version=2)
    await service.delete(project.id, second.id)
    assert await service.list(project.id) == []
    with pytest.raises(RecordNotFound):
        await service.delete(project.id, first.id)
    with pytest.raises(RecordNotFound):
        await service.upsert(project.id, {"id": second.id, "content": "c"})


async def test_another_projects_segment_is_not_found(project: ProjectRecord, other_project: ProjectRecord,
                                                     service: SegmentService) -> None:
    """Update or delete by an id of another project is RECORD_NOT_FOUND and leaves it as it was;
    each project lists only its own segments."""
    theirs = await service.upsert(other_project.id, {"scope": "world", "refId": "world.x",
                                                     "content": "他们的"})
    mine = await service.upsert(project.id, {"scope": "world", "refId": "world.x", "content": "我的"})
    with pytest.raises(RecordNotFound):
        await service.upsert(project.id, {"id": theirs.id, "content": "mine now"})
    with pytest.raises(RecordNotFound):
        await service.delete(project.id, theirs.id)
    assert await service.list(other_project.id) == [theirs]
    assert await service.list(project.id) == [mine]
    assert [s.id for s in await service.list(project.id, active_only=True)] == [mine.id]


async def test_unknown_project_is_project_not_found(database: Database, service: SegmentService) -> None:
    """Every method of an unknown project answers PROJECT_NOT_FOUND."""
    with pytest.raises(ProjectNotFound):
        await service.list("nope")
    with pytest.raises(ProjectNotFound):
        await service.list("nope", active_only=True)
    with pytest.raises(ProjectNotFound):
        await service.upsert("nope", {"scope": "core", "content": "a"})
    with pytest.raises(ProjectNotFound):
        await service.import_("nope", [{"scope": "core", "content": "a"}])
    with pytest.raises(ProjectNotFound):
        await service.export("nope")


@pytest.mark.parametrize(("segment", "loc"), [
    ({"scope": "tavern", "content": "a"}, ["segment", "scope"]),
    ({"scope": "npc", "refId": "npc.a", "content": "a", "metadata": {"tier": -1}},
     ["segment", "metadata", "tier"]),
    ({"scope": "core", "content": ""}, ["segment", "content"]),
    ({"scope": "core", "content": " \n\t"}, ["segment", "content"]),
    ({"scope": "core", "content": "坏\ud800"}, ["segment", "content"]),
    ({"scope": "core", "content": "a", "metadata": {"priority": "urgent"}},
     ["segment", "metadata", "priority"]),
    ({"scope": "core", "content": "a", "locale": "zh CN"}, ["segment", "locale"]),
    ({"scope": "core", "content": "a", "refId": "has space"}, ["segment", "refId"]),
    ({"scope": "core", "content": "a", "colour": "crimson-value"}, ["segment", "colour"]),
    ({"scope": "world", "content": "a"}, ["segment", "refId"]),
    ({"content": "a"}, ["segment", "scope"]),
    ({"scope": "core"}, ["segment", "content"]),
])
async def test_invalid_segments_name_the_field(project: ProjectRecord, service: SegmentService,
                                               segment: dict[str, Any], loc: list[Any]) -> None:
    """Unknown scope, negative tier, empty or blank content, a lone surrogate, an unknown
    priority name, a malformed locale or refId, an unknown field, a missing refId (any scope
    but core), scope or content: INVALID_PARAMS whose error names the field and not the value."""
    with pytest.raises(InvalidInput) as raised:
        await service.upsert(project.id, segment)
    assert loc in locs(raised.value)
    assert "crimson-value" not in str(raised.value.to_error())
    assert await service.list(project.id) == []


async def test_content_is_limited_to_64_kib_of_utf8(project: ProjectRecord, service: SegmentService) -> None:
    """Content of exactly 64 KiB of UTF-8 is stored; one byte more is INVALID_PARAMS (counted in
    bytes, so 21,846 Chinese characters are too many)."""
    stored = await service.upsert(project.id, {"scope": "core", "content": "a" * MAX_CONTENT_BYTES})
    assert len(stored.content) == MAX_CONTENT_BYTES
    for content in ("a" * (MAX_CONTENT_BYTES + 1), "字" * (MAX_CONTENT_BYTES // 3 + 1)):
        with pytest.raises(InvalidInput) as raised:
            await service.upsert(project.id, {"scope": "core", "content": content})
        assert locs(raised.value) == [["segment", "content"]]


async def test_an_update_cannot_leave_a_scope_without_its_ref_id(project: ProjectRecord,
                                                                 service: SegmentService) -> None:
    """Moving a core segment without refId to another scope, or clearing the refId of a world
    segment, is INVALID_PARAMS naming refId and changes nothing; null scope or content too."""
    core = await service.upsert(project.id, {"scope": "core", "content": "a"})
    world = await service.upsert(project.id, {"scope": "world", "refId": "world.a", "content": "b"})
    for change in ({"id": core.id, "scope": "world"}, {"id": world.id, "refId": None}):
        with pytest.raises(InvalidInput) as raised:
            await service.upsert(project.id, change)
        assert locs(raised.value) == [["segment", "refId"]]
    for change in ({"id": core.id, "scope": None}, {"id": core.id, "content": None}):
        with pytest.raises(InvalidInput):
            await service.upsert(project.id, change)
    assert await service.list(project.id) == [core, world]
    moved = await service.upsert(project.id, {"id": core.id, "scope": "world", "refId": "world.a"})
    assert (moved.scope, moved.ref_id, moved.version) == ("world", "world.a", 2)


async def test_version_without_an_id_is_invalid(project: ProjectRecord, service: SegmentService) -> None:
    """A version applies only to an update by id."""
    with pytest.raises(InvalidInput) as raised:
        await service.upsert(project.id, {"scope": "core", "content": "a"}, version=1)
    assert locs(raised.value) == [["version"]]


async def test_a_project_holds_at_most_its_limit(database: Database, project: ProjectRecord,
                                                 other_project: ProjectRecord) -> None:
    """Past the limit a create is INVALID_PARAMS with ``limit``; another project is not affected.
    The real limit is 10,000."""
    assert MAX_SEGMENTS == 10_000
    service = SegmentService(database, limit=3)
    for i in range(3):
        await service.upsert(project.id, {"scope": "core", "content": f"第{i}段"})
    with pytest.raises(InvalidInput) as raised:
        await service.upsert(project.id, {"scope": "core", "content": "one too many"})
    assert raised.value.fields == {"limit": 3}
    assert len(await service.list(project.id)) == 3
    await service.upsert(other_project.id, {"scope": "core", "content": "theirs"})
