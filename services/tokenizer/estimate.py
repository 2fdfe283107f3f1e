"""A clearly labelled estimate, used only when no exact encoding is on disk."""

from __future__ import annotations

import re

from services.tokenizer.base import TokenizerInfo

# Han, kana and hangul run close to one token per character in BPE vocabularies;
# other text averages about four UTF-8 bytes per token.
_WIDE_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# Other characters by UTF-8 length (a lone surrogate counts as three bytes).
_BY_SIZE = (
    (1, "[\x00-\x7f]"),
    (2, "[\x80-\u07ff]"),
    (3, f"(?![{_WIDE_CHARS}])[\u0800-\uffff]"),
    (4, "[\U00010000-\U0010ffff]"),
)


def _fit(budget: int) -> str:
    """Pattern taking characters greedily while their UTF-8 bytes fit in ``budget``."""
    return "|".join(
        pattern + (f"(?:{_fit(budget - size)})?" if size < budget else "")
        for size, pattern in _BY_SIZE if size <= budget
    )


# A piece is one wide character, or as many others as fit in four UTF-8 bytes
# (at least one).
_PIECE = re.compile(f"[{_WIDE_CHARS}]|{_fit(4)}")


class EstimateTokenizer:
    """Deterministic approximation; ``info.exact`` is False so callers can say so.

    Its "tokens" are pieces of the text (one wide character, or other
    characters up to four UTF-8 bytes), so encode/decode round-trip and
    trimming by tokens still works.
    """

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self._info = TokenizerInfo(encoding=encoding, source="estimate", exact=False)
        self._pieces: dict[str, int] = {}
        self._texts: list[str] = []

    @property
    def info(self) -> TokenizerInfo:
        return self._info

    def count(self, text: str) -> int:
        return len(_PIECE.findall(text))

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in _PIECE.findall(text):
            if piece not in self._pieces:
                self._pieces[piece] = len(self._texts)
                self._texts.append(piece)
            ids.append(self._pieces[piece])
        return ids

    def decode(self, tokens: list[int]) -> str:
        return "".join(self._texts[t] for t in tokens)


class ConservativeEstimate(EstimateTokenizer):
    """An estimate that errs high (two UTF-8 bytes per token at most), for budget fallbacks.

    BPE vocabularies average three or more bytes per token on prose in both
    Chinese and English, so a prompt fitted with these counts still fits.
    """

    def count(self, text: str) -> int:
        return max(super().count(text), -(-len(text.encode("utf-8", "surrogatepass")) // 2))
