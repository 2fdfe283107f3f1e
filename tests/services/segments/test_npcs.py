"""parse_npcs: the ``npcs`` variable of a game-master request, read or refused."""

from __future__ import annotations

import json

import pytest

from services.errors import InvalidInput
from services.segments.npcs import MAX_NPCS, MAX_NPCS_TEXT, parse_npcs


def test_npcs_in_order_each_once() -> None:
    """The NPCs come in the order given; an npcId named again keeps its first mention."""
    npcs = parse_npcs(json.dumps([{"npcId": "npc.店主", "tier": 1}, {"npcId": "npc.guard", "tier": 0},
                                  {"npcId": "npc.店主", "tier": 3}]))
    assert [(n.npc_id, n.tier) for n in npcs] == [("npc.店主", 1), ("npc.guard", 0)]


@pytest.mark.parametrize("text", [None, "", "  ", "[]"])
def test_nothing_means_no_npcs(text: str | None) -> None:
    """An absent, blank or empty list is no NPCs."""
    assert parse_npcs(text) == ()


@pytest.mark.parametrize(("text", "loc"), [
    ('[{"npcId": "npc.a", "tier": -1}]', [0, "tier"]),
    ('[{"npcId": "npc.a", "tier": true}]', [0, "tier"]),
    ('[{"npcId": "npc.a"}]', [0, "tier"]),
    ('[{"npcId": "npc a", "tier": 0}]', [0, "npcId"]),
    ('[{"npcId": "npc.a", "tier": 0, "mood": "sly"}]', [0, "mood"]),
    ('[{"npcId": "npc.a", "tier": 0}, 7]', [1]),
    ('{"npcId": "npc.a", "tier": 0}', []),
])
def test_wrong_shapes_are_refused_naming_the_place(text: str, loc: list[object]) -> None:
    """Not an array of {npcId, tier} (tier a whole number from 0, npcId without spaces, nothing
    else): INVALID_PARAMS naming the variable, errors located in the array, no value echoed."""
    with pytest.raises(InvalidInput) as raised:
        parse_npcs(text)
    assert raised.value.fields["variable"] == "npcs"
    assert loc in [e["loc"] for e in raised.value.fields["errors"]]
    assert "sly" not in json.dumps(raised.value.to_error())


@pytest.mark.parametrize("text", ["npc.a", "[{", "[" * 60_000, " " * (MAX_NPCS_TEXT + 1) + "[]"])
def test_text_that_is_not_json_is_refused(text: str) -> None:
    """Text that is not JSON (or nests too deep, or is too long) is INVALID_PARAMS naming the
    variable."""
    with pytest.raises(InvalidInput) as raised:
        parse_npcs(text)
    assert raised.value.fields == {"variable": "npcs"}


def test_at_most_max_npcs() -> None:
    """A list longer than MAX_NPCS is refused."""
    many = json.dumps([{"npcId": f"npc.{i}", "tier": 0} for i in range(MAX_NPCS + 1)])
    with pytest.raises(InvalidInput):
        parse_npcs(many)
    most = json.dumps([{"npcId": f"npc.{i}", "tier": 0} for i in range(MAX_NPCS)])
    assert len(parse_npcs(most)) == MAX_NPCS
