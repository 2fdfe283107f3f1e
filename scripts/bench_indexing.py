"""Indexing and search speed of retrieval, on real stores (SQLite, a Chroma folder, the bundled encoder).

Run from the repository root::

    .venv/bin/python scripts/bench_indexing.py            # readable
    .venv/bin/python scripts/bench_indexing.py --json     # the same figures as JSON

Three measurements:

1. **Full index** of a bilingual project of about ``--chunks`` chunks (half
   Chinese, half English chapters): chunks/s from files to a searchable index
   (chunking, exact token counts, terms, embedding, Chroma, SQLite). The
   encoder's one-time load is timed apart.
2. **One-paragraph edit** in a 200,000-character chapter: the time from the
   file changing to the new snapshot being searchable (``index_project``),
   repeated ``--edits`` times, each edit a different paragraph.
3. **Search**: hybrid search latency over the full project, one query at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.benchlib import cpu_model, emit, percentile, quiet_logs
from services.retrieval import build_retrieval
from services.retrieval.embeddings import shared_encoder
from tests.support.scenarios import zh_chapter

_EN_WORDS = ("harbour", "lighthouse", "keeper", "storm", "letter", "key", "stairs", "lantern", "tide",
             "island", "boat", "rope", "map", "fog", "bell", "captain", "sister", "village", "cliff",
             "window", "night", "morning", "salt", "gull", "anchor", "journal", "compass")
_EN_NAMES = ("Mara", "Tom", "Elsie", "Jonah", "Ruth", "Iris", "Owen")


def en_chapter(title: str, sentences: int, rng: random.Random) -> str:
    paragraphs, current = [], []
    for n in range(sentences):
        words = " ".join(rng.choice(_EN_WORDS) for _ in range(rng.randint(6, 14)))
        current.append(f"{rng.choice(_EN_NAMES)} looked at the {words} and said nothing for a while.")
        if n % 5 == 4:
            paragraphs.append(" ".join(current))
            current = []
    return title + "\n\n" + "\n\n".join(paragraphs + ([" ".join(current)] if current else [])) + "\n"


def write_corpus(root: Path, chapters: int, sentences: int) -> None:
    rng = random.Random(7)
    (root / "卷一").mkdir(parents=True)
    (root / "part-1").mkdir()
    for n in range(chapters):
        (root / "卷一" / f"第{n:02d}章.md").write_text(
            zh_chapter(f"第{n}章", sentences, start=n * sentences), encoding="utf-8")
        (root / "part-1" / f"chapter-{n:02d}.md").write_text(
            en_chapter(f"Chapter {n}", sentences // 2, rng), encoding="utf-8")


def big_chapter(characters: int) -> str:
    text, n = [], 0
    size = 0
    while size < characters:
        paragraph = zh_chapter(f"第{n}节", 8, start=n * 8).split("\n", 1)[1].strip()
        text.append(paragraph)
        size += len(paragraph) + 2
        n += 1
    return "\n\n".join(text) + "\n"


async def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    shared_encoder()
    load_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="strata-bench-index-") as tmp:
        root = Path(tmp)
        write_corpus(root / "novel", args.chapters, args.sentences)
        opened = build_retrieval(root / "data")
        try:
            retrieval = opened.retrieval
            report = await retrieval.index_project("bench", root / "novel")
            full = {"documents": report.documents, "chunks": report.chunks,
                    "seconds": round(report.seconds, 3),
                    "chunks_per_s": round(report.chunks / report.seconds, 1),
                    "characters": sum(len(p.read_text(encoding="utf-8"))
                                      for p in (root / "novel").rglob("*.md"))}
            print(f"... full index: {full['chunks']} chunks in {full['seconds']} s", file=sys.stderr)

            chapter = root / "big" / "长章.md"
            chapter.parent.mkdir()
            text = big_chapter(args.characters)
            chapter.write_text(text, encoding="utf-8")
            await retrieval.index_project("big", root / "big")
            edits = []
            paragraphs = text.split("\n\n")
            for k in range(args.edits):
                index = (k * 7919) % len(paragraphs)
                paragraphs[index] = paragraphs[index].replace("。", f"，第{k}次修改。", 1)
                chapter.write_text("\n\n".join(paragraphs), encoding="utf-8")
                t0 = time.perf_counter()
                edit = await retrieval.index_project("big", root / "big")
                edits.append({"seconds": time.perf_counter() - t0, "embedded": edit.embedded,
                              "chunks": edit.chunks})
            seconds = [e["seconds"] for e in edits]
            edit_figures = {"characters": len(text), "chunks": edits[0]["chunks"], "edits": len(edits),
                            "p50_ms": round(statistics.median(seconds) * 1e3, 1),
                            "max_ms": round(max(seconds) * 1e3, 1),
                            "embedded_per_edit": sorted({e["embedded"] for e in edits})}
            print(f"... edits: p50 {edit_figures['p50_ms']} ms", file=sys.stderr)

            queries = ["他想起了那把钥匙藏在哪里", "the keeper climbed the lighthouse stairs in the storm",
                       "灯塔下的旧码头", "Mara read the captain's journal by the lantern"]
            latencies = []
            for k in range(args.queries):
                t0 = time.perf_counter()
                await retrieval.search("bench", queries[k % len(queries)] + f" {k}")
                latencies.append(time.perf_counter() - t0)
            latencies.sort()
            search = {"queries": len(latencies), "p50_ms": round(percentile(latencies, 50) * 1e3, 2),
                      "p95_ms": round(percentile(latencies, 95) * 1e3, 2)}
        finally:
            await opened.close()
    return {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()},
            "command": " ".join([".venv/bin/python", "scripts/bench_indexing.py", *sys.argv[1:]]),
            "encoder_load_s": round(load_s, 2), "full_index": full, "paragraph_edit": edit_figures,
            "search": search}


def render(result: dict[str, Any]) -> str:
    full, edit, search = result["full_index"], result["paragraph_edit"], result["search"]
    return "\n".join([
        f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, "
        f"Python {result['machine']['python']}",
        f"Command: {result['command']}",
        f"Encoder load (once per process): {result['encoder_load_s']} s",
        f"Full index: {full['documents']} documents, {full['characters']:,} characters, "
        f"{full['chunks']} chunks in {full['seconds']} s = {full['chunks_per_s']} chunks/s",
        f"One-paragraph edit in a {edit['characters']:,}-character chapter ({edit['chunks']} chunks), "
        f"{edit['edits']} edits: p50 {edit['p50_ms']} ms, max {edit['max_ms']} ms, "
        f"chunks embedded per edit {edit['embedded_per_edit']}",
        f"Hybrid search over the full index: {search['queries']} queries, p50 {search['p50_ms']} ms, "
        f"p95 {search['p95_ms']} ms",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chapters", type=int, default=10, help="chapters per language")
    parser.add_argument("--sentences", type=int, default=330, help="sentences per Chinese chapter")
    parser.add_argument("--characters", type=int, default=200_000, help="size of the big chapter")
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with quiet_logs():
        result = asyncio.run(run(args))
    emit(result, lambda: render(result) + "\n", as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
