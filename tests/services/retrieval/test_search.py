"""Reciprocal-rank fusion: normalized scores, modes, exclusion of text after the cursor."""

from __future__ import annotations

from services.retrieval.search import RRF_K, Exclusion, Snapshot, fuse
from services.retrieval.store import ChunkRecord


def _chunk(document: str, ordinal: int, start: int, end: int) -> ChunkRecord:
    return ChunkRecord("p1", document, ordinal, start, end, f"h{document}{ordinal}", 10, f"text {ordinal}",
                       (f"t{ordinal}",))


SNAPSHOT = Snapshot([_chunk("a.md", 0, 0, 100), _chunk("a.md", 1, 90, 200), _chunk("b.md", 0, 0, 50)])


def test_a_chunk_first_in_both_rankings_scores_one() -> None:
    """Scores are normalized so that first place in every ranking used is 1.0; the order is by score."""
    hits = fuse(SNAPSHOT, [(2, "p1"), (0, "p1")], [2, 1], mode="hybrid", limit=10, exclude=None)
    assert [h.ordinal for h in hits][:1] == [0]
    assert hits[0].document_id == "b.md"
    assert hits[0].score == 1.0
    assert all(0 < h.score <= 1 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].dense_rank == 0
    assert hits[0].lexical_rank == 0


def test_single_modes_use_only_their_ranking() -> None:
    """dense ignores the lexical list and lexical the dense one; each normalizes to its own best."""
    dense = fuse(SNAPSHOT, [(1, "p1")], [2], mode="dense", limit=10, exclude=None)
    lexical = fuse(SNAPSHOT, [(1, "p1")], [2], mode="lexical", limit=10, exclude=None)
    assert [(h.document_id, h.ordinal, h.score) for h in dense] == [("a.md", 1, 1.0)]
    assert [(h.document_id, h.ordinal, h.score) for h in lexical] == [("b.md", 0, 1.0)]


def test_excluded_chunks_do_not_take_a_rank() -> None:
    """Chunks reaching past the cursor in the current document are dropped before ranking."""
    hits = fuse(SNAPSHOT, [(1, "p1"), (0, "p1"), (2, "p1")], [], mode="dense", limit=10,
                exclude=Exclusion("a.md", 150))
    assert [(h.document_id, h.ordinal) for h in hits] == [("a.md", 0), ("b.md", 0)]
    assert hits[0].score == 1.0
    assert hits[1].score == round((1 / (RRF_K + 2)) / (1 / (RRF_K + 1)), 6)


def test_the_vector_store_project_is_carried_for_the_scope_check() -> None:
    """A hit keeps the project id the vector store reported, so a foreign vector fails the scope check."""
    hits = fuse(SNAPSHOT, [(0, "other")], [0], mode="hybrid", limit=10, exclude=None)
    assert hits[0].project_id == "other"
    assert fuse(SNAPSHOT, [], [0], mode="hybrid", limit=10, exclude=None)[0].project_id == "p1"


def test_limit_caps_the_result() -> None:
    """No more than ``limit`` hits come back."""
    assert len(fuse(SNAPSHOT, [(0, "p1"), (1, "p1"), (2, "p1")], [0, 1, 2], mode="hybrid", limit=2,
                    exclude=None)) == 2
