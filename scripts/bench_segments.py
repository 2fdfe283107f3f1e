"""Benchmark segments:assemble (the game-master profile) warm, in-process.

A project of 200 segments (core, two rulesets, two worlds, three entry points
with their first-turn welcomes, and 20 NPCs with three tiers of two segments
each) is imported through JSON-RPC into the whole app as ``strata serve``
builds it, without a socket. Then the same ``segments:assemble`` is timed:

* **dispatcher**: ``Dispatcher.dispatch`` of the JSON-RPC call, reply encoded;
* **service**: ``GameMaster.assemble`` (the context service and the engine);
* **engine**: the pure engine on the items the providers gathered.

Two scenes: three NPCs at tier 2 (a room of an inn) and all 20 NPCs at tier 2,
whose NPC block passes ``npcTokenBudget`` so its cap steps run every call.

    .venv/bin/python scripts/bench_segments.py [--calls 2000] [--json] [--save PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import itertools
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ipc.context import CallContext, Peer, Role
from ipc.dispatch import Dispatcher
from ipc.protocol import Call
from main.config import Config
from main.stores import open_services
from main.wiring import build_registry
from scripts import benchlib
from scripts.benchlib import LoadMeter, emit, fmt, quiet_logs, spread, table

NPCS = 20
TIERS = 3
PER_TIER = 2
SCENE_NPCS = 3
BUDGET_MS = 1.0  # the target: warm segments:assemble p50 in-process
_ids = itertools.count(1)


def segments() -> list[dict[str, Any]]:
    """200 segments, bilingual, of every scope."""
    rows: list[dict[str, Any]] = [{"scope": "core", "content": text} for text in (
        "You are the game master of a text adventure. Narrate in the second person.",
        "Keep every answer under three paragraphs and end on a choice for the player.",
        "你是文字冒险的主持人，用第二人称叙述。",
        "Never decide the player's actions for them.")]
    for ruleset in ("ruleset.classic_v1", "ruleset.light"):
        rows += [{"scope": "ruleset", "refId": ruleset, "content": f"Rule {n}: roll a d20 and add the "
                  f"relevant modifier; a natural 20 always succeeds ({ruleset})."} for n in range(8)]
    for world in ("world.mystika", "world.ashen"):
        rows += [{"scope": "world", "refId": world, "content": f"{world}: 第{n}条世界设定。魔法在夜里"
                  "更强，河流不会结冰。"} for n in range(10)]
    for entry in ("ep.whispercross", "ep.harbor", "ep.tower"):
        rows += [{"scope": "entry", "refId": entry, "content": f"{entry} scene note {n}: the common room "
                  "smells of smoke and rain."} for n in range(25 if entry == "ep.whispercross" else 0)]
        rows += [{"scope": "entry_start", "refId": entry, "content": f"Welcome to {entry}, part {n}."}
                 for n in range(5)]
    for npc in range(NPCS):
        for tier in range(TIERS):
            metadata = {"tier": tier, "priority": npc % 3}
            rows += [{"scope": "npc", "refId": f"npc.{npc:02d}", "metadata": metadata,
                      "content": f"NPC {npc} tier {tier} fact {k}: they know the road north is watched."}
                     for k in range(PER_TIER)]
    return rows[:200]


def args(npcs: int, project_id: str) -> dict[str, Any]:
    return {"projectId": project_id, "entryPointId": "ep.whispercross", "worldId": "world.mystika",
            "rulesetId": "ruleset.classic_v1", "isFirstTurn": False,
            "gameStateText": "You are in the inn common room. The fire is low; rain on the shutters.",
            "playerText": "You are a level 3 fighter with a notched sword.",
            "inputText": "I ask the innkeeper about the road north.",
            "npcs": [{"npcId": f"npc.{n:02d}", "tier": 2} for n in range(npcs)]}


@contextlib.asynccontextmanager
async def app(root: Path) -> AsyncIterator[tuple[Dispatcher, Any]]:
    config = Config(data_dir=root / "data")
    services = await asyncio.to_thread(open_services, config)
    try:
        registry = build_registry(config, services, lambda: 0)
        yield Dispatcher(registry), registry
    finally:
        await services.aclose()


async def timed(label: str, call: Callable[[], Awaitable[Any]], calls: int, warmup: int) -> dict[str, Any]:
    for _ in range(warmup):
        await call()
    samples: list[float] = []
    meter = LoadMeter()
    clock = time.perf_counter
    for _ in range(calls):
        t0 = clock()
        await call()
        samples.append((clock() - t0) * 1e3)
    stats = spread(samples)
    load = meter.stop()
    return {"label": label, "calls": stats.count, "p50_ms": stats.p50, "p95_ms": stats.p95,
            "p99_ms": stats.p99, "max_ms": stats.max, "load": dataclasses.asdict(load),
            "noisy": load.noisy}


async def run(calls: int, warmup: int) -> dict[str, Any]:
    ctx = CallContext(peer=Peer(connection_id="bench", role=Role.CLIENT))
    with tempfile.TemporaryDirectory() as tmp, quiet_logs():
        root = Path(tmp)
        (root / "game").mkdir()
        async with app(root) as (dispatcher, _):
            async def rpc(method: str, params: dict[str, Any]) -> Any:
                reply = await dispatcher.dispatch(Call(method, params, next(_ids)), ctx)
                if reply is None or '"result":' not in reply:
                    raise RuntimeError(f"{method} failed: {reply}")
                return reply

            opened = json.loads(await rpc("project:open", {"path": str(root / "game")}))["result"]
            project_id = opened["project"]["id"] if "project" in opened else opened["projectId"]
            await rpc("segments:import", {"projectId": project_id, "segments": segments()})
            phases = []
            for label, npcs in (("scene: 3 NPCs at tier 2", SCENE_NPCS), ("crowd: 20 NPCs at tier 2", NPCS)):
                params = args(npcs, project_id)
                reply = json.loads(await rpc("segments:assemble", params))["result"]
                call = functools.partial(rpc, "segments:assemble", params)
                phase = await timed(f"dispatcher, {label}", call, calls, warmup)
                phase["tokens"] = reply["meta"]["tokensEstimated"]
                phase["truncated"] = reply["meta"].get("truncated")
                phases.append(phase)
    return {"machine": benchlib.machine_facts(), "command": benchlib.command_line(),
            "data": {"segments": 200, "npcs": NPCS, "tiers": TIERS}, "phases": phases}


def render(report: dict[str, Any]) -> str:
    lines = [*benchlib.machine_lines(report["machine"]), ""]
    rows = [[p["label"], str(p["calls"]), fmt(p["p50_ms"], 3), fmt(p["p95_ms"], 3), fmt(p["p99_ms"], 3),
             str(p["tokens"])] for p in report["phases"]]
    lines += table(["phase", "calls", "p50 ms", "p95 ms", "p99 ms", "tokens"], rows)
    scene = report["phases"][0]["p50_ms"]
    lines.append(f"warm segments:assemble p50 {scene:.3f} ms: target < {BUDGET_MS} ms "
                 f"{'met' if scene < BUDGET_MS else 'NOT met'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", type=Path)
    options = parser.parse_args(argv)
    report = asyncio.run(run(options.calls, options.warmup))
    emit(report, lambda: render(report), as_json=options.json, save=options.save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
