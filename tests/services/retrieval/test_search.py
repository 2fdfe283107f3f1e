"""Hybrid fusion: normalized scores, modes, exclusion of text after the cursor, project labels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st

from services.retrieval.embedding_spec import E5_EMBEDDING, USE_EMBEDDING
from services.retrieval.lexical import LexicalRanking
from services.retrieval.search import (
    DENSE_FLOOR_RANK,
    DENSE_WEIGHT,
    E5_DENSE_WEIGHT,
    E5_HUB_PENALTY,
    HUB_PENALTY,
    DenseRanking,
    Exclusion,
    Snapshot,
    dense_weight,
    fuse,
    hub_penalty,
)
from services.retrieval.store import ChunkRecord

if TYPE_CHECKING:
    from services.retrieval.search import Hit, Mode


def _chunk(document: str, ordinal: int, start: int, end: int) -> ChunkRecord:
    return ChunkRecord("p1", document, ordinal, start, end, f"h{document}{ordinal}", 10, f"text {ordinal}",
                       (f"t{ordinal}",))


def _fuse(snapshot: Snapshot, dense: Sequence[tuple[int, str, float]], lexical: Sequence[tuple[int, float]],
          *, mode: Mode, limit: int, exclude: Exclusion | None,
          dense_weight: float = DENSE_WEIGHT) -> list[Hit]:
    """:func:`fuse` of plain ``(position, label, similarity)`` and ``(position, score)`` rankings."""
    return fuse(snapshot, DenseRanking.of(snapshot, dense), LexicalRanking.of(lexical), mode=mode,
                limit=limit, exclude=exclude, dense_weight=dense_weight)


SNAPSHOT = Snapshot([_chunk("a.md", 0, 0, 100), _chunk("a.md", 1, 90, 200), _chunk("b.md", 0, 0, 50)])


def test_a_chunk_first_in_both_rankings_scores_one() -> None:
    """Scores are normalized so that first place in every ranking used is 1.0; the order is by score."""
    hits = _fuse(SNAPSHOT, [(2, "p1", 0.9), (0, "p1", 0.5)], [(2, 8.0), (1, 4.0)], mode="hybrid", limit=10,
                exclude=None)
    assert (hits[0].document_id, hits[0].ordinal) == ("b.md", 0)
    assert hits[0].score == 1.0
    assert all(0 <= h.score <= 1 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert (hits[0].dense_rank, hits[0].lexical_rank) == (0, 0)


def test_bm25_leads_and_dense_adds_a_weighted_share() -> None:
    """Hybrid score = BM25 / best BM25 + DENSE_WEIGHT x rescaled similarity, over 1 + DENSE_WEIGHT."""
    hits = _fuse(SNAPSHOT, [(1, "p1", 0.9), (0, "p1", 0.1)], [(0, 10.0), (1, 5.0)], mode="hybrid", limit=10,
                exclude=None)
    scores = {h.ordinal: h.score for h in hits if h.document_id == "a.md"}
    assert scores[0] == round(1.0 / (1 + DENSE_WEIGHT), 6)
    assert scores[1] == round((0.5 + DENSE_WEIGHT) / (1 + DENSE_WEIGHT), 6)


def test_single_modes_use_only_their_ranking() -> None:
    """dense ignores BM25 and lexical ignores the vectors; each normalizes to its own best."""
    dense = _fuse(SNAPSHOT, [(1, "p1", 0.8)], [(2, 3.0)], mode="dense", limit=10, exclude=None)
    lexical = _fuse(SNAPSHOT, [(1, "p1", 0.8)], [(2, 3.0)], mode="lexical", limit=10, exclude=None)
    assert [(h.document_id, h.ordinal, h.score) for h in dense] == [("a.md", 1, 1.0)]
    assert [(h.document_id, h.ordinal, h.score) for h in lexical] == [("b.md", 0, 1.0)]


def test_dense_similarities_are_rescaled_between_the_top_and_the_floor_rank() -> None:
    """The best sentence's chunk scores 1, the chunk at DENSE_FLOOR_RANK and below 0; a chunk's best
    sentence counts, its later ones are ignored."""
    chunks = [_chunk("c.md", n, n * 10, n * 10 + 10) for n in range(DENSE_FLOOR_RANK + 5)]
    dense = [(n, "p1", 0.9 - n * 0.01) for n in range(len(chunks))] + [(0, "p1", 0.1)]
    hits = _fuse(Snapshot(chunks), dense, [], mode="dense", limit=100, exclude=None)
    by = {h.ordinal: h.score for h in hits}
    assert by[0] == 1.0
    assert by[DENSE_FLOOR_RANK] == 0.0
    assert by[DENSE_FLOOR_RANK + 3] == 0.0
    assert [h.ordinal for h in hits] == list(range(len(chunks)))


def test_excluded_chunks_are_left_out_before_normalizing() -> None:
    """Chunks reaching past the cursor in the current document never count, not even as the best."""
    hits = _fuse(SNAPSHOT, [], [(1, 9.0), (0, 3.0), (2, 1.0)], mode="lexical", limit=10,
                exclude=Exclusion("a.md", 150))
    assert [(h.document_id, h.ordinal, h.score) for h in hits] == [("a.md", 0, 1.0), ("b.md", 0, 0.333333)]


def test_the_vector_store_project_is_carried_for_the_scope_check() -> None:
    """A chunk any of whose vectors is labelled with another project keeps that label."""
    hits = _fuse(SNAPSHOT, [(0, "p1", 0.9), (0, "other", 0.5)], [(0, 1.0)], mode="hybrid", limit=10,
                exclude=None)
    assert hits[0].project_id == "other"
    assert _fuse(SNAPSHOT, [], [(0, 1.0)], mode="hybrid", limit=10, exclude=None)[0].project_id == "p1"


def test_limit_caps_the_result() -> None:
    """No more than ``limit`` hits come back."""
    dense = [(0, "p1", 0.9), (1, "p1", 0.8), (2, "p1", 0.7)]
    assert len(_fuse(SNAPSHOT, dense, [(0, 3.0), (1, 2.0), (2, 1.0)], mode="hybrid", limit=2,
                    exclude=None)) == 2


def test_the_dense_weight_is_chosen_by_the_index_encoder() -> None:
    """e5 (its config string, or one that starts with it) gets E5_DENSE_WEIGHT; the Universal Sentence
    Encoder and every other encoder keep DENSE_WEIGHT (0.3)."""
    assert E5_DENSE_WEIGHT != DENSE_WEIGHT
    assert dense_weight(E5_EMBEDDING) == E5_DENSE_WEIGHT
    assert dense_weight(f"{E5_EMBEDDING}-q4") == E5_DENSE_WEIGHT
    assert dense_weight(E5_EMBEDDING.upper()) == E5_DENSE_WEIGHT
    assert DENSE_WEIGHT == 0.3
    for other in (USE_EMBEDDING, "chroma-default", "sentence-transformers:all-MiniLM-L6-v2",
                  "openai:http://localhost:8080/v1#text-embedding-3-small", "", "something-else"):
        assert dense_weight(other) == DENSE_WEIGHT, other


def test_with_e5_a_dense_only_top_hit_outranks_a_bm25_only_top_hit() -> None:
    """With the Universal Sentence Encoder's weight BM25 leads: its first hit beats the dense search's
    first hit; with e5's weight (above 1) the dense search's first hit leads."""
    dense = [(1, "p1", 0.9), (2, "p1", 0.5)]
    lexical = [(0, 10.0), (2, 1.0)]
    use = _fuse(SNAPSHOT, dense, lexical, mode="hybrid", limit=10, exclude=None,
               dense_weight=dense_weight(USE_EMBEDDING))
    e5 = _fuse(SNAPSHOT, dense, lexical, mode="hybrid", limit=10, exclude=None,
              dense_weight=dense_weight(E5_EMBEDDING))
    assert (use[0].document_id, use[0].ordinal) == ("a.md", 0)
    assert (e5[0].document_id, e5[0].ordinal) == ("a.md", 1)
    assert e5[0].score == round(E5_DENSE_WEIGHT / (1 + E5_DENSE_WEIGHT), 6)  # first in dense only


def test_a_flat_dense_head_gives_no_chunk_a_dense_score() -> None:
    """When the chunk at DENSE_FLOOR_RANK is as similar as the top one (one sentence repeated in many
    chunks), every dense score is 0 and the dense rank only orders them: with e5's weight, BM25's first
    hit ranks first in hybrid instead of falling behind every tied chunk."""
    tied = DENSE_FLOOR_RANK + 5
    chunks = [_chunk("c.md", n, n * 10, n * 10 + 10) for n in range(tied + 1)]
    dense = [(n, "p1", 0.8) for n in range(tied)]
    dense_only = _fuse(Snapshot(chunks), dense, [], mode="dense", limit=100, exclude=None)
    assert [h.ordinal for h in dense_only] == list(range(tied))
    assert {h.score for h in dense_only} == {0.0}
    hybrid = _fuse(Snapshot(chunks), dense, [(tied, 5.0), (3, 1.0)], mode="hybrid", limit=100, exclude=None,
                  dense_weight=E5_DENSE_WEIGHT)
    assert [h.ordinal for h in hybrid[:3]] == [tied, 3, 0]
    assert hybrid[0].score == round(1 / (1 + E5_DENSE_WEIGHT), 6)


def test_a_head_tied_above_the_floor_still_scores_one() -> None:
    """Ties that end before DENSE_FLOOR_RANK are not flat: the tied chunks score 1, the floor rank's 0;
    a lone dense hit scores 1."""
    chunks = [_chunk("c.md", n, n * 10, n * 10 + 10) for n in range(DENSE_FLOOR_RANK + 1)]
    dense = [(n, "p1", 0.8) for n in range(DENSE_FLOOR_RANK)] + [(DENSE_FLOOR_RANK, "p1", 0.7)]
    hits = _fuse(Snapshot(chunks), dense, [], mode="dense", limit=100, exclude=None)
    by = {h.ordinal: h.score for h in hits}
    assert all(by[n] == 1.0 for n in range(DENSE_FLOOR_RANK))
    assert by[DENSE_FLOOR_RANK] == 0.0
    lone = _fuse(Snapshot(chunks), [(4, "p1", 0.2)], [], mode="dense", limit=10, exclude=None)
    assert [(h.ordinal, h.score) for h in lone] == [(4, 1.0)]


def test_the_hub_penalty_is_chosen_by_the_index_encoder() -> None:
    """As the dense weight: e5 (however its config string is written) gets E5_HUB_PENALTY (1.0),
    every other encoder HUB_PENALTY (0.5), the values chosen on the tuning part."""
    assert (E5_HUB_PENALTY, HUB_PENALTY) == (1.0, 0.5)
    for e5 in (E5_EMBEDDING, f"{E5_EMBEDDING}-q4", E5_EMBEDDING.upper()):
        assert hub_penalty(e5) == E5_HUB_PENALTY
    for other in (USE_EMBEDDING, "chroma-default", "", "something-else"):
        assert hub_penalty(other) == HUB_PENALTY, other


# The fusion of plain Python floats that the array fusion must answer exactly (its former code).
def _reference_fuse(snapshot: Snapshot, dense: Sequence[tuple[int, str, float]],
                    lexical: Sequence[tuple[int, float]], *, mode: Mode, limit: int,
                    exclude: Exclusion | None, weight: float) -> list[tuple[object, ...]]:
    chunks = snapshot.chunks
    best_dense: dict[int, float] = {}
    for position, _, similarity in dense:
        if position not in best_dense and not (exclude and exclude.excludes(chunks[position])):
            best_dense[position] = similarity
    dense_scores: dict[int, float] = {}
    if mode != "lexical" and len(best_dense) <= 1:
        dense_scores = dict.fromkeys(best_dense, 1.0)
    elif mode != "lexical":
        values = list(best_dense.values())
        top, floor = values[0], values[min(DENSE_FLOOR_RANK, len(values) - 1)]
        span = top - floor
        dense_scores = (dict.fromkeys(best_dense, 0.0) if span <= 0 else
                        {p: max(0.0, (v - floor) / span) for p, v in best_dense.items()})
    kept = [(p, s) for p, s in lexical if not (exclude and exclude.excludes(chunks[p]))]
    top_lexical = kept[0][1] if kept else 0.0
    lexical_scores = {p: s / top_lexical for p, s in kept} if top_lexical > 0 and mode != "dense" else {}
    factor = {"hybrid": weight, "dense": 1.0, "lexical": 0.0}[mode]
    scores = dict(lexical_scores)
    for p, similarity in dense_scores.items():
        scores[p] = scores.get(p, 0.0) + factor * similarity
    dense_rank = {p: n for n, p in enumerate(dense_scores)}
    lexical_rank = {p: n for n, p in enumerate(lexical_scores)}
    ranked = [p for _, _, p in sorted((-score, dense_rank.get(p, 1 << 30), p) for p, score in scores.items())]
    owners = {p: owner for p, owner, _ in dense if owner != chunks[p].project_id}
    best = (mode != "dense") + factor
    return [(owners.get(p, chunks[p].project_id), chunks[p].document_id, chunks[p].ordinal,
             round(min(1.0, max(0.0, scores[p] / best)), 6), dense_rank.get(p), lexical_rank.get(p))
            for p in ranked[:limit]]


@st.composite
def _rankings(draw: st.DrawFn) -> tuple[Snapshot, list[tuple[int, str, float]], list[tuple[int, float]]]:
    count = draw(st.integers(1, 30))
    chunks = [_chunk("a.md" if n % 3 else "b.md", n, n * 10, n * 10 + draw(st.integers(5, 30)))
              for n in range(count)]
    snapshot = Snapshot(chunks)
    similarity = st.sampled_from([0.9, 0.8, 0.5, 0.25, 0.1, 0.0, -0.2]) | st.floats(-1, 1, width=32)
    dense = draw(st.lists(st.tuples(st.integers(0, count - 1), st.sampled_from(["p1", "p1", "p1", "other"]),
                                    similarity), max_size=60))
    dense.sort(key=lambda m: -m[2])
    positions = draw(st.lists(st.integers(0, count - 1), unique=True, max_size=count))
    scores = sorted(draw(st.lists(st.floats(0.5, 50, width=32), min_size=len(positions),
                                  max_size=len(positions))), reverse=True)
    return snapshot, dense, list(zip(positions, scores, strict=True))


@settings(max_examples=300, deadline=None)
@given(_rankings(), st.sampled_from(["hybrid", "dense", "lexical"]), st.integers(1, 40),
       st.sampled_from([None, ("a.md", 55), ("b.md", 0), ("a.md", 1000), ("c.md", 5)]),
       st.sampled_from([DENSE_WEIGHT, E5_DENSE_WEIGHT]))
def test_array_fusion_answers_exactly_what_fusing_python_floats_answers(
        rankings: tuple[Snapshot, list[tuple[int, str, float]], list[tuple[int, float]]], mode: Mode,
        limit: int, cut: tuple[str, int] | None, weight: float) -> None:
    """For any rankings (repeated chunks, tied similarities, labels of other projects, chunks after the
    cursor), each mode, limit and weight: the same hits, scores, ranks and labels in the same order."""
    snapshot, dense, lexical = rankings
    exclude = Exclusion(*cut) if cut else None
    hits = _fuse(snapshot, dense, lexical, mode=mode, limit=limit, exclude=exclude, dense_weight=weight)
    found = [(h.project_id, h.document_id, h.ordinal, h.score, h.dense_rank, h.lexical_rank) for h in hits]
    assert found == _reference_fuse(snapshot, dense, lexical, mode=mode, limit=limit, exclude=exclude,
                                    weight=weight)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3), st.booleans()), min_size=1, max_size=30),
       st.integers(1, 40), st.booleans())
def test_matrix_rows_give_the_ranking_their_chunk_ids_give(
        rows: list[tuple[int, int, bool]], limit: int, twice: bool) -> None:
    """The rows of an exact search, mapped to chunk positions by array, are the ranking that mapping
    its matches' chunk ids gives: sentences of chunks the snapshot lacks, chunks held at two
    positions and rows labelled with another project included."""
    import numpy as np

    from services.retrieval.dense import SentenceMatrix

    chunks = [_chunk("a.md", n, n * 10, n * 10 + 10) for n in range(5)]
    if twice:
        chunks.append(_chunk("a.md", 0, 0, 10))  # a second chunk with the first one's vector id
    snapshot = Snapshot(chunks)
    vector_of = {c.ordinal: c.vector_id for c in chunks}
    ids = [f"{vector_of.get(chunk, f'gone{chunk}')}-{n}" for n, (chunk, _, _) in enumerate(rows)]
    vectors = {vid: np.array([1.0, 0.1 * sentence + 0.01 * n], np.float32)
               for n, (vid, (_, sentence, _)) in enumerate(zip(ids, rows, strict=True))}
    labels = {vid: "other" for vid, (_, _, foreign) in zip(ids, rows, strict=True) if foreign}
    matrix = SentenceMatrix.build("p1", ids,
                                  lambda wanted: {v: (vectors[v], labels.get(v, "p1")) for v in wanted})
    assert matrix is not None
    query = np.array([1.0, 0.3], np.float32)
    found, similarities = matrix.top(query, limit)
    by_rows = snapshot.dense_rows(matrix, found, similarities)
    by_ids = snapshot.dense_positions(matrix.ranked(query, limit))
    assert by_rows.positions.tolist() == by_ids.positions.tolist()
    assert by_rows.similarities.tolist() == by_ids.similarities.tolist()
    assert dict(by_rows.owners) == dict(by_ids.owners)
