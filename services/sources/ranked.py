"""Records ranked by relevance to the text around the cursor, made once per records version.

An entity sheet's or a past interaction's item depends on the cursor only through its key: its
similarity to the features around the cursor (for a past interaction, scaled and added to its
recency). Everything else (the rendered text, its count, the id, the record's own features) is made
once for the records as they are, and an assembly with features not seen before only scores them
(:class:`services.sources.relevance.Overlaps`) and stamps the keys on copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from services.context.models import Item
from services.sources.relevance import Overlaps


@dataclass(frozen=True, slots=True)
class Ranked:
    templates: tuple[Item, ...]  # each record's item, its key still to come
    overlaps: Overlaps  # each record's features, in the same order
    scale: float | None = None  # key = round(scale x similarity + base, 6); None: round(similarity, 6)
    base: tuple[float, ...] = ()
    # The last features scored and their keys: a writer's next keystroke mostly has the very same,
    # and comparing them costs a fraction of scoring them again.
    last: list[tuple[AbstractSet[str], tuple[float, ...]]] = field(default_factory=list, compare=False,
                                                                   repr=False)

    @classmethod
    def of(cls, templates: Sequence[Item], owns: Sequence[AbstractSet[str]], *, scale: float | None = None,
           base: Sequence[float] = ()) -> Ranked:
        return cls(tuple(templates), Overlaps(owns), scale, tuple(base))

    def weight(self) -> int:
        """What it holds beyond its records, for the cache's bound: each record's features."""
        return self.overlaps.weight()

    def keys(self, near: AbstractSet[str]) -> list[float]:
        """Each record's key for the features ``near`` the cursor."""
        shares = self.overlaps.shares(near)
        scale = self.scale
        if scale is None:
            return [round(share, 6) for share in shares]
        return [round(scale * share + base, 6) for share, base in zip(shares, self.base, strict=True)]

    def keys_for(self, near: AbstractSet[str]) -> tuple[float, ...]:
        """:meth:`keys` as a tuple, the last answer kept."""
        last = self.last[0] if self.last else None
        if last is not None and last[0] == near:
            return last[1]
        keys = tuple(self.keys(near))
        self.last[:] = [(near, keys)]
        return keys

    def items(self, near: AbstractSet[str]) -> list[Item]:
        """The records' items, keyed for the features ``near`` the cursor."""
        return self.keyed(self.keys(near))

    def keyed(self, keys: Sequence[float]) -> list[Item]:
        """The records' items with these ``keys`` (one per record, in order)."""
        # Positional: a keyword call costs a quarter more, and there are dozens per assembly.
        return [Item(t.id, t.layer, t.section, t.source, t.text, t.tokens, key, t.key_name, t.project_id,
                     t.origin, t.span, t.names, t.group, t.tier, t.quote)
                for t, key in zip(self.templates, keys, strict=True)]
