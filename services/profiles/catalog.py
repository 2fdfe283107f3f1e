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
    # A character conversation's messages (chat:assemble), bounded by the caller to a few times the
    # prompt's budget, newest first.
    "chat.history": SourceInfo("items", ("hasHistory",), bounded=True),
    # The reading companion (reading:ask, services/reading): stored summaries and paragraphs of the
    # reader's window only, each carrying the pages it draws on.
    "reading.chapters": SourceInfo("items", ("hasChapterSummaries",), bounded=True),
    "reading.pages": SourceInfo("items", ("hasPageSummaries",), bounded=True),
    "reading.evidence": SourceInfo("items", ("hasEvidence",), bounded=True),
}

# ${...} namespaces whose values the assembly publishes: a placeholder under one of them must be a
# published name, so a typo is a validation problem rather than a silent empty string.
NAMESPACES = ("project", "system", "user", "memory", "perspective")


def _character(role: str) -> tuple[str, ...]:
    return tuple(f"{role}.{name}" for name in (
        "firstName", "lastName", "fullName", "characterDesc", "characterDescLight", "characterDescPublic",
        "asg", "age", "gender", "race", "personality.summary", "personality.casual", "speechPattern",
        "emotionalTendency"))


PUBLISHED: frozenset[str] = frozenset({
    # Every assembly (services/assembly/service.py).
    "project.id", "project.language", "project.model", "system.skill", "system.profile",
    # A character conversation (chat:assemble, services/characters): its two characters, from their
    # entity records; their memories; and writing-style hints drawn from the character's own traits.
    *_character("system"), *_character("user"),
    "memory.context", "memory.relationship", "memory.facts", "memory.lastSession", "memory.count",
    "perspective.dynamic", "perspective.casual",
})


@dataclass(frozen=True)
class Catalog:
    sources: Mapping[str, SourceInfo] = field(default_factory=lambda: dict(BUILT_IN))
    namespaces: tuple[str, ...] = NAMESPACES
    published: frozenset[str] = PUBLISHED

    def info(self, name: str) -> SourceInfo | None:
        if name.startswith(REQUEST_PREFIX) and len(name) > len(REQUEST_PREFIX):
            return SourceInfo("text")
        return self.sources.get(name)

    def facts(self) -> dict[str, str]:
        """Fact name -> the source that publishes it."""
        return {fact: name for name, info in self.sources.items() for fact in info.facts}

    def with_sources(self, extra: Iterable[tuple[str, SourceInfo]]) -> Catalog:
        return Catalog({**self.sources, **dict(extra)}, self.namespaces, self.published)


DEFAULT_CATALOG = Catalog()
