"""Smoke tests of scripts/demo.py --profile game-master: three prompts with their meta, in each language."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import demo

ROOT = Path(__file__).resolve().parents[2]


def turns(output: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The demo's output as {title: (prompt, meta)}, each ``meta`` line read back as JSON."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for block in output.split("\n##### ")[1:]:
        heading, rest = block.split("\n", 1)
        prompt, meta_lines = rest.strip("\n").split("\n\nmeta:\n")
        meta = {}
        for line in meta_lines.strip("\n").splitlines():
            key, value = line.strip().split(": ", 1)
            meta[key] = json.loads(value)
        found[heading.split(": segments:assemble")[0]] = (prompt, meta)
    return found


def test_game_master_demo_in_english() -> None:
    """The first turn has the welcome and tier-0 NPCs, the later turn the innkeeper's secrets and no
    welcome, the small budget the NPC block dropped after its tiers and the input trimmed; only
    English segments are used."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py"), "--profile", "game-master",
                           "--language", "en"], capture_output=True, text=True, timeout=90, cwd=ROOT,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("imported 22 segments (11 per language); assembling with locale en\n")
    found = turns(done.stdout)
    assert list(found) == ["first turn", "later turn", "later turn, small budget"]

    prompt, meta = found["first turn"]
    assert prompt.startswith("=== CORE_BEGIN ===\nYou are the game master of a text adventure.")
    assert ("=== NPC_BEGIN ===\nNPC: npc.innkeeper\nMarta, the innkeeper: broad, cheerful, quick to laugh.\n"
            "NPC: npc.bard\nFen, a travelling bard: thin, polite, always tuning a lute.\n"
            "=== NPC_END ===") in prompt
    assert meta["order"] == ["core", "ruleset", "world", "entry", "entry_start", "npc", "game_state",
                             "player", "input"]
    assert (meta["tokenizer"], meta["exact"], meta["emptyScopes"]) == ("cl100k_base", True, ["rng"])
    assert "truncated" not in meta

    prompt, meta = found["later turn"]
    assert "ENTRY_START" not in prompt
    assert "Under the bar she hides a smuggler's map of the old river tunnels.\nNPC: npc.bard" in prompt
    assert len(meta["segmentIdsByScope"]["npc"]) == 5
    assert "truncated" not in meta

    prompt, meta = found["later turn, small budget"]
    assert meta["tokensEstimated"] <= demo.SMALL_BUDGETS["en"]
    assert "NPC_BEGIN" not in prompt
    assert meta["truncated"]["droppedScopes"] == ["npc"]
    assert meta["truncated"]["npcDroppedTiers"] == [{"npcId": "npc.innkeeper", "fromTier": 2, "toTier": 0},
                                                    {"npcId": "npc.bard", "fromTier": 1, "toTier": 0}]
    assert meta["truncated"]["inputTrimmed"]["fromChars"] == 212
    assert 0 < meta["truncated"]["inputTrimmed"]["toChars"] < 212
    assert "玛尔塔" not in done.stdout


async def test_game_master_demo_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    """The Chinese segments (locale zh-CN) come through exactly; the NPC cap drops the bard."""
    await demo.game_master("zh", None)
    output = capsys.readouterr().out
    found = turns(output)
    prompt, meta = found["first turn"]
    assert "=== CORE_BEGIN ===\n你是一场文字冒险的游戏主持人。" in prompt
    assert "NPC: npc.innkeeper\n玛尔塔，旅店老板娘：身材宽大，性格开朗，爱笑。\n" in prompt
    assert "Marta" not in output
    prompt, meta = found["later turn, small budget"]
    assert meta["tokensEstimated"] <= demo.SMALL_BUDGETS["zh"]
    assert meta["truncated"]["droppedNpcs"] == ["npc.bard"]
    assert "NPC: npc.bard" not in prompt


def test_novel_stays_the_default() -> None:
    assert demo.parse_args([]).profile == "novel"
    assert demo.parse_args(["--profile", "game-master", "--budget", "400"]).budget == 400
