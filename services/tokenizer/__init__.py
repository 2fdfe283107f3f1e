"""Token counting behind one small interface, exact and offline when possible."""

from services.tokenizer.base import Tokenizer, TokenizerInfo
from services.tokenizer.estimate import EstimateTokenizer
from services.tokenizer.resolve import resolve_tokenizer
from services.tokenizer.tiktoken_backend import TiktokenTokenizer

__all__ = [
    "EstimateTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "TokenizerInfo",
    "resolve_tokenizer",
]
