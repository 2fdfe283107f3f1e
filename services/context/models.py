"""The engine's data: layer items in, an explained assembly out.

Everything here is immutable and free of I/O, so the same input always gives
the same prompt bytes and the same hashes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal


class Layer(StrEnum):
    RULES = "rules"
    SETTINGS = "settings"
    RETRIEVED = "retrieved"
    IMMEDIATE = "immediate"


LAYER_ORDER: tuple[Layer, ...] = (Layer.RULES, Layer.SETTINGS, Layer.RETRIEVED, Layer.IMMEDIATE)
# The spec's trimming order: lowest priority first; Rules is never budget-trimmed.
TRIM_ORDER: tuple[Layer, ...] = (Layer.RETRIEVED, Layer.SETTINGS, Layer.IMMEDIATE)
STABLE_LAYERS: tuple[Layer, ...] = (Layer.RULES, Layer.SETTINGS)

KeyName = Literal["priority", "confidence", "score", "distance", "relevance", "order"]
Origin = Literal["user", "kg", "project"]


@dataclass(frozen=True, slots=True)
class Item:
    """One candidate for a layer, as a provider gathered it.

    ``key`` orders items inside their section: higher is kept longer.
    ``tokens`` is the count of ``text`` alone (providers may precompute it,
    e.g. chunk counts from index time); the engine recounts the final prompt.
    """

    id: str
    layer: Layer
    section: str
    source: str
    text: str
    tokens: int
    key: float
    key_name: KeyName
    project_id: str
    origin: Origin = "user"
    span: tuple[int, int] | None = None  # character offsets in the current document, if any
    names: tuple[str, ...] = ()  # names and aliases, for kg relevance to the cursor text


@dataclass(frozen=True, slots=True)
class Window:
    """The Immediate layer's text around the cursor, already cut to the skill's shape."""

    before: str
    after: str
    start: int  # character offset of ``before`` in the document
    cursor: int
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, slots=True)
class BudgetProfile:
    context_window: int = 8192
    output_reserve: int = 1024
    ratios: tuple[float, float, float, float] = (0.15, 0.10, 0.25, 0.50)
    minimums: tuple[int, int, int, int] = (500, 200, 0, 2000)
    version: int = 1

    def ratio(self, layer: Layer) -> float:
        return self.ratios[LAYER_ORDER.index(layer)]

    def minimum(self, layer: Layer) -> int:
        return self.minimums[LAYER_ORDER.index(layer)]


DEFAULT_PROFILE = BudgetProfile()

Fate = Literal["included", "trimmed", "dropped"]


@dataclass(slots=True)  # not frozen: hundreds are built per assembly, and frozen init costs 3x
class ItemReport:
    """What happened to one candidate, and why."""

    id: str
    layer: Layer
    section: str
    source: str
    tokens: int
    key: float
    key_name: KeyName
    fate: Fate
    reason: str | None = None
    kept_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Budget:
    context_window: int
    output_reserve: int
    system_prompt_tokens: int
    total: int
    shares: dict[Layer, int]
    minimums: dict[Layer, int]


@dataclass(frozen=True, slots=True)
class LayerResult:
    tokens: int
    truncated: bool
    text: str
    items: int


@dataclass(frozen=True, slots=True)
class Divergence:
    layer: Layer
    byte_offset: int


@dataclass(frozen=True, slots=True)
class Assembly:
    """The engine's answer for one request."""

    prompt: str
    token_count: int
    stable_prefix: str
    stable_prefix_hash: str
    prefix_hashes: dict[Layer, str]
    layers: dict[Layer, LayerResult]
    budget: Budget
    warnings: tuple[str, ...]
    reports: tuple[ItemReport, ...]
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def retrieved_chunks(self) -> int:
        return self.layers[Layer.RETRIEVED].items
