"""Exact nearest-sentence search over a project's sentence vectors, held beside its snapshot.

Chroma's HNSW search is approximate: it looks at about as many candidates as it is asked for, and
asked for 100 it missed the nearest sentence of several evaluation queries (docs/retrieval.md).
Here a project's sentence vectors (1.5 KiB each with 384 dimensions: about 20 MiB for a
13k-sentence book) sit in one float32 matrix of unit rows, and a search is one matrix-vector
product (numpy releases the GIL for it) and a partial sort: exact, and several times cheaper than
asking Chroma. Chroma stays the store: the rows are read from it when a project opens, and each
index pass reads only its new sentences' rows. A project of more than :data:`MAX_SENTENCES`
sentences searches Chroma as before.

The nearest sentences are ranked with a hub penalty: the similarity to the query less ``penalty``
times the similarity to the project's mean sentence direction. Templated, repetitive prose makes
some sentences near to every query (hubs); on the evaluation set (docs/retrieval.md) the penalty
chosen on the tuning part raised dense recall@5 held out from 0.688 to 0.781 with e5. Since
``s·q − p·s·m = s·(q − p·m)``, it is one shifted query vector, no extra cost per sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from services.retrieval.blas import one_blas_thread
from services.retrieval.query import unit_vector
from services.retrieval.vectors import VectorHit, chunk_of_sentence

MAX_SENTENCES = 40_000  # about 60 MiB of rows; past it, Chroma's approximate search
# ``read(ids)``: the stored ``(vector, project label)`` of those ids the store holds.
ReadStored = Callable[[list[str]], Mapping[str, tuple[Any, str]]]
# A matching sentence: its chunk's vector id, the project the store labels it with, its similarity.
SentenceMatch = tuple[str, str, float]


class SentenceMatrix:
    """One project's sentence vectors (rows in the order given), searched exactly; immutable."""

    def __init__(self, project_id: str, ids: Sequence[str], matrix: Any, labels: Sequence[str]) -> None:
        self.project_id = project_id
        self.ids = tuple(ids)
        self.matrix = matrix
        self._row = {vid: n for n, vid in enumerate(self.ids)}
        # Rows the store labels with another project: kept, so that the scope check refuses them.
        self._foreign = {n: label for n, label in enumerate(labels) if label != project_id}
        self._centre = unit_vector(matrix.mean(axis=0)) if len(self.ids) else None  # the mean direction
        # Each row's chunk, made once (a search names up to hundreds); a chunk's sentences share one string.
        chunks: dict[str, str] = {}
        self._chunks = [chunks.setdefault(chunk, chunk) for chunk in map(chunk_of_sentence, self.ids)]

    def __len__(self) -> int:
        return len(self.ids)

    def row(self, vector_id: str) -> Any | None:
        """The unit vector of sentence ``vector_id`` (a read-only view), or None if not held."""
        row = self._row.get(vector_id)
        return None if row is None else self.matrix[row]

    @classmethod
    def build(cls, project_id: str, ids: Iterable[str], read: ReadStored,
              previous: SentenceMatrix | None = None) -> SentenceMatrix | None:
        """The vectors of ``ids`` (in that order, each once): rows ``previous`` holds are reused and
        the rest read from the store; ids the store lacks are left out. None past MAX_SENTENCES."""
        import numpy as np

        one_blas_thread()  # the search's matrix product on one thread (services/retrieval/blas.py)
        wanted = list(dict.fromkeys(ids))
        if len(wanted) > MAX_SENTENCES:
            return None
        known = previous if previous is not None and previous.project_id == project_id else None
        missing = [vid for vid in wanted if known is None or vid not in known._row]
        stored = read(missing) if missing else {}
        rows: list[Any] = []
        kept: list[str] = []
        labels: list[str] = []
        for vid in wanted:
            if known is not None and (row := known._row.get(vid)) is not None:
                rows.append(known.matrix[row])
                labels.append(known._foreign.get(row, project_id))
            elif (entry := stored.get(vid)) is not None:
                rows.append(unit_vector(np.asarray(entry[0], dtype=np.float32)))
                labels.append(entry[1])
            else:
                continue
            kept.append(vid)
        width = rows[0].shape[0] if rows else 0
        matrix = np.vstack(rows).astype(np.float32, copy=False) if rows else np.zeros((0, width), np.float32)
        return cls(project_id, kept, matrix, labels)

    def nearest(self, vector: Any, limit: int, penalty: float = 0.0) -> list[VectorHit]:
        """The ``limit`` best sentences, best first: cosine similarity to ``vector`` less ``penalty``
        times the cosine similarity to the mean direction (the hub penalty, see above). Equal scores
        fall in row order, so the same matrix and vector always give the same list."""
        return [VectorHit(chunk, similarity, label, "")
                for chunk, label, similarity in self.ranked(vector, limit, penalty)]

    def ranked(self, vector: Any, limit: int, penalty: float = 0.0) -> list[SentenceMatch]:
        """What :meth:`nearest` finds, as plain ``(chunk id, project label, similarity)`` tuples."""
        rows, similarities = self.top(vector, limit, penalty)
        project_id, foreign, chunks = self.project_id, self._foreign, self._chunks
        return [(chunks[row], foreign.get(row, project_id), similarity)
                for row, similarity in zip(rows.tolist(), similarities.tolist(), strict=True)]

    def top(self, vector: Any, limit: int, penalty: float = 0.0) -> tuple[Any, Any]:
        """What :meth:`nearest` finds, as arrays: the rows (int64) and their similarities (float32),
        best first; a search's hundreds of matches cost no object each."""
        import numpy as np

        count = len(self.ids)
        query = np.asarray(vector, dtype=np.float32)
        if count == 0 or limit <= 0 or query.shape != (self.matrix.shape[1],):
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        norm = float(np.linalg.norm(query))
        if norm == 0.0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        shifted = query / norm
        if penalty and self._centre is not None:
            shifted = (shifted - np.float32(penalty) * self._centre).astype(np.float32)
        similarities = self.matrix @ shifted
        if limit < count:
            floor = np.partition(similarities, count - limit)[count - limit]
            candidates = np.flatnonzero(similarities >= floor)
        else:
            candidates = np.arange(count)
        order = candidates[np.lexsort((candidates, -similarities[candidates]))][:limit]
        return order.astype(np.int64, copy=False), similarities[order]

    def label(self, row: int) -> str:
        """The project the store labels row ``row``'s vector with."""
        return self._foreign.get(row, self.project_id)

    @property
    def foreign(self) -> bool:
        """Whether the store labels any row with another project than this matrix's."""
        return bool(self._foreign)

    def chunk_ids(self) -> list[str]:
        """Each row's chunk vector id, in row order (a chunk's sentences share one string)."""
        return list(self._chunks)
