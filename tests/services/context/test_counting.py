"""CountCache: exact counts from the tokenizer, remembered by content, bounded, thread-safe."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.counting import MIN_LINE, CountCache, counts_by_line, split_lines
from services.tokenizer import TokenizerInfo, resolve_tokenizer
from services.tokenizer.deferred import DeferredTokenizer
from services.tokenizer.estimate import EstimateTokenizer
from services.tokenizer.tiktoken_backend import TiktokenTokenizer


class CharTokenizer:
    """One token per character, recording every text it is asked to count."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()

    @property
    def info(self) -> TokenizerInfo:
        return TokenizerInfo(encoding="chars", source="estimate", exact=False)

    def count(self, text: str) -> int:
        with self._lock:
            self.calls.append(text)
        return len(text)

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, tokens: list[int]) -> str:
        return "".join(map(chr, tokens))


def test_counts_match_the_tokenizer() -> None:
    """Counts are the tokenizer's own, for Chinese, English and emoji."""
    tokenizer = resolve_tokenizer()
    cache = CountCache(tokenizer)
    for text in ("The lighthouse door opened.", "我推开灯塔的门，海风灌进来。", "🙂👍🏽"):
        assert cache.count(text) == tokenizer.count(text) == len(tokenizer.encode(text))
    assert cache.info == tokenizer.info


def test_empty_text_is_zero_without_asking_the_tokenizer() -> None:
    """The empty string counts 0 and never reaches the tokenizer."""
    tokenizer = CharTokenizer()
    assert CountCache(tokenizer).count("") == 0
    assert tokenizer.calls == []


def test_repeated_text_is_counted_once() -> None:
    """A second count of the same content is a cache hit."""
    tokenizer = CharTokenizer()
    cache = CountCache(tokenizer)
    assert [cache.count("灯塔"), cache.count("灯塔"), cache.count("海风吹")] == [2, 2, 3]
    assert tokenizer.calls == ["灯塔", "海风吹"]


def test_least_recently_used_entry_is_evicted_first() -> None:
    """At capacity the entry used longest ago goes; a recently read entry stays."""
    tokenizer = CharTokenizer()
    cache = CountCache(tokenizer, max_entries=2)
    cache.count("a")
    cache.count("bb")
    cache.count("a")  # "a" is now the most recent
    cache.count("ccc")  # evicts "bb"
    tokenizer.calls.clear()
    assert [cache.count("a"), cache.count("ccc"), cache.count("bb")] == [1, 3, 2]
    assert tokenizer.calls == ["bb"]


def test_concurrent_counts_agree() -> None:
    """Many threads counting overlapping texts all get the right counts, and the cache stays bounded."""
    tokenizer = CharTokenizer()
    cache = CountCache(tokenizer, max_entries=16)
    texts = [f"{'x' * n}" for n in range(1, 41)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(cache.count, texts * 25))
    assert results == [len(t) for t in texts * 25]
    assert len(cache._cache) == 16


class RecordingTiktoken(TiktokenTokenizer):
    """cl100k_base itself, remembering every text it tokenizes."""

    def __init__(self) -> None:
        inner = resolve_tokenizer()
        assert isinstance(inner, TiktokenTokenizer)
        super().__init__(inner._encoding, inner.info)
        self.counted: list[str] = []

    def count(self, text: str) -> int:
        self.counted.append(text)
        return super().count(text)


# Line breaks, spaces, tabs, punctuation that may run into a line break ("/", "."), CJK, combining
# marks, emoji, a special token's text and a lone surrogate: the cases where a pre-tokenizer
# piece could cross a line break if the rule were wrong.
_TRICKY = st.sampled_from([*"ab Z9_ \t\r\n\n\n.,;:!?/'\"“”「」（）[]-—…#*中文林远。，", "\u0301", "\u200b",
                           "\u3000", "\u00a0", "\u2028", "\u0085", "\x1c", "🙂", "👍🏽", "²", "Ⅻ",
                           "<|endoftext|>", "'s", "'ll", "123", "\r\n", "\ud800",
                           "The lighthouse keeper counted the steps again. ", "我推开灯塔的门，海风灌进来。"])


# Lines long enough to be cut after, each starting with anything the alphabet has.
_LINES = st.lists(st.tuples(_TRICKY, st.lists(_TRICKY, min_size=12, max_size=40).map("".join)),
                  min_size=2, max_size=30).map(lambda lines: "\n".join(a + b for a, b in lines))


@settings(max_examples=600, deadline=None)
@given(st.lists(_TRICKY, min_size=20, max_size=300).map("".join) | _LINES)
def test_counting_by_line_is_exactly_the_tokenizers_count(text: str) -> None:
    """cl100k_base counts of long texts, summed over their lines, equal the tokenizer's count of
    the whole text, whatever the text; and again once the lines are cached."""
    tokenizer = resolve_tokenizer()
    cache = CountCache(tokenizer)
    assert cache.count(text) == tokenizer.count(text)
    assert cache.count(text) == tokenizer.count(text)
    tail = text[len(text) // 3:]
    assert cache.count(tail) == tokenizer.count(tail)


def test_a_tokenizer_built_on_first_use_counts_by_line_once_built() -> None:
    """The server's tokenizer is built on the first count (DeferredTokenizer): a cache over it does
    not build it when made, and once counting it tokenizes a long text's lines, not the whole."""
    recording = RecordingTiktoken()
    deferred = DeferredTokenizer("cl100k_base", recording.info, usable=lambda: True,
                                 fallback=resolve_tokenizer)
    deferred._build = lambda: recording  # type: ignore[method-assign]
    cache = CountCache(deferred)
    assert not deferred.built
    lines = [
        f"第{n}段：海风灌进来，林远站在台阶上，没有说话。钥匙藏在第三级台阶下。" * 2 for n in range(12)]
    text = "\n".join(lines)
    assert cache.count(text) == recording.count(text)
    assert deferred.built
    assert text not in recording.counted[:-1]  # only the check above counted the whole text
    assert max(map(len, recording.counted[:-1])) < len(text) // 2


def test_only_cl100k_with_its_known_pattern_counts_by_line() -> None:
    """The line rule is used for cl100k_base with the pre-tokenizer pattern it was shown for, and
    for nothing else: not an estimate, not a tokenizer without that pattern."""
    assert counts_by_line(resolve_tokenizer())
    assert not counts_by_line(EstimateTokenizer())
    assert not counts_by_line(CharTokenizer())


def test_a_text_that_shares_lines_with_an_earlier_one_tokenizes_only_its_new_lines() -> None:
    """Two windows of one chapter at different cursors: the second count tokenizes only the part
    the cut falls in, nothing it has seen."""
    tokenizer = RecordingTiktoken()
    cache = CountCache(tokenizer)
    paragraphs = [f"第{n}段：林远推开灯塔的门，海风灌进来，他在台阶上站了很久。" for n in range(40)]
    chapter = "\n\n".join(paragraphs)
    first = chapter[120:]
    assert cache.count(first) == resolve_tokenizer().count(first)
    tokenizer.counted.clear()
    second = chapter[150:]
    assert cache.count(second) == resolve_tokenizer().count(second)
    # Only the part the cut falls in: the cut line, with the next one when the cut line is short.
    assert len(tokenizer.counted) == 1
    assert second.startswith(tokenizer.counted[0])
    assert len(tokenizer.counted[0]) <= 2 * (len(paragraphs[0]) + 2)


def test_split_lines_cuts_only_before_a_letter_digit_or_line_mark_after_a_long_enough_line() -> None:
    """Lines join the next one when it starts with whitespace or an unlisted mark, or when the
    line before is short; the parts always join back into the text."""
    long = "x" * MIN_LINE
    text = f"{long}\n second\n{long}\n/third\n{long}\n[fourth]\nab\nfifth\n\n{long}\n6th"
    parts = split_lines(text)
    assert "".join(parts) == text
    assert parts == [f"{long}\n second\n{long}\n/third\n{long}\n", f"[fourth]\nab\nfifth\n\n{long}\n",
                     "6th"]


def test_kept_characters_are_bounded_as_well_as_entries() -> None:
    """Past max_chars of kept text the least recently used entries go, whatever their number."""
    tokenizer = CharTokenizer()
    cache = CountCache(tokenizer, max_entries=1000, max_chars=10)
    for text in ("aaaa", "bbbb", "cccc"):
        cache.count(text)
    assert list(cache._cache) == ["bbbb", "cccc"]
    assert cache._chars == 8


def test_locate_guesses_where_a_cut_falls_and_none_when_the_text_fits() -> None:
    """For a tail, the start of the text the last n tokens make; for a head, the end of the first
    n; exact counts of the guessed cut are then within a token of n. None when it all fits."""
    tokenizer = resolve_tokenizer()
    cache = CountCache(tokenizer)
    text = "\n\n".join(f"第{n}段：林远推开灯塔的门。The door opened." for n in range(60))
    total = tokenizer.count(text)
    assert cache.locate(text, total, True) is None
    assert cache.locate(text, total + 5, False) is None
    start = cache.locate(text, 300, True)
    end = cache.locate(text, 300, False)
    assert start is not None
    assert end is not None
    assert abs(tokenizer.count(text[start:]) - 300) <= 2
    assert abs(tokenizer.count(text[:end]) - 300) <= 2
    estimate = CountCache(EstimateTokenizer())
    guess = estimate.locate("灯塔" * 100, 50, True)
    assert guess == 150


def test_ready_until_a_tokenizer_built_on_first_use_is_built() -> None:
    """A cache over a tokenizer built on first use is not ready until ``prepare`` builds it (off
    the event loop, by its callers); one over a built tokenizer always is."""
    from services.tokenizer.resolve import resolve_tokenizer

    deferred = CountCache(resolve_tokenizer("cl100k_base", deferred=True))
    assert not deferred.ready
    deferred.prepare()
    assert deferred.ready
    assert CountCache(resolve_tokenizer("cl100k_base")).ready
