"""CountCache: exact counts from the tokenizer, remembered by content, bounded, thread-safe."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from services.context.counting import CountCache
from services.tokenizer import TokenizerInfo, resolve_tokenizer


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
