"""The ``npcs`` variable of a game-master request: which NPCs are on stage, each up to a tier.

Variables are strings, so the list travels as JSON text:
``[{"npcId": "npc.innkeeper", "tier": 1}, ...]``, in the order the NPCs should
appear. :func:`parse_npcs` reads it or says what is wrong (INVALID_PARAMS
naming the variable, with ``errors`` located inside the array and never the
value sent), so a channel can refuse a bad request before assembling; the
segments provider, given a bad value anyway, gathers no NPC segments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from services.errors import InvalidInput
from services.segments.records import CamelModel, RefId, Tier

NPCS_VARIABLE = "npcs"
MAX_NPCS = 200
MAX_NPCS_TEXT = 64 * 1024


class NpcRequest(CamelModel):
    """One NPC on stage: its segments' refId and the highest tier to reveal."""

    npc_id: RefId
    tier: Tier


_NPCS = TypeAdapter(Annotated[list[NpcRequest], Field(max_length=MAX_NPCS)])


def _refused(message: str, errors: list[dict[str, Any]] | None = None) -> InvalidInput:
    fields: dict[str, Any] = {"variable": NPCS_VARIABLE}
    if errors is not None:
        fields["errors"] = errors
    return InvalidInput(message, **fields)


def parse_npcs(text: str | None) -> tuple[NpcRequest, ...]:
    """The NPCs of an ``npcs`` value, in order, each npcId once (its first mention wins).

    Absent, empty or blank: none. Not JSON, not an array of ``{npcId, tier}`` (at most
    :data:`MAX_NPCS`; tier 0 or more): INVALID_PARAMS.
    """
    if text is None or not text.strip():
        return ()
    if len(text) > MAX_NPCS_TEXT:
        raise _refused(f"The npcs variable holds at most {MAX_NPCS_TEXT // 1024} KiB of JSON")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise _refused("The npcs variable must be JSON: an array of {npcId, tier}") from None
    try:
        npcs = _NPCS.validate_python(value)
    except ValidationError as exc:
        errors = [{"loc": list(err["loc"]), "type": err["type"], "msg": err["msg"]}
                  for err in exc.errors(include_url=False, include_input=False, include_context=False)]
        raise _refused("The npcs variable must be an array of {npcId, tier}", errors) from None
    first: dict[str, NpcRequest] = {}
    for npc in npcs:
        first.setdefault(npc.npc_id, npc)
    return tuple(first.values())


def npcs_of(variables: Mapping[str, str]) -> tuple[NpcRequest, ...]:
    """:func:`parse_npcs` of the request's ``npcs`` variable."""
    return parse_npcs(variables.get(NPCS_VARIABLE))
