"""See the engine work in one command: a sample project, one prompt, its layer table.

    .venv/bin/python scripts/demo.py [--language zh|en] [--budget 3000]
    .venv/bin/python scripts/demo.py --profile game-master [--language zh|en] [--budget 320]

Builds Strata exactly as ``strata serve`` does (same composition root, same
JSON-RPC dispatch), in a temporary data dir, without opening a socket.

``--profile novel`` (the default) assembles one ``continue`` prompt in a novel.
``--profile game-master`` imports a small bilingual set of game-master segments
(docs/segments.md) and prints three ``segments:assemble`` prompts with their
``meta``: the first turn, a later turn, and the later turn on a small budget
(``--budget`` tokens; by default 320 in English, 500 in Chinese).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ipc.context import CallContext, Peer, Role
from ipc.dispatch import Dispatcher
from ipc.protocol import Call
from main.app import build_registry, open_services
from main.config import Config
from scripts.sample_data import GM_LOCALES, GM_REFS, GM_SEGMENTS, GM_TURNS, seed, seed_game

_ids = itertools.count(1)


class Client:
    """Calls methods through the server's own dispatcher, as the inspector would."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self._ctx = CallContext(peer=Peer(connection_id="demo", role=Role.INSPECTOR), debug=True)

    async def __call__(self, method: str, params: dict[str, Any]) -> Any:
        reply = await self._dispatcher.dispatch(Call(method, params, next(_ids)), self._ctx)
        assert reply is not None
        message = json.loads(reply)
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']['data']['code']}: {message['error']['message']}")
        return message["result"]


def _table(result: dict[str, Any]) -> str:
    lines = [f"{'layer':<10} {'tokens':>7} {'truncated':>9}"]
    for name in ("rules", "settings", "retrieved", "immediate"):
        layer = result["layers"][name]
        lines.append(f"{name:<10} {layer['tokens']:>7} {'yes' if layer['truncated'] else 'no':>9}")
    budget = result["budget"]
    lines.append(f"{'total':<10} {result['tokenCount']:>7}   of {budget['total']} "
                 f"(window {budget['contextWindow']} - reserve {budget['outputReserve']} "
                 f"- system prompt {budget['systemPromptTokens']})")
    return "\n".join(lines)


def _candidates(result: dict[str, Any]) -> str:
    lines = [f"{'layer':<10} {'id':<16} {'tokens':>6} {'key':>12}  fate"]
    for c in result["candidates"]:
        key = f"{c['keyName']}={c['key']:.2f}"
        fate = c["fate"] + (f" ({c['reason']})" if c["reason"] else "")
        lines.append(f"{c['layer']:<10} {c['id']:<16} {c['tokens']:>6} {key:>12}  {fate}")
    return "\n".join(lines)


async def main(language: str, budget: int | None) -> None:
    with tempfile.TemporaryDirectory(prefix="strata-demo-") as tmp:
        root = Path(tmp)
        config = Config(data_dir=root / "data", debug=True)
        services = await asyncio.to_thread(open_services, config)
        try:
            call = Client(Dispatcher(build_registry(config, services, lambda: 0)))
            project_id = await seed(call, root / "sample", language)
            document = "第五章.md" if language == "zh" else "chapter-05.md"
            text = (await call("document:read", {"projectId": project_id, "documentId": document}))["text"]
            if budget:
                profile = await call("context:budget:get", {"projectId": project_id})
                await call("context:budget:update", {"projectId": project_id, "version": profile["version"],
                                                     "contextWindow": budget})
            instruction = "写主角想起第三级台阶下的钥匙" if language == "zh" else \
                "The narrator remembers the key under the third step"
            result = await call("context:inspect", {
                "projectId": project_id, "documentId": document, "cursorPosition": len(text),
                "skillId": "continue", "additionalInput": instruction})
        finally:
            await services.aclose()
    print("=== system prompt ===\n" + result["systemPrompt"])
    print("\n=== prompt ===\n" + result["prompt"])
    print("\n=== layers ===\n" + _table(result))
    print("\n=== candidates ===\n" + _candidates(result))
    print("\nwarnings:", result["warnings"] or "none")
    print("stablePrefixHash:", result["stablePrefixHash"])
    print("tokenizer:", result["tokenizer"])


# tokenBudget of the game master's third prompt unless --budget says otherwise (Chinese text takes
# more tokens), and its npcTokenBudget
SMALL_BUDGETS = {"en": 320, "zh": 500}
SMALL_NPC_BUDGET = 60
_TEXTS = ("gameStateText", "playerText", "rngText", "inputText")


@contextlib.contextmanager
def _logs_to_stderr() -> Iterator[None]:
    """The services' warnings and errors on stderr, nothing else: stdout is the prompts."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    try:
        yield
    finally:
        structlog.configure(**saved)


def _turns(project_id: str, language: str, budget: int | None) -> list[tuple[str, dict[str, Any]]]:
    """The three segments:assemble calls: the first turn, a later turn, the later turn squeezed."""
    texts = GM_TURNS[language]
    base = {"projectId": project_id, **GM_REFS, "locale": GM_LOCALES[language]}
    later = {**base, **texts["later"], "isFirstTurn": False,
             "npcs": [{"npcId": "npc.innkeeper", "tier": 2}, {"npcId": "npc.bard", "tier": 1}]}
    return [
        ("first turn", {**base, **texts["first"], "isFirstTurn": True,
                        "npcs": [{"npcId": "npc.innkeeper", "tier": 0}, {"npcId": "npc.bard", "tier": 0}]}),
        ("later turn", later),
        ("later turn, small budget", {**later, "tokenBudget": budget or SMALL_BUDGETS[language],
                                      "npcTokenBudget": SMALL_NPC_BUDGET}),
    ]


async def game_master(language: str, budget: int | None) -> None:
    """Import the sample segments and print three game-master prompts with their meta."""
    with _logs_to_stderr(), tempfile.TemporaryDirectory(prefix="strata-demo-") as tmp:
        root = Path(tmp)
        config = Config(data_dir=root / "data", debug=True)
        services = await asyncio.to_thread(open_services, config)
        try:
            call = Client(Dispatcher(build_registry(config, services, lambda: 0)))
            project_id = await seed_game(call, root / "whispercross", language)
            results = [(title, params, await call("segments:assemble", params))
                       for title, params in _turns(project_id, language, budget)]
        finally:
            await services.aclose()
    print(f"imported {len(GM_SEGMENTS)} segments ({len(GM_SEGMENTS) // 2} per language); "
          f"assembling with locale {GM_LOCALES[language]}")
    for title, params, result in results:
        shown = {k: v for k, v in params.items() if k not in ("projectId", *_TEXTS)}
        print(f"\n##### {title}: segments:assemble {json.dumps(shown, ensure_ascii=False)}\n")
        print(result["prompt"])
        print("\nmeta:")
        for key, value in result["meta"].items():
            print(f"  {key}: {json.dumps(value, ensure_ascii=False)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=["novel", "game-master"], default="novel")
    parser.add_argument("--language", choices=["zh", "en"], default="zh")
    parser.add_argument("--budget", type=int,
                        help="novel: context window to use (default: the profile's 8192); game-master: "
                             "tokenBudget of the third prompt (default 320 in English, 500 in Chinese)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse_args()
    if args.profile == "game-master":
        asyncio.run(game_master(args.language, args.budget))
    else:
        asyncio.run(main(args.language, args.budget))
