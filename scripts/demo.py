"""See the engine work in one command: a sample project, one prompt, its layer table.

    .venv/bin/python scripts/demo.py [--language zh|en] [--budget 3000]

Builds Strata exactly as ``strata serve`` does (same composition root, same
JSON-RPC dispatch), in a temporary data dir, without opening a socket.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ipc.context import CallContext, Peer, Role
from ipc.dispatch import Dispatcher
from ipc.protocol import Call
from main.app import build_registry, open_services
from main.config import Config
from scripts.sample_data import seed

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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", choices=["zh", "en"], default="zh")
    parser.add_argument("--budget", type=int, help="context window to use (default: the profile's 8192)")
    args = parser.parse_args()
    asyncio.run(main(args.language, args.budget))
