"""The built-in game-master profile (seed 001) on the engine: the seed's examples, byte for byte."""

from __future__ import annotations

from services.context.engine import Request, assemble
from services.context.models import Assembly, BudgetProfile, Item
from services.profiles.plans import BuiltInPlans
from tests.services.context.factory import counter
from tests.support.seed_game import FIRST_TURN

PROJECT = "p-gm"
PLAN = BuiltInPlans().resolved["game-master"].plan
Row = tuple[int, str, str | None, int | None]
SEGMENTS: dict[str, list[Row]] = {  # scope -> [(id, text, npc, tier)], as the seed's example shows them
    "core": [(1, "You are a helpful AI game master.", None, None)],
    "ruleset": [(2, "Use classic D&D rules for combat.", None, None)],
    "world": [(3, "The world of Mystika is magical.", None, None)],
    "entry": [(4, "You are at the Whispercross Inn.", None, None)],
    "entry_start": [(5, "Welcome to your adventure!", None, None)],
    "npc": [(6, "The innkeeper is friendly.", "npc.innkeeper", 0),
            (7, "He knows local secrets.", "npc.innkeeper", 1),
            (8, "He keeps a silver key behind the bar.", "npc.innkeeper", 2)],
}




def _items(max_tier: int, first_turn: bool) -> tuple[Item, ...]:
    found = []
    for scope, rows in SEGMENTS.items():
        if scope == "entry_start" and not first_turn:
            continue
        for id_, text, npc, tier in rows:
            if tier is not None and tier > max_tier:
                continue
            found.append(Item(id=f"segment:{id_}", layer=scope, section=scope, source=f"segment:{scope}",
                              text=text, tokens=counter().count(text), key=0.0, key_name="priority",
                              project_id=PROJECT, group=npc, tier=tier))
    return tuple(found)


def _run(variables: dict[str, str], max_tier: int) -> Assembly:
    first = variables.get("isFirstTurn") == "true"
    plan = PLAN.bind(variables)
    assert isinstance(plan.context_window, int)
    facts = frozenset({"always", *(k for k, v in variables.items() if v and v != "false")})
    return assemble(Request(project_id=PROJECT, language="en", plan=plan,
                            profile=BudgetProfile(context_window=plan.context_window, output_reserve=0),
                            system_prompt_tokens=0, items=_items(max_tier, first), window=None,
                            variables=variables, facts=facts), counter())


def test_first_turn_is_the_seed_example_byte_for_byte() -> None:
    """First turn: every scope in order, delimited as the seed shows, ENTRY_START included, the
    innkeeper at tier 1 (tiers 0 and 1), no RNG block since no rngText was given."""
    result = _run({"isFirstTurn": "true", "gameStateText": "You arrive at the Whispercross Inn.",
                   "playerText": "You are a level 3 fighter.", "inputText": "I want to explore the inn."}, 1)
    assert result.prompt == FIRST_TURN
    assert result.reductions == ()


def test_subsequent_turn_has_no_entry_start_and_the_higher_tier() -> None:
    """A later turn: no ENTRY_START block; the innkeeper at tier 2 shows all three tiers in order."""
    result = _run({"isFirstTurn": "false", "gameStateText": "You are in the inn common room.",
                   "playerText": "You are a level 3 fighter.", "inputText": "I talk to the innkeeper."}, 2)
    assert "ENTRY_START" not in result.prompt
    assert ("=== NPC_BEGIN ===\nNPC: npc.innkeeper\nThe innkeeper is friendly.\nHe knows local secrets.\n"
            "He keeps a silver key behind the bar.\n=== NPC_END ===") in result.prompt
