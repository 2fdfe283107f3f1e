"""SegmentsProvider: a game-master request's stored segments, chosen by scope, refId, NPC tier
and locale, in the order the prompt shows them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from services.context.counting import CountCache
from services.context.models import Item, Window
from services.context.skills import get_skill
from services.projects import ProjectRecord
from services.segments import ActiveSegments, SegmentRecord, SegmentService
from services.segments.provider import SOURCES, SegmentsProvider
from services.sources.base import GatherContext
from services.store import Database
from services.tokenizer import resolve_tokenizer

COUNTER = CountCache(resolve_tokenizer())
T0 = datetime(2024, 5, 1, tzinfo=UTC)
SCOPES = ("core", "ruleset", "world", "entry", "entry_start", "npc")
PLACEMENT = {f"segments.{scope}": (scope, scope) for scope in SCOPES}
VARIABLES = {"rulesetId": "ruleset.classic_v1", "worldId": "world.mystika",
             "entryPointId": "ep.whispercross", "npcs": json.dumps([{"npcId": "npc.innkeeper", "tier": 1}])}


def seg(id_: int, scope: str, content: str, ref_id: str | None = None, *, tier: int = 0, priority: int = 0,
        active: bool = True, locale: str | None = None, project_id: str = "p1") -> SegmentRecord:
    return SegmentRecord(id=id_, project_id=project_id, scope=scope, ref_id=ref_id,
                         content=content, tier=tier, type=None, priority=priority, active=active,
                         locale=locale, version=1, created_at=T0, updated_at=T0)


SEED = [  # the seed's example, plus segments no request of these tests asks for
    seg(1, "core", "You are a helpful AI game master."),
    seg(2, "ruleset", "Use classic D&D rules for combat.", "ruleset.classic_v1"),
    seg(3, "ruleset", "Use narrative rules.", "ruleset.story_v2"),
    seg(4, "world", "The world of Mystika is magical.", "world.mystika"),
    seg(5, "entry", "You are at the Whispercross Inn.", "ep.whispercross"),
    seg(6, "entry_start", "Welcome to your adventure!", "ep.whispercross"),
    seg(7, "npc", "The innkeeper is friendly.", "npc.innkeeper", tier=0),
    seg(8, "npc", "He knows local secrets.", "npc.innkeeper", tier=1),
    seg(9, "npc", "He has magical items.", "npc.innkeeper", tier=2),
    seg(10, "game_state", "stored state is not a source", "game.1"),
]


class Fetch:
    """The provider's fetch over fixed records, counting its calls."""

    def __init__(self, records: Sequence[SegmentRecord]) -> None:
        self.active = ActiveSegments.of(records)
        self.calls = 0

    async def __call__(self, project_id: str) -> ActiveSegments:
        self.calls += 1
        return self.active


def ctx(variables: Mapping[str, str], placement: Mapping[str, tuple[str, str]] | None = None,
        project_id: str = "p1") -> GatherContext:
    return GatherContext(project_id=project_id, document_id="", language="en", skill=get_skill("continue"),
                         window=Window("", "", 0, 0, 0, 0), additional_input="", counter=COUNTER,
                         placement=PLACEMENT if placement is None else placement, variables=variables)


async def gather(records: Sequence[SegmentRecord], variables: Mapping[str, str], **kwargs: Any) -> list[Item]:
    return list(await SegmentsProvider(Fetch(records)).gather(ctx(variables, **kwargs)))


def ids(items: Sequence[Item]) -> list[str]:
    return [item.id for item in items]


def test_provider_names_its_sources_and_warning() -> None:
    """The provider is "segments", fails as SEGMENTS_UNAVAILABLE and fills the six stored scopes."""
    provider = SegmentsProvider(Fetch([]))
    assert (provider.name, provider.warning) == ("segments", "SEGMENTS_UNAVAILABLE")
    assert provider.sources == SOURCES == tuple(f"segments.{scope}" for scope in SCOPES)


async def test_the_seed_request_gives_each_scope_its_segments_in_order() -> None:
    """Core, the asked ruleset, world and entry point (entry and entry_start) and the NPC up to
    its tier, in scope order; each item placed where the profile puts its source, keyed by
    priority, counted by the request's counter; only NPC items carry a group and a tier."""
    items = await gather(SEED, VARIABLES)
    assert ids(items) == ["segment:1", "segment:2", "segment:4", "segment:5", "segment:6", "segment:7",
                          "segment:8"]
    assert items[0] == Item(id="segment:1", layer="core", section="core", source="segment:core",
                            text="You are a helpful AI game master.",
                            tokens=COUNTER.count("You are a helpful AI game master."), key=0.0,
                            key_name="priority", project_id="p1")
    assert [(i.layer, i.section, i.source) for i in items[4:6]] == [
        ("entry_start", "entry_start", "segment:entry_start"), ("npc", "npc", "segment:npc")]
    assert [(i.group, i.tier) for i in items] == [(None, None)] * 5 + [("npc.innkeeper", 0),
                                                                      ("npc.innkeeper", 1)]


async def test_only_placed_sources_are_gathered() -> None:
    """A source the profile does not place gives nothing; placed elsewhere, items go there; with
    none placed the segments are not even read."""
    placement = {"segments.world": ("setting", "world"), "segments.npc": ("cast", "npcs")}
    items = await gather(SEED, VARIABLES, placement=placement)
    assert [(i.id, i.layer, i.section) for i in items] == [
        ("segment:4", "setting", "world"), ("segment:7", "cast", "npcs"), ("segment:8", "cast", "npcs")]
    fetch = Fetch(SEED)
    assert await SegmentsProvider(fetch).gather(ctx(VARIABLES, placement={"constraints": ("a", "b")})) == []
    assert fetch.calls == 0


async def test_missing_or_blank_ref_variables_give_nothing() -> None:
    """Without rulesetId, worldId or entryPointId (or with a blank one) their scopes give nothing;
    core and NPCs still come."""
    assert ids(await gather(SEED, {"npcs": VARIABLES["npcs"]})) == ["segment:1", "segment:7", "segment:8"]
    assert ids(await gather(SEED, {"rulesetId": " ", "worldId": "", "entryPointId": "ep.nowhere"})) == [
        "segment:1"]


async def test_core_is_every_active_core_segment_by_tier_then_id() -> None:
    """Core takes every active core segment, with or without a refId, by tier then id."""
    records = [seg(3, "core", "c", tier=1), seg(1, "core", "a", "core.extra", tier=1), seg(2, "core", "b"),
               seg(4, "core", "off", active=False)]
    assert ids(await gather(records, {})) == ["segment:2", "segment:1", "segment:3"]


async def test_npc_tiers_up_to_the_one_asked_for() -> None:
    """An NPC gives its segments of tier up to the one asked for: tier 0 only the basics, a high
    tier everything, in tier order."""
    for tier, expected in ((0, ["segment:7"]), (1, ["segment:7", "segment:8"]),
                           (5, ["segment:7", "segment:8", "segment:9"])):
        npcs = json.dumps([{"npcId": "npc.innkeeper", "tier": tier}])
        assert ids(await gather(SEED, {"npcs": npcs}, placement={"segments.npc": ("npc", "npc")})) == expected


async def test_npcs_come_in_the_order_asked_each_keyed_by_its_highest_priority() -> None:
    """NPCs come in the order of ``npcs`` (not by id or name), each NPC's items by tier then id,
    all keyed by the NPC's highest priority among them; an NPC named twice comes once (its first
    mention); an NPC without segments gives nothing."""
    records = [seg(1, "npc", "甲一", "npc.a", tier=1, priority=1), seg(2, "npc", "甲零", "npc.a", priority=5),
               seg(3, "npc", "乙零", "npc.b", priority=2), seg(4, "npc", "乙二", "npc.b", tier=2, priority=9)]
    npcs = json.dumps([{"npcId": "npc.b", "tier": 1}, {"npcId": "npc.ghost", "tier": 3},
                       {"npcId": "npc.a", "tier": 1}, {"npcId": "npc.b", "tier": 2}])
    items = await gather(records, {"npcs": npcs})
    assert [(i.id, i.group, i.tier, i.key, i.text) for i in items] == [
        ("segment:3", "npc.b", 0, 2.0, "乙零"),
        ("segment:2", "npc.a", 0, 5.0, "甲零"), ("segment:1", "npc.a", 1, 5.0, "甲一")]


async def test_invalid_npcs_give_no_npc_items_only() -> None:
    """An npcs value that is not JSON, or not an array of {npcId, tier} (tier 0 or more), gives no
    NPC items; the other scopes still come."""
    for npcs in ("npc.innkeeper", "{}", '[{"npcId": "npc.innkeeper"}]',
                 '[{"npcId": "npc.innkeeper", "tier": -1}]', '[{"npcId": "npc.innkeeper", "tier": "1"}]',
                 "[1]"):
        assert ids(await gather(SEED, {**VARIABLES, "npcs": npcs})) == [
            "segment:1", "segment:2", "segment:4", "segment:5", "segment:6"], npcs


async def test_locale_segments_only_for_their_locale() -> None:
    """A segment with a locale is used only when the request's locale is the same tag (letter
    case aside); one without a locale always; no request locale: only those without."""
    records = [seg(1, "world", "Mystika.", "world.m", locale="en"), seg(2, "world", "米斯蒂卡。", "world.m",
                                                                        locale="zh-CN"),
               seg(3, "world", "⚔", "world.m"), seg(4, "npc", "店主。", "npc.a", locale="zh-cn")]
    base = {"worldId": "world.m", "npcs": '[{"npcId": "npc.a", "tier": 0}]'}
    assert ids(await gather(records, {**base, "locale": "zh-CN"})) == ["segment:2", "segment:3", "segment:4"]
    assert ids(await gather(records, {**base, "locale": "en"})) == ["segment:1", "segment:3"]
    assert ids(await gather(records, base)) == ["segment:3"]


async def test_inactive_segments_are_never_given() -> None:
    """Inactive segments of any scope are never items, whatever the request asks for."""
    records = [seg(i, scope, "off", None if scope == "core" else ref, active=False)
               for i, (scope, ref) in enumerate((("core", None), ("ruleset", "ruleset.classic_v1"),
                                                 ("world", "world.mystika"), ("entry", "ep.whispercross"),
                                                 ("entry_start", "ep.whispercross"),
                                                 ("npc", "npc.innkeeper")), start=1)]
    assert await gather(records, {**VARIABLES, "npcs": '[{"npcId": "npc.innkeeper", "tier": 9}]'}) == []


async def test_from_the_store_in_chinese(database: Database, project: ProjectRecord,
                                         other_project: ProjectRecord) -> None:
    """With the service's kept read as its fetch, a project's stored segments become its items
    (its own only, never another project's), with their stored priority as key."""
    service = SegmentService(database)
    await service.import_(other_project.id, [{"scope": "core", "content": "别的项目"}])
    stored = await service.import_(project.id, [
        {"scope": "core", "content": "你是一位游戏主持人。"},
        {"scope": "world", "refId": "world.mystika", "content": "米斯蒂卡充满魔法。",
         "metadata": {"priority": "high"}},
        {"scope": "npc", "refId": "npc.innkeeper", "content": "店主很友善。"},
        {"scope": "npc", "refId": "npc.innkeeper", "content": "他知道秘密。", "metadata": {"tier": 1}}])
    items = await SegmentsProvider(service.active).gather(ctx(VARIABLES, project_id=project.id))
    assert ids(items) == [f"segment:{s.id}" for s in stored]
    assert [i.text for i in items] == [s.content for s in stored]
    assert {i.project_id for i in items} == {project.id}
    assert items[1].key == 2.0
