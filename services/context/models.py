"""The engine's data: layer items in, an explained assembly out.

Everything here is immutable and free of I/O, so the same input always gives
the same prompt bytes and the same hashes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal


class Layer(StrEnum):
    """The four layers of the ``novel`` profile, whose budget table a project keeps
    (``context:budget:*``). The engine itself knows sections only from the plan."""

    RULES = "rules"
    SETTINGS = "settings"
    RETRIEVED = "retrieved"
    IMMEDIATE = "immediate"


LAYER_ORDER: tuple[Layer, ...] = (Layer.RULES, Layer.SETTINGS, Layer.RETRIEVED, Layer.IMMEDIATE)

KeyName = Literal["priority", "confidence", "score", "distance", "relevance", "order"]
Origin = Literal["user", "kg", "project"]


@dataclass(frozen=True, slots=True)
class Item:
    """One candidate for a layer, as a provider gathered it.

    ``layer`` is the id of the profile section it goes in and ``section`` the
    id of the part of that section (both from the plan's placement of its
    source). ``key`` orders items inside their part: higher is kept longer.
    ``tokens`` is the count of ``text`` alone (providers may precompute it,
    e.g. chunk counts from index time); the engine recounts the final prompt.
    ``group`` and ``tier`` serve ``lower_tier`` reductions (e.g. an NPC's tiers).
    """

    id: str
    layer: str
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
    group: str | None = None
    tier: int | None = None
    # What the item repeats of the writer's own text (an accepted past output), if any: a window that
    # holds it, or that it holds, makes the item a duplicate of the window.
    quote: str | None = None


@dataclass(frozen=True, slots=True)
class Window:
    """The Immediate layer's text around the cursor, already cut to the skill's shape."""

    before: str
    after: str
    start: int  # character offset of ``before`` in the document
    cursor: int
    tokens_before: int
    tokens_after: int
    # The document's whole text when the window was cut from it (``before + after`` is then
    # ``document[start:cursor + len(after)]``): what stands nowhere in it stands in no window of it.
    document: str | None = field(default=None, compare=False, repr=False)


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
    layer: str
    section: str
    source: str
    tokens: int
    key: float
    key_name: KeyName
    fate: Fate
    reason: str | None = None
    kept_tokens: int = 0
    group: str | None = None  # tiered content (an NPC): its group and tier
    tier: int | None = None


@dataclass(frozen=True, slots=True)
class Budget:
    context_window: int
    output_reserve: int
    system_prompt_tokens: int
    total: int
    shares: dict[str, int]  # by section id, in plan order
    minimums: dict[str, int]


@dataclass(frozen=True, slots=True)
class LayerResult:
    """One section of the assembled prompt."""

    tokens: int
    truncated: bool
    text: str
    items: int
    role: str = "user"
    chunks: bool = False  # whether its items are retrieved chunks (reported as ``chunks``)


@dataclass(frozen=True, slots=True)
class Reduction:
    """One reduction step taken: which section, which rung of its ladder, tokens before and after.

    ``estimated``: the section was first measured by this step (a drop of whole items, which
    needs no count of the section before it), so ``tokens_before`` is the count after plus each
    dropped item's own count and a separator, not a count of the text before.
    """

    section: str
    step: str
    tokens_before: int
    tokens_after: int
    estimated: bool = False
    kind: str = field(default="", compare=False)  # the step's kind (drop_section, ...), whatever its id


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Divergence:
    layer: str  # the stable section the first differing byte falls in
    byte_offset: int


@dataclass(frozen=True, slots=True)
class Assembly:
    """The engine's answer for one request."""

    prompt: str
    token_count: int
    stable_prefix: str
    stable_prefix_hash: str
    prefix_hashes: dict[str, str]  # by section id: the hash of the prompt up to its end
    layers: dict[str, LayerResult]  # by section id, in plan order
    budget: Budget
    warnings: tuple[str, ...]
    reports: tuple[ItemReport, ...]  # every candidate's fate; empty when the request did not ask (explain)
    timings_ms: dict[str, float] = field(default_factory=dict)
    reductions: tuple[Reduction, ...] = ()
    stable_ends: tuple[tuple[str, int], ...] = ()  # each stable section's end, in UTF-8 bytes
    part_texts: dict[tuple[str, str], str] = field(default_factory=dict)  # text parts' bodies, as sent
    profile: str = "novel"

    def messages(self, system_prompt: str) -> list[Message]:
        """The prompt split by role: the system prompt and system sections first, then runs of
        sections of one role in prompt order."""
        system = [system_prompt] if system_prompt else []
        runs: list[Message] = []
        for layer in self.layers.values():
            if not layer.text:
                continue
            if layer.role == "system":
                system.append(layer.text)
            elif runs and runs[-1].role == layer.role:
                runs[-1] = Message(layer.role, runs[-1].content + "\n\n" + layer.text)
            else:
                runs.append(Message(layer.role, layer.text))
        head = [Message("system", "\n\n".join(system))] if system else []
        return head + runs
