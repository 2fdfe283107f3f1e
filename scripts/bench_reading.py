"""Reading companion benchmark: reading:ask over a book of about 300 pages, warm.

Run from the repository root::

    .venv/bin/python scripts/bench_reading.py                 # readable tables (about a minute)
    .venv/bin/python scripts/bench_reading.py --json          # the same figures as JSON
    .venv/bin/python scripts/bench_reading.py --language zh   # a Chinese book
    .venv/bin/python scripts/bench_reading.py --calls 50      # fewer measured calls

The server is ``python -m main serve`` on a fresh data dir with its defaults. One websocket; every
call is sequential. Setup, through JSON-RPC and deterministic for a ``--seed``: one project of
``--chapters`` (30) chapters of about ``--chapter-tokens`` (3,450) tokens of generated prose (the
load benchmark's), which the default 400-token pages make about 300 pages; the retrieval index
settled; a valid summary stored for every page and every chapter (``reading:summaries:put``: the
page's or chapter's cast as entities, one fact, citing only its own pages).

Measured: ``--warmup`` (20) asks, then ``--calls`` (200) ``reading:ask {start: 1, end, question}``
with the window's end drawn anywhere in the book and a question naming one of the cast, a place or
an object; p50/p95/p99/max in ms over the websocket, the prompt's tokens, the parts kept of each
kind, and the server's CPU per ask. The run exits 1 if any call fails, any ``tokenCount`` passes
``budget.total``, or any kept part draws on a page after the window's end.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import benchlib
from scripts.bench_load import build_project, settle_index
from scripts.benchlib import fmt, spread, table
from services.tokenizer import resolve_tokenizer
from tests.support.client import RpcClient
from tests.support.scenarios import Project

QUESTIONS = {"en": ("Who is {x}?", "What happened at {x}?", "Why does everyone talk about {x}?",
                    "Where was {x} last seen?"),
             "zh": ("{x}是谁？", "{x}发生了什么？", "为什么大家都在说{x}？", "{x}最后一次出现在哪里？")}
_NAME = {"en": re.compile(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b"),
         "zh": re.compile(r"[\u4e00-\u9fff]{2,3}(?=在|把|低声)")}


@dataclass
class Report:
    machine: dict[str, Any]
    command: str
    config: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    prompt_tokens: dict[str, float] = field(default_factory=dict)
    kept: dict[str, float] = field(default_factory=dict)
    cpu_ms_per_ask: float = 0.0
    problems: list[str] = field(default_factory=list)


def names_in(text: str, language: str) -> list[str]:
    """The cast named in ``text``, most mentioned first."""
    return [n for n, _ in Counter(_NAME[language].findall(text)).most_common()]


def summary_of(text: str, first: int, last: int, language: str, names: int) -> dict[str, Any]:
    """A valid summary of pages first..last: its cast as entities, its first words as one fact."""
    cast = names_in(text, language)[:names]
    words = text.split()[:12] if language == "en" else [text.replace("\n", "")[:24]]
    spans = sorted({first, last})
    return {"entities": [{"name": n.lower(), "type": "character", "mentions": 1, "page_spans": spans}
                         for n in cast],
            "events": [], "relationships": [], "facts": [" ".join(words)], "open_questions": []}


async def put_summaries(rpc: RpcClient, project_id: str, chapters: dict[str, str],
                        layout: dict[str, Any], language: str) -> int:
    """A summary for every page and chapter; how many were stored."""
    stored = 0
    texts = [chapters[c["documentId"]] for c in layout["chapters"]]
    for chapter, text in zip(layout["chapters"], texts, strict=True):
        pages = chapter["pages"]
        share = max(1, len(text) // max(1, len(pages)))
        for i, page in enumerate(pages):
            piece = text[i * share:(i + 1) * share]
            await rpc.call("reading:summaries:put", {"projectId": project_id, "level": "page",
                                                     "unit": str(page["number"]),
                                                     "summary": summary_of(piece, page["number"],
                                                                           page["number"], language, 3)})
            stored += 1
        await rpc.call("reading:summaries:put", {"projectId": project_id, "level": "chapter",
                                                 "unit": str(chapter["index"]),
                                                 "summary": summary_of(text, chapter["startPage"],
                                                                       chapter["endPage"], language, 5)})
        stored += 1
    return stored


def check(result: dict[str, Any], end: int) -> list[str]:
    problems = []
    if result["tokenCount"] > result["budget"]["total"]:
        problems.append(f"tokenCount {result['tokenCount']} over {result['budget']['total']}")
    late = [p["id"] for p in result["parts"] if p["fate"] != "dropped" and p["pages"][1] > end]
    if late:
        problems.append(f"parts after page {end}: {late[:3]}")
    return problems


async def run(args: argparse.Namespace) -> Report:
    report = Report(machine=benchlib.machine_facts(), command=benchlib.command_line(),
                    config=vars(args).copy())
    report.config.pop("save", None)
    rng = random.Random(args.seed)
    count = resolve_tokenizer().count
    data = build_project(0, args.language, count, seed=args.seed, documents=args.chapters,
                         min_tokens=args.chapter_tokens - 200, max_tokens=args.chapter_tokens + 200)
    with tempfile.TemporaryDirectory(prefix="strata-bench-reading-") as tmp:
        root = Path(tmp)
        async with benchlib.running_server(root / "data") as server:
            rpc = await RpcClient.open(server.url, server.token)
            try:
                project = await Project.open(rpc, root / "book", language=args.language)
                benchlib.progress(f"writing {len(data.chapters)} chapters")
                for name, text in data.chapters.items():
                    await project.write(name, text)
                benchlib.progress("waiting for the retrieval index")
                report.data["index"] = await settle_index(server.url, server.token, [project.project_id], 600)
                layout = await rpc.call("reading:layout", {"projectId": project.project_id})
                report.data["pages"] = layout["pageCount"]
                report.data["chapters"] = len(layout["chapters"])
                benchlib.progress("storing page and chapter summaries")
                started = time.perf_counter()
                report.data["summaries"] = await put_summaries(rpc, project.project_id, data.chapters, layout,
                                                               args.language)
                report.data["summaries_s"] = round(time.perf_counter() - started, 1)
                cast = names_in(" ".join(data.chapters.values()), args.language)[:20] or ["the lamp"]
                pages = layout["pageCount"]

                def ask_params() -> tuple[dict[str, Any], int]:
                    end = rng.randint(min(10, pages), pages)
                    question = rng.choice(QUESTIONS[args.language]).format(x=rng.choice(cast))
                    params = {"projectId": project.project_id, "start": 1, "end": end, "question": question}
                    return params, end

                benchlib.progress(f"{args.warmup} warm-up asks")
                for _ in range(args.warmup):
                    params, end = ask_params()
                    report.problems += check(await rpc.call("reading:ask", params), end)
                benchlib.progress(f"{args.calls} measured asks")
                latencies, tokens, kept = [], [], Counter[str]()
                cpu_before = sum(benchlib.process_cpu(server.process.pid))
                for _ in range(args.calls):
                    params, end = ask_params()
                    started = time.perf_counter()
                    result = await rpc.call("reading:ask", params)
                    latencies.append((time.perf_counter() - started) * 1000)
                    report.problems += check(result, end)
                    tokens.append(result["tokenCount"])
                    kept.update(p["kind"] for p in result["parts"] if p["fate"] != "dropped")
                cpu = sum(benchlib.process_cpu(server.process.pid)) - cpu_before
            finally:
                await rpc.close()
    report.latency_ms = {k: round(v, 2) for k, v in asdict(spread(latencies)).items()}
    report.prompt_tokens = {k: round(v, 1) for k, v in asdict(spread(tokens)).items()}
    report.kept = {kind: round(n / args.calls, 1) for kind, n in sorted(kept.items())}
    report.cpu_ms_per_ask = round(cpu * 1000 / args.calls, 1)
    return report


def render(report: Report) -> str:
    lines = ["# reading:ask over a book of about 300 pages", "", *benchlib.machine_lines(report.machine), "",
             f"command: `{report.command}`", "",
             f"book: {report.data['chapters']} chapters, {report.data['pages']} pages, "
             f"{report.data['index']['chunks']} chunks indexed; {report.data['summaries']} summaries stored "
             f"in {report.data['summaries_s']} s", ""]
    lat = report.latency_ms
    lines += table(["calls", "p50 ms", "p95 ms", "p99 ms", "max ms", "CPU ms/ask"],
                   [[str(int(lat["count"])), fmt(lat["p50"], 1), fmt(lat["p95"], 1), fmt(lat["p99"], 1),
                     fmt(lat["max"], 1), fmt(report.cpu_ms_per_ask, 1)]])
    tok = report.prompt_tokens
    lines += ["", f"prompt tokens: p50 {fmt(tok['p50'], 0)}, max {fmt(tok['max'], 0)}; parts kept per ask: "
              + ", ".join(f"{k} {v}" for k, v in report.kept.items()),
              f"problems: {len(report.problems)}"
              + (f" (first: {report.problems[0]})" if report.problems else ""),
              ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--language", choices=("en", "zh"), default="en")
    parser.add_argument("--chapters", type=int, default=30)
    parser.add_argument("--chapter-tokens", type=int, default=3450)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", type=Path)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with benchlib.quiet_logs():
        report = asyncio.run(run(args))
    benchlib.emit(asdict(report), lambda: render(report), as_json=args.json, save=args.save)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
