"""The tokenizer seam the engine counts with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Source = Literal["cache", "bundled", "estimate"]


@dataclass(frozen=True, slots=True)
class TokenizerInfo:
    """What is counting, and whether its counts are the model's own."""

    encoding: str
    source: Source
    exact: bool


@runtime_checkable
class Tokenizer(Protocol):
    @property
    def info(self) -> TokenizerInfo: ...

    def count(self, text: str) -> int:
        """Number of tokens ``text`` encodes to."""
        ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, tokens: list[int]) -> str: ...
