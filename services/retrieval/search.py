"""Hybrid search over one project's snapshot: dense ranks and BM25 ranks fused by reciprocal rank.

A :class:`Snapshot` is an immutable view of a project's chunks as last
committed, with its BM25 index; a search reads one snapshot from start to end,
so indexing that runs meanwhile never shows it half-done state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from services.retrieval.lexical import Bm25
from services.retrieval.store import ChunkRecord
from services.retrieval.vectors import VectorHit

Mode = Literal["hybrid", "dense", "lexical"]
MODES: tuple[Mode, ...] = ("hybrid", "dense", "lexical")
RRF_K = 60  # the usual constant: damps the head of each list so neither ranking dominates


@dataclass(frozen=True, slots=True)
class Hit:
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
        self.chunks = tuple(chunks)
        self.by_vector: dict[str, list[int]] = {}
        for position, chunk in enumerate(self.chunks):
            self.by_vector.setdefault(chunk.vector_id, []).append(position)
        self.lexical = Bm25([chunk.terms for chunk in self.chunks])
        self.documents = len({chunk.document_id for chunk in self.chunks})

    def updated(self, documents: Mapping[str, Sequence[ChunkRecord]]) -> Snapshot:
        """A new snapshot with these documents' chunks replaced (an empty list: the document is gone)."""
        kept = [c for c in self.chunks if c.document_id not in documents]
        return Snapshot(sorted([*kept, *(c for chunks in documents.values() for c in chunks)],
                               key=lambda c: (c.document_id, c.ordinal)))

    def dense_positions(self, hits: Sequence[VectorHit]) -> list[tuple[int, str]]:
        """Snapshot positions in vector-rank order, with the project id the vector store gave."""
        return [(position, hit.project_id) for hit in hits
                for position in self.by_vector.get(hit.vector_id, ())]


def fuse(snapshot: Snapshot, dense: Sequence[tuple[int, str]], lexical: Sequence[int], *, mode: Mode,
         limit: int, exclude: Exclusion | None) -> list[Hit]:
    """The top ``limit`` chunks by reciprocal-rank fusion of the rankings ``mode`` uses."""
    chunks = snapshot.chunks
    keep = [p for p, _ in dense] if mode != "lexical" else []
    dense_rank = _ranks(keep, chunks, exclude)
    lexical_rank = _ranks(list(lexical) if mode != "dense" else [], chunks, exclude)
    owners = dict(dense)
    used = (mode != "lexical") + (mode != "dense")
    best = used / (RRF_K + 1)
    scores: dict[int, float] = {}
    for ranks in (dense_rank, lexical_rank):
        for position, rank in ranks.items():
            scores[position] = scores.get(position, 0.0) + 1.0 / (RRF_K + rank + 1)
    ranked = sorted(scores, key=lambda p: (-scores[p], p))[:limit]
    return [_hit(chunks[p], owners.get(p, chunks[p].project_id), scores[p] / best,
                 dense_rank.get(p), lexical_rank.get(p)) for p in ranked]


def _ranks(positions: Sequence[int], chunks: Sequence[ChunkRecord],
           exclude: Exclusion | None) -> dict[int, int]:
    ranks: dict[int, int] = {}
    for position in positions:
        if position not in ranks and not (exclude and exclude.excludes(chunks[position])):
            ranks[position] = len(ranks)
    return ranks


def _hit(chunk: ChunkRecord, owner: str, score: float, dense: int | None, lexical: int | None) -> Hit:
    return Hit(owner, chunk.document_id, chunk.ordinal, chunk.start, chunk.end, chunk.text, chunk.tokens,
               round(min(1.0, score), 6), dense, lexical)
