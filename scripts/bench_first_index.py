"""A new project's first index through the server, alone or while a writer asks for assemblies.

Run from the repository root::

    .venv/bin/python scripts/bench_first_index.py                   # idle: 125 chapters, as issue 18 seeds
    .venv/bin/python scripts/bench_first_index.py --documents 40 --ask-every 1.3

The server (``python -m main serve``, its default encoder: e5) first gets a small project of
``--writer-documents`` chapters and indexes it; then a new project of ``--documents`` chapters is
written over ``document:write`` (the load benchmark's chapters, ``scripts/bench_load.py``), and the
time from the last write's answer until ``index:status`` says no pass runs is its first index.
With ``--ask-every S``, one ``context:assemble`` at a random cursor of the small project is sent S
seconds after the last one answered, until the index is settled: their latency is what a writer
working during an import waits (an index pass lends itself the spare core only once assemblies have
rested, services/retrieval/batches.py).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import bench_load, benchlib
from services.tokenizer import resolve_tokenizer
from tests.support.client import RpcClient


async def _assemblies_until_settled(rpc: RpcClient, writer: list[bench_load.Target], project_id: str,
                                    every: float, timeout: float) -> list[float]:
    rng = random.Random(1)
    latencies: list[float] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(every)
        if not (await rpc.call("index:status", {"projectId": project_id}))["indexing"]:
            break
        target = rng.choice(writer)
        started = time.perf_counter()
        await rpc.call("context:assemble", {"projectId": target.project_id, "documentId": target.document_id,
                                            "cursorPosition": rng.randint(0, target.length),
                                            "skillId": "continue"})
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def run(args: argparse.Namespace) -> dict[str, Any]:
    count = resolve_tokenizer().count
    sizes = {"min_tokens": args.min_tokens, "max_tokens": args.max_tokens}
    writer_data = bench_load.build_project(0, "zh", count, seed=args.seed, documents=args.writer_documents,
                                           **sizes)
    new_data = bench_load.build_project(1, "zh", count, seed=args.seed, documents=args.documents, **sizes)
    with tempfile.TemporaryDirectory(prefix="strata-first-index-") as tmp:
        root = Path(tmp)
        async with benchlib.running_server(root / "data", *args.server_flag) as server:
            writer = await bench_load.seed(server.url, server.token,
                                           [(writer_data, root / "projects" / writer_data.name)])
            await bench_load.settle_index(server.url, server.token, [writer[0].project_id], args.timeout)
            speed_before = benchlib.speed_reference()
            rpc = await RpcClient.open(server.url, server.token)
            try:
                targets = await bench_load.seed(server.url, server.token,
                                                [(new_data, root / "projects" / new_data.name)])
                started = time.perf_counter()
                project_id = targets[0].project_id
                latencies = (await _assemblies_until_settled(rpc, writer, project_id, args.ask_every,
                                                             args.timeout) if args.ask_every else [])
                index = await bench_load.settle_index(server.url, server.token, [project_id], args.timeout)
                index["seconds"] = time.perf_counter() - started
            finally:
                await rpc.close()
    result: dict[str, Any] = {"machine": {**benchlib.machine_facts(), "speed_before": speed_before,
                                          "speed_after": benchlib.speed_reference()},
                              "command": args.command, "index": index}
    if args.ask_every:
        waited = dataclasses.asdict(bench_load.latency(latencies))
        result["assemblies"] = {"every_s": args.ask_every, **waited}
    return result


def render(report: dict[str, Any]) -> str:
    index, machine = report["index"], report["machine"]
    lines = [*benchlib.machine_lines(machine),
             benchlib.speed_line(machine['speed_before'], machine['speed_after']),
             f"Index:   {index['documents']} documents, {index['chunks']} chunks, "
             f"{'settled' if index['settled'] else 'NOT settled'} after {index['seconds']:.1f} s"]
    if "assemblies" in report:
        a = report["assemblies"]
        lines.append(f"Writer:  {a['count']} assemblies, one {a['every_s']} s after the last: "
                     f"p50 {a['p50_ms']:.1f} / p95 {a['p95_ms']:.1f} / p99 {a['p99_ms']:.1f} ms")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--documents", type=int, default=125, help="chapters of the project indexed first")
    p.add_argument("--writer-documents", type=int, default=5, help="chapters of the writer's project")
    p.add_argument("--min-tokens", type=int, default=2500, help="smallest chapter")
    p.add_argument("--max-tokens", type=int, default=3500, help="largest chapter")
    p.add_argument("--ask-every", type=float, default=0.0, metavar="S",
                   help="an assembly in the writer's project S s after the last (0: none, the server idle)")
    p.add_argument("--timeout", type=float, default=1200.0, help="longest wait for an index to settle")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--server-flag", action="append", default=[], metavar="FLAG",
                   help="a flag for the server (repeat it; e.g. --server-flag=--index-debounce=0.05)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--save", type=Path, default=None, metavar="PATH", help="also write the JSON report")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.command = benchlib.script_command("bench_first_index.py", argv)
    report = asyncio.run(run(args))
    benchlib.emit(report, lambda: render(report), as_json=args.json, save=args.save)
    return 0 if report["index"]["settled"] else 1


if __name__ == "__main__":
    sys.exit(main())
