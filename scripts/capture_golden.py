"""Capture the golden files of the `novel` assembly: tests/golden/novel/<case>.json.

    .venv/bin/python scripts/capture_golden.py [--runs 2] [--out DIR] [--dry-run]

Only re-run this when a change to the output of the `novel` profile (the
default four-layer assembly) is intended and reviewed: the golden files are
the regression baseline of tests/e2e/test_novel_golden.py, and re-capturing
after an unintended change silently blesses it. A refactor that must keep
`novel` byte-identical never re-captures.

What it does: for each run, start a real ``python -m main serve --debug``
child on a fresh data dir, seed the corpus of tests/support/golden_corpus.py
over JSON-RPC, wait for every retrieval index to settle, then send every case
as ``context:assemble`` (client token) and ``context:inspect`` (inspector
token). The runs must agree byte for byte (the engine is deterministic; a
difference is reported and nothing is written), and every case must still
show the engine paths it claims (``Case.expects``). Then each case is written
as pretty-printed JSON with sorted keys and unescaped UTF-8, holding the
request, the corpus fingerprint and the compared fields of both results.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import process
from tests.support.client import RpcClient
from tests.support.golden_corpus import (
    CASES,
    SERVER_ARGS,
    golden_document,
    run_case,
    seed_corpus,
    unmet_expectations,
)
from tests.support.golden_diff import first_difference

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "tests" / "golden" / "novel"


async def capture_once(workdir: Path) -> dict[str, dict[str, Any]]:
    """Every case's golden document, from one fresh server and data dir."""
    server = await asyncio.to_thread(process.start_server, workdir / "data", *SERVER_ARGS)
    try:
        rpc = await RpcClient.open(server.url, server.token)
        inspector = await RpcClient.open(server.url, str(server.ready["inspectorToken"]))
        try:
            ids = await seed_corpus(rpc, workdir / "projects")
            documents = {}
            for case in CASES:
                assembled, inspected = await run_case(rpc, inspector, case, ids[case.project])
                documents[case.name] = golden_document(case, assembled, inspected)
            return documents
        finally:
            await inspector.close()
            await rpc.close()
    finally:
        await asyncio.to_thread(server.terminate)


def dump(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def code_origin() -> str:
    """Where the server child imports the engine from (it runs with cwd = the checkout of process.py)."""
    out = subprocess.run([sys.executable, "-c", "import services; print(services.__file__)"],
                         cwd=process.REPO, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def summary(document: dict[str, Any]) -> str:
    inspected = document["inspect"]
    fates: dict[str, int] = {}
    for c in inspected["candidates"]:
        label = f"{c['section']}:{c['fate']}" + (f":{c['reason']}" if c["reason"] else "")
        fates[label] = fates.get(label, 0) + 1
    layers = " ".join(f"{k[:3]}={v['tokens']}" for k, v in inspected["layers"].items())
    tokens = f"{inspected['tokenCount']:>5}/{inspected['budget']['total']:<5}"
    return f"{document['case']:<32} {tokens} {layers}\n    warnings={inspected['warnings']}\n    {fates}"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2,
                        help="independent captures that must agree (default 2)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--dry-run", action="store_true", help="capture and compare, write nothing")
    args = parser.parse_args(argv)

    print(f"engine imported from {code_origin()}", file=sys.stderr)
    captures = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="strata-golden-") as tmp:
            captures.append(await capture_once(Path(tmp)))
        print(f"run {run + 1}: {len(captures[-1])} cases captured", file=sys.stderr)
    for run, other in enumerate(captures[1:], start=2):
        for name, document in captures[0].items():
            difference = first_difference(document, other[name]) or first_difference(other[name], document)
            if difference is not None:
                print(f"run 1 and run {run} differ in {name}: {difference}", file=sys.stderr)
                return 1
    unmet = {}
    for case in CASES:
        document = captures[0][case.name]
        print(summary(document))
        missing = unmet_expectations(case, document["inspect"])
        if missing:
            unmet[case.name] = missing
            print(f"    NOT SHOWN: {missing}")
    if unmet:
        print(f"{len(unmet)} case(s) no longer exercise what they claim (Case.expects); nothing written",
              file=sys.stderr)
        return 1
    if args.dry_run:
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in args.out.glob("*.json"):
        if stale.stem not in captures[0]:
            stale.unlink()
    for name, document in captures[0].items():
        (args.out / f"{name}.json").write_text(dump(document), encoding="utf-8")
    print(f"wrote {len(captures[0])} golden files to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
