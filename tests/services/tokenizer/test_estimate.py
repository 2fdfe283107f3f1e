"""The labelled estimate: deterministic pieces that round-trip, about four bytes each."""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from services.tokenizer.base import TokenizerInfo
from services.tokenizer.estimate import EstimateTokenizer

_WIDE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")

# Any code point at all, lone surrogates included, with CJK, kana, hangul and
# astral characters made common enough to mix with the rest.
_ANY_CHAR = st.one_of(
    st.characters(exclude_categories=()),
    st.sampled_from("天地玄黄あア가힣豈\u3040\ud7af😀𠀀é\u07ff\u0800\ud800\udfff"),
)
_ANY_TEXT = st.text(alphabet=_ANY_CHAR, max_size=200)


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def test_info_is_labelled_as_an_estimate() -> None:
    """The estimate says which encoding it stands in for and that it is not exact."""
    assert EstimateTokenizer("o200k_base").info == TokenizerInfo(
        encoding="o200k_base", source="estimate", exact=False)
    assert EstimateTokenizer().info.encoding == "cl100k_base"


def test_empty_text_has_no_tokens() -> None:
    """Empty text counts zero, encodes to nothing and decodes back from nothing."""
    tok = EstimateTokenizer()
    assert (tok.count(""), tok.encode(""), tok.decode([])) == (0, [], "")


def test_wide_characters_are_one_token_each() -> None:
    """Han, kana and hangul count one token per character, never merged with neighbours."""
    tok = EstimateTokenizer()
    assert tok.count("天地玄黄") == 4
    assert tok.count("ひらがなカタカナ") == 8
    assert tok.count("안녕하세요") == 5
    pieces = [tok.decode([i]) for i in tok.encode("a天b")]
    assert pieces == ["a", "天", "b"]


def test_other_text_is_cut_every_four_utf8_bytes() -> None:
    """Non-wide text is cut into pieces of at most four UTF-8 bytes, not four characters."""
    tok = EstimateTokenizer()

    def pieces(text: str) -> list[str]:
        return [tok.decode([i]) for i in tok.encode(text)]

    assert pieces("abcdefg") == ["abcd", "efg"]
    assert pieces("привет") == ["пр", "ив", "ет"]  # two bytes per letter
    assert pieces("café") == ["caf", "é"]
    assert pieces("😀😀") == ["😀", "😀"]  # four bytes per emoji
    assert pieces("ไทย") == ["ไ", "ท", "ย"]  # three bytes per Thai letter


def test_ids_are_stable_within_one_tokenizer() -> None:
    """The same piece always gets the same id, and earlier ids still decode later."""
    tok = EstimateTokenizer()
    first = tok.encode("abcdabcd")
    tok.encode("some other text entirely")
    assert first[0] == first[1]
    assert tok.encode("abcd") == [first[0]]
    assert tok.decode(first) == "abcdabcd"


@settings(database=None, deadline=None)
@given(_ANY_TEXT)
def test_decode_inverts_encode_for_any_text(text: str) -> None:
    """decode(encode(t)) == t for every string, lone surrogates included."""
    tok = EstimateTokenizer()
    assert tok.decode(tok.encode(text)) == text


@settings(database=None, deadline=None)
@given(_ANY_TEXT)
def test_count_is_the_number_of_encoded_tokens(text: str) -> None:
    """count(t) == len(encode(t)) for every string."""
    tok = EstimateTokenizer()
    assert tok.count(text) == len(tok.encode(text))


@settings(database=None, deadline=None)
@given(_ANY_TEXT)
def test_pieces_are_greedy_and_at_most_four_bytes(text: str) -> None:
    """Each piece is one wide character or 1..4 UTF-8 bytes of others, taken greedily."""
    tok = EstimateTokenizer()
    pieces = [tok.decode([i]) for i in tok.encode(text)]
    for piece in pieces:
        if _WIDE.search(piece):
            assert len(piece) == 1
        else:
            assert 1 <= _utf8_size(piece) <= 4
    for left, right in itertools.pairwise(pieces):
        if not _WIDE.match(left) and not _WIDE.match(right[0]):
            # the next character did not fit, or it would have joined this piece
            assert _utf8_size(left) + _utf8_size(right[0]) > 4
