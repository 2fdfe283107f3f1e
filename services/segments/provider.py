"""The segments provider: a game-master request's stored segments as prompt items.

It fills the sources ``segments.core``, ``segments.ruleset``, ``segments.world``,
``segments.entry``, ``segments.entry_start`` and ``segments.npc``, each only
when the profile places it, from the request's variables:

* core: every active core segment;
* ruleset, world: the active segments whose refId is ``rulesetId``, ``worldId``;
* entry, entry_start: those whose refId is ``entryPointId``;
* npc: for each NPC of ``npcs`` (JSON ``[{npcId, tier}]``), in the order given,
  its active segments of tier up to the one asked for. Items carry the NPC's
  id as ``group`` and their ``tier``, and all of one NPC share its key: the
  highest priority among them, so a budget drops the least important NPCs
  whole. An ``npcs`` value that is not such a list gives no NPC items (a
  channel can refuse it first with :func:`services.segments.npcs.parse_npcs`).

A variable that is absent or blank gives its scope nothing. A segment with a
locale is used only when the request's ``locale`` is the same tag (letter case
aside); one without is always used. Within a scope (and an NPC) items come by
tier, then id: the order a ``given`` rank renders them in. Other keys are the
segment's own priority (``keyName`` ``priority``).

The active segments come from :meth:`SegmentService.active` (kept per project
until the next write); building items, token counts included, runs in a worker
thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from services.concurrency.offload import off_loop
from services.context.models import Item
from services.errors import InvalidInput
from services.segments.active import ActiveSegments
from services.segments.npcs import npcs_of
from services.segments.records import SegmentRecord
from services.sources.base import GatherContext

_log = structlog.get_logger("segments")

SOURCE_PREFIX = "segments."
GATHERED = ("core", "ruleset", "world", "entry", "entry_start", "npc")  # scopes, in prompt order
SOURCES = tuple(SOURCE_PREFIX + scope for scope in GATHERED)
REF_VARIABLES = {"ruleset": "rulesetId", "world": "worldId", "entry": "entryPointId",
                 "entry_start": "entryPointId"}
LOCALE_VARIABLE = "locale"

FetchActive = Callable[[str], Awaitable[ActiveSegments]]
_Where = tuple[str, str]


@dataclass(frozen=True)
class SegmentsProvider:
    """Stored segments by scope for the game-master profile."""

    fetch: FetchActive
    name: str = "segments"
    warning: str = "SEGMENTS_UNAVAILABLE"
    sources: tuple[str, ...] = SOURCES

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        placed = {scope: where for scope in GATHERED
                  if (where := ctx.place(SOURCE_PREFIX + scope)) is not None}
        if not placed:
            return []
        active = await self.fetch(ctx.project_id)
        return await off_loop(active.chars, _items, active, ctx, placed)


def _items(active: ActiveSegments, ctx: GatherContext, placed: dict[str, _Where]) -> list[Item]:
    locale = (ctx.variables.get(LOCALE_VARIABLE) or "").strip().casefold() or None

    def usable(record: SegmentRecord) -> bool:
        return record.locale is None or record.locale.casefold() == locale

    items: list[Item] = []
    for scope, where in placed.items():
        if scope == "npc":
            items += _npc_items(active, ctx, where, usable)
            continue
        if scope == "core":
            records = active.scope(scope)
        else:
            ref_id = (ctx.variables.get(REF_VARIABLES[scope]) or "").strip()
            records = active.group(scope, ref_id) if ref_id else ()
        items += [_item(r, ctx, where, float(r.priority)) for r in records if usable(r)]
    return items


def _npc_items(active: ActiveSegments, ctx: GatherContext, where: _Where,
               usable: Callable[[SegmentRecord], bool]) -> list[Item]:
    try:
        npcs = npcs_of(ctx.variables)
    except InvalidInput:
        _log.warning("segments.npcs_invalid", project_id=ctx.project_id)
        return []
    items: list[Item] = []
    for npc in npcs:
        chosen = [r for r in active.group("npc", npc.npc_id) if r.tier <= npc.tier and usable(r)]
        if chosen:
            key = float(max(r.priority for r in chosen))
            items += [_item(r, ctx, where, key, group=npc.npc_id) for r in chosen]
    return items


def _item(record: SegmentRecord, ctx: GatherContext, where: _Where, key: float,
          group: str | None = None) -> Item:
    return Item(id=f"segment:{record.id}", layer=where[0], section=where[1],
                source=f"segment:{record.scope}", text=record.content,
                tokens=ctx.counter.count(record.content), key=key, key_name="priority",
                project_id=record.project_id, group=group,
                tier=record.tier if group is not None else None)
