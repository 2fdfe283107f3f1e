"""Exact counts with a tiktoken encoding."""

from __future__ import annotations

import tiktoken

from services.tokenizer.base import TokenizerInfo


class TiktokenTokenizer:
    """Counts exactly as the target model does. Special tokens count as text."""

    def __init__(self, encoding: tiktoken.Encoding, info: TokenizerInfo) -> None:
        self._encoding = encoding
        self._info = info

    @property
    def info(self) -> TokenizerInfo:
        return self._info

    def encode(self, text: str) -> list[int]:
        # disallowed_special=() treats "<|endoftext|>" typed by a writer as plain text.
        return list(self._encoding.encode(text, disallowed_special=()))

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def decode(self, tokens: list[int]) -> str:
        return str(self._encoding.decode(tokens))
