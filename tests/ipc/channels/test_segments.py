"""segments:* over the real registry: camelCase segments with nested metadata, compare-and-set,
all-or-nothing imports, exports that import back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ipc.openrpc import openrpc_document
from ipc.registry import Registry
from tests.ipc.channels.conftest import Rpc, assert_documented
from tests.support.projects import make_folder

# The module shares one event loop with its services (see conftest.services).
pytestmark = pytest.mark.asyncio(loop_scope="module")

SEGMENT_KEYS = {"id", "scope", "refId", "content", "metadata", "active", "locale", "version", "createdAt",
                "updatedAt"}
CONFLICT_AT_2 = {"code": "RECORD_VERSION_CONFLICT", "currentVersion": 2}
SEGMENT_METHODS = {
    "segments:list": {}, "segments:upsert": {"segment": {"scope": "core", "content": "x"}},
    "segments:delete": {"id": 1}, "segments:import": {"segments": [{"scope": "core", "content": "x"}]},
    "segments:export": {},
}


async def _other_project(rpc: Rpc, tmp_path: Path) -> str:
    result = await rpc.call("project:open", {"path": str(make_folder(tmp_path / "other"))})
    project_id: str = result["project"]["id"]
    return project_id


async def test_segment_crud(rpc: Rpc, project_id: str) -> None:
    """upsert creates -> list -> upsert updates (versioned, only the fields given) -> delete; the
    segment is camelCase with its metadata nested and priority names stored as numbers."""
    created = await rpc.call("segments:upsert", {"projectId": project_id, "segment": {
        "scope": "npc", "refId": "npc.innkeeper", "content": "店主很友善。",
        "metadata": {"tier": 0, "type": "npc_description", "priority": "high"}, "locale": "zh-CN"}})
    assert set(created) == SEGMENT_KEYS
    assert (created["scope"], created["refId"], created["metadata"], created["active"], created["locale"],
            created["version"]) == ("npc", "npc.innkeeper", {"tier": 0, "type": "npc_description",
                                                             "priority": 2}, True, "zh-CN", 1)
    assert await rpc.call("segments:list", {"projectId": project_id}) == {"segments": [created]}
    updated = await rpc.call("segments:upsert", {"projectId": project_id, "version": 1, "segment": {
        "id": created["id"], "content": "店主知道秘密。", "metadata": {"tier": 1}}})
    assert (updated["content"], updated["metadata"], updated["locale"], updated["version"]) == (
        "店主知道秘密。", {"tier": 1, "type": "npc_description", "priority": 2}, "zh-CN", 2)
    stale = await rpc.error("segments:upsert", {"projectId": project_id, "version": 1,
                                                "segment": {"id": created["id"], "active": False}})
    assert (stale["code"], stale["data"]) == (-32015, CONFLICT_AT_2)
    stale = await rpc.error("segments:delete", {"projectId": project_id, "id": created["id"], "version": 1})
    assert (stale["code"], stale["data"]) == (-32015, CONFLICT_AT_2)
    assert await rpc.call("segments:delete", {"projectId": project_id, "id": created["id"],
                                              "version": 2}) == {"ok": True}
    assert await rpc.call("segments:list", {"projectId": project_id}) == {"segments": []}
    gone = await rpc.error("segments:delete", {"projectId": project_id, "id": created["id"]})
    assert (gone["code"], gone["data"]) == (-32014, {"code": "RECORD_NOT_FOUND"})


async def test_list_filters(rpc: Rpc, project_id: str) -> None:
    """segments:list filters by scope, refId and activeOnly."""
    result = await rpc.call("segments:import", {"projectId": project_id, "segments": [
        {"scope": "core", "content": "核心"},
        {"scope": "world", "refId": "world.a", "content": "甲"},
        {"scope": "world", "refId": "world.b", "content": "乙", "active": False}]})
    core, world_a, world_b = result["segments"]
    listed = await rpc.call("segments:list", {"projectId": project_id, "scope": "world"})
    assert listed["segments"] == [world_a, world_b]
    listed = await rpc.call("segments:list", {"projectId": project_id, "refId": "world.b"})
    assert listed["segments"] == [world_b]
    listed = await rpc.call("segments:list", {"projectId": project_id, "activeOnly": True})
    assert listed["segments"] == [core, world_a]


async def test_import_export_round_trip(rpc: Rpc, project_id: str, tmp_path: Path) -> None:
    """segments:export gives what segments:list gives; imported into another project it makes
    the same segments (new ids); imported back with its ids it replaces them in place."""
    entries = [{"scope": "core", "content": "你是游戏主持人。"},
               {"scope": "npc", "refId": "npc.a", "content": "甲", "metadata": {"tier": 2, "priority": "low"},
                "locale": "zh"}]
    imported = await rpc.call("segments:import", {"projectId": project_id, "segments": entries})
    assert imported["imported"] == 2
    exported = await rpc.call("segments:export", {"projectId": project_id})
    assert exported == await rpc.call("segments:list", {"projectId": project_id})
    assert exported["segments"] == imported["segments"]
    other = await _other_project(rpc, tmp_path)
    copied = await rpc.call("segments:import", {"projectId": other, "segments": exported["segments"]})
    strip = {"id", "createdAt", "updatedAt"}
    assert [{k: v for k, v in s.items() if k not in strip} for s in copied["segments"]] == [
        {k: v for k, v in s.items() if k not in strip} for s in exported["segments"]]
    assert {s["id"] for s in copied["segments"]}.isdisjoint(s["id"] for s in exported["segments"])
    again = await rpc.call("segments:import", {"projectId": project_id, "segments": exported["segments"]})
    assert [(s["id"], s["version"]) for s in again["segments"]] == [
        (s["id"], 2) for s in exported["segments"]]


async def test_a_bad_import_lists_every_problem_and_writes_nothing(rpc: Rpc, project_id: str) -> None:
    """One bad entry refuses the whole import: -32602 with problems [{index, field, message}]
    naming every bad field, and nothing written."""
    error = await rpc.error("segments:import", {"projectId": project_id, "segments": [
        {"scope": "core", "content": "好的"}, {"scope": "tavern", "content": "x"},
        {"scope": "npc", "refId": "npc.a", "content": "", "metadata": {"tier": -1}}, 42]})
    assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    assert sorted((p["index"], p["field"]) for p in error["data"]["problems"]) == [
        (1, "scope"), (2, "content"), (2, "metadata.tier"), (3, "")]
    assert error["data"]["problemCount"] == 4
    assert await rpc.call("segments:list", {"projectId": project_id}) == {"segments": []}


@pytest.mark.parametrize(("segment", "loc"), [
    ({"scope": "tavern", "content": "x"}, ["segment", "scope"]),
    ({"scope": "npc", "refId": "npc.a", "content": "x", "metadata": {"tier": -1}},
     ["segment", "metadata", "tier"]),
    ({"scope": "core", "content": ""}, ["segment", "content"]),
    ({"scope": "world", "content": "x"}, ["segment", "refId"]),
    ({"content": "x"}, ["segment", "scope"]),
])
async def test_invalid_upserts_name_the_field(rpc: Rpc, project_id: str, segment: dict[str, Any],
                                              loc: list[Any]) -> None:
    """An unknown scope, a negative tier, empty content or a missing refId or scope is -32602 whose
    errors name the field."""
    error = await rpc.error("segments:upsert", {"projectId": project_id, "segment": segment})
    assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    assert loc in [e["loc"] for e in error["data"]["errors"]]


async def test_cross_project_ids_are_record_not_found(rpc: Rpc, project_id: str, tmp_path: Path) -> None:
    """Another project's segment id answers -32014 to upsert and delete and stays unchanged; an
    import naming it creates a new segment instead."""
    other = await _other_project(rpc, tmp_path)
    theirs = await rpc.call("segments:upsert", {"projectId": other, "segment": {"scope": "core",
                                                                                "content": "theirs"}})
    for method, params in (("segments:upsert", {"segment": {"id": theirs["id"], "content": "mine"}}),
                           ("segments:delete", {"id": theirs["id"]})):
        error = await rpc.error(method, {"projectId": project_id, **params})
        assert (error["code"], error["data"]) == (-32014, {"code": "RECORD_NOT_FOUND"})
    imported = await rpc.call("segments:import", {"projectId": project_id, "segments": [theirs]})
    assert imported["segments"][0]["id"] != theirs["id"]
    assert (await rpc.call("segments:list", {"projectId": other}))["segments"] == [theirs]


@pytest.mark.parametrize(("method", "params"), SEGMENT_METHODS.items())
async def test_unknown_project_is_project_not_found(rpc: Rpc, method: str, params: dict[str, Any]) -> None:
    """Every segments method answers -32010 PROJECT_NOT_FOUND for an unknown project."""
    error = await rpc.error(method, {"projectId": "0000000000000000", **params})
    assert (error["code"], error["data"]) == (-32010, {"code": "PROJECT_NOT_FOUND"})


async def test_methods_and_their_errors_are_documented(registry: Registry) -> None:
    """docs/protocol.md lists every segments:* method and each error code they declare."""
    assert_documented(registry, ("segments:",))


async def test_discover_describes_segments_and_import_entries(registry: Registry) -> None:
    """rpc.discover describes the segment result, the upsert's segment and each import entry
    (their metadata nested), though import entries are checked by the service."""
    document = openrpc_document(registry, title="strata", version="1")
    schemas = document["components"]["schemas"]
    methods = {m["name"]: m for m in document["methods"]}
    assert methods["segments:upsert"]["result"]["schema"] == {"$ref": "#/components/schemas/Segment"}
    assert set(schemas["Segment"]["properties"]) == SEGMENT_KEYS
    entries = next(p for p in methods["segments:import"]["params"] if p["name"] == "segments")
    entry = entries["schema"]["items"]
    assert entry["required"] == ["scope", "content"]
    assert set(entry["properties"]) == SEGMENT_KEYS
    assert entry["properties"]["metadata"]["$ref"] == "#/components/schemas/MetadataInput"
    segment = next(p for p in methods["segments:upsert"]["params"] if p["name"] == "segment")
    assert segment["schema"] == {"$ref": "#/components/schemas/SegmentInput"}
