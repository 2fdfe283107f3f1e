"""Providers turn a project's records into layer items with their ordering keys."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest

from services.caches import SourceCaches
from services.concurrency.offload import INLINE_CHARS
from services.context.counting import CountCache
from services.context.models import Item, Layer
from services.context.skills import get_skill
from services.sources.base import GatherContext, Provider
from services.sources.providers import (
    EpisodicMemoryProvider,
    KnowledgeGraphProvider,
    NullRetrievalProvider,
    SemanticMemoryProvider,
    UserConstraintsProvider,
)
from services.sources.relevance import features, similarity
from services.sources.window import cut_window
from services.tokenizer import TokenizerInfo, resolve_tokenizer

COUNTER = CountCache(resolve_tokenizer())
DOCUMENT = "我推开灯塔的门，海风灌进来。林远站在台阶上，没有说话。"
T0 = datetime(2024, 5, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Constraint:
    id: int
    text: str
    priority: int = 0
    source: str = "user"
    kind: str = "narrative"
    project_id: str = "p1"


@dataclass(frozen=True)
class Entity:
    id: int
    name: str
    description: str
    kind: str = "character"
    aliases: Sequence[str] = ()
    project_id: str = "p1"


@dataclass(frozen=True)
class Rule:
    id: int
    text: str
    confidence: float = 0.8
    confirmed: bool = True
    project_id: str = "p1"


@dataclass(frozen=True)
class Episode:
    id: int
    instruction: str
    output: str
    created_at: datetime = T0
    project_id: str = "p1"


R = TypeVar("R")


@dataclass
class Store:
    """A fetch callable over fixed records that remembers which projects were asked for."""

    records: Sequence[object]
    asked: list[str] = field(default_factory=list)

    def fetch(self, kind: type[R]) -> Callable[[str], Awaitable[Sequence[R]]]:
        async def fetch(project_id: str) -> Sequence[R]:
            self.asked.append(project_id)
            return [r for r in self.records if isinstance(r, kind)]
        return fetch


def _ctx(language: str = "zh", additional_input: str = "", cursor: int = len(DOCUMENT)) -> GatherContext:
    skill = get_skill("continue")
    return GatherContext(project_id="p1", document_id="ch1.md", language=language, skill=skill,
                         window=cut_window(DOCUMENT, cursor, skill, 500, COUNTER),
                         additional_input=additional_input, counter=COUNTER)


async def test_user_constraints_provider_keeps_only_the_writers_constraints() -> None:
    """User constraints become Rules items keyed by priority; kg-derived ones are left to the kg provider."""
    store = Store([Constraint(1, "严格第一人称叙述", priority=5),
                   Constraint(2, "林远不会游泳", priority=3, source="kg", kind="character")])
    items = await UserConstraintsProvider(store.fetch(Constraint)).gather(_ctx())
    assert items == [Item(id="constraint:1", layer=Layer.RULES, section="constraints",
                          source="constraint:narrative", text="严格第一人称叙述",
                          tokens=COUNTER.count("严格第一人称叙述"), key=5.0, key_name="priority",
                          project_id="p1", origin="user")]
    assert store.asked == ["p1"]


async def test_kg_provider_gives_kg_constraints_and_entity_sheets() -> None:
    """kg constraints keep origin kg; each entity becomes a sheet with kind, aliases and relevance."""
    store = Store([
        Constraint(1, "严格第一人称叙述", priority=5),
        Constraint(2, "林远不会游泳", priority=3, source="kg", kind="character"),
        Entity(7, "林远", "灯塔看守人，性格冷静。", aliases=("小远", "远哥")),
        Entity(8, "北港", "海边的小镇。", kind="location"),
    ])
    provider = KnowledgeGraphProvider(store.fetch(Constraint), store.fetch(Entity))
    items = await provider.gather(_ctx())
    assert [(i.id, i.origin, i.section) for i in items] == [
        ("constraint:2", "kg", "constraints"), ("entity:7", "kg", "entities"), ("entity:8", "kg", "entities")]
    sheet = items[1]
    assert sheet.text == "林远（角色；别名：小远、远哥）：灯塔看守人，性格冷静。"
    assert (sheet.source, sheet.names, sheet.key_name) == \
        ("kg:character", ("林远", "小远", "远哥"), "relevance")
    near = features(DOCUMENT)
    assert sheet.key == round(similarity(features("林远 灯塔看守人，性格冷静。"), near), 6)
    assert sheet.key > items[2].key
    assert items[2].text == "北港（地点）：海边的小镇。"
    assert sheet.tokens == COUNTER.count(sheet.text)
    assert store.asked == ["p1", "p1"]


async def test_kg_entity_sheet_in_english_and_unknown_kind() -> None:
    """English sheets use English kind names; an unknown kind is shown as given."""
    store = Store([Entity(1, "Lin", "The lighthouse keeper.", aliases=("Yuan",)),
                   Entity(2, "Orb", "A glowing stone.", kind="artifact")])
    items = await KnowledgeGraphProvider(store.fetch(Constraint), store.fetch(Entity)).gather(_ctx("en"))
    assert [i.text for i in items] == ["Lin (character; also Yuan): The lighthouse keeper.",
                                       "Orb (artifact): A glowing stone."]


async def test_semantic_memory_keeps_confirmed_rules_by_confidence() -> None:
    """Only confirmed rules become Settings preferences, keyed by confidence."""
    store = Store([Rule(1, "动作场景偏好短句", confidence=0.9), Rule(2, "多用比喻", confidence=0.99,
                                                                confirmed=False)])
    items = await SemanticMemoryProvider(store.fetch(Rule)).gather(_ctx())
    assert [(i.id, i.layer, i.section, i.key, i.key_name, i.source) for i in items] == [
        ("semantic:1", Layer.SETTINGS, "preferences", 0.9, "confidence", "semantic")]


async def test_episodes_score_by_relevance_and_recency() -> None:
    """Score = 0.7 x relevance + 0.3 x 0.85^age-rank, newest first; text labels the instruction."""
    store = Store([
        Episode(1, "写海风", "海风灌进来，灯塔在响。", created_at=T0),
        Episode(2, "写早餐", "面包和牛奶。", created_at=T0 + timedelta(days=1)),
    ])
    items = await EpisodicMemoryProvider(store.fetch(Episode)).gather(_ctx(additional_input="继续"))
    assert [i.id for i in items] == ["episode:2", "episode:1"]
    near = features(DOCUMENT + " 继续")
    relevance = similarity(features("写海风 海风灌进来，灯塔在响。"), near)
    assert items[1].key == round(0.7 * relevance + 0.3 * 0.85, 6)
    assert items[0].key == round(0.7 * similarity(features("写早餐 面包和牛奶。"), near) + 0.3, 6)
    assert items[1].key > items[0].key
    assert items[1].text == "指令：写海风\n采纳：海风灌进来，灯塔在响。"
    assert (items[1].layer, items[1].section, items[1].key_name) == (Layer.RETRIEVED, "history", "score")
    assert all(0.0 <= i.key <= 1.0 for i in items)


async def test_episode_text_in_english() -> None:
    """English episodes use English labels."""
    store = Store([Episode(1, "Continue", "The wind rose.")])
    items = await EpisodicMemoryProvider(store.fetch(Episode)).gather(_ctx("en"))
    assert items[0].text == "Instruction: Continue\nAccepted: The wind rose."


async def test_rendered_records_are_kept_in_the_injected_cache_of_their_project() -> None:
    """The kg and episodic providers keep each record's rendered text and features in the cache they
    were given, under the record's project: the next assembly reuses the same text object, and
    dropping the project forgets them."""
    caches = SourceCaches()
    store = Store([Entity(7, "林远", "灯塔看守人。"), Episode(1, "写海风", "海风灌进来。")])
    kg = KnowledgeGraphProvider(store.fetch(Constraint), store.fetch(Entity), sheets=caches.entity_sheets)
    episodic = EpisodicMemoryProvider(store.fetch(Episode), texts=caches.episode_texts)
    first = [*await kg.gather(_ctx()), *await episodic.gather(_ctx())]
    second = [*await kg.gather(_ctx()), *await episodic.gather(_ctx())]
    assert [a.text is b.text for a, b in zip(first, second, strict=True)] == [True, True]
    assert caches.entity_sheets.entries("p1") == 1
    assert caches.episode_texts.entries("p1") == 1
    caches.drop("p1")
    assert caches.entity_sheets.entries("p1") == 0
    assert caches.episode_texts.entries("p1") == 0
    assert [i.text for i in await kg.gather(_ctx())] == [first[0].text]


async def test_providers_built_without_a_cache_share_none() -> None:
    """A provider built without a cache gets a private one: two such providers keep nothing in common."""
    store = Store([Entity(7, "林远", "灯塔看守人。")])
    one = KnowledgeGraphProvider(store.fetch(Constraint), store.fetch(Entity))
    other = KnowledgeGraphProvider(store.fetch(Constraint), store.fetch(Entity))
    assert one.sheets is not other.sheets
    await one.gather(_ctx())
    assert one.sheets.entries("p1") == 1
    assert other.sheets.entries("p1") == 0
    assert EpisodicMemoryProvider(store.fetch(Episode)).texts is not \
        EpisodicMemoryProvider(store.fetch(Episode)).texts


async def test_cursor_features_given_in_the_context_are_what_relevance_is_judged_against() -> None:
    """GatherContext.cursor_features (made once per assembly) replaces features of the cursor text;
    without it a provider makes them from the window itself."""
    store = Store([Entity(7, "林远", "灯塔看守人。"), Entity(8, "北港", "海边的小镇。", kind="location")])
    provider = KnowledgeGraphProvider(store.fetch(Constraint), store.fetch(Entity))
    ctx = _ctx()
    assert ctx.cursor_features is None
    assert ctx.near_cursor == features(ctx.cursor_text)
    given = replace(ctx, cursor_features=features("北港 海边的小镇"))
    assert given.near_cursor == features("北港 海边的小镇")
    by_window = {i.id: i.key for i in await provider.gather(ctx)}
    by_given = {i.id: i.key for i in await provider.gather(given)}
    assert by_window["entity:7"] > by_window["entity:8"]
    assert by_given["entity:8"] > by_given["entity:7"]


async def test_records_keep_their_own_project_for_the_scope_check() -> None:
    """A record of another project keeps its project id, so the engine's scope check can refuse it."""
    store = Store([Rule(1, "别人的偏好", project_id="p2")])
    items = await SemanticMemoryProvider(store.fetch(Rule)).gather(_ctx())
    assert [i.project_id for i in items] == ["p2"]


async def test_failing_fetch_propagates_to_the_caller() -> None:
    """A provider does not swallow its source's failure: the service turns it into a warning."""
    async def broken(project_id: str) -> Sequence[Rule]:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        await SemanticMemoryProvider(broken).gather(_ctx())


async def test_provider_names_and_warning_codes() -> None:
    """Each provider names its fault and its warning code; the retrieval slot is empty."""
    store = Store([])
    providers: list[Provider] = [UserConstraintsProvider(store.fetch(Constraint)),
                 KnowledgeGraphProvider(store.fetch(Constraint), store.fetch(Entity)),
                 SemanticMemoryProvider(store.fetch(Rule)), EpisodicMemoryProvider(store.fetch(Episode)),
                 NullRetrievalProvider()]
    assert [(p.name, p.warning) for p in providers] == [
        ("constraints", "CONSTRAINTS_UNAVAILABLE"), ("kg", "KG_UNAVAILABLE"),
        ("memory", "MEMORY_UNAVAILABLE"), ("memory", "MEMORY_UNAVAILABLE"),
        ("retrieval", "RETRIEVAL_UNAVAILABLE")]
    assert [list(await p.gather(_ctx())) for p in providers] == [[], [], [], [], []]


@dataclass
class ThreadRecordingTokenizer:
    """Counts like the real tokenizer and remembers which threads counted."""

    threads: set[int] = field(default_factory=set)

    @property
    def info(self) -> TokenizerInfo:
        return COUNTER.info

    def count(self, text: str) -> int:
        self.threads.add(threading.get_ident())
        return COUNTER.tokenizer.count(text)

    def encode(self, text: str) -> list[int]:
        self.threads.add(threading.get_ident())
        return COUNTER.tokenizer.encode(text)

    def decode(self, tokens: list[int]) -> str:
        self.threads.add(threading.get_ident())
        return COUNTER.tokenizer.decode(tokens)


async def test_providers_count_and_rank_off_the_event_loop() -> None:
    """Every provider counts tokens and ranks relevance in a worker thread, never on the event loop,
    when its records hold more than INLINE_CHARS of text, so a huge past interaction or a large
    knowledge graph does not stall other connections' calls (a few short records are turned into
    items on the loop: less work than the hop to a thread)."""
    tokenizer = ThreadRecordingTokenizer()
    ctx = replace(_ctx(additional_input="续写灯塔的夜晚" * 50), counter=CountCache(tokenizer))
    large = "灯塔的夜晚很长。" * (INLINE_CHARS // 8 + 1)
    store = Store([Constraint(1, "严格第一人称叙述" + large),
                   Constraint(2, "林远不会游泳" + large, source="kg"),
                   Entity(7, "林远", "灯塔看守人。" + large), Rule(3, "动作场景用短句" + large),
                   Episode(4, "续写", "他把钥匙放进台阶下。" + large)])
    providers: list[Provider] = [
        UserConstraintsProvider(store.fetch(Constraint)),
        KnowledgeGraphProvider(store.fetch(Constraint), store.fetch(Entity)),
        SemanticMemoryProvider(store.fetch(Rule)),
        EpisodicMemoryProvider(store.fetch(Episode)),
    ]
    loop_thread = threading.get_ident()
    for provider in providers:
        tokenizer.threads.clear()
        assert await provider.gather(ctx)
        assert tokenizer.threads
        assert loop_thread not in tokenizer.threads, provider.name
