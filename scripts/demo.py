"""See the engine work in one command: a sample novel, indexed, one prompt, its layers and candidates.

    .venv/bin/python scripts/demo.py [--language zh|en] [--budget 3000] [--verbose]
    .venv/bin/python scripts/demo.py --profile game-master [--language zh|en] [--budget 320]

Builds Strata exactly as ``strata serve`` does (same composition root, same
JSON-RPC dispatch), in a temporary data dir, without opening a socket. Logs
stay quiet (warnings and errors only, on stderr) unless ``--verbose``.

``--profile novel`` (the default) writes a four-chapter novel in the chosen
language (``scripts/sample_data.py``: a lighthouse keeper, his sister, a brass
key hidden under the third step in chapter 2), opens it as a project with its
rules, characters and memories, waits until the retrieval index has settled,
and assembles one ``continue`` prompt at the end of chapter 4, where the
narrator is locked out of the lamp room and remembers something. It prints the
prompt, the layer table and every candidate with the dense (encoder) and
lexical (BM25) rank its passage had: the chapter-2 passage shares no word with
the text before the cursor or the instruction, so it is found by meaning alone
(``found by: meaning``) and listed at the end.

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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ipc.context import CallContext, Peer, Role
from ipc.dispatch import Dispatcher
from ipc.protocol import Call
from main.config import Config
from main.stores import open_services
from main.wiring import build_registry
from scripts.sample_data import (
    GM_LOCALES,
    GM_REFS,
    GM_SEGMENTS,
    GM_TURNS,
    NOVEL,
    NOVEL_CURSOR,
    NOVEL_INSTRUCTION,
    seed_game,
    seed_novel,
)
from services.retrieval.deferred import DeferredRetrieval
from services.retrieval.search import Hit

_ids = itertools.count(1)
INDEX_TIMEOUT = 300.0  # seconds to wait for the first indexing of the sample (the encoder loads first)


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


class SearchTap:
    """Keeps the hits of the retrieval searches an assembly makes: each carries the rank its passage had
    in the dense (encoder) ranking and in the lexical (BM25) one, which the candidate table shows.

    It wraps the service's own ``search``, so the Retrieved layer gets exactly what it would without it.
    """

    def __init__(self, retrieval: DeferredRetrieval) -> None:
        self.hits: dict[str, Hit] = {}  # by candidate id, as the retrieval provider names them
        self._search = retrieval.search
        retrieval.search = self._record  # type: ignore[method-assign]

    async def _record(self, project_id: str, query: str, **options: Any) -> list[Hit]:
        hits = await self._search(project_id, query, **options)
        for hit in hits:
            self.hits[f"chunk:{hit.document_id}#{hit.ordinal}"] = hit
        return hits


def found_by(hit: Hit | None) -> str:
    """How a passage was found: by ``meaning`` (the encoder ranked it and no search term of the query
    occurs in it, so BM25 did not), by ``words`` (BM25 only) or by ``both``."""
    if hit is None:
        return ""
    if hit.lexical_rank is None:
        return "meaning" if hit.dense_rank is not None else ""
    return "both" if hit.dense_rank is not None else "words"


def _encoder(info: dict[str, Any], configured: str) -> str:
    """The encoder the index uses and why, as ``system:info`` tells it (else the configured one)."""
    embedding = info.get("embedding")
    if isinstance(embedding, dict) and "name" in embedding:
        return f"{embedding['name']}, {embedding.get('reason', 'configured')}"
    return configured


def _rank(rank: int | None) -> str:
    return "-" if rank is None else str(rank + 1)


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


def _candidates(result: dict[str, Any], hits: dict[str, Hit] | None = None) -> str:
    """Every candidate with its fate; a retrieved passage also with its dense and BM25 ranks (1 is best)."""
    hits = hits or {}
    lines = [f"{'layer':<10} {'id':<22} {'tokens':>6} {'key':>12} {'dense':>5} {'bm25':>5} "
             f"{'found by':<8}  fate"]
    for c in result["candidates"]:
        key = f"{c['keyName']}={c['key']:.2f}"
        fate = c["fate"] + (f" ({c['reason']})" if c["reason"] else "")
        hit = hits.get(c["id"]) if c["layer"] == "retrieved" else None
        dense, bm25 = (_rank(hit.dense_rank), _rank(hit.lexical_rank)) if hit else ("", "")
        lines.append(f"{c['layer']:<10} {c['id']:<22} {c['tokens']:>6} {key:>12} {dense:>5} {bm25:>5} "
                     f"{found_by(hit):<8}  {fate}")
    return "\n".join(lines)


def _by_meaning(result: dict[str, Any], hits: dict[str, Hit], shown: int = 3) -> str:
    """The retrieved passages found by meaning alone, best dense rank first, with their opening words."""
    fates = {c["id"]: c["fate"] for c in result["candidates"] if c["layer"] == "retrieved"}
    found = sorted((hit for id_, hit in hits.items() if id_ in fates and found_by(hit) == "meaning"),
                   key=lambda hit: hit.dense_rank if hit.dense_rank is not None else 1 << 30)
    if not found:
        return "(none: every retrieved passage shares a word with the query)"
    lines = []
    for hit in found[:shown]:
        id_ = f"chunk:{hit.document_id}#{hit.ordinal}"
        text = " ".join(hit.text.split())
        lines.append(f"{id_}  dense rank {_rank(hit.dense_rank)}, no BM25 match, {fates[id_]}\n"
                     f"    {text[:110]}…")
    return "\n".join(lines)


@contextlib.contextmanager
def _logs(verbose: bool) -> Iterator[None]:
    """The services' logs on stderr (stdout is the demo's output): warnings and errors only, every
    line with ``--verbose``."""
    saved = structlog.get_config()
    level = logging.DEBUG if verbose else logging.WARNING
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    root = logging.getLogger()
    previous = root.level
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    try:
        yield
    finally:
        root.setLevel(previous)
        structlog.configure(**saved)


async def wait_for_index(call: Client, project_id: str, documents: int,
                         timeout: float = INDEX_TIMEOUT) -> dict[str, Any]:
    """Poll ``index:status`` until the project's index has settled with all its documents."""
    deadline = time.monotonic() + timeout
    while True:
        status: dict[str, Any] = await call("index:status", {"projectId": project_id})
        if not status["indexing"] and status["documents"] >= documents:
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"the index did not settle in {timeout:g} s: {status}")
        await asyncio.sleep(0.1)


async def main(language: str, budget: int | None, verbose: bool = False) -> None:
    chapters = NOVEL[language]
    document = NOVEL_CURSOR[language]
    instruction = NOVEL_INSTRUCTION[language]
    with _logs(verbose), tempfile.TemporaryDirectory(prefix="strata-demo-") as tmp:
        root = Path(tmp)
        config = Config(data_dir=root / "data", debug=True)
        services = await asyncio.to_thread(open_services, config)
        try:
            tap = SearchTap(services.retrieval)
            call = Client(Dispatcher(build_registry(config, services, lambda: 0)))
            started = time.perf_counter()
            project_id = await seed_novel(call, root / "lighthouse", language)
            index = await wait_for_index(call, project_id, len(chapters))
            indexed = time.perf_counter() - started
            info = await call("system:info", {})
            text = (await call("document:read", {"projectId": project_id, "documentId": document}))["text"]
            if budget:
                profile = await call("context:budget:get", {"projectId": project_id})
                await call("context:budget:update", {"projectId": project_id, "version": profile["version"],
                                                     "contextWindow": budget})
            result = await call("context:inspect", {
                "projectId": project_id, "documentId": document, "cursorPosition": len(text),
                "skillId": "continue", "additionalInput": instruction})
        finally:
            await services.aclose()
    print(f"sample novel: {len(chapters)} chapters ({', '.join(chapters)}), indexed into {index['chunks']} "
          f"chunks in {indexed:.1f} s (encoder: {_encoder(info, config.embedding)})")
    print(f"assembling 'continue' at the end of {document}; instruction: {instruction}")
    print("\n=== system prompt ===\n" + result["systemPrompt"])
    print("\n=== prompt ===\n" + result["prompt"])
    print("\n=== layers ===\n" + _table(result))
    print("\n=== candidates === (dense, bm25: the passage's rank in each ranking, '-' absent)\n"
          + _candidates(result, tap.hits))
    print("\n=== retrieved by meaning === (no word in common with the text before the cursor or the "
          "instruction)\n" + _by_meaning(result, tap.hits))
    print("\nwarnings:", result["warnings"] or "none")
    print("stablePrefixHash:", result["stablePrefixHash"])
    print("tokenizer:", result["tokenizer"])


# tokenBudget of the game master's third prompt unless --budget says otherwise (Chinese text takes
# more tokens), and its npcTokenBudget
SMALL_BUDGETS = {"en": 320, "zh": 500}
SMALL_NPC_BUDGET = 60
_TEXTS = ("gameStateText", "playerText", "rngText", "inputText")


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


async def game_master(language: str, budget: int | None, verbose: bool = False) -> None:
    """Import the sample segments and print three game-master prompts with their meta."""
    with _logs(verbose), tempfile.TemporaryDirectory(prefix="strata-demo-") as tmp:
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
    parser.add_argument("--verbose", action="store_true",
                        help="every log line on stderr (else warnings and errors only)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse_args()
    if args.profile == "game-master":
        asyncio.run(game_master(args.language, args.budget, args.verbose))
    else:
        asyncio.run(main(args.language, args.budget, args.verbose))
