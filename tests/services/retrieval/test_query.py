"""The dense query's arithmetic: how sentence vectors and the instruction's vector combine, and the
bounded cache of sentence vectors."""

from __future__ import annotations

import numpy as np

from services.retrieval.query import INSTRUCTION_WEIGHT, RECENCY, SentenceVectors, combine


def test_the_nearest_sentence_weighs_most_and_the_instruction_half() -> None:
    """Sentences are weighted RECENCY ** age (the last is nearest the cursor); their unit sum and the
    instruction's unit vector share the query INSTRUCTION_WEIGHT to the instruction; the result is a
    unit vector. With no instruction the sentences alone make it, and the other way round."""
    old, near, ask = np.eye(3, dtype=np.float32)
    context = RECENCY * old + near
    context /= np.linalg.norm(context)
    expected = (1 - INSTRUCTION_WEIGHT) * context + INSTRUCTION_WEIGHT * ask
    assert np.allclose(combine([old, near], ask), expected / np.linalg.norm(expected))
    assert np.allclose(combine([old, near], None), context)
    assert np.allclose(combine([], ask), ask)
    assert np.isclose(np.linalg.norm(combine([old, near, 3 * ask], 2 * ask)), 1.0)


def test_the_sentence_cache_is_bounded_and_keyed_by_project() -> None:
    """The least recently used entry leaves first; the same sentence hash in two projects is two
    entries."""
    cache = SentenceVectors(max_entries=2)
    cache.put("a", "h1", 1)
    cache.put("b", "h1", 2)
    assert (cache.get("a", "h1"), cache.get("b", "h1")) == (1, 2)
    cache.put("a", "h2", 3)
    assert (cache.get("a", "h1"), len(cache)) == (None, 2)
