"""Fault injection for black-box tests of degradation (debug mode only)."""

from __future__ import annotations

from enum import StrEnum


class Fault(StrEnum):
    KG = "kg"
    MEMORY = "memory"
    RETRIEVAL = "retrieval"
    SEGMENTS = "segments"
    TOKENIZER = "tokenizer"
    FOREIGN_ITEM = "foreign_item"


class ProviderFault(RuntimeError):
    """Raised in place of a provider's work while its fault is set."""


class TokenizerFault(RuntimeError):
    """Raised in place of counting while the tokenizer fault is set."""


class Faults:
    """The faults currently switched on; empty in normal operation."""

    def __init__(self) -> None:
        self.active: frozenset[Fault] = frozenset()

    def set(self, faults: frozenset[Fault]) -> None:
        self.active = faults

    def __contains__(self, fault: object) -> bool:
        return fault in self.active


class FailingTokenizer:
    """Stands in for the project's tokenizer while the tokenizer fault is set."""

    def __init__(self, info: object) -> None:
        self.info = info

    def count(self, text: str) -> int:
        raise TokenizerFault("injected")

    def encode(self, text: str) -> list[int]:
        raise TokenizerFault("injected")

    def decode(self, tokens: list[int]) -> str:
        raise TokenizerFault("injected")
