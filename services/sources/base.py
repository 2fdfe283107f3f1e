"""What a provider receives and returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from services.context.counting import CountCache
from services.context.models import Item, Window
from services.context.skills import Skill
from services.sources.relevance import features


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
    def warning(self) -> str:
        """The warning code used when this provider fails, e.g. KG_UNAVAILABLE."""
        ...

    async def gather(self, ctx: GatherContext) -> Sequence[Item]: ...
