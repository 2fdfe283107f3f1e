"""Retrieval per assembly, warm: the Retrieved layer's search at a writer's cursor, per encoder and query.

Run from the repository root::

    .venv/bin/python scripts/bench_dense_query.py            # readable
    .venv/bin/python scripts/bench_dense_query.py --json     # the same figures as JSON

It writes the first ``--chapters`` chapters of the evaluation corpus's 《雾港》
(``tests/retrieval_eval``) into a temporary folder, indexes them with each
encoder (``use-multilingual`` and ``multilingual-e5-small``) through the real
retrieval code, and times ``RetrievalProvider.gather`` (the whole retrieval
part of a ``continue`` assembly: the dense query, Chroma, BM25, fusion) in the
last chapter, with the query made two ways:

- ``text``: the last 300 characters before the cursor and the instruction,
  embedded as one query (how Strata asked before issue 17);
- ``index``: the sentences before the cursor, their vectors read from the
  index, and the instruction embedded as a query (``services.retrieval.query``).

Three runs of ``--calls`` calls each, after a warm-up:

1. **same cursor**: the same request again (everything cached);
2. **moving cursor**: the cursor at the end of a different paragraph each call,
   all of them already indexed (reading back, or a writer moving around);
3. **typing**: a sentence the index has not seen grows by four characters a call.

Reported per call: wall time (median and p95) and the process's CPU time, and
how many texts the encoder embedded. The machine's load is printed: other
processes make wall times longer, not CPU times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

from scripts.benchlib import emit, percentile, quiet_logs
from services.context.counting import CountCache
from services.context.skills import get_skill
from services.retrieval import Standalone, build_retrieval
from services.retrieval.embeddings import embed_queries
from services.retrieval.provider import DENSE_INSTRUCTION, RetrievalProvider
from services.retrieval.query import context_sentences
from services.retrieval.search import Exclusion
from services.sources.base import GatherContext
from services.sources.window import cut_window
from tests.retrieval_eval.corpus import build_corpus

INSTRUCTION = "写林远想起父亲留下的那把铜钥匙"
TYPED = "林远扶着栏杆往下看，雾里有一盏灯忽明忽暗，像是有人在码头上打信号，他想起了父亲临走前说过的话"
WINDOW_TOKENS = 2000


class Counting(EmbeddingFunction[Documents]):
    """The encoder, counting the texts it embeds."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts = 0

    def __call__(self, input: Documents) -> Embeddings:
        self.texts += len(input)
        return list(self.inner(input))

    def embed_query(self, input: Documents) -> Embeddings:
        self.texts += len(input)
        return embed_queries(self.inner, input)


class TextQueryProvider(RetrievalProvider):
    """The provider as it was before issue 17: the encoder embeds the last 300 characters and the
    instruction as one query text."""

    async def gather(self, ctx: GatherContext) -> Any:
        exclude = Exclusion(ctx.document_id, ctx.window.cursor)
        dense = ctx.window.before[-300:] + "\n" + ctx.additional_input[:DENSE_INSTRUCTION]
        return await self.searcher.search(ctx.project_id, ctx.query, limit=200, exclude=exclude,
                                          dense_query=dense)


def _context(counter: CountCache, document_id: str, text: str) -> GatherContext:
    skill = get_skill("continue")
    window = cut_window(text, len(text), skill, WINDOW_TOKENS, counter)
    return GatherContext("wugang", document_id, "zh", skill, window, INSTRUCTION, counter)


async def _run(provider: RetrievalProvider, contexts: list[GatherContext],
               encoder: Counting) -> dict[str, float]:
    walls, cpus = [], []
    before = encoder.texts
    for ctx in contexts:
        cpu, wall = time.process_time(), time.perf_counter()
        await provider.gather(ctx)
        walls.append((time.perf_counter() - wall) * 1e3)
        cpus.append((time.process_time() - cpu) * 1e3)
    return {"p50_ms": round(statistics.median(walls), 1), "p95_ms": round(percentile(sorted(walls), 95), 1),
            "cpu_ms": round(statistics.mean(cpus), 1),
            "embedded_per_call": round((encoder.texts - before) / len(contexts), 2)}


async def measure(spec: str, root: Path, data: Path, document_id: str, text: str,
                  calls: int) -> dict[str, Any]:
    standalone: Standalone = build_retrieval(data, embedding=spec)
    try:
        started = time.perf_counter()
        report = await standalone.retrieval.index_project("wugang", root)
        indexing = time.perf_counter() - started
        encoder = Counting(standalone.retrieval._vectors.embedding)
        standalone.retrieval._vectors.embedding = encoder
        counter = CountCache(standalone.tokenizer)
        # Cursors at the ends of the chapter's last paragraphs (all indexed), nearest the end last.
        ends = [i for i, ch in enumerate(text) if ch == "\n" and text[i - 1:i].strip()][-(calls + 5):]
        moving = [_context(counter, document_id, text[:end]) for end in ends]
        same = [moving[-1]] * calls
        typed = [TYPED[:min(len(TYPED), 8 + 4 * n)] + str(n) for n in range(calls)]
        typing = [_context(counter, document_id, text + "\n\n" + sentence) for sentence in typed]
        result: dict[str, Any] = {"encoder": spec, "sentences_indexed": report.sentences,
                                  "indexing_s": round(indexing, 1), "runs": {}}
        for name, make in (("text", TextQueryProvider), ("index", RetrievalProvider)):
            provider = make(standalone.retrieval, standalone.tokenizer.info.encoding)
            await _run(provider, moving[:5], encoder)  # warm-up: caches, Chroma, BM25
            result["runs"][name] = {
                "same cursor": await _run(provider, same, encoder),
                "moving cursor": await _run(provider, moving[5:], encoder),
                "typing": await _run(provider, typing, encoder)}
        return result
    finally:
        await standalone.close()


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    corpus = build_corpus(projects=["wugang"], chapters=args.chapters)
    documents = corpus.projects[0].documents
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "novel"
        for document in documents:
            (root / document.id).parent.mkdir(parents=True, exist_ok=True)
            (root / document.id).write_text(document.text, encoding="utf-8")
        last = documents[-1]
        results = []
        for n, spec in enumerate(args.encoders):
            results.append(await measure(spec, root, Path(tmp) / f"data-{n}", last.id, last.text, args.calls))
    return {"chapters": len(documents), "characters": sum(len(d.text) for d in documents),
            "calls": args.calls, "window_tokens": WINDOW_TOKENS,
            "query_sentences": len(context_sentences(last.text)), "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 1), "results": results}


def render(report: dict[str, Any]) -> str:
    lines = [f"《雾港》 chapters 1-{report['chapters']} ({report['characters']:,} characters); "
             f"{report['calls']} calls a run; window {report['window_tokens']} tokens; "
             f"load average {report['load_average_1m']} on {report['cpus']} CPUs", "",
             "| encoder | query | run | p50 ms | p95 ms | CPU ms/call | texts embedded/call |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for result in report["results"]:
        for query, runs in result["runs"].items():
            for run, figures in runs.items():
                lines.append(f"| {result['encoder']} | {query} | {run} | {figures['p50_ms']} | "
                             f"{figures['p95_ms']} | {figures['cpu_ms']} | {figures['embedded_per_call']} |")
    lines.append("")
    lines += [f"{r['encoder']}: {r['sentences_indexed']:,} sentences indexed in {r['indexing_s']} s"
              for r in report["results"]]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--chapters", type=int, default=10, help="chapters of 《雾港》 to index")
    parser.add_argument("--calls", type=int, default=40, help="calls per run")
    parser.add_argument("--encoder", action="append", dest="encoders",
                        help="encoders to measure (default: use-multilingual and multilingual-e5-small)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    args.encoders = args.encoders or ["use-multilingual", "multilingual-e5-small"]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with quiet_logs():
        report = asyncio.run(main_async(args))
    emit(report, lambda: render(report), as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
