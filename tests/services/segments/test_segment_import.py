"""SegmentService import and export: all or nothing, every problem listed, a lossless round trip."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.errors import InvalidInput
from services.projects import ProjectRecord
from services.segments import SegmentService
from services.segments.validation import MAX_PROBLEMS
from services.store import Database

SEGMENTS: list[dict[str, Any]] = [
    {"scope": "core", "content": "你是一位公正的游戏主持人。"},
    {"scope": "ruleset", "refId": "ruleset.classic_v1", "content": "战斗使用经典规则。",
     "metadata": {"type": "rules", "priority": "high"}},
    {"scope": "world", "refId": "world.mystika", "content": "米斯蒂卡是一个魔法世界。", "locale": "zh-CN"},
    {"scope": "world", "refId": "world.mystika", "content": "Mystika is a world of magic.", "locale": "en"},
    {"scope": "entry", "refId": "ep.whispercross", "content": "你在低语十字旅店。"},
    {"scope": "entry_start", "refId": "ep.whispercross", "content": "欢迎开始你的冒险！"},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "店主很友善。", "metadata": {"tier": 0}},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "他知道本地的秘密。", "metadata": {"tier": 1}},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "他有魔法物品。", "metadata": {"tier": 2},
     "active": False},
]


@pytest.fixture
def service(database: Database) -> SegmentService:
    return SegmentService(database)


def _portable(exported: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An export without what a new project gives anew: ids, versions and times."""
    return [{k: v for k, v in s.items() if k not in {"id", "version", "createdAt", "updatedAt"}}
            for s in exported]


async def test_import_creates_every_segment_in_order(project: ProjectRecord, service: SegmentService) -> None:
    """An import without ids creates each entry, returned in the order of the entries."""
    imported = await service.import_(project.id, SEGMENTS)
    assert [s.content for s in imported] == [s["content"] for s in SEGMENTS]
    assert [s.version for s in imported] == [1] * len(SEGMENTS)
    assert (imported[1].priority, imported[1].type, imported[8].active) == (2, "rules", False)
    assert len(await service.list(project.id)) == len(SEGMENTS)


async def test_export_then_import_into_an_empty_project_is_the_same(
        project: ProjectRecord, other_project: ProjectRecord, service: SegmentService) -> None:
    """Export is a JSON array that, written to a file, read back and imported into an empty
    project, gives the same segments apart from ids, versions and times."""
    await service.import_(project.id, SEGMENTS)
    exported = await service.export(project.id)
    assert exported[0] == {**exported[0], "scope": "core", "refId": None, "active": True, "locale": None,
                           "metadata": {"tier": 0, "type": None, "priority": 0}}
    assert set(exported[0]) == {"id", "scope", "refId", "content", "metadata", "active", "locale",
                                "version", "createdAt", "updatedAt"}
    text = json.dumps(exported, ensure_ascii=False)
    imported = await service.import_(other_project.id, json.loads(text))
    assert {s.id for s in imported}.isdisjoint(s["id"] for s in exported)
    again = await service.export(other_project.id)
    assert _portable(again) == _portable(exported)
    assert len(await service.list(project.id)) == len(SEGMENTS)


async def test_entries_with_an_id_of_the_project_replace_it(project: ProjectRecord,
                                                            other_project: ProjectRecord,
                                                            service: SegmentService) -> None:
    """An entry with the id of one of the project's segments replaces that segment (a whole
    segment: left-out fields take their defaults; version and times are ignored); an id of
    another project's segment, or of none, creates a new segment."""
    mine = await service.upsert(project.id, {"scope": "npc", "refId": "npc.a", "content": "旧",
                                             "metadata": {"tier": 3, "type": "t"}, "locale": "zh"})
    theirs = await service.upsert(other_project.id, {"scope": "core", "content": "theirs"})
    imported = await service.import_(project.id, [
        {"id": mine.id, "scope": "npc", "refId": "npc.a", "content": "新", "version": 99,
         "createdAt": "2020-01-01T00:00:00Z", "updatedAt": "2020-01-01T00:00:00Z"},
        {"id": theirs.id, "scope": "core", "content": "copied"},
        {"id": 987654, "scope": "core", "content": "new"},
    ])
    assert imported[0].id == mine.id
    assert (imported[0].content, imported[0].tier, imported[0].type, imported[0].locale,
            imported[0].version, imported[0].created_at) == ("新", 0, None, None, 2, mine.created_at)
    assert theirs.id not in {imported[1].id, imported[2].id}
    assert 987654 not in {imported[1].id, imported[2].id}
    assert await service.list(other_project.id) == [theirs]
    assert len(await service.list(project.id)) == 3


async def test_one_bad_entry_imports_nothing_and_every_problem_is_listed(
        project: ProjectRecord, service: SegmentService) -> None:
    """A refused import writes nothing and lists every problem of every entry by index and
    field, never echoing a value sent."""
    existing = await service.upsert(project.id, {"scope": "core", "content": "kept"})
    entries: list[Any] = [
        {"scope": "core", "content": "fine"},
        {"scope": "tavern", "content": "", "metadata": {"tier": -1}},
        "not an object",
        {"scope": "world", "content": "世界"},
        {"scope": "npc", "refId": "npc.a", "content": "x", "metadata": {"priority": "secret-value"},
         "mood": "secret-value"},
        {"id": existing.id, "scope": "core", "content": "a"},
        {"id": existing.id, "scope": "core", "content": "b"},
        {"refId": "npc.b"},
    ]
    with pytest.raises(InvalidInput) as raised:
        await service.import_(project.id, entries)
    fields = raised.value.fields
    assert sorted((p["index"], p["field"]) for p in fields["problems"]) == [
        (1, "content"), (1, "metadata.tier"), (1, "scope"), (2, ""), (3, "refId"),
        (4, "metadata.priority"), (4, "mood"), (6, "id"), (7, "content"), (7, "scope")]
    assert fields["problemCount"] == 10
    assert all(p["message"] for p in fields["problems"])
    assert "secret-value" not in json.dumps(raised.value.to_error())
    assert await service.list(project.id) == [existing]


async def test_problems_listed_are_capped(project: ProjectRecord, service: SegmentService) -> None:
    """At most MAX_PROBLEMS problems are listed; problemCount says how many there were."""
    with pytest.raises(InvalidInput) as raised:
        await service.import_(project.id, [{"scope": "x"}] * (MAX_PROBLEMS // 2 + 1))
    assert len(raised.value.fields["problems"]) == MAX_PROBLEMS
    assert raised.value.fields["problemCount"] == 2 * (MAX_PROBLEMS // 2 + 1)


async def test_an_import_past_the_limit_imports_nothing(database: Database, project: ProjectRecord) -> None:
    """An import that would take the project past its limit is INVALID_PARAMS with ``limit`` and
    writes nothing, not even the replacements it holds; one that reaches the limit exactly is
    written."""
    service = SegmentService(database, limit=4)
    first = await service.import_(project.id, [{"scope": "core", "content": "a"},
                                               {"scope": "core", "content": "b"}])
    with pytest.raises(InvalidInput) as raised:
        await service.import_(project.id, [{"id": first[0].id, "scope": "core", "content": "changed"},
                                           *[{"scope": "core", "content": str(i)} for i in range(3)]])
    assert raised.value.fields == {"limit": 4}
    assert [s.content for s in await service.list(project.id)] == ["a", "b"]
    with pytest.raises(InvalidInput):
        await service.import_(project.id, [{"scope": "core", "content": str(i)} for i in range(5)])
    await service.import_(project.id, [{"scope": "core", "content": str(i)} for i in range(2)])
    assert len(await service.list(project.id)) == 4


async def test_empty_import_and_export(project: ProjectRecord, service: SegmentService) -> None:
    """Importing nothing changes nothing; a project without segments exports an empty array."""
    assert await service.import_(project.id, []) == []
    assert await service.export(project.id) == []
