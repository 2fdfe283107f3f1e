"""Cutting text to a token budget: longest suffix/prefix that fits, snapped to sentence boundaries."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.trim import keep_head, keep_sentences, keep_tail
from tests.services.context.factory import counter

# Mixed prose: Chinese, English, emoji, sentence ends, closing quotes and line breaks.
PROSE = st.text(
    alphabet=st.sampled_from([*"我推开灯塔的门海风灌进来。！？“”「」abc XYZ.!?,'\"\n…🙂👍🏽\t"]),
    max_size=120,
)


def chars(text: str) -> int:
    """One token per character: makes budgets and cut points exact and readable."""
    return len(text)


def test_keep_tail_returns_whole_text_when_it_fits() -> None:
    """Text within the budget comes back unchanged, even with sentence ends in it."""
    assert keep_tail("aa.bb.cc", 8, chars) == "aa.bb.cc"


def test_keep_tail_returns_empty_for_no_budget_or_no_text() -> None:
    """A zero or negative budget, or empty text, keeps nothing."""
    assert (keep_tail("abc", 0, chars), keep_tail("abc", -3, chars), keep_tail("", 5, chars)) == ("", "", "")


def test_keep_tail_snaps_forward_to_the_next_sentence_within_35_percent() -> None:
    """A cut mid-sentence moves just past the nearest sentence end in the first 35% of the kept text."""
    # 14 characters fit, "xbb.cccccccccc": the cut lands mid-sentence at "x", and "." is 4 characters in.
    text = "aaaaxbb.cccccccccc"
    assert keep_tail(text, 14, chars) == "cccccccccc"


def test_keep_tail_skips_closing_quotes_and_spaces_after_the_sentence_end() -> None:
    """The kept text starts after the closing quote and whitespace that end the cut sentence."""
    text = "他说：“走吧。” 她点头，没有说话，转身离开了灯塔。"
    kept = keep_tail(text, len(text) - 3, chars)
    assert kept == "她点头，没有说话，转身离开了灯塔。"


def test_keep_tail_keeps_a_hard_cut_when_no_boundary_is_near() -> None:
    """With no sentence end in the first 35% of the kept text, the cut stays where the budget puts it."""
    text = "aaaa.bbbbbbbbbbbbbbbbbbbbb"
    assert keep_tail(text, 20, chars) == text[-20:]


def test_keep_tail_does_not_drop_a_whole_sentence_when_the_cut_is_on_a_boundary() -> None:
    """A cut that already starts a sentence keeps it instead of skipping to the next sentence end."""
    text = "aa.bb.cccccccccc"
    assert keep_tail(text, 13, chars) == "bb.cccccccccc"
    quoted = "“走。”“停。”灯塔在远处亮着，海风很冷"
    assert keep_tail(quoted, len(quoted) - 4, chars) == "“停。”灯塔在远处亮着，海风很冷"


def test_keep_head_returns_whole_text_when_it_fits_and_nothing_for_no_budget() -> None:
    """keep_head mirrors keep_tail's trivial cases."""
    assert (keep_head("ab.c", 4, chars), keep_head("ab.c", 0, chars), keep_head("", 3, chars)) == \
        ("ab.c", "", "")


def test_keep_head_ends_on_a_sentence_end_within_the_last_35_percent() -> None:
    """A prefix cut mid-sentence moves back to the last sentence end near the cut."""
    text = "cccccccccc.aa.bbbb"
    assert keep_head(text, 15, chars) == "cccccccccc.aa."


def test_keep_head_keeps_the_closing_quote_of_the_last_sentence() -> None:
    """A cut after a quoted sentence keeps its closing quote, so quotes stay balanced."""
    text = "“灯塔还亮着吗？”她没有回答，只是看着窗外。"
    kept = keep_head(text, 12, chars)
    assert kept == "“灯塔还亮着吗？”"


def test_keep_head_hard_cut_without_a_near_boundary() -> None:
    """With no sentence end in the last 35% of the kept text, the prefix is cut at the budget."""
    text = "a.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    assert keep_head(text, 20, chars) == text[:20]


def test_keep_tail_with_a_real_tokenizer_fits_exactly_at_most_the_budget() -> None:
    """With cl100k counts, the kept suffix is within the budget and not much shorter than it."""
    count = counter().count
    text = "".join(f"第{n}句话在这里结束。" for n in range(200))
    kept = keep_tail(text, 300, count)
    assert text.endswith(kept)
    assert 300 * 0.6 <= count(kept) <= 300
    assert kept.startswith("第")


@settings(max_examples=150, deadline=None)
@given(text=PROSE, limit=st.integers(min_value=-2, max_value=60))
def test_keep_tail_is_a_suffix_within_the_limit(text: str, limit: int) -> None:
    """For any text and limit, keep_tail returns a suffix whose token count is within the limit."""
    count = counter().count
    kept = keep_tail(text, limit, count)
    assert text.endswith(kept)
    assert count(kept) <= max(limit, 0)


@settings(max_examples=150, deadline=None)
@given(text=PROSE, limit=st.integers(min_value=-2, max_value=60))
def test_keep_head_is_a_prefix_within_the_limit(text: str, limit: int) -> None:
    """For any text and limit, keep_head returns a prefix whose token count is within the limit."""
    count = counter().count
    kept = keep_head(text, limit, count)
    assert text.startswith(kept)
    assert count(kept) <= max(limit, 0)


def test_keep_tail_never_snaps_past_the_budget_with_a_real_tokenizer() -> None:
    """Snapping to a sentence start must not make the suffix cost more tokens than the cut it replaces.

    With cl100k, "...," is one token but "..," is two: a snap past the first "." would overshoot.
    """
    count = counter().count
    text = "？的灯进👍推」cing👍...,"
    kept = keep_tail(text, 1, count)
    assert (kept, count(kept)) == ("...,", 1)


def test_keep_head_never_snaps_past_the_budget() -> None:
    """If the prefix ending at the sentence end costs more than the plain cut, the plain cut is kept."""
    def count(text: str) -> int:
        # A tokenizer in which a trailing "." is expensive: shorter is not always cheaper.
        return len(text) + (3 if text.endswith(".") else 0)

    text = "aaaaaaaaa.bb"
    kept = keep_head(text, 11, count)
    assert (kept, count(kept)) == ("aaaaaaaaa.b", 11)


@settings(max_examples=300, deadline=None)
@given(text=PROSE, limit=st.integers(min_value=1, max_value=60),
       guess=st.integers(min_value=-5, max_value=130))
def test_a_guess_changes_only_how_many_counts_are_made_not_the_cut(text: str, limit: int, guess: int) -> None:
    """With counts that grow with length, a guess anywhere (even outside the text) gives the same
    suffix and prefix as the search without one."""
    def locate(text: str, max_tokens: int, tail: bool) -> int:
        return guess

    assert keep_tail(text, limit, chars, locate) == keep_tail(text, limit, chars)
    assert keep_head(text, limit, chars, locate) == keep_head(text, limit, chars)


@settings(max_examples=150, deadline=None)
@given(text=PROSE, limit=st.integers(min_value=-2, max_value=60))
def test_with_a_real_tokenizer_and_its_guess_the_cut_is_within_the_limit(text: str, limit: int) -> None:
    """Guided by the tokenizer's own guess, keep_tail and keep_head still return a suffix and a
    prefix within the limit."""
    cache = counter()
    tail = keep_tail(text, limit, cache.count, cache.locate)
    head = keep_head(text, limit, cache.count, cache.locate)
    assert text.endswith(tail)
    assert text.startswith(head)
    assert cache.count(tail) <= max(limit, 0)
    assert cache.count(head) <= max(limit, 0)


def test_a_good_guess_costs_a_few_counts_instead_of_one_per_halving() -> None:
    """Cutting 3,000 characters to 1,000 takes 14 counts by halving (the whole, 12 halvings, the
    result) and 4 when the guess is the cut itself (the whole, the guess, one before it, the
    result)."""
    text = "a" * 3000
    asked: list[int] = []

    def count(part: str) -> int:
        asked.append(len(part))
        return len(part)

    keep_tail(text, 1000, count)
    halving = len(asked)
    asked.clear()
    keep_tail(text, 1000, count, lambda _text, _max, _tail: 2000)
    assert (halving, len(asked)) == (14, 4)


ENDS = "。！？!?.…\n"


def _with_closers(text: str, end: int) -> str:
    """The text up to the sentence end at ``end``, with the closing quotes right after it."""
    j = end + 1
    while j < len(text) and text[j] in "\"'”’」』）)】":
        j += 1
    return text[:j]


def test_keep_sentences_ends_on_a_sentence_end_however_far_back() -> None:
    """A budget that falls far into the second sentence keeps only the first, closing quote
    included; not even the first sentence fitting keeps nothing."""
    text = "“灯亮了。”她说完就走进了很长很长很长很长很长的雨里"
    assert keep_sentences(text, 20, chars) == "“灯亮了。”"
    assert keep_sentences(text, 5, chars) == ""
    assert keep_sentences("I open the door.", 5, chars) == ""
    assert keep_sentences(text, len(text), chars) == text
    assert keep_sentences(text, 0, chars) == ""
    assert keep_sentences("ab。”cd", 3, chars) == ""  # the end fits only without its closing quote


@settings(max_examples=200, deadline=None)
@given(text=PROSE, budget=st.integers(min_value=0, max_value=130))
def test_keep_sentences_is_the_longest_whole_sentence_prefix_that_fits(text: str, budget: int) -> None:
    """The result is a prefix of the text within the budget (also counted by the real tokenizer),
    and the whole text or one that ends a sentence (closing quotes after the end kept), the longest
    such with one token a character."""
    kept = keep_sentences(text, budget, chars)
    assert text.startswith(kept)
    assert len(kept) <= budget
    if kept != text:
        assert kept == "" or kept.rstrip("\"'”’」』）)】")[-1:] in set(ENDS)
        later = [i for i in range(len(kept), len(text)) if text[i] in ENDS]
        assert all(len(_with_closers(text, i)) > budget for i in later)
    real = counter().count
    assert real(keep_sentences(text, budget, real)) <= max(budget, 0)
