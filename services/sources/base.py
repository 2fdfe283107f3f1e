"""What a provider receives and returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from services.context.counting import CountCache
from services.context.models import Item, Window
from services.context.skills import Skill
from services.sources.relevance import features

# Where each source's items go when no plan says otherwise: the novel profile's sections and parts.
NOVEL_PLACEMENT: Mapping[str, tuple[str, str]] = MappingProxyType({
    "constraints": ("rules", "constraints"),
    "project.narrative": ("rules", "narrative"),
    "kg.entities": ("rules", "entities"),
    "memory.semantic": ("settings", "preferences"),
    "project.style": ("settings", "style"),
    "retrieval.passages": ("retrieved", "passages"),
    "memory.episodic": ("retrieved", "history"),
})


@dataclass(frozen=True, slots=True)
class GatherContext:
    """Where the writer is, as every provider sees it."""

    project_id: str
    document_id: str
    language: str
    skill: Skill
    window: Window
    additional_input: str
    counter: CountCache
    # features() of cursor_text, made once per assembly (off the event loop) by whoever builds the
    # context, for every provider that ranks by it; None: each provider makes them itself.
    cursor_features: frozenset[str] | None = None
    # Source name -> (section id, part id) of the plan being assembled; a source not in it is not
    # wanted, and its provider gathers nothing for it.
    placement: Mapping[str, tuple[str, str]] = field(default_factory=lambda: NOVEL_PLACEMENT)
    # The caller's variables (context:assemble ``variables``), for sources a request steers.
    variables: Mapping[str, str] = field(default_factory=dict)

    def place(self, source: str) -> tuple[str, str] | None:
        """Where ``source``'s items go in this assembly, or None if nowhere."""
        return self.placement.get(source)

    @property
    def cursor_text(self) -> str:
        """The text around the cursor, for relevance."""
        return self.window.before + self.window.after

    @property
    def near_cursor(self) -> frozenset[str]:
        """The relevance features of the text around the cursor (``cursor_features`` if given)."""
        if self.cursor_features is not None:
            return self.cursor_features
        return features(self.cursor_text)

    @property
    def query(self) -> str:
        """What retrieval searches with: text just before the cursor plus the instruction."""
        return self.window.before[-800:] + "\n" + self.additional_input


class Provider(Protocol):
    """A source of items for one or more layers."""

    @property
    def name(self) -> str:
        """The fault name and log name: constraints, kg, memory, retrieval."""
        ...

    @property
    def sources(self) -> tuple[str, ...]:
        """The profile sources it fills (constraints, kg.entities, ...)."""
        ...

    @property
    def warning(self) -> str:
        """The warning code used when this provider fails, e.g. KG_UNAVAILABLE."""
        ...

    async def gather(self, ctx: GatherContext) -> Sequence[Item]: ...
