"""The sources a profile may name, what kind of content each gives, and the facts it publishes.

A source that fills a part with items is one provider registered under its
name (services/sources); ``document.window``, ``instruction``, ``literal`` and
``request.<name>`` are filled by the assembly itself. A later mode adds its
source here and its provider in the composition root.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from services.context.plan import PartKind

REQUEST_PREFIX = "request."
LITERAL = "literal"


@dataclass(frozen=True, slots=True)
class SourceInfo:
    kind: PartKind
    facts: tuple[str, ...] = ()  # facts true when the source gives anything
    bounded: bool = False  # bounded apart, not counted as the caller's input


BUILT_IN: dict[str, SourceInfo] = {
    "constraints": SourceInfo("items", ("hasConstraints",)),
    "kg.entities": SourceInfo("items", ("hasEntities",)),
    "memory.semantic": SourceInfo("items", ("hasMemories",)),
    "memory.episodic": SourceInfo("items", ("hasEpisodes",)),
    "retrieval.passages": SourceInfo("items", ("hasPassages",), bounded=True),
    "project.narrative": SourceInfo("items"),
    "project.style": SourceInfo("items"),
    "document.window": SourceInfo("window", ("hasDocument",)),
    "instruction": SourceInfo("text", ("hasInstruction",)),
    LITERAL: SourceInfo("text"),
    # Interactive fiction: stored segments by scope (the game-master profile).
    "segments.core": SourceInfo("items"),
    "segments.ruleset": SourceInfo("items"),
    "segments.world": SourceInfo("items"),
    "segments.entry": SourceInfo("items"),
    "segments.entry_start": SourceInfo("items", ("hasEntryStart",)),
    "segments.npc": SourceInfo("items", ("hasNpcs",)),
    # The command chat: the user's messages before the current one (the chat-navigation profile).
    "chat.recent": SourceInfo("items", ("hasRecentMessages",)),
}

# ${...} namespaces whose values the assembly publishes (project.id, project.language, system.skill,
# ...); user.* and memory.* are for the sources that will publish them.
NAMESPACES = ("project", "system", "user", "memory")


@dataclass(frozen=True)
class Catalog:
    sources: Mapping[str, SourceInfo] = field(default_factory=lambda: dict(BUILT_IN))
    namespaces: tuple[str, ...] = NAMESPACES

    def info(self, name: str) -> SourceInfo | None:
        if name.startswith(REQUEST_PREFIX) and len(name) > len(REQUEST_PREFIX):
            return SourceInfo("text")
        return self.sources.get(name)

    def facts(self) -> dict[str, str]:
        """Fact name -> the source that publishes it."""
        return {fact: name for name, info in self.sources.items() for fact in info.facts}

    def with_sources(self, extra: Iterable[tuple[str, SourceInfo]]) -> Catalog:
        return Catalog({**self.sources, **dict(extra)}, self.namespaces)


DEFAULT_CATALOG = Catalog()
