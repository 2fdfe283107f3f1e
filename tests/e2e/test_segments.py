"""Prompt segments over the real websocket: segments:* against a ``python -m main serve`` child.

One child serves the module (``proc`` in conftest); each test opens its own project folders
through JSON-RPC.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient
from tests.support.scenarios import Project, rpc_error

SEED_SEGMENTS: list[dict[str, Any]] = [
    {"scope": "core", "content": "你是一位公正的游戏主持人，用中文回答。"},
    {"scope": "ruleset", "refId": "ruleset.classic_v1", "content": "战斗使用经典规则：先攻、命中、伤害。",
     "metadata": {"type": "rules", "priority": "high"}},
    {"scope": "world", "refId": "world.mystika", "content": "米斯蒂卡是一个充满魔法的世界。",
     "locale": "zh-CN"},
    {"scope": "entry", "refId": "ep.whispercross", "content": "你站在低语十字旅店门前。"},
    {"scope": "entry_start", "refId": "ep.whispercross", "content": "欢迎开始你的冒险！"},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "店主很友善。", "metadata": {"tier": 0}},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "他知道本地的秘密。", "metadata": {"tier": 1}},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "他在吧台后藏着一把银钥匙。",
     "metadata": {"tier": 2, "priority": "medium"}, "active": False},
]


@pytest.fixture
async def project(rpc: RpcClient, tmp_path: Path) -> Project:
    return await Project.open(rpc, tmp_path / "game")


@pytest.fixture
async def other(rpc: RpcClient, tmp_path: Path) -> Project:
    return await Project.open(rpc, tmp_path / "other-game")


def _portable(segments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k not in {"id", "version", "createdAt", "updatedAt"}}
            for s in segments]


async def test_crud_with_compare_and_set(project: Project) -> None:
    """Create, list, update at the current version, refuse a stale one, delete: the segment is
    camelCase with nested metadata, Chinese content kept exactly."""
    rpc, pid = project.rpc, project.project_id
    created = await rpc.call("segments:upsert", {"projectId": pid, "segment": {
        "scope": "npc", "refId": "npc.innkeeper", "content": "店主很友善，总在擦杯子。",
        "metadata": {"tier": 1, "priority": "high"}}})
    assert created == {**created, "scope": "npc", "refId": "npc.innkeeper",
                       "content": "店主很友善，总在擦杯子。",
                       "metadata": {"tier": 1, "type": None, "priority": 2},
                       "active": True, "locale": None, "version": 1}
    assert (await rpc.call("segments:list", {"projectId": pid}))["segments"] == [created]
    updated = await rpc.call("segments:upsert", {"projectId": pid, "version": 1,
                                                 "segment": {"id": created["id"], "active": False}})
    assert (updated["active"], updated["content"], updated["version"]) == (False, created["content"], 2)
    stale = await rpc_error(rpc, "segments:upsert", {"projectId": pid, "version": 1,
                                                     "segment": {"id": created["id"], "content": "x"}})
    assert (stale["code"], stale["data"]) == (-32015, {"code": "RECORD_VERSION_CONFLICT",
                                                       "currentVersion": 2})
    assert (await rpc.call("segments:list", {"projectId": pid, "activeOnly": True}))["segments"] == []
    deleted = await rpc.call("segments:delete", {"projectId": pid, "id": created["id"], "version": 2})
    assert deleted == {"ok": True}
    gone = await rpc_error(rpc, "segments:delete", {"projectId": pid, "id": created["id"]})
    assert (gone["code"], gone["data"]["code"]) == (-32014, "RECORD_NOT_FOUND")


async def test_export_import_round_trip_between_projects(project: Project, other: Project,
                                                         tmp_path: Path) -> None:
    """A project's export, kept as a file in its folder and imported into an empty project, gives
    the same segments there (new ids, versions and times); the source project is unchanged."""
    imported = await project.rpc.call("segments:import", {"projectId": project.project_id,
                                                          "segments": SEED_SEGMENTS})
    assert imported["imported"] == len(SEED_SEGMENTS)
    exported = (await project.rpc.call("segments:export", {"projectId": project.project_id}))["segments"]
    saved = project.folder / "segments.json"
    saved.write_text(json.dumps(exported, ensure_ascii=False, indent=2), encoding="utf-8")
    kept = json.loads(saved.read_text(encoding="utf-8"))
    again = await other.rpc.call("segments:import", {"projectId": other.project_id, "segments": kept})
    assert again["imported"] == len(SEED_SEGMENTS)
    copied = (await other.rpc.call("segments:export", {"projectId": other.project_id}))["segments"]
    assert _portable(copied) == _portable(exported)
    assert {s["id"] for s in copied}.isdisjoint(s["id"] for s in exported)
    unchanged = await project.rpc.call("segments:export", {"projectId": project.project_id})
    assert unchanged["segments"] == exported


async def test_invalid_params_name_the_fields(project: Project) -> None:
    """An upsert with an unknown scope, a negative tier or empty content answers -32602 naming
    each field; an import lists every problem by index and field and writes nothing."""
    rpc, pid = project.rpc, project.project_id
    error = await rpc_error(rpc, "segments:upsert", {"projectId": pid, "segment": {
        "scope": "tavern", "content": "", "metadata": {"tier": -1}}})
    assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    assert sorted(tuple(e["loc"]) for e in error["data"]["errors"]) == [
        ("segment", "content"), ("segment", "metadata", "tier"), ("segment", "scope")]
    error = await rpc_error(rpc, "segments:import", {"projectId": pid, "segments": [
        *SEED_SEGMENTS, {"scope": "tavern", "content": "x"}, {"scope": "world", "content": "无归属"},
        {"scope": "npc", "refId": "npc.a", "content": "  ", "metadata": {"tier": -2}}]})
    n = len(SEED_SEGMENTS)
    assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    assert sorted((p["index"], p["field"]) for p in error["data"]["problems"]) == [
        (n, "scope"), (n + 1, "refId"), (n + 2, "content"), (n + 2, "metadata.tier")]
    assert "无归属" not in json.dumps(error)
    assert (await rpc.call("segments:list", {"projectId": pid}))["segments"] == []


async def test_projects_are_isolated(project: Project, other: Project) -> None:
    """Each project lists and exports only its own segments; another project's segment id is
    RECORD_NOT_FOUND for update and delete, and importing it creates a copy instead."""
    mine = await project.rpc.call("segments:upsert", {"projectId": project.project_id, "segment": {
        "scope": "world", "refId": "world.mystika", "content": "我的世界"}})
    theirs = await other.rpc.call("segments:upsert", {"projectId": other.project_id, "segment": {
        "scope": "world", "refId": "world.mystika", "content": "他们的世界"}})
    assert (await project.rpc.call("segments:list", {"projectId": project.project_id}))["segments"] == [mine]
    assert (await other.rpc.call("segments:export", {"projectId": other.project_id}))["segments"] == [theirs]
    for method, params in (("segments:upsert", {"segment": {"id": theirs["id"], "content": "抢走"}}),
                           ("segments:delete", {"id": theirs["id"]})):
        error = await rpc_error(project.rpc, method, {"projectId": project.project_id, **params})
        assert (error["code"], error["data"]) == (-32014, {"code": "RECORD_NOT_FOUND"})
    copied = await project.rpc.call("segments:import", {"projectId": project.project_id,
                                                        "segments": [theirs]})
    assert copied["segments"][0]["id"] not in {mine["id"], theirs["id"]}
    assert (await other.rpc.call("segments:list", {"projectId": other.project_id}))["segments"] == [theirs]


SEED_EXAMPLE = [  # seed 001's first-turn example, as stored segments
    {"scope": "core", "content": "You are a helpful AI game master."},
    {"scope": "ruleset", "refId": "ruleset.classic_v1", "content": "Use classic D&D rules for combat."},
    {"scope": "world", "refId": "world.mystika", "content": "The world of Mystika is magical."},
    {"scope": "world", "refId": "world.mystika", "content": "米斯蒂卡充满魔法。", "locale": "zh-CN"},
    {"scope": "entry", "refId": "ep.whispercross", "content": "You are at the Whispercross Inn."},
    {"scope": "entry_start", "refId": "ep.whispercross", "content": "Welcome to your adventure!"},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "The innkeeper is friendly."},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "He knows local secrets.", "metadata": {"tier": 1}},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "He has magical items.", "metadata": {"tier": 2}},
]
SEED_VARIABLES = {"entryPointId": "ep.whispercross", "worldId": "world.mystika",
                  "rulesetId": "ruleset.classic_v1", "isFirstTurn": "true",
                  "gameStateText": "You arrive at the Whispercross Inn.",
                  "playerText": "You are a level 3 fighter.", "inputText": "I want to explore the inn.",
                  "npcs": json.dumps([{"npcId": "npc.innkeeper", "tier": 1}])}
SEED_BLOCKS = [
    "=== CORE_BEGIN ===\nYou are a helpful AI game master.\n=== CORE_END ===",
    "=== RULESET_BEGIN ===\nUse classic D&D rules for combat.\n=== RULESET_END ===",
    "=== WORLD_BEGIN ===\nThe world of Mystika is magical.\n=== WORLD_END ===",
    "=== ENTRY_BEGIN ===\nYou are at the Whispercross Inn.\n=== ENTRY_END ===",
    "=== ENTRY_START_BEGIN ===\nWelcome to your adventure!\n=== ENTRY_START_END ===",
    "=== NPC_BEGIN ===\nNPC: npc.innkeeper\nThe innkeeper is friendly.\nHe knows local secrets.\n"
    "=== NPC_END ===",
]


async def test_the_game_master_profile_assembles_the_stored_segments(project: Project) -> None:
    """context:assemble with the game-master profile reads the project's stored segments: the
    seed's first-turn blocks in scope order (the NPC up to its tier, the zh-CN world segment left
    out of an English request); after a segment is switched off the next assembly leaves it out."""
    rpc, pid = project.rpc, project.project_id
    imported = (await rpc.call("segments:import", {"projectId": pid, "segments": SEED_EXAMPLE}))["segments"]
    params = {"projectId": pid, "profileId": "game-master", "variables": SEED_VARIABLES}
    first = await rpc.call("context:assemble", params)
    positions = [first["prompt"].find(block) for block in SEED_BLOCKS]
    assert -1 not in positions, first["prompt"]
    assert positions == sorted(positions)
    assert "米斯蒂卡" not in first["prompt"]
    assert first["warnings"] == []
    secrets = imported[7]
    await rpc.call("segments:upsert", {"projectId": pid, "version": 1,
                                       "segment": {"id": secrets["id"], "active": False}})
    second = await rpc.call("context:assemble", params)
    assert "He knows local secrets." not in second["prompt"]
    assert "NPC: npc.innkeeper\nThe innkeeper is friendly.\n=== NPC_END ===" in second["prompt"]
    zh_variables = {**SEED_VARIABLES, "locale": "zh-CN"}
    chinese = await rpc.call("context:assemble", {**params, "variables": zh_variables})
    assert "The world of Mystika is magical.\n米斯蒂卡充满魔法。" in chinese["prompt"]
