"""Exact nearest-sentence search over a project's sentence vectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from services.retrieval import dense
from services.retrieval.dense import SentenceMatrix

UNIT = st.floats(-1.0, 1.0, allow_nan=False, width=32)


def _store(vectors: Mapping[str, Any], labels: Mapping[str, str] | None = None,
           reads: list[list[str]] | None = None) -> dense.ReadStored:
    def read(ids: list[str]) -> dict[str, tuple[Any, str]]:
        if reads is not None:
            reads.append(list(ids))
        return {vid: (vectors[vid], (labels or {}).get(vid, "p1")) for vid in ids if vid in vectors}
    return read


@settings(max_examples=200, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 40), st.just(6)), elements=UNIT),
       arrays(np.float32, (6,), elements=UNIT), st.integers(1, 50))
def test_nearest_is_the_exact_top_by_cosine_with_ties_in_row_order(matrix: Any, query: Any,
                                                                    limit: int) -> None:
    """For any vectors and query, the hits are the ``limit`` rows of highest cosine similarity, most
    similar first and equal similarities in row order, each in the chunk its id names."""
    ids = [f"c{n // 3}-{n % 3}" for n in range(len(matrix))]
    vectors = SentenceMatrix.build("p1", ids, _store(dict(zip(ids, matrix, strict=True))))
    assert vectors is not None
    hits = vectors.nearest(query, limit)
    if not np.linalg.norm(query):
        assert hits == []
        return
    similarities = vectors.matrix @ (query / np.linalg.norm(query))
    expected = sorted(range(len(vectors.ids)), key=lambda row: (-similarities[row], row))[:limit]
    assert [h.chunk_id for h in hits] == [vectors.ids[row].rpartition("-")[0] for row in expected]
    assert [h.similarity for h in hits] == [float(similarities[row]) for row in expected]
    assert {h.project_id for h in hits} <= {"p1"}


@settings(max_examples=200, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 30), st.just(5)), elements=UNIT),
       arrays(np.float32, (5,), elements=UNIT), st.integers(1, 40), st.sampled_from([0.25, 0.5, 1.0]))
def test_the_hub_penalty_ranks_by_similarity_less_similarity_to_the_mean(
        matrix: Any, query: Any, limit: int, penalty: float) -> None:
    """With a penalty, sentences rank by cos(query, s) - penalty * cos(mean direction, s), the mean
    direction being that of the project's rows; ties in row order."""
    ids = [f"c{n}-0" for n in range(len(matrix))]
    vectors = SentenceMatrix.build("p1", ids, _store(dict(zip(ids, matrix, strict=True))))
    assert vectors is not None
    hits = vectors.nearest(query, limit, penalty)
    centre = vectors.matrix.mean(axis=0)
    if not np.linalg.norm(query) or not np.linalg.norm(centre):
        return
    scores = vectors.matrix @ (query / np.linalg.norm(query)) - penalty * (
        vectors.matrix @ (centre / np.linalg.norm(centre)))
    got = [h.similarity for h in hits]
    assert got == sorted(got, reverse=True)
    assert got == pytest.approx(sorted(scores.tolist(), reverse=True)[:limit], abs=1e-5)


def test_a_hub_sentence_gives_way_to_a_specific_one() -> None:
    """A sentence near the others (the mean direction) and a specific sentence equally similar to the
    query: without the penalty the row order decides, with it the specific sentence leads."""
    stored = {"hub-0": [1.0, 1.0, 0.0], "x-0": [0.0, 1.0, -0.2], "y-0": [1.0, 0.0, -0.2],
              "spec-0": [1.0, 0.0, 1.0]}
    vectors = SentenceMatrix.build("p1", list(stored), _store(stored))
    assert vectors is not None
    query = [1.0, 0.5, 0.5]
    plain = vectors.nearest(query, 2)
    assert [h.chunk_id for h in plain] == ["hub", "spec"]
    assert plain[0].similarity == pytest.approx(plain[1].similarity)
    assert [h.chunk_id for h in vectors.nearest(query, 4, penalty=1.0)][:1] == ["spec"]


def test_rows_are_unit_vectors_and_similarity_is_the_cosine() -> None:
    """Stored vectors of any length become unit rows: the similarity of a vector with itself is 1."""
    vectors = SentenceMatrix.build("p1", ["a-0", "a-1"], _store({"a-0": [3.0, 4.0], "a-1": [0.0, 2.0]}))
    assert vectors is not None
    assert np.allclose(np.linalg.norm(vectors.matrix, axis=1), 1.0)
    hits = vectors.nearest([6.0, 8.0], 2)
    assert [h.chunk_id for h in hits] == ["a", "a"]
    assert hits[0].similarity == pytest.approx(1.0)
    assert hits[1].similarity == pytest.approx(0.8)


def test_a_new_build_reads_only_the_sentences_it_does_not_hold() -> None:
    """An index pass's build reuses the previous rows and reads only its new sentences; sentences
    gone from the snapshot leave the matrix, and the rows follow the order of the ids given."""
    stored = {"a-0": [1.0, 0.0], "a-1": [0.0, 1.0], "b-0": [1.0, 1.0]}
    reads: list[list[str]] = []
    first = SentenceMatrix.build("p1", ["a-0", "a-1"], _store(stored, reads=reads))
    second = SentenceMatrix.build("p1", ["b-0", "a-1"], _store(stored, reads=reads), previous=first)
    assert reads == [["a-0", "a-1"], ["b-0"]]
    assert second is not None
    assert second.ids == ("b-0", "a-1")
    assert [h.chunk_id for h in second.nearest([0.0, 1.0], 5)] == ["a", "b"]


def test_ids_the_store_lacks_are_left_out() -> None:
    """A sentence the vector store does not hold (not embedded yet, or lost) is simply not found."""
    vectors = SentenceMatrix.build("p1", ["a-0", "gone-0"], _store({"a-0": [1.0, 0.0]}))
    assert vectors is not None
    assert vectors.ids == ("a-0",)
    empty = SentenceMatrix.build("p1", [], _store({}))
    assert empty is not None
    assert len(empty) == 0
    assert empty.nearest([1.0, 0.0], 3) == []


def test_a_row_labelled_with_another_project_keeps_its_label() -> None:
    """A stored vector labelled with another project carries that label into its hit (the scope
    check then refuses it), also after a rebuild reuses its row."""
    stored = {"a-0": [1.0, 0.0], "x-0": [0.9, 0.1]}
    first = SentenceMatrix.build("p1", ["a-0", "x-0"], _store(stored, {"x-0": "intruder"}))
    again = SentenceMatrix.build("p1", ["x-0", "a-0"], _store({}), previous=first)
    for vectors in (first, again):
        assert vectors is not None
        found = {h.chunk_id: h.project_id for h in vectors.nearest([1.0, 0.0], 2)}
        assert found == {"a": "p1", "x": "intruder"}


def test_queries_that_cannot_match_find_nothing() -> None:
    """A zero vector, a vector of another width or a limit of 0 finds nothing, and raises nothing."""
    vectors = SentenceMatrix.build("p1", ["a-0"], _store({"a-0": [1.0, 0.0]}))
    assert vectors is not None
    assert vectors.nearest([0.0, 0.0], 3) == []
    assert vectors.nearest([1.0, 0.0, 0.0], 3) == []
    assert vectors.nearest([1.0, 0.0], 0) == []


def test_a_project_past_the_bound_is_left_to_the_vector_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_SENTENCES no matrix is built (None), and nothing is read."""
    monkeypatch.setattr(dense, "MAX_SENTENCES", 2)
    reads: list[list[str]] = []
    assert SentenceMatrix.build("p1", ["a-0", "a-1", "a-2"], _store({}, reads=reads)) is None
    assert reads == []
