"""Search terms for Chinese and English, and BM25 ranking."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.retrieval.lexical import Bm25, Terms, best, needs_segmenter

TERMS = Terms()


def test_chinese_is_split_into_words_without_stopwords() -> None:
    """jieba splits Chinese into words (search mode adds sub-words); particles and pronouns go."""
    terms = TERMS("林远把铜钥匙藏在灯塔第三级台阶下的砖缝里。")
    assert {"林远", "钥匙", "灯塔", "台阶"} <= set(terms)
    assert not {"的", "把", "在", "。"} & set(terms)


def test_english_is_lowercased_stemmed_and_stopworded() -> None:
    """Words are lowercased, plural and verb endings stripped, stopwords dropped."""
    assert TERMS("The Keys were hidden under the Stairs") == ["key", "hidden", "under", "stair"]
    assert TERMS("key") == TERMS("keys")


def test_mixed_text_keeps_latin_inside_chinese() -> None:
    """A Latin name inside Chinese text is a term of its own."""
    terms = TERMS("Mara在灯塔里找到了key")
    assert {"mara", "灯塔", "key"} <= set(terms)


def test_known_runs_give_the_same_terms_and_skip_segmenting_them_again() -> None:
    """With ``known``, each Chinese run is looked up first: the terms are those found without it,
    and a run seen before is not segmented again (English words never go through it)."""
    kept: dict[str, tuple[str, ...]] = {}
    made: list[str] = []

    def known(run: str, make: Callable[[], tuple[str, ...]]) -> tuple[str, ...]:
        if run not in kept:
            made.append(run)
            kept[run] = make()
        return kept[run]

    text = "林远把铜钥匙藏在灯塔下，Mara found the keys。林远把铜钥匙藏在灯塔下"
    assert TERMS(text, known) == TERMS(text)
    assert made == ["林远把铜钥匙藏在灯塔下"]
    assert TERMS(text, known) == TERMS(text)
    assert made == ["林远把铜钥匙藏在灯塔下"]


def test_loading_the_dictionary_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The segmenter's dictionary loads from jieba's package only: no cache file appears in the
    temporary directory (where jieba would write its own)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert Terms()("灯塔下的钥匙") == ["灯塔", "钥匙"]
    assert not any(tmp_path.iterdir())


def test_bm25_ranks_the_matching_chunk_first_and_skips_non_matches() -> None:
    """The document with the rarer query terms ranks first; documents sharing no term are not returned."""
    index = Bm25([TERMS("林远在港口修船"), TERMS("林远把铜钥匙藏在灯塔台阶下"), TERMS("天气很好")])
    found = index.search(TERMS("钥匙藏在哪里"), 10)
    assert found[0][0] == 1
    assert 2 not in [position for position, _ in found]
    assert Bm25([]).search(["x"], 5) == []
    assert index.search(["无关词语"], 5) == []


_WORDS = st.sampled_from(["港口", "钥匙", "灯塔", "林远", "key", "lamp", "雨", "船", "台阶", "夜"])


@settings(max_examples=80, deadline=None)
@given(documents=st.lists(st.lists(_WORDS, max_size=12), min_size=1, max_size=12),
       query=st.lists(_WORDS, min_size=1, max_size=8))
def test_bm25_scores_are_bm25s_own_scores_summed_more_precisely(documents: list[list[str]],
                                                                 query: list[str]) -> None:
    """Search scores each document as bm25s does, repeated query terms counting again, to float32
    precision (bm25s sums in float32, search in float64); documents with equal terms score equal,
    and the order is by score, then by position; no document without a query term is returned."""
    index = Bm25(documents)
    found = index.search(query, len(documents))
    known = [t for t in query if t in index._index.vocab_dict]
    expected = np.asarray(index._index.get_scores(known)) if known else np.zeros(len(documents))
    assert [p for p, _ in found] == sorted((p for p, _ in found), key=lambda p: (-dict(found)[p], p))
    assert {p for p, _ in found} == {p for p in range(len(documents)) if expected[p] > 0}
    for position, score in found:
        assert score == pytest.approx(float(expected[position]), rel=1e-6)
    scores = dict(found)
    for a, b in itertools.combinations(scores, 2):
        if sorted(documents[a]) == sorted(documents[b]):
            assert scores[a] == scores[b]


def test_bm25_scores_do_not_depend_on_the_order_of_query_terms() -> None:
    """The same terms in another order give the very same scores (each document's sum has one order)."""
    index = Bm25([TERMS("林远在港口修船"), TERMS("林远把铜钥匙藏在灯塔台阶下"), TERMS("港口的灯塔")])
    query = TERMS("林远 钥匙 港口 灯塔 灯塔")
    assert index.search(query, 5) == index.search(list(reversed(query)), 5)


def _sums_in_term_order(index: Bm25, term_ids: list[int]) -> np.ndarray:
    """Each document's score as plain float64 additions, query term after term in term order, the
    entries of a term in index order, then rounded to float32: the order the search promises."""
    columns = index._index.scores
    data, documents, starts = columns["data"], columns["indices"], columns["indptr"]
    sums = [0.0] * int(columns["num_docs"])
    for term in sorted(set(term_ids)):
        repeats = float(term_ids.count(term))
        for entry in range(int(starts[term]), int(starts[term + 1])):
            sums[int(documents[entry])] += float(data[entry]) * repeats
    return np.asarray(sums, np.float64).astype(np.float32)


@settings(max_examples=120, deadline=None)
@given(documents=st.lists(st.lists(_WORDS, max_size=12), min_size=1, max_size=16),
       query=st.lists(_WORDS, min_size=1, max_size=12), limit=st.integers(1, 20))
def test_bm25_sums_in_term_order_whichever_entries_it_gathers(documents: list[list[str]], query: list[str],
                                                               limit: int) -> None:
    """Weighting every entry (by 0 for the terms not asked) and gathering only the query's entries
    give the very bits of the sums added term after term; the ranking is the head of a stable sort
    of those scores, however short, documents without a query term left out."""
    index = Bm25(documents)
    term_ids = [index._index.vocab_dict[t] for t in query if t in index._index.vocab_dict]
    if not term_ids:
        assert index.search(query, limit) == []
        return
    expected = _sums_in_term_order(index, term_ids)
    for every in (True, False):
        assert index._scores(term_ids, every=every).tobytes() == expected.tobytes()
    order = [p for p in np.argsort(-expected, kind="stable")[:limit].tolist() if expected[p] > 0]
    assert index.search(query, limit) == [(p, float(expected[p])) for p in order]


@settings(max_examples=200, deadline=None)
@given(scores=st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 7.25]), min_size=1, max_size=40),
       limit=st.integers(1, 45))
def test_best_is_the_head_of_a_stable_sort(scores: list[float], limit: int) -> None:
    """The chosen positions are those a stable sort by descending score puts first, in its order:
    ties at the cut go to the earlier positions."""
    array = np.asarray(scores, np.float32)
    assert best(array, limit).tolist() == np.argsort(-array, kind="stable")[:limit].tolist()


def test_the_dictionary_is_ready_once_loaded_and_only_chinese_needs_it() -> None:
    """A new Terms has no dictionary until ``load`` (or a first Chinese split); English and digits
    never need it, any CJK character does."""
    terms = Terms()
    assert not terms.ready
    assert terms("keys and locks") == ["key", "lock"]
    assert not terms.ready
    terms.load()
    assert terms.ready
    assert needs_segmenter("他把钥匙 hid")
    assert not needs_segmenter("the key, 2024")
