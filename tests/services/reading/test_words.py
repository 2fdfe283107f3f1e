"""Word overlap weighted by rarity in the book: rare shared words count, common ones barely do."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.reading.words import Words
from services.sources.relevance import features

BOOK = ["The lamp was cold.", "The rope was wet.", "The Aurora passed the rocks.", "The keeper slept.",
        "苏晚点亮了灯。", "风很大，海浪拍打着礁石。"]


def test_a_rare_shared_word_outweighs_a_common_one() -> None:
    """'aurora' (one paragraph) carries the question; 'the' (most paragraphs) alone is no match; words
    the book never uses ('who', 'sank') weigh nothing."""
    words = Words.of(BOOK)
    question = features("Who sank the Aurora?")
    assert words.overlap(question, features(BOOK[2])) == 1.0
    assert words.overlap(question, features(BOOK[0])) == 0.0
    assert words.weight("sank") == 0.0


def test_chinese_bigrams_are_words_too() -> None:
    """A Chinese question finds the paragraph sharing its bigrams."""
    words = Words.of(BOOK)
    assert words.overlap(features("谁点亮了灯？"), features(BOOK[4])) > 0.5
    assert words.overlap(features("谁点亮了灯？"), features(BOOK[5])) == 0.0


def test_a_question_with_no_words_overlaps_nothing() -> None:
    """Punctuation alone has no features, hence no overlap (and no division by zero)."""
    assert Words.of(BOOK).overlap(features("？！"), features(BOOK[0])) == 0.0


@given(st.lists(st.text(max_size=40), max_size=8), st.text(max_size=40), st.text(max_size=40))
def test_overlap_is_a_share(texts: list[str], question: str, text: str) -> None:
    """Overlap is always within 0..1, and a text holding every question word scores 1 or, when they
    weigh too little to match, 0."""
    words = Words.of(texts)
    q = features(question)
    assert 0.0 <= words.overlap(q, features(text)) <= 1.0 + 1e-9
    assert words.overlap(q, q) in (0.0, 1.0)
