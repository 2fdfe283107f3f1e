"""segments:assemble over the real websocket: the seed's assemblePrompt(args) on stored segments.

The seed's own example segments are imported through segments:import, and its three examples come
back byte for byte (first turn, a later turn, the tokenBudget 100 truncation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient
from tests.support.scenarios import Project, rpc_error
from tests.support.seed_game import FIRST_TURN

SEED: list[dict[str, Any]] = [
    {"scope": "core", "content": "You are a helpful AI game master."},
    {"scope": "ruleset", "refId": "ruleset.classic_v1", "content": "Use classic D&D rules for combat."},
    {"scope": "world", "refId": "world.mystika", "content": "The world of Mystika is magical."},
    {"scope": "entry", "refId": "ep.whispercross", "content": "You are at the Whispercross Inn."},
    {"scope": "entry_start", "refId": "ep.whispercross", "content": "Welcome to your adventure!"},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "The innkeeper is friendly.",
     "metadata": {"tier": 0}},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "He knows local secrets.", "metadata": {"tier": 1}},
    {"scope": "npc", "refId": "npc.innkeeper", "content": "Has magical items.", "metadata": {"tier": 2}},
]
FIRST_TURN_ARGS = {"entryPointId": "ep.whispercross", "worldId": "world.mystika",
                   "rulesetId": "ruleset.classic_v1", "isFirstTurn": True,
                   "gameStateText": "You arrive at the Whispercross Inn.",
                   "playerText": "You are a level 3 fighter.", "inputText": "I want to explore the inn.",
                   "npcs": [{"npcId": "npc.innkeeper", "tier": 1}]}



async def _game(rpc: RpcClient, folder: Path, segments: list[dict[str, Any]] = SEED) -> Project:
    project = await Project.open(rpc, folder)
    await rpc.call("segments:import", {"projectId": project.project_id, "segments": segments})
    return project


async def _assemble(project: Project, **args: Any) -> dict[str, Any]:
    result: dict[str, Any] = await project.rpc.call(
        "segments:assemble", {"projectId": project.project_id, **args})
    return result


@pytest.fixture
async def game(rpc: RpcClient, tmp_path: Path) -> Project:
    return await _game(rpc, tmp_path / "whispercross")


async def test_first_turn_is_the_seed_example(game: Project) -> None:
    """The seed's first-turn arguments give its example output byte for byte, and meta lists the
    scopes in order, the segment ids by scope and an exact token count."""
    result = await _assemble(game, **FIRST_TURN_ARGS)
    assert result["prompt"] == FIRST_TURN
    meta = result["meta"]
    assert meta["order"] == ["core", "ruleset", "world", "entry", "entry_start", "npc", "game_state",
                             "player", "input"]
    ids = meta["segmentIdsByScope"]
    assert [len(ids[scope]) for scope in ("core", "ruleset", "world", "entry", "entry_start", "npc")] == \
        [1, 1, 1, 1, 1, 2]
    assert ids["game_state"] == ids["rng"] == []
    assert (meta["tokenizer"], meta["exact"]) == ("cl100k_base", True)
    assert meta["tokensEstimated"] > 0
    assert "truncated" not in meta
    assert meta["emptyScopes"] == ["rng"]


async def test_later_turn_has_no_entry_start_and_the_higher_tier(game: Project) -> None:
    """isFirstTurn false: no ENTRY_START block; the innkeeper at tier 2 shows tiers 0..2 in order."""
    result = await _assemble(game, **{**FIRST_TURN_ARGS, "isFirstTurn": False,
                                      "gameStateText": "You are in the inn common room.",
                                      "inputText": "I talk to the innkeeper.",
                                      "npcs": [{"npcId": "npc.innkeeper", "tier": 2}]})
    prompt = result["prompt"]
    assert "ENTRY_START" not in prompt
    assert ("=== NPC_BEGIN ===\nNPC: npc.innkeeper\nThe innkeeper is friendly.\nHe knows local secrets.\n"
            "Has magical items.\n=== NPC_END ===") in prompt
    assert prompt == FIRST_TURN.replace("=== ENTRY_START_BEGIN ===\nWelcome to your adventure!\n"
                                        "=== ENTRY_START_END ===\n\n", "").replace(
        "He knows local secrets.\n", "He knows local secrets.\nHas magical items.\n").replace(
        "You arrive at the Whispercross Inn.\n=== GAME", "You are in the inn common room.\n=== GAME").replace(
        "I want to explore the inn.", "I talk to the innkeeper.")
    assert "emptyScopes" not in result["meta"] or "entry_start" not in result["meta"]["emptyScopes"]


async def test_a_tiny_budget_truncates_in_the_seeds_order(game: Project) -> None:
    """tokenBudget 100 with a 500-character input: the input is trimmed on a sentence boundary, the
    NPC loses its highest tier first, and meta says what was cut; core and ruleset stay; the count
    never passes the budget."""
    long_input = ("I search the common room for the silver key. " * 12)[:500]
    result = await _assemble(game, **{**FIRST_TURN_ARGS, "isFirstTurn": False, "tokenBudget": 100,
                                      "npcs": [{"npcId": "npc.innkeeper", "tier": 2}],
                                      "inputText": long_input})
    meta = result["meta"]
    assert meta["tokensEstimated"] <= 100
    truncated = meta["truncated"]
    assert truncated["inputTrimmed"]["fromChars"] == 500
    assert truncated["inputTrimmed"]["toChars"] < 500
    assert truncated["npcDroppedTiers"][0]["npcId"] == "npc.innkeeper"
    assert truncated["npcDroppedTiers"][0]["fromTier"] == 2
    assert truncated["npcDroppedTiers"][0]["toTier"] < 2
    assert result["prompt"].startswith("=== CORE_BEGIN ===\nYou are a helpful AI game master.\n"
                                       "=== CORE_END ===\n\n=== RULESET_BEGIN ===")
    assert set(truncated.get("droppedScopes", [])) <= {"npc", "game_state", "world", "entry", "entry_start",
                                                       "rng"}


async def test_core_and_ruleset_over_the_budget_is_a_clear_error(rpc: RpcClient, tmp_path: Path) -> None:
    """Core and ruleset are never dropped: when they alone pass the budget the answer is
    SEGMENTS_CORE_OVERBUDGET with both numbers, not a broken prompt."""
    verbose = "Always narrate in vivid, careful detail. " * 40
    big: list[dict[str, Any]] = [{"scope": "core", "content": verbose}, *SEED[1:]]
    project = await _game(rpc, tmp_path / "verbose", big)
    error = await rpc_error(rpc, "segments:assemble", {"projectId": project.project_id, **FIRST_TURN_ARGS,
                                                       "tokenBudget": 60})
    assert (error["code"], error["data"]["code"]) == (-32060, "SEGMENTS_CORE_OVERBUDGET")
    assert error["data"]["tokenBudget"] == 60
    assert error["data"]["coreTokens"] > 60


async def test_inactive_missing_and_chinese_segments(rpc: RpcClient, tmp_path: Path) -> None:
    """Inactive segments are never assembled; a refId with no segments gives no block and meta names
    the scope that had nothing; Chinese segments come through exactly."""
    segments: list[dict[str, Any]] = [{"scope": "core", "content": "你是一位公正的游戏主持人。"},
                {"scope": "ruleset", "refId": "ruleset.zh", "content": "使用经典规则。"},
                {"scope": "world", "refId": "world.zh", "content": "旧的世界设定。", "active": False},
                {"scope": "entry", "refId": "ep.zh", "content": "你站在旅店门前。"}]
    project = await _game(rpc, tmp_path / "中文", segments)
    result = await _assemble(project, entryPointId="ep.zh", worldId="world.zh", rulesetId="ruleset.zh",
                             inputText="我推开门。")
    assert "旧的世界设定" not in result["prompt"]
    assert "WORLD_BEGIN" not in result["prompt"]
    assert "=== CORE_BEGIN ===\n你是一位公正的游戏主持人。\n=== CORE_END ===" in result["prompt"]
    assert "world" in result["meta"]["emptyScopes"]
    assert result["meta"]["segmentIdsByScope"]["world"] == []


async def test_the_same_assembly_through_context_assemble(game: Project) -> None:
    """context:assemble with profileId game-master and the arguments as variables gives the same
    prompt (no document, cursor or skill needed)."""
    seed_result = await _assemble(game, **FIRST_TURN_ARGS)
    variables = {"entryPointId": "ep.whispercross", "worldId": "world.mystika",
                 "rulesetId": "ruleset.classic_v1", "isFirstTurn": "true",
                 "gameStateText": "You arrive at the Whispercross Inn.",
                 "playerText": "You are a level 3 fighter.", "inputText": "I want to explore the inn.",
                 "npcs": '[{"npcId": "npc.innkeeper", "tier": 1}]'}
    result = await game.rpc.call("context:assemble", {"projectId": game.project_id,
                                                      "profileId": "game-master", "variables": variables})
    assert result["prompt"] == seed_result["prompt"]
    assert result["profileId"] == "game-master"


async def test_projects_are_isolated(game: Project, rpc: RpcClient, tmp_path: Path) -> None:
    """Another project's segments never appear: an empty project gives no segment blocks."""
    empty = await Project.open(rpc, tmp_path / "empty")
    result = await _assemble(empty, **FIRST_TURN_ARGS)
    assert "CORE_BEGIN" not in result["prompt"]
    assert all(ids == [] for ids in result["meta"]["segmentIdsByScope"].values())


async def test_bad_arguments_name_the_field(game: Project) -> None:
    """A negative tier or a missing rulesetId is INVALID_PARAMS naming the field."""
    error = await rpc_error(game.rpc, "segments:assemble", {"projectId": game.project_id,
                                                            **{**FIRST_TURN_ARGS, "npcs": [
                                                                {"npcId": "npc.innkeeper", "tier": -1}]}})
    assert error["data"]["code"] == "INVALID_PARAMS"
    assert "tier" in str(error["data"])
    args = {k: v for k, v in FIRST_TURN_ARGS.items() if k != "rulesetId"}
    error = await rpc_error(game.rpc, "segments:assemble", {"projectId": game.project_id, **args})
    assert "rulesetId" in str(error["data"])
