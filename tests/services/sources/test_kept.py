"""Record providers keep the items they made and give them again to an assembly that would make the
very same ones: same records (by identity), placement, tokenizer and, for the records ranked by
relevance, the same key for each."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from services.caches import SourceCaches
from services.context.counting import CountCache
from services.context.models import Item
from services.sources.base import GatherContext, Provider
from services.sources.kept import gathered, keep_items, kept_items
from services.sources.providers import (
    EpisodicMemoryProvider,
    KnowledgeGraphProvider,
    SemanticMemoryProvider,
    UserConstraintsProvider,
)
from services.tokenizer import resolve_tokenizer
from tests.services.sources.test_providers import Constraint, Entity, Episode, Rule, _ctx

ITEM = Item(id="x:1", layer="rules", section="constraints", source="x", text="t", tokens=1, key=1.0,
            key_name="priority", project_id="p1")


def _fixed(records: list[Any]) -> Callable[[str], Awaitable[Sequence[Any]]]:
    """A fetch that answers every project with the very same record objects, as kept snapshots do."""
    async def fetch(project_id: str) -> Sequence[Any]:
        return list(records)
    return fetch


def test_kept_items_need_the_very_same_records() -> None:
    """An entry is found only for records that are the same objects: equal copies (a write read
    again) miss, and so does another project with the same key."""
    caches = SourceCaches()
    records = [Constraint(1, "严格第一人称叙述")]
    keep_items(caches.gathered, "p1", "k", records, [ITEM])
    assert kept_items(caches.gathered, "p1", "k", records) == [ITEM]
    assert kept_items(caches.gathered, "p1", "k", [Constraint(1, "严格第一人称叙述")]) is None
    assert kept_items(caches.gathered, "p1", "k", [*records, *records]) is None
    assert kept_items(caches.gathered, "p2", "k", records) is None
    caches.drop("p1")
    assert kept_items(caches.gathered, "p1", "k", records) is None


async def test_records_are_sized_only_when_items_are_made() -> None:
    """What the items are made from is measured (to decide whether they are made off the event
    loop) only when they are made: an assembly given kept items sizes nothing."""
    caches = SourceCaches()
    records = [Constraint(1, "严格第一人称叙述")]
    sized: list[int] = []

    def size() -> int:
        sized.append(1)
        return 8

    made = await gathered(caches.gathered, "p1", "k", records, lambda: [ITEM], size=size)
    again = await gathered(caches.gathered, "p1", "k", records, lambda: [], size=size)
    assert made == again == [ITEM]
    assert sized == [1]


async def test_each_record_provider_gives_kept_items_to_the_same_assembly() -> None:
    """Gathering twice for the same place with the same records gives the same item objects, and a
    write (new record objects) makes them anew, with the new text."""
    caches = SourceCaches()
    constraints = [Constraint(1, "严格第一人称叙述"), Constraint(2, "林远不会游泳", source="kg")]
    entities = [Entity(7, "林远", "灯塔看守人。")]
    rules = [Rule(1, "动作场景偏好短句")]
    episodes = [Episode(1, "写海风", "海风灌进来。")]
    providers: list[Provider] = [
        UserConstraintsProvider(_fixed(constraints), kept=caches.gathered),
        KnowledgeGraphProvider(_fixed(constraints), _fixed(entities), kept=caches.gathered),
        SemanticMemoryProvider(_fixed(rules), kept=caches.gathered),
        EpisodicMemoryProvider(_fixed(episodes), kept=caches.gathered),
    ]
    for provider in providers:
        first, second = await provider.gather(_ctx()), await provider.gather(_ctx())
        assert first
        assert all(a is b for a, b in zip(first, second, strict=True))
    # One entry of items per provider, and what the two relevance-ranked ones keep of their records.
    assert caches.gathered.entries("p1") == 4 + 2
    constraints[0] = replace(constraints[0], text="严格第三人称叙述")
    written = await providers[0].gather(_ctx())
    assert [i.text for i in written] == ["严格第三人称叙述"]


async def test_relevance_ranked_items_follow_the_cursor_features() -> None:
    """Entity sheets and past interactions are ranked by the text around the cursor: other features
    (or another instruction, for past interactions) are another entry, with their own keys, while
    the writer's constraints are the same whatever the cursor."""
    caches = SourceCaches()
    entities = [Entity(7, "林远", "灯塔看守人。")]
    episodes = [Episode(1, "写海风", "海风灌进来。")]
    kg = KnowledgeGraphProvider(_fixed([]), _fixed(entities), kept=caches.gathered)
    episodic = EpisodicMemoryProvider(_fixed(episodes), kept=caches.gathered)
    near, far = _ctx(), _ctx(cursor=0)
    elsewhere = replace(far, cursor_features=frozenset({"天空"}))
    assert (await kg.gather(near))[0].key > (await kg.gather(elsewhere))[0].key == 0.0
    assert (await episodic.gather(near))[0].key > (await episodic.gather(elsewhere))[0].key
    instructed = await episodic.gather(replace(elsewhere, additional_input="写海风"))
    assert instructed[0].key > (await episodic.gather(elsewhere))[0].key


async def test_cursor_features_that_give_the_same_keys_give_the_very_same_items() -> None:
    """Neighbouring cursors whose features differ only in ones no record holds (the window's far
    edges) rank every record alike: they get the very same item objects, which the engine's memo
    knows again; a feature a record holds changes its key and gives new items."""
    caches = SourceCaches()
    entities = [Entity(7, "林远", "灯塔看守人。"), Entity(8, "北港", "海边的小镇。", kind="location")]
    episodes = [Episode(1, "写海风", "海风灌进来。"), Episode(2, "写灯塔", "灯塔在雾里。")]
    kg = KnowledgeGraphProvider(_fixed([Constraint(2, "林远不会游泳", source="kg")]), _fixed(entities),
                                kept=caches.gathered)
    episodic = EpisodicMemoryProvider(_fixed(episodes), kept=caches.gathered)
    ctx = _ctx()
    one, other = (replace(ctx, cursor_features=frozenset({"林远", "灯塔", edge}))
                  for edge in ("天空", "石阶"))
    closer = replace(ctx, cursor_features=frozenset({"林远", "灯塔", "看守", "海风"}))
    for provider in (kg, episodic):
        first, second, third = [await provider.gather(c) for c in (one, other, closer)]
        assert [i.key for i in first] == [i.key for i in second]
        assert all(a is b for a, b in zip(first, second, strict=True))
        assert [i.id for i in third] == [i.id for i in first]
        assert [i.key for i in third] != [i.key for i in first]
        assert not any(a is b for a, b in zip(first, third, strict=True) if a.key != b.key)


async def test_new_cursor_features_rescore_the_records_without_making_them_again() -> None:
    """An assembly with cursor features not seen before gets new items (new keys) for the same
    records, but the records' texts, counts and features are made once per records version: the
    entity sheet is rendered once however many feature sets come, and again after a write."""
    caches = SourceCaches()
    entities = [Entity(7, "林远", "灯塔看守人。")]
    kg = KnowledgeGraphProvider(_fixed([]), _fixed(entities), kept=caches.gathered,
                                sheets=caches.entity_sheets)
    ctx = _ctx()
    keys = [(await kg.gather(replace(ctx, cursor_features=frozenset(near))))[0].key
            for near in ({"林远"}, {"灯塔", "天空"}, {"看守", "灯塔", "林远"}, set())]
    assert keys == [0.2, 0.2, 0.6, 0.0]  # of the sheet's 5 features: 林远 灯塔 塔看 看守 守人
    assert caches.entity_sheets.entries("p1") == 1
    entities[0] = replace(entities[0], description="灯塔看守人，沉默。")
    [written] = await kg.gather(replace(ctx, cursor_features=frozenset({"林远"})))
    assert written.text.endswith("灯塔看守人，沉默。")
    assert caches.entity_sheets.entries("p1") == 2


async def test_another_tokenizer_is_another_entry() -> None:
    """Items carry token counts, so a request counted by another tokenizer does not reuse them."""
    caches = SourceCaches()
    provider = UserConstraintsProvider(_fixed([Constraint(1, "严格第一人称叙述")]), kept=caches.gathered)
    ctx: GatherContext = _ctx()
    other = replace(ctx, counter=CountCache(resolve_tokenizer()))
    first, second = await provider.gather(ctx), await provider.gather(other)
    assert first == second
    assert first[0] is not second[0]
    assert caches.gathered.entries("p1") == 2
