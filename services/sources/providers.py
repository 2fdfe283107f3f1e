"""Providers for constraints, the knowledge graph and the two memories.

Each reads its records for one project through an injected ``fetch`` and turns
them into layer items with their ordering keys. Relevance is computed against
the text around the cursor.

Turning records into items counts tokens and extracts relevance features, both
CPU work proportional to the text (a 60k-token instruction, a 200,000-character
past interaction), so a large amount of it runs in a worker thread and the event
loop only awaits; the usual few dozen short records are turned into items on the
loop itself, where they take less time than the hop to a thread and back
(:func:`services.concurrency.offload.off_loop`).
What depends on a record alone (its rendered text and its features) is kept
by content in a bounded per-project cache (:mod:`services.caches`) that the
composition root hands in, and the entity sheets' and past interactions' items
are kept per records version with their keys still to come
(:mod:`services.sources.ranked`), so an assembly recomputes only what depends on
the cursor: each record's similarity to the text around it. The items themselves
are kept too (:mod:`services.sources.kept`) under the records' keys, and an
assembly with the same records and keys (a neighbouring keystroke, mostly)
makes none and gets the same objects. A
provider built without these caches gets private ones of its own.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import partial

from services.caches import (
    Gathered,
    ProjectCache,
    Rendered,
    entity_sheet_cache,
    episode_text_cache,
    gathered_cache,
)
from services.context.models import Item
from services.sources.base import GatherContext
from services.sources.kept import gathered, kept_value
from services.sources.ranked import Ranked
from services.sources.records import ConstraintLike, EntityLike, EpisodeLike, Fetch, SemanticRuleLike
from services.sources.relevance import features

ENTITY_KINDS = {
    "zh": {"character": "角色", "location": "地点", "object": "物品", "group": "组织", "concept": "概念"},
    "en": {"character": "character", "location": "place", "object": "object", "group": "group",
           "concept": "concept"},
}


# The characters of text a provider's items are made from: whether they are made off the event loop.
def _chars(records: Sequence[ConstraintLike | SemanticRuleLike]) -> int:
    return sum(len(r.text) for r in records)


def _entity_chars(entities: Sequence[EntityLike]) -> int:
    return sum(len(e.description) + len(e.name) for e in entities)


def _episode_chars(records: Sequence[EpisodeLike]) -> int:
    return sum(len(r.instruction) + len(r.output) for r in records)


def _constraint_item(record: ConstraintLike, ctx: GatherContext, where: tuple[str, str]) -> Item:
    return Item(id=f"constraint:{record.id}", layer=where[0], section=where[1],
                source=f"constraint:{record.kind}", text=record.text,
                tokens=ctx.counter.count(record.text), key=float(record.priority), key_name="priority",
                project_id=record.project_id, origin="kg" if record.source == "kg" else "user")


@dataclass(frozen=True)
class UserConstraintsProvider:
    """The writer's own constraints: the top of Rules, never dropped for the knowledge graph."""

    fetch: Fetch[ConstraintLike]
    name: str = "constraints"
    warning: str = "CONSTRAINTS_UNAVAILABLE"
    sources: tuple[str, ...] = ("constraints",)
    kept: Gathered = field(default_factory=gathered_cache, repr=False)

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        where = ctx.place("constraints")
        if where is None:
            return []
        records = await self.fetch(ctx.project_id)
        return await gathered(self.kept, ctx.project_id, ("constraints", where, ctx.counter), records,
                              partial(self._items, records, ctx, where), size=partial(_chars, records))

    @staticmethod
    def _items(records: Sequence[ConstraintLike], ctx: GatherContext, where: tuple[str, str]) -> list[Item]:
        return [_constraint_item(r, ctx, where) for r in records if r.source != "kg"]


@dataclass(frozen=True)
class KnowledgeGraphProvider:
    """kg-derived constraints and entity sheets (角色设定)."""

    fetch_constraints: Fetch[ConstraintLike]
    fetch_entities: Fetch[EntityLike]
    name: str = "kg"
    warning: str = "KG_UNAVAILABLE"
    sheets: ProjectCache[Hashable, Rendered] = field(default_factory=entity_sheet_cache, repr=False)
    sources: tuple[str, ...] = ("constraints", "kg.entities")
    kept: Gathered = field(default_factory=gathered_cache, repr=False)

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        at_constraints, at_entities = ctx.place("constraints"), ctx.place("kg.entities")
        constraints = await self.fetch_constraints(ctx.project_id) if at_constraints else ()
        entities = await self.fetch_entities(ctx.project_id) if at_entities else ()
        records = (*constraints, *entities)
        ranked: Ranked | None = None
        keys: tuple[float, ...] = ()
        if at_entities and entities:  # entities are ranked by the text around the cursor, constraints not
            ranked = await kept_value(
                self.kept, ctx.project_id, ("kg.ranked", ctx.language, at_entities, ctx.counter), entities,
                partial(self._ranked, entities, ctx, at_entities), size=partial(_entity_chars, entities))
            keys = ranked.keys_for(ctx.near_cursor)
        key = ("kg", ctx.language, at_constraints, at_entities, ctx.counter, keys)
        return await gathered(self.kept, ctx.project_id, key, records,
                              partial(self._items, constraints, ranked, keys, ctx),
                              size=partial(_chars, constraints), weight=len(keys))

    @staticmethod
    def _items(constraints: Sequence[ConstraintLike], ranked: Ranked | None, keys: Sequence[float],
               ctx: GatherContext) -> list[Item]:
        items = []
        at_constraints = ctx.place("constraints")
        if at_constraints:
            items = [_constraint_item(r, ctx, at_constraints) for r in constraints if r.source == "kg"]
        return items if ranked is None else items + ranked.keyed(keys)

    def _ranked(self, entities: Sequence[EntityLike], ctx: GatherContext, where: tuple[str, str]) -> Ranked:
        sheets = [self._sheet(e, ctx) for e in entities]
        return Ranked.of([
            Item(id=f"entity:{e.id}", layer=where[0], section=where[1], source=f"kg:{e.kind}", text=text,
                 tokens=ctx.counter.count(text), key=0.0, key_name="relevance", project_id=e.project_id,
                 origin="kg", names=(e.name, *e.aliases))
            for e, (text, _) in zip(entities, sheets, strict=True)
        ], [own for _, own in sheets])

    def _sheet(self, entity: EntityLike, ctx: GatherContext) -> Rendered:
        key = (ctx.language, entity.kind, entity.name, tuple(entity.aliases), entity.description)
        return self.sheets.get_or_make(entity.project_id, key, lambda: _entity_sheet(*key))


def _entity_sheet(language: str, kind: str, name: str, aliases: tuple[str, ...],
                  description: str) -> tuple[str, frozenset[str]]:
    """An entity's sheet as the prompt shows it, and the features its relevance is judged by."""
    label = ENTITY_KINDS.get(language, ENTITY_KINDS["en"]).get(kind, kind)
    if language == "zh":
        also = f"；别名：{'、'.join(aliases)}" if aliases else ""
        text = f"{name}（{label}{also}）：{description}"
    else:
        also = f"; also {', '.join(aliases)}" if aliases else ""
        text = f"{name} ({label}{also}): {description}"
    return text, features(f"{name} {description}")


@dataclass(frozen=True)
class SemanticMemoryProvider:
    """Confirmed preference rules, by confidence (Settings layer)."""

    fetch: Fetch[SemanticRuleLike]
    name: str = "memory"
    warning: str = "MEMORY_UNAVAILABLE"
    sources: tuple[str, ...] = ("memory.semantic",)
    kept: Gathered = field(default_factory=gathered_cache, repr=False)

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        where = ctx.place("memory.semantic")
        if where is None:
            return []
        records = await self.fetch(ctx.project_id)
        return await gathered(self.kept, ctx.project_id, ("semantic", where, ctx.counter), records,
                              partial(self._items, records, ctx, where), size=partial(_chars, records))

    @staticmethod
    def _items(records: Sequence[SemanticRuleLike], ctx: GatherContext, where: tuple[str, str]) -> list[Item]:
        return [
            Item(id=f"semantic:{r.id}", layer=where[0], section=where[1], source="semantic",
                 text=r.text, tokens=ctx.counter.count(r.text), key=float(r.confidence),
                 key_name="confidence", project_id=r.project_id)
            for r in records if r.confirmed
        ]


# How fast an older interaction loses weight against a newer one, per step of age rank.
_RECENCY_DECAY = 0.85


@dataclass(frozen=True)
class EpisodicMemoryProvider:
    """Past accepted interactions, by relevance to the cursor text and recency (Retrieved layer)."""

    fetch: Fetch[EpisodeLike]
    name: str = "memory"
    warning: str = "MEMORY_UNAVAILABLE"
    texts: ProjectCache[Hashable, Rendered] = field(default_factory=episode_text_cache, repr=False)
    sources: tuple[str, ...] = ("memory.episodic",)
    kept: Gathered = field(default_factory=gathered_cache, repr=False)

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        where = ctx.place("memory.episodic")
        if where is None:
            return []
        records = await self.fetch(ctx.project_id)
        ranked = await kept_value(
            self.kept, ctx.project_id, ("episodic.ranked", ctx.language, where, ctx.counter), records,
            partial(self._ranked, records, ctx, where), size=partial(_episode_chars, records))
        # A space never joins a bigram, so this is features() of the two texts joined.
        near = ctx.near_cursor | features(ctx.additional_input) if ctx.additional_input else ctx.near_cursor
        keys = ranked.keys_for(near)
        key = ("episodic", ctx.language, where, ctx.counter, keys)
        return await gathered(self.kept, ctx.project_id, key, records, partial(ranked.keyed, keys),
                              size=lambda: 0, weight=len(keys))

    def _ranked(self, records: Sequence[EpisodeLike], ctx: GatherContext, where: tuple[str, str]) -> Ranked:
        episodes = sorted(records, key=lambda e: e.created_at, reverse=True)
        texts = [self._text(e, ctx) for e in episodes]
        return Ranked.of([
            Item(id=f"episode:{e.id}", layer=where[0], section=where[1], source="episodic", text=text,
                 tokens=ctx.counter.count(text), key=0.0, key_name="score", project_id=e.project_id,
                 quote=e.output)
            for e, (text, _) in zip(episodes, texts, strict=True)
        ], [own for _, own in texts], scale=0.7, base=[0.3 * math.pow(_RECENCY_DECAY, rank)
                                                       for rank in range(len(episodes))])

    def _text(self, episode: EpisodeLike, ctx: GatherContext) -> Rendered:
        key = (ctx.language, episode.instruction, episode.output)
        return self.texts.get_or_make(episode.project_id, key, lambda: _episode_text(*key))


def _episode_text(language: str, instruction: str, output: str) -> tuple[str, frozenset[str]]:
    """A past interaction as the prompt shows it, and the features its relevance is judged by."""
    if language == "zh":
        text = f"指令：{instruction}\n采纳：{output}"
    else:
        text = f"Instruction: {instruction}\nAccepted: {output}"
    return text, features(instruction + " " + output)


@dataclass(frozen=True)
class NullRetrievalProvider:
    """The document-chunk retrieval slot, empty until an index is plugged in."""

    name: str = "retrieval"
    warning: str = "RETRIEVAL_UNAVAILABLE"
    sources: tuple[str, ...] = ("retrieval.passages",)

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        return []
