"""Lexical relevance for Chinese and English: words, CJK bigrams, share of features found."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.sources import relevance
from services.sources.relevance import Overlaps, features, features_by_line, similarity


def test_english_words_are_lower_cased_and_single_letters_dropped() -> None:
    """English features are lower-cased words of two or more characters."""
    assert features("The Lighthouse keeper, Lin Yuan, is 42.") == {
        "the", "lighthouse", "keeper", "lin", "yuan", "is", "42"}


def test_chinese_runs_become_character_bigrams() -> None:
    """A run of CJK characters gives its overlapping character bigrams."""
    assert features("林远推门") == {"林远", "远推", "推门"}


def test_bigrams_do_not_cross_punctuation_or_spaces() -> None:
    """Bigrams come from one CJK run: none spans a comma, a space or a sentence end."""
    assert features("林远，推门。风 大") == {"林远", "推门"}
    assert features("门。风") == set()


def test_single_letter_english_words_make_no_bigrams() -> None:
    """Single-letter English words are neither features nor halves of a bigram."""
    assert features("I saw a b c") == {"saw"}


def test_mixed_text() -> None:
    """Chinese bigrams and English words mix; an ASCII letter next to Chinese is not part of a bigram."""
    assert features("林远 opened 灯塔 door A股") == {"林远", "opened", "灯塔", "door"}


def test_empty_and_punctuation_only_text_has_no_features() -> None:
    """Nothing to match in empty or punctuation-only text."""
    assert features("") == features("。，！ ... ?!") == set()


@pytest.mark.parametrize(("a", "b", "expected"), [
    ({"x", "y"}, {"x", "z"}, 0.5),
    ({"x"}, {"x", "y", "z"}, 1.0),
    ({"x", "y", "z", "w"}, {"q"}, 0.0),
    (set(), {"x"}, 0.0),
    ({"x"}, set(), 0.0),
])
def test_similarity_is_the_share_of_the_first_set_found_in_the_second(a: set[str], b: set[str],
                                                                      expected: float) -> None:
    """similarity(a, b) = |a & b| / |a|, and 0 when either side is empty."""
    assert similarity(a, b) == expected


def test_entity_description_is_relevant_to_the_window_that_mentions_it() -> None:
    """A description sharing words with the cursor text scores above an unrelated one."""
    near = features("林远站在灯塔的台阶上，海风很冷。")
    unrelated = similarity(features("苏晴 城里的医生"), near)
    assert (similarity(features("林远 灯塔看守人"), near), unrelated) == (2 / 5, 0.0)


_REFERENCE_WORD = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9\W]", re.UNICODE)


def _reference_features(text: str) -> frozenset[str]:
    """The definition, one match at a time: words of 2+ ASCII letters or digits, and a bigram for
    every two adjacent single non-ASCII word characters, each lower-cased alone."""
    words: set[str] = set()
    last, last_end = "", -1
    for match in _REFERENCE_WORD.finditer(text):
        token = match.group().lower()
        if len(token) > 1:
            words.add(token)
        elif not token.isascii():
            if match.start() == last_end:
                words.add(last + token)
            last, last_end = token, match.end()
    return frozenset(words)


_TRICKY = "abcXYZ019_ 中文林远。，İßΣσéÉ１２\n\t-'\u0301\u200b灯塔ǅK"


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=_TRICKY, max_size=40) | st.text(max_size=40))
def test_features_match_the_definition_on_any_text(text: str) -> None:
    """The run-at-a-time features equal the definition's, including characters whose lower case
    is longer ("İ") or depends on the next character (capital sigma)."""
    assert features(text) == _reference_features(text)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=_TRICKY + "\n\n\r", max_size=60) | st.text(max_size=60))
def test_features_by_line_equal_the_features_of_the_whole_text(text: str) -> None:
    """No feature spans a line break, so the union of the lines' features is the text's, with or
    without a cache of lines (a line seen before is not computed again)."""
    kept: dict[str, frozenset[str]] = {}
    computed: list[str] = []

    def known(line: str) -> frozenset[str]:
        if line not in kept:
            computed.append(line)
            kept[line] = features(line)
        return kept[line]

    assert features_by_line(text, features) == features(text)
    assert features_by_line(text, known) == features(text)
    assert features_by_line(text, known) == features(text)
    assert len(computed) == len(set(text.split("\n")))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(alphabet=_TRICKY + "\r", max_size=20) | st.text(max_size=20), min_size=1, max_size=8),
       st.integers(0, 6), st.integers(0, 6))
def test_features_between_cut_ends_equal_the_whole_windows(lines: list[str], head: int, tail: int) -> None:
    """Windows cut from one text at moving ends, their whole middle lines' union kept (the very
    object, when the ends add nothing), give the features of each whole window."""
    text = "\n".join(lines)
    kept: dict[tuple[str, ...], frozenset[str]] = {}

    def between(middle: tuple[str, ...]) -> frozenset[str]:
        return kept.setdefault(middle, relevance.union_by_line(middle, features))

    for start, end in ((head, len(text) - tail), (head + 1, len(text) - tail - 1), (head, len(text) - tail)):
        window = text[start:max(start, end)]
        assert features_by_line(window, features, between) == features(window)


def test_features_match_the_definition_next_to_every_code_point() -> None:
    """Every code point, in runs of 50 with its neighbours, gives the definition's features."""
    points = [chr(n) for n in range(0x110000) if not 0xD800 <= n < 0xE000]
    random.Random(3).shuffle(points)
    for start in range(0, len(points), 50):
        text = "".join(points[start:start + 50])
        assert features(text) == _reference_features(text)


_FEATURE = st.text(alphabet="林远灯塔看守人海风abc", min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(owns=st.lists(st.frozensets(_FEATURE, max_size=12), max_size=8),
       nears=st.lists(st.frozensets(_FEATURE, max_size=20), min_size=1, max_size=4))
def test_overlaps_give_similarity_exactly(owns: list[frozenset[str]], nears: list[frozenset[str]]) -> None:
    """Overlaps.shares(near) is [similarity(own, near) for own in owns], float for float, for any
    fixed sets (empty ones included) and any number of changing sets asked in turn."""
    overlaps = Overlaps(owns)
    assert len(overlaps) == len(owns)
    assert overlaps.vocabulary() == len(frozenset().union(*owns))
    for near in nears:
        assert overlaps.shares(near) == [similarity(own, near) for own in owns]


def test_overlaps_past_the_bit_bound_intersect_the_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A vocabulary too large for MAX_MASK_BYTES of bits keeps the sets themselves: the shares are
    the same, and the weight counts their features instead of words of bits."""
    owns = [features("林远 灯塔看守人"), features("苏晴 城里的医生"), frozenset()]
    near = features("林远走上灯塔，苏晴在城里。")
    dense = Overlaps(owns)
    monkeypatch.setattr(relevance, "MAX_MASK_BYTES", 0)
    sparse = Overlaps(owns)
    assert sparse.shares(near) == dense.shares(near) == [similarity(own, near) for own in owns]
    assert sparse.shares(frozenset()) == [0.0, 0.0, 0.0]
    assert (dense.weight(), sparse.weight()) == (3 * 1, sum(map(len, owns)))
