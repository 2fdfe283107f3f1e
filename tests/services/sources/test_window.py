"""The Immediate window: text around the cursor, cut to the skill's shape and the token budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.counting import CountCache
from services.context.models import Window
from services.context.skills import SKILLS, get_skill
from services.context.trim import keep_head, keep_tail
from services.errors import InvalidInput
from services.sources.window import cut_window
from services.tokenizer import Tokenizer, TokenizerInfo, resolve_tokenizer

COUNTER = CountCache(resolve_tokenizer())
CHAPTER = "".join(f"第{n}句：我推开灯塔的门，海风灌进来。" for n in range(300))


class RecordingTokenizer:
    """Wraps a tokenizer and remembers the longest text it was asked to count."""

    def __init__(self, inner: Tokenizer) -> None:
        self.inner = inner
        self.longest = 0

    @property
    def info(self) -> TokenizerInfo:
        return self.inner.info

    def count(self, text: str) -> int:
        self.longest = max(self.longest, len(text))
        return self.inner.count(text)

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def decode(self, tokens: list[int]) -> str:
        return self.inner.decode(tokens)


@pytest.mark.parametrize("cursor", [-1, len(CHAPTER) + 1])
def test_cursor_outside_the_document_is_invalid(cursor: int) -> None:
    """A cursor before 0 or past the end is INVALID_PARAMS, naming only the length."""
    with pytest.raises(InvalidInput) as raised:
        cut_window(CHAPTER, cursor, get_skill("continue"), 100, COUNTER)
    assert raised.value.fields == {"length": len(CHAPTER)}


def test_continue_takes_only_text_before_the_cursor() -> None:
    """continue's window is the text just before the cursor, up to the budget, starting a sentence."""
    cursor = len(CHAPTER) // 2
    win = cut_window(CHAPTER, cursor, get_skill("continue"), 200, COUNTER)
    assert win.after == ""
    assert win.tokens_after == 0
    assert win.before == CHAPTER[win.start:cursor]
    assert win.before.startswith("第")
    assert 0.6 * 200 <= win.tokens_before == COUNTER.count(win.before) <= 200


@pytest.mark.parametrize("skill_id", ["polish", "expand", "rewrite"])
def test_editing_skills_split_the_budget_around_the_cursor(skill_id: str) -> None:
    """polish/expand/rewrite give text after the cursor its share of the budget, before the rest."""
    skill = SKILLS[skill_id]
    cursor = len(CHAPTER) // 2
    win = cut_window(CHAPTER, cursor, skill, 400, COUNTER)
    after_budget = int(400 * skill.after_share)
    assert win.after == CHAPTER[cursor:cursor + len(win.after)]
    assert 0.6 * after_budget <= win.tokens_after <= after_budget
    assert 0.6 * (400 - after_budget) <= win.tokens_before <= 400 - after_budget
    assert win.after.endswith("。")


def test_short_document_is_taken_whole() -> None:
    """A document within the budget is the whole window, split at the cursor."""
    text = "灯塔。海风。"
    win = cut_window(text, 3, get_skill("polish"), 100, COUNTER)
    assert win == Window(before="灯塔。", after="海风。", start=0, cursor=3,
                         tokens_before=COUNTER.count("灯塔。"), tokens_after=COUNTER.count("海风。"))


def test_zero_tokens_is_an_empty_window_at_the_cursor() -> None:
    """No budget gives an empty window that still records where the cursor is."""
    assert cut_window(CHAPTER, 50, get_skill("rewrite"), 0, COUNTER) == Window("", "", 50, 50, 0, 0)


def test_only_a_slice_near_the_cursor_is_tokenized() -> None:
    """A 300,000-character chapter never has more than budget x 6 characters counted at once."""
    recording = RecordingTokenizer(resolve_tokenizer())
    counter = CountCache(recording)
    text = ("海风灌进来。" * 50_000)[:300_000]
    win = cut_window(text, 150_000, get_skill("polish"), 500, counter)
    assert recording.longest <= 500 * 6
    assert win.tokens_before + win.tokens_after <= 500
    assert win.before
    assert win.after


# Chinese, English, emoji (with modifiers), punctuation and line breaks; no lone surrogates.
DOCUMENT = st.lists(
    st.sampled_from([*"我推开灯塔的门海风灌进来。，！？“”", *"The door opened. \"Wait,\" she said!\n",
                     "🙂", "👍🏽", "🏳️‍🌈", "😀", " the", "ing"]),
    max_size=300,
).map("".join)


@settings(max_examples=120, deadline=None)
@given(text=DOCUMENT, position=st.floats(min_value=0, max_value=1),
       skill_id=st.sampled_from(sorted(SKILLS)), tokens=st.integers(min_value=0, max_value=120))
def test_window_is_the_text_around_the_cursor_within_budget(text: str, position: float, skill_id: str,
                                                            tokens: int) -> None:
    """For any text and cursor, before/after are exactly the text on each side, and within budget."""
    cursor = int(position * len(text))
    skill = SKILLS[skill_id]
    win = cut_window(text, cursor, skill, tokens, COUNTER)
    assert win.cursor == cursor
    assert win.before == text[win.start:cursor]
    assert win.after == text[cursor:cursor + len(win.after)]
    after_budget = int(tokens * skill.after_share)
    assert COUNTER.count(win.before) == win.tokens_before <= tokens - after_budget
    assert COUNTER.count(win.after) == win.tokens_after <= after_budget


class CharTokenizer:
    """One token per character: counts that grow with length, so every cut is exact."""

    @property
    def info(self) -> TokenizerInfo:
        return TokenizerInfo(encoding="chars", source="estimate", exact=False)

    def count(self, text: str) -> int:
        return len(text)

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, tokens: list[int]) -> str:
        return "".join(map(chr, tokens))


def _cut_from_six_per_token(text: str, cursor: int, skill_id: str, tokens: int,
                            counter: CountCache) -> Window:
    """The window as it is defined: cut from the slice of 6 characters per token on each side."""
    skill = SKILLS[skill_id]
    after_tokens = int(tokens * skill.after_share)
    before_tokens = tokens - after_tokens
    before = keep_tail(text[max(0, cursor - before_tokens * 6):cursor], before_tokens, counter.count)
    after = keep_head(text[cursor:cursor + after_tokens * 6] if after_tokens else "", after_tokens,
                      counter.count)
    return Window(before, after, cursor - len(before), cursor, counter.count(before), counter.count(after))


@settings(max_examples=200, deadline=None)
@given(text=DOCUMENT, position=st.floats(min_value=0, max_value=1),
       skill_id=st.sampled_from(sorted(SKILLS)), tokens=st.integers(min_value=0, max_value=120))
def test_the_window_is_the_one_cut_from_six_characters_per_token(text: str, position: float,
                                                                 skill_id: str, tokens: int) -> None:
    """Starting from a smaller slice and a guessed cut gives exactly the window the whole 6
    characters per token would give, when counts grow with length."""
    counter = CountCache(CharTokenizer())
    cursor = int(position * len(text))
    assert cut_window(text, cursor, SKILLS[skill_id], tokens, counter) == _cut_from_six_per_token(
        text, cursor, skill_id, tokens, counter)


def test_a_chinese_window_tokenizes_about_its_budget_not_six_times_it() -> None:
    """At about one token per character, a window of 500 tokens never has more than twice 500
    characters tokenized at once (the slice starts at one character per token)."""
    recording = RecordingTokenizer(resolve_tokenizer())
    counter = CountCache(recording)
    win = cut_window(CHAPTER, len(CHAPTER) // 2, get_skill("polish"), 500, counter)
    assert recording.longest <= 2 * 500
    assert 0.6 * 500 <= win.tokens_before + win.tokens_after <= 500
