"""The game-master profile's policy (seed 001 and its issue), through GameMaster on the engine.

Blocks in scope order, entry_start on the first turn only, NPC tiers, the
budget ladder rung by rung (input trimmed to 800 characters on a sentence
end and further, game_state compressed to a 400-character cue, one tier of
every NPC, the NPC block, the rest of the input, game_state, then rng and
entry_start, world and entry only in extreme cases, the player's text
last), the NPC sub-budget (tiers, then the lowest-priority NPCs but never
the last one, then behaviour cues, then the block if even the cue is over),
core and ruleset never dropped, and ``meta`` reporting each of these.
Budgets are worked out from the exact counts of the blocks, so each case
stops at the rung it is about.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipc.channels.context import _inspect_result
from services.assembly.service import Outcome
from services.errors import InputTooLarge, SegmentsCoreOverbudget
from services.segments.assembler import AssembleArgs, GameMaster
from services.segments.records import SCOPES, SegmentRecord
from tests.support.game_master import EngineAssembler, Run, args, run, segment, tokens

INNKEEPER, GUARD, BEGGAR, SPY = "npc.innkeeper", "npc.guard", "npc.beggar", "npc.spy"
CORE = segment(1, "core", "You are a helpful AI game master.")
RULESET = segment(2, "ruleset", "Use classic D&D rules for combat.")
WORLD = segment(3, "world", "The world of Mystika is magical.")
ENTRY = segment(4, "entry", "You are at the Whispercross Inn.")
ENTRY_START = segment(5, "entry_start", "Welcome to your adventure!")
NPCS = [segment(6, "npc", "The innkeeper is friendly.", INNKEEPER, tier=0, priority=2),
        segment(7, "npc", "He knows local secrets.", INNKEEPER, tier=1),
        segment(8, "npc", "Has magical items.", INNKEEPER, tier=2),
        segment(9, "npc", "The guard is stern.", GUARD, tier=0, priority=1),
        segment(10, "npc", "She was bribed last night.", GUARD, tier=1),
        segment(11, "npc", "A beggar sits by the fire.", BEGGAR, tier=0)]
SEGMENTS = [CORE, RULESET, WORLD, ENTRY, ENTRY_START, *NPCS]
ON_STAGE = ((INNKEEPER, 2), (GUARD, 1))

SENTENCE = "I search the common room for the silver key. "  # 45 characters
SENTENCE_ZH = "我在大厅里寻找那把银钥匙。"  # 13 characters
SENTENCES_ZH = "钥匙在哪里？快找！"  # two sentences, 6 and 3 characters
STATE = "The inn is busy. "  # 17 characters
PLAYER, RNG = "You are a level 3 fighter.", "Roll a d20."
LONG_INPUT = SENTENCE * 40  # 1800 characters
LONG_STATE = STATE * 30  # 510 characters
# What the ladder's first rungs leave, worked out by hand: 17 whole sentences fit in 800
# characters (781 without the trailing space); 61 Chinese sentences (793); the state's cue is
# the 23 whole sentences within 399 characters, then an ellipsis (391 characters); 88 pairs of
# ？ and ！ sentences and one more question (798).
TRIMMED_EN = (SENTENCE * 17).rstrip()
TRIMMED_ZH = SENTENCE_ZH * 61
TRIMMED_ZH_MIXED = SENTENCES_ZH * 88 + "钥匙在哪里？"
STATE_CUE = (STATE * 23).rstrip() + "…"
INPUT_MINIMUM = 50  # the profile's input floor before the later rungs


def block(scope: str, body: str) -> str:
    """A scope's block as the seed delimits it."""
    name = scope.upper()
    return f"=== {name}_BEGIN ===\n{body}\n=== {name}_END ==="


def npc_block(*npcs: tuple[str, Sequence[str]]) -> str:
    return block("npc", "\n".join(f"NPC: {npc}\n" + "\n".join(lines) for npc, lines in npcs))


def prompt_tokens(*blocks: str) -> int:
    """The exact count of these blocks joined as the prompt joins them."""
    return tokens("\n\n".join(blocks))


def ladder_args(budget: int | None, **changes: Any) -> AssembleArgs:
    values: dict[str, Any] = {"first_turn": True, "npcs": ON_STAGE, "input_text": LONG_INPUT,
                              "game_state": LONG_STATE, "player": PLAYER, "rng": RNG,
                              "token_budget": budget, **changes}
    return args(**values)


def go(segments: Sequence[SegmentRecord], assemble_args: AssembleArgs) -> Run:
    """segments:assemble on the engine, from a plain test."""
    return asyncio.run(run(segments, assemble_args))


def truncated(result: Run) -> dict[str, Any]:
    found: dict[str, Any] = result.meta.get("truncated", {})
    return found


def steps(result: Run) -> list[tuple[str, str]]:
    return [(r.section, r.step) for r in result.assembly.reductions]


def body(result: Run, scope: str) -> str:
    """The text inside a scope's block ("" when the prompt has none)."""
    text = result.assembly.layers[scope].text
    if not text:
        return ""
    name = scope.upper()
    return text.removeprefix(f"=== {name}_BEGIN ===\n").removesuffix(f"\n=== {name}_END ===")


def assert_exact_within(result: Run, budget: int) -> None:
    assert result.meta["tokensEstimated"] == tokens(result.prompt) <= budget


# --- order, entry_start, NPC tiers ---------------------------------------------------------------

SCOPE_SEGMENTS: dict[str, SegmentRecord] = {
    "core": CORE, "ruleset": RULESET, "world": WORLD, "entry": ENTRY, "entry_start": ENTRY_START,
    "npc": segment(6, "npc", "The innkeeper is friendly.", INNKEEPER)}
SCOPE_TEXTS = {"game_state": "You arrive at the Whispercross Inn.", "player": PLAYER, "rng": RNG,
               "input": "I want to explore the inn."}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sets(st.sampled_from(SCOPES)))
def test_blocks_follow_the_scope_order_for_any_subset_of_scopes(present: set[str]) -> None:
    """Whatever scopes have content, the prompt is exactly their blocks in the seed's order (core,
    ruleset, world, entry, entry_start, npc, game_state, player, rng, input) joined by blank lines;
    meta.order lists those scopes in that order and emptyScopes the others."""
    segments = [record for scope, record in SCOPE_SEGMENTS.items() if scope in present]
    texts = {scope: text for scope, text in SCOPE_TEXTS.items() if scope in present}
    result = go(segments, args(first_turn=True, npcs=((INNKEEPER, 0),), game_state=texts.get("game_state"),
                               player=texts.get("player"), rng=texts.get("rng"),
                               input_text=texts.get("input")))
    shown = [scope for scope in SCOPES if scope in present]
    bodies = {**{scope: record.content for scope, record in SCOPE_SEGMENTS.items()}, **SCOPE_TEXTS,
              "npc": f"NPC: {INNKEEPER}\nThe innkeeper is friendly."}
    assert result.prompt == "\n\n".join(block(scope, bodies[scope]) for scope in shown)
    assert result.meta["order"] == shown
    assert result.meta.get("emptyScopes", []) == [scope for scope in SCOPES if scope not in present]
    assert "truncated" not in result.meta
    assert_exact_within(result, 8000)


@pytest.mark.parametrize("first_turn", [True, False])
def test_entry_start_only_on_the_first_turn(first_turn: bool) -> None:
    """entry_start is shown (after entry, before npc) exactly when isFirstTurn is true; on a later
    turn its segments are not used, not listed in meta and not reported as an empty scope."""
    result = go(SEGMENTS, args(first_turn=first_turn, npcs=((INNKEEPER, 0),), input_text="I wait."))
    start = block("entry_start", "Welcome to your adventure!")
    assert (start in result.prompt) is first_turn
    assert ("entry_start" in result.meta["order"]) is first_turn
    assert result.meta["segmentIdsByScope"]["entry_start"] == ([5] if first_turn else [])
    assert "entry_start" not in result.meta.get("emptyScopes", [])
    if first_turn:
        assert result.prompt.index(block("entry", ENTRY.content)) < result.prompt.index(start) \
            < result.prompt.index("=== NPC_BEGIN ===")


def test_npc_tiers_up_to_the_requested_one_in_tier_order_and_npcs_in_the_requested_order() -> None:
    """An NPC shows its segments of tier <= the requested tier, by tier then id (not by id alone);
    several NPCs come in the order requested; an NPC requested twice counts once (its first
    mention); one with no segments shows nothing; meta lists the shown ids in that order."""
    segments = [CORE, RULESET,
                segment(20, "npc", "Knows the back door.", INNKEEPER, tier=1),
                segment(21, "npc", "The innkeeper is friendly.", INNKEEPER, tier=0),
                segment(22, "npc", "Hides a silver key.", INNKEEPER, tier=2),
                segment(23, "npc", "Was once a thief.", INNKEEPER, tier=3),
                segment(19, "npc", "Waters the ale.", INNKEEPER, tier=1),
                segment(30, "npc", "The guard is stern.", GUARD, tier=0),
                segment(31, "npc", "Takes bribes.", GUARD, tier=1)]
    result = go(segments, args(npcs=((GUARD, 0), (INNKEEPER, 2), ("npc.nobody", 5), (GUARD, 1))))
    assert body(result, "npc") == (f"NPC: {GUARD}\nThe guard is stern.\n"
                                   f"NPC: {INNKEEPER}\nThe innkeeper is friendly.\nWaters the ale.\n"
                                   "Knows the back door.\nHides a silver key.")
    assert result.meta["segmentIdsByScope"]["npc"] == [30, 21, 19, 20, 22]
    assert "npc.nobody" not in result.prompt


# --- the budget ladder, one rung at a time --------------------------------------------------------

def _full() -> Run:
    return go(SEGMENTS, ladder_args(None))


def test_a_prompt_within_the_budget_is_not_truncated() -> None:
    """At exactly its own size (and the default 8000) nothing is cut and meta has no truncated."""
    full = _full()
    assert "truncated" not in full.meta
    exact = go(SEGMENTS, ladder_args(full.meta["tokensEstimated"]))
    assert exact.prompt == full.prompt
    assert "truncated" not in exact.meta
    assert exact.assembly.reductions == ()


@pytest.mark.parametrize(("sentence", "trimmed"), [(SENTENCE, TRIMMED_EN), (SENTENCE_ZH, TRIMMED_ZH),
                                                   (SENTENCES_ZH, TRIMMED_ZH_MIXED)],
                         ids=["english", "chinese", "chinese-question-exclamation"])
def test_rung_1_input_trimmed_to_800_characters_on_a_sentence_end(sentence: str, trimmed: str) -> None:
    """One token over: only the input is trimmed, to the longest run of whole sentences within
    800 characters (. 。 ？ ！ each end one), and meta.truncated says exactly that, from and to
    characters."""
    long_input = sentence * 120
    full = go(SEGMENTS, ladder_args(None, input_text=long_input))
    budget = int(full.meta["tokensEstimated"]) - 1
    result = go(SEGMENTS, ladder_args(budget, input_text=long_input))
    assert body(result, "input") == trimmed
    next_end = min(long_input.find(end, len(trimmed)) % 10**6 for end in ".。？！") + 1
    assert len(trimmed) <= 800 < next_end  # whole sentences, and the next one would not fit
    assert steps(result) == [("input", "trim_chars")]
    assert truncated(result) == {"inputTrimmed": {"fromChars": len(long_input), "toChars": len(trimmed)}}
    assert result.prompt == full.prompt.replace(long_input, trimmed)
    assert_exact_within(result, budget)


@pytest.mark.parametrize("sentence", [SENTENCE, SENTENCE_ZH, SENTENCES_ZH],
                         ids=["english", "chinese", "chinese-question-exclamation"])
def test_rung_1_input_cut_further_on_a_sentence_end(sentence: str) -> None:
    """When 800 characters are still too many, the input is cut further, still to whole sentences,
    and nothing else is touched: meta.truncated holds only inputTrimmed with the kept length."""
    long_input = sentence * 120
    full = go(SEGMENTS, ladder_args(None, input_text=long_input))
    at_800 = go(SEGMENTS, ladder_args(int(full.meta["tokensEstimated"]) - 1,
                                      input_text=long_input))
    budget = int(at_800.meta["tokensEstimated"]) - 40
    result = go(SEGMENTS, ladder_args(budget, input_text=long_input))
    kept = body(result, "input")
    assert steps(result) == [("input", "trim_chars"), ("input", "to_minimum")]
    assert kept
    assert long_input.startswith(kept)
    assert len(kept) < len(body(at_800, "input"))
    assert kept[-1] in ".。？！"  # each stands only at the end of a sentence here
    assert truncated(result) == {"inputTrimmed": {"fromChars": len(long_input), "toChars": len(kept)}}
    assert result.assembly.layers["input"].tokens >= INPUT_MINIMUM - 5
    assert_exact_within(result, budget)


@pytest.mark.parametrize("long_input", [
    "我推开酒馆的门，看见吟游诗人在唱歌！我走到吧台前，问老板有没有见过一把银钥匙，同时把三枚金币放在桌上。"
    "老板摇摇头，说昨晚有个陌生人来过？",
    "I search the common room. Then I ask the innkeeper, quietly and at length, whether anyone saw a "
    "stranger with a silver key last night, and I put three gold coins on the counter. He nods.",
], ids=["chinese", "english"])
def test_the_input_is_only_ever_cut_on_a_sentence_end(long_input: str) -> None:
    """Whatever the budget, the input the prompt shows is all of it, nothing, or its head up to a
    sentence end (never a half sentence, as the seed's policy says), and meta says how long."""
    full = go(SEGMENTS, ladder_args(None, input_text=long_input))
    top = int(full.meta["tokensEstimated"])
    for budget in range(top - 120, top + 1):
        try:
            result = go(SEGMENTS, ladder_args(budget, input_text=long_input))
        except (InputTooLarge, SegmentsCoreOverbudget):
            continue
        kept = body(result, "input")
        assert long_input.startswith(kept)
        assert kept in ("", long_input) or kept[-1] in ".。？！?!", (budget, kept)
        if kept != long_input:
            assert truncated(result)["inputTrimmed"] == {"fromChars": len(long_input), "toChars": len(kept)}
        assert_exact_within(result, budget)


def test_an_input_whose_first_sentence_is_over_its_minimum_waits_for_the_later_rungs() -> None:
    """Cut to its minimum, an input of one long sentence would be half a sentence: it stays whole
    while the rungs after it (here the game state's cue) can make room, and meta does not list it."""
    one_sentence = "I search the common room for the silver key " + "and then the cellar " * 20 + "."
    full = go(SEGMENTS, ladder_args(None, input_text=one_sentence))
    result = go(SEGMENTS, ladder_args(int(full.meta["tokensEstimated"]) - 3, input_text=one_sentence))
    assert body(result, "input") == one_sentence
    assert "inputTrimmed" not in truncated(result)
    assert steps(result) == [("game_state", "summary_cue")]


def _budget_for_compressed_state() -> int:
    """Room for everything with the input at its minimum and game_state as its cue, no more."""
    full = _full()
    layers = full.assembly.layers
    others = sum(layer.tokens for scope, layer in layers.items() if scope not in ("input", "game_state"))
    filled = sum(1 for layer in layers.values() if layer.tokens)
    return others + INPUT_MINIMUM + tokens(block("game_state", STATE_CUE)) + filled - 1


def test_rung_2_game_state_compressed_to_a_cue_of_at_most_400_characters() -> None:
    """After the input rungs, game_state is replaced by its 400-character cue (whole sentences and an
    ellipsis); NPCs, world and entry are untouched; meta adds gameStateCompressed."""
    budget = _budget_for_compressed_state()
    result = go(SEGMENTS, ladder_args(budget))
    assert steps(result) == [("input", "trim_chars"), ("input", "to_minimum"), ("game_state", "summary_cue")]
    cue = body(result, "game_state")
    assert cue == STATE_CUE
    assert len(cue) <= 400
    found = truncated(result)
    assert set(found) == {"inputTrimmed", "gameStateCompressed"}
    assert found["gameStateCompressed"] is True
    assert body(result, "npc") == body(_full(), "npc")
    assert_exact_within(result, budget)


def test_rung_3_one_tier_dropped_from_every_npc_at_once() -> None:
    """One token short after the cue: the highest tier of every NPC goes in one round (innkeeper
    2 to 1, guard 1 to 0) and no more; meta.truncated.npcDroppedTiers names each NPC with fromTier and
    toTier; the NPC block stays."""
    at_cue = go(SEGMENTS, ladder_args(_budget_for_compressed_state()))
    budget = int(at_cue.meta["tokensEstimated"]) - 1
    result = go(SEGMENTS, ladder_args(budget))
    assert steps(result)[-1] == ("npc", "lower_tier")
    assert body(result, "npc") == (f"NPC: {INNKEEPER}\nThe innkeeper is friendly.\nHe knows local secrets.\n"
                                   f"NPC: {GUARD}\nThe guard is stern.")
    found = truncated(result)
    assert found["npcDroppedTiers"] == [{"npcId": INNKEEPER, "fromTier": 2, "toTier": 1},
                                        {"npcId": GUARD, "fromTier": 1, "toTier": 0}]
    assert set(found) == {"inputTrimmed", "gameStateCompressed", "npcDroppedTiers"}
    assert result.meta["segmentIdsByScope"]["npc"] == [6, 7, 9]
    assert_exact_within(result, budget)


def test_rung_4_the_npc_block_dropped_once_tiers_are_not_enough() -> None:
    """When even tier 0 of every NPC does not fit, tiers go first and then the whole NPC block:
    droppedScopes is ["npc"]; world and entry stay."""
    at_cue = go(SEGMENTS, ladder_args(_budget_for_compressed_state()))
    full_npc = at_cue.assembly.layers["npc"].tokens
    tier_0 = tokens(npc_block((INNKEEPER, ["The innkeeper is friendly."]), (GUARD, ["The guard is stern."])))
    budget = int(at_cue.meta["tokensEstimated"]) - (full_npc - tier_0) - 1
    result = go(SEGMENTS, ladder_args(budget))
    assert steps(result)[-2:] == [("npc", "lower_tier"), ("npc", "drop_section")]
    assert "=== NPC_BEGIN ===" not in result.prompt
    found = truncated(result)
    assert found["droppedScopes"] == ["npc"]
    assert {t["npcId"] for t in found["npcDroppedTiers"]} == {INNKEEPER, GUARD}
    assert set(found) == {"inputTrimmed", "gameStateCompressed", "npcDroppedTiers", "droppedScopes"}
    assert body(result, "world") == WORLD.content
    assert body(result, "entry") == ENTRY.content
    assert result.meta["segmentIdsByScope"]["npc"] == []
    assert_exact_within(result, budget)


EXTREME = ["rng", "entry_start", "world", "entry"]  # the extreme rungs, in the profile's order
EARLIER_RUNGS = {("input", "trim_chars"), ("input", "to_minimum"), ("game_state", "summary_cue"),
                 ("npc", "lower_tier"), ("npc", "drop_section"), ("input", "cut_far_end"),
                 ("game_state", "drop_section")}


def _fixed_blocks() -> tuple[str, str, str, str, str, str]:
    """core, ruleset, world, entry, entry_start and player: what is left once the ladder reaches its
    extreme rungs (the input is cut to nothing, the NPC block and game_state are gone)."""
    return (block("core", CORE.content), block("ruleset", RULESET.content), block("world", WORLD.content),
            block("entry", ENTRY.content), block("entry_start", ENTRY_START.content), block("player", PLAYER))


def test_rung_5_rng_and_entry_start_go_before_world_and_world_before_entry() -> None:
    """The extreme rungs run only after the input, game_state and NPC rungs, one scope at a time in
    the profile's order: rng, then entry_start, then world, then entry. At a budget of exactly the
    prompt without the first n of them, exactly those n go and no more: world goes only once rng and
    entry_start have gone, entry only after world; droppedScopes lists them in the order they went
    (after npc and game_state); core, ruleset and the player's text stay whole; the input the budget
    cut to nothing is not an empty scope."""
    core, ruleset, world, entry, start, player = _fixed_blocks()
    kept_after = [[core, ruleset, world, entry, start, player], [core, ruleset, world, entry, player],
                  [core, ruleset, entry, player], [core, ruleset, player]]
    for gone, kept in enumerate(kept_after, start=1):
        budget = prompt_tokens(*kept)
        result = go(SEGMENTS, ladder_args(budget))
        order = steps(result)
        first = order.index(("rng", "drop_section"))
        assert set(order[:first]) >= EARLIER_RUNGS
        assert order[first:] == [(scope, "drop_section") for scope in EXTREME[:gone]]
        assert truncated(result)["droppedScopes"] == ["npc", "game_state", *EXTREME[:gone]]
        assert "playerTrimmed" not in truncated(result)
        assert "input" not in result.meta.get("emptyScopes", [])
        assert result.prompt == "\n\n".join(kept)
        assert (result.meta["segmentIdsByScope"]["world"] == []) is ("world" in EXTREME[:gone])
        assert_exact_within(result, budget)


def test_rung_5_world_goes_next_when_rng_and_entry_start_are_absent() -> None:
    """On a later turn without rng there is no rng or entry_start block to drop, so world is the
    first extreme rung that goes, and entry still stays."""
    core, ruleset, _, entry, _, player = _fixed_blocks()
    budget = prompt_tokens(core, ruleset, entry, player)
    result = go(SEGMENTS, ladder_args(budget, first_turn=False, rng=None))
    assert steps(result)[-1] == ("world", "drop_section")
    assert truncated(result)["droppedScopes"] == ["npc", "game_state", "world"]
    assert result.prompt == "\n\n".join([core, ruleset, entry, player])
    assert_exact_within(result, budget)


def test_rung_6_the_player_text_is_cut_last() -> None:
    """Only once rng, entry_start, world and entry have all gone is the player's text cut, from its
    end: it is the ladder's last step and meta.truncated.playerTrimmed gives its length before and
    after."""
    core, ruleset, _, _, _, player = _fixed_blocks()
    budget = prompt_tokens(core, ruleset, player) - 1
    result = go(SEGMENTS, ladder_args(budget))
    order = steps(result)
    assert order[-5:] == [*((scope, "drop_section") for scope in EXTREME), ("player", "cut_far_end")]
    kept = body(result, "player")
    assert PLAYER.startswith(kept)
    assert len(kept) < len(PLAYER)
    assert truncated(result)["playerTrimmed"] == {"fromChars": len(PLAYER), "toChars": len(kept)}
    assert truncated(result)["droppedScopes"] == ["npc", "game_state", *EXTREME]
    assert result.prompt.startswith(core + "\n\n" + ruleset)
    assert_exact_within(result, budget)


def test_each_step_shows_in_context_inspect() -> None:
    """Every step the ladder took is in context:inspect's reductions and its section's steps, and
    every segment it removed is a candidate with its reason: lower_tier for NPC tiers,
    section_dropped for the NPC block, extreme_budget for entry_start and then world (rng, before
    them, is a text and has no segment); entry, core and ruleset are included."""
    core, ruleset, _, entry, _, player = _fixed_blocks()
    result = go(SEGMENTS, ladder_args(prompt_tokens(core, ruleset, entry, player)))
    assert steps(result)[-3:] == [("rng", "drop_section"), ("entry_start", "drop_section"),
                                  ("world", "drop_section")]
    outcome = Outcome(assembly=result.assembly, system_prompt="", stable_prefix_unchanged=False,
                      divergence=None, tokenizer="cl100k_base", exact=True)
    inspect = _inspect_result(outcome)
    assert [(r.section, r.step) for r in inspect.reductions] == steps(result)
    by_section = {s.id: [(s.id, step.step) for step in s.steps] for s in inspect.sections}
    assert [pair for scope in SCOPES for pair in by_section.get(scope, [])] == sorted(
        steps(result), key=lambda pair: SCOPES.index(pair[0]))
    reasons = {c.id: (c.fate, c.reason) for c in inspect.candidates}
    assert reasons["segment:8"] == reasons["segment:7"] == reasons["segment:10"] == ("dropped", "lower_tier")
    assert reasons["segment:6"] == reasons["segment:9"] == ("dropped", "section_dropped")
    assert reasons["segment:5"] == reasons["segment:3"] == ("dropped", "extreme_budget")
    assert reasons["segment:1"] == reasons["segment:2"] == reasons["segment:4"] == ("included", None)


def test_game_state_is_dropped_only_once_the_input_is_gone() -> None:
    """The input is cut further while the budget needs it before anything after it on the ladder:
    for every budget in a range, game_state is never dropped while the input still shows text."""
    segments = [CORE, RULESET, WORLD]
    failures = []
    for budget in range(185, 215):
        result = go(segments, args(input_text=SENTENCE * 20, game_state=LONG_STATE, token_budget=budget))
        if "game_state" in truncated(result).get("droppedScopes", []) and body(result, "input"):
            failures.append((budget, result.assembly.layers["input"].tokens, result.meta["tokensEstimated"]))
        assert_exact_within(result, budget)
    assert failures == []


def test_a_player_block_cut_for_the_budget_is_reported_in_meta() -> None:
    """Every step lands in meta.truncated: when the budget cuts the player block (the ladder's last
    rung), meta.truncated.playerTrimmed gives the player text's length in characters before and
    after the cut, and the player scope is not reported as dropped."""
    player = "You are a level 3 fighter. " * 20
    budget = prompt_tokens(block("core", CORE.content), block("ruleset", RULESET.content),
                           block("player", "You are a level 3 fighter."))
    result = go([CORE, RULESET], args(player=player, token_budget=budget))
    assert ("player", "cut_far_end") in steps(result)
    kept = body(result, "player")
    assert kept
    assert player.startswith(kept)
    assert truncated(result) == {"playerTrimmed": {"fromChars": len(player), "toChars": len(kept)}}
    assert_exact_within(result, budget)


def test_a_game_state_dropped_without_its_cue_is_reported_compressed_and_dropped() -> None:
    """A game state under 400 characters gets no cue; when the budget drops it, it is in droppedScopes
    and meta.truncated says gameStateCompressed (compressed to nothing, as the seed's 100-token example
    reports a short game state); neither it nor the input the budget cut to nothing is listed in
    emptyScopes."""
    state = "The inn is busy."
    budget = prompt_tokens(block("core", CORE.content), block("ruleset", RULESET.content),
                           block("world", WORLD.content))
    result = go([CORE, RULESET, WORLD], args(game_state=state, input_text=SENTENCE * 3, token_budget=budget))
    assert ("game_state", "summary_cue") not in steps(result)
    assert truncated(result) == {"droppedScopes": ["game_state"], "gameStateCompressed": True,
                                 "inputTrimmed": {"fromChars": len(SENTENCE * 3), "toChars": 0}}
    assert not {"game_state", "input"} & set(result.meta.get("emptyScopes", []))
    assert_exact_within(result, budget)


# --- the NPC sub-budget -----------------------------------------------------------------------

THREE = ((INNKEEPER, 2), (GUARD, 1), (BEGGAR, 0))


def _npc_run(npc_budget: int | None, npcs: Sequence[tuple[str, int]] = THREE,
             segments: Sequence[SegmentRecord] = (CORE, RULESET, *NPCS)) -> Run:
    return go(segments, args(npcs=npcs, npc_token_budget=npc_budget))


def test_npc_budget_lowers_tiers_first() -> None:
    """npcTokenBudget just under the block: one tier of every NPC that has more than one goes, even
    though the prompt fits tokenBudget; no NPC is dropped; meta reports the tiers."""
    one_round = npc_block((INNKEEPER, ["The innkeeper is friendly.", "He knows local secrets."]),
                          (GUARD, ["The guard is stern."]), (BEGGAR, ["A beggar sits by the fire."]))
    result = _npc_run(tokens(one_round))
    assert result.assembly.layers["npc"].text == one_round
    assert steps(result) == [("npc", "cap_tiers")]
    assert truncated(result) == {"npcDroppedTiers": [{"npcId": INNKEEPER, "fromTier": 2, "toTier": 1},
                                                     {"npcId": GUARD, "fromTier": 1, "toTier": 0}]}


def test_npc_budget_then_drops_the_lowest_priority_npcs_whole() -> None:
    """Once every NPC is at its lowest tier, whole NPCs go, lowest priority first (beggar 0, then
    guard 1; the innkeeper, 2, stays): meta.truncated.droppedNpcs names them in the order they went;
    the block stays."""
    tier_0 = [(INNKEEPER, ["The innkeeper is friendly."]), (GUARD, ["The guard is stern."])]
    result = _npc_run(tokens(npc_block(*tier_0)))
    assert result.assembly.layers["npc"].text == npc_block(*tier_0)
    assert steps(result) == [("npc", "cap_tiers"), ("npc", "cap_npcs")]
    assert truncated(result)["droppedNpcs"] == [BEGGAR]
    assert "droppedScopes" not in truncated(result)

    result = _npc_run(tokens(npc_block(*tier_0)) - 1)
    assert result.assembly.layers["npc"].text == npc_block(tier_0[0])
    assert steps(result) == [("npc", "cap_tiers"), ("npc", "cap_npcs")]
    assert truncated(result)["droppedNpcs"] == [BEGGAR, GUARD]
    assert result.meta["segmentIdsByScope"]["npc"] == [6]


def test_npc_budget_tiers_report_the_tier_the_reduction_left_even_if_the_npc_then_goes() -> None:
    """npcDroppedTiers.toTier is the highest tier the tier reduction left the NPC (here 1, its lowest
    segment's tier), even when cap_npcs then drops that NPC whole (droppedNpcs)."""
    segments = [CORE, RULESET, segment(70, "npc", "A tall sailor.", "npc.a", tier=1),
                segment(71, "npc", "He sings sea shanties.", "npc.a", tier=2),
                segment(72, "npc", "A short sailor.", "npc.b", priority=1)]
    keep = npc_block(("npc.b", ["A short sailor."]))
    result = _npc_run(tokens(keep), (("npc.a", 2), ("npc.b", 0)), segments)
    assert steps(result) == [("npc", "cap_tiers"), ("npc", "cap_npcs")]
    assert result.assembly.layers["npc"].text == keep
    assert truncated(result) == {"npcDroppedTiers": [{"npcId": "npc.a", "fromTier": 2, "toTier": 1}],
                                 "droppedNpcs": ["npc.a"]}


def test_npc_budget_of_equal_priorities_drops_the_one_listed_last() -> None:
    """Between NPCs of the same priority the one requested last goes first."""
    segments = [CORE, RULESET, segment(40, "npc", "A tall sailor.", "npc.a"),
                segment(41, "npc", "A short sailor.", "npc.b")]
    keep = npc_block(("npc.b", ["A short sailor."]))
    result = _npc_run(tokens(keep), (("npc.b", 0), ("npc.a", 0)), segments)
    assert result.assembly.layers["npc"].text == keep
    assert truncated(result)["droppedNpcs"] == ["npc.a"]


def test_npc_budget_defaults_to_600_tokens() -> None:
    """Without npcTokenBudget the NPC block is held to 600 tokens (tiers lowered until it is)."""
    detail = "The spy notes every face, every coin and every whispered word in the room. " * 4
    segments = [CORE, RULESET,
                *(segment(50 + t, "npc", f"Tier {t}. {detail}", SPY, tier=t) for t in range(12))]
    full = _npc_run(10**6, ((SPY, 11),), segments)
    assert full.assembly.layers["npc"].tokens > 600
    result = _npc_run(None, ((SPY, 11),), segments)
    assert result.assembly.layers["npc"].tokens <= 600
    assert truncated(result)["npcDroppedTiers"][0]["fromTier"] == 11
    assert "droppedNpcs" not in truncated(result)


WATCHER = "She watches every stranger who comes through the door and remembers each face for years. "
WATCHER_CUE = WATCHER.rstrip() + "…"  # the whole sentences within 119 characters, then an ellipsis
WATCHED = [CORE, RULESET, segment(60, "npc", WATCHER * 3, SPY, priority=2),
           segment(61, "npc", "A beggar sits by the fire.", BEGGAR)]


def test_npc_budget_last_replaces_an_npc_with_a_behaviour_cue() -> None:
    """Over npcTokenBudget with one NPC at its lowest tier: the NPC is replaced by a behaviour cue
    (its text cut to at most 120 characters on a sentence end), not dropped, and the block fits the
    budget."""
    long = WATCHER * 3
    segments = [CORE, RULESET, segment(60, "npc", long, SPY)]
    npc_budget = tokens(npc_block((SPY, [long[:119] + "…"])))
    result = _npc_run(npc_budget, ((SPY, 0),), segments)
    npc = body(result, "npc")
    assert npc == f"NPC: {SPY}\n{WATCHER_CUE}"
    assert all(len(line) <= 120 for line in npc.splitlines())
    assert steps(result) == [("npc", "cap_cues")]
    assert result.assembly.layers["npc"].tokens <= npc_budget
    assert SPY not in truncated(result).get("droppedNpcs", [])
    assert result.meta["segmentIdsByScope"]["npc"] == [60]


def test_npc_budget_keeps_the_last_npc_for_its_cue() -> None:
    """cap_npcs drops the lower-priority NPCs but always leaves one (keep 1): here the beggar goes and
    the spy, alone still over npcTokenBudget, is cued rather than dropped; the block stays."""
    npc_budget = tokens(npc_block((SPY, [WATCHER_CUE])))
    result = _npc_run(npc_budget, ((SPY, 0), (BEGGAR, 0)), WATCHED)
    assert steps(result) == [("npc", "cap_npcs"), ("npc", "cap_cues")]
    assert body(result, "npc") == f"NPC: {SPY}\n{WATCHER_CUE}"
    assert result.assembly.layers["npc"].tokens <= npc_budget
    assert truncated(result) == {"droppedNpcs": [BEGGAR], "npcCues": True}
    assert result.meta["segmentIdsByScope"]["npc"] == [60]


def test_npc_budget_drops_the_block_when_even_the_cue_is_over() -> None:
    """One token under the cued NPC's block: after the lower-priority NPCs and the cue, the NPC block
    itself goes (cap_block, reason npc_budget), so the kept NPC is dropped last; droppedNpcs lists
    the NPCs in the order they went and the emptied block is not an empty scope."""
    npc_budget = tokens(npc_block((SPY, [WATCHER_CUE]))) - 1
    result = _npc_run(npc_budget, ((SPY, 0), (BEGGAR, 0)), WATCHED)
    assert steps(result) == [("npc", "cap_npcs"), ("npc", "cap_cues"), ("npc", "cap_block")]
    assert "=== NPC_BEGIN ===" not in result.prompt
    assert truncated(result)["droppedNpcs"] == [BEGGAR, SPY]
    assert {r.id: r.reason for r in result.assembly.reports if r.layer == "npc"} == {
        "segment:60": "npc_budget", "segment:61": "npc_budget"}
    assert "npc" not in result.meta.get("emptyScopes", [])
    assert result.meta["segmentIdsByScope"]["npc"] == []


def test_npc_budget_zero_drops_every_npc_but_never_core() -> None:
    """npcTokenBudget 0 leaves no NPC block: tiers, then every NPC but the last by priority, then the
    block with the last one (droppedNpcs in that order); core and ruleset are untouched."""
    result = _npc_run(0)
    assert "=== NPC_BEGIN ===" not in result.prompt
    assert steps(result)[-1] == ("npc", "cap_block")
    assert truncated(result)["droppedNpcs"] == [BEGGAR, GUARD, INNKEEPER]
    assert result.prompt == block("core", CORE.content) + "\n\n" + block("ruleset", RULESET.content)


# --- core and ruleset, the default token budget, segment ids -----------------------------------

def test_core_and_ruleset_over_the_budget_are_refused_with_both_numbers() -> None:
    """Core and ruleset alone over tokenBudget: SEGMENTS_CORE_OVERBUDGET with coreTokens (the exact
    count of the two blocks as the prompt joins them) and tokenBudget, from the one assembly the call
    makes; never a prompt without them."""
    core_tokens = prompt_tokens(block("core", CORE.content), block("ruleset", RULESET.content))
    engine = EngineAssembler(SEGMENTS)
    with pytest.raises(SegmentsCoreOverbudget) as caught:
        asyncio.run(GameMaster(engine).assemble(ladder_args(core_tokens - 1)))
    assert caught.value.fields == {"coreTokens": core_tokens, "tokenBudget": core_tokens - 1}
    assert caught.value.data_code == "SEGMENTS_CORE_OVERBUDGET"
    assert len(engine.requests) == 1


def test_a_budget_of_exactly_core_and_ruleset_keeps_only_them() -> None:
    """tokenBudget equal to the core and ruleset blocks: the prompt is exactly those two blocks,
    every other scope cut, neither of them ever in droppedScopes."""
    both = block("core", CORE.content) + "\n\n" + block("ruleset", RULESET.content)
    result = go(SEGMENTS, ladder_args(tokens(both)))
    assert result.prompt == both
    assert not {"core", "ruleset"} & set(truncated(result)["droppedScopes"])
    assert_exact_within(result, tokens(both))


def test_core_and_ruleset_that_only_fail_with_their_separator_are_core_overbudget() -> None:
    """When the two blocks fit one by one but not together as the prompt holds them, they alone still
    exceed the budget: SEGMENTS_CORE_OVERBUDGET with their joined count, not CONTEXT_INPUT_TOO_LARGE."""
    both = tokens(block("core", CORE.content) + "\n\n" + block("ruleset", RULESET.content))
    apart = tokens(block("core", CORE.content)) + tokens(block("ruleset", RULESET.content))
    assert apart < both
    with pytest.raises(SegmentsCoreOverbudget) as caught:
        go(SEGMENTS, ladder_args(apart))
    assert caught.value.fields == {"coreTokens": both, "tokenBudget": apart}


@pytest.mark.parametrize("scope", ["input", "player"])
def test_only_core_and_ruleset_can_make_a_call_fail(scope: str) -> None:
    """Core and ruleset fit with room to spare: a short input or player text that does not fit is cut
    or left out, never a refusal (CONTEXT_INPUT_TOO_LARGE)."""
    both = prompt_tokens(block("core", CORE.content), block("ruleset", RULESET.content))
    for budget in range(both, both + 20):
        text = {"input_text" if scope == "input" else "player": "I wait."}
        result = go([CORE, RULESET], args(token_budget=budget, input_text=text.get("input_text"),
                                          player=text.get("player")))
        assert_exact_within(result, budget)


def test_token_budget_defaults_to_8000() -> None:
    """Without tokenBudget the prompt is held to 8000 tokens: a 10,000-token game state is cut to
    fit, the count exact."""
    huge = "The caravan master recounts every trade of the season, one by one. " * 700
    result = go(SEGMENTS, ladder_args(None, game_state=huge))
    assert tokens(huge) > 8000
    assert truncated(result)["gameStateCompressed"] is True
    assert_exact_within(result, 8000)


def test_segment_ids_by_scope_list_what_the_prompt_shows() -> None:
    """segmentIdsByScope has every scope; each lists the ids of its shown segments in prompt order,
    leaving out inactive ones, those of another locale, tiers cut by the budget and scopes
    dropped; the dynamic scopes never have ids."""
    segments = [*SEGMENTS, segment(12, "world", "An old draft of the world.", active=False),
                segment(13, "world", "Le monde de Mystika.", locale="fr"),
                segment(14, "world", "Mystika has two moons.", locale="en")]
    result = go(segments, args(first_turn=True, npcs=ON_STAGE, locale="en", input_text="I look up."))
    ids = result.meta["segmentIdsByScope"]
    assert ids == {"core": [1], "ruleset": [2], "world": [3, 14], "entry": [4], "entry_start": [5],
                   "npc": [6, 7, 8, 9, 10], "game_state": [], "player": [], "rng": [], "input": []}
    one_round = go(segments, args(first_turn=True, npcs=ON_STAGE, locale="en",
                                  npc_token_budget=result.assembly.layers["npc"].tokens - 1))
    assert one_round.meta["segmentIdsByScope"]["npc"] == [6, 7, 9]


# --- the property ----------------------------------------------------------------------------

WORDS = ["the", "inn", "key", "guard", "moon", "river", "silver", "quiet", "stair", "lamp",
         "钥匙", "旅店", "月亮"]


@st.composite
def sentences(draw: st.DrawFn, most: int) -> str:
    count = draw(st.integers(0, most))
    found = []
    for _ in range(count):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12))
        found.append(" ".join(words).capitalize() + draw(st.sampled_from([". ", "! ", "? ", "。", "！"])))
    return "".join(found)


@st.composite
def games(draw: st.DrawFn) -> tuple[list[SegmentRecord], AssembleArgs]:
    segments: list[SegmentRecord] = []

    def add(scope: str, ref_id: str | None = None, tier: int = 0, priority: int = 0) -> None:
        text = draw(sentences(3)).strip() or "A line."
        segments.append(segment(len(segments) + 1, scope, text, ref_id, tier=tier, priority=priority))

    for scope in ("core", "ruleset", "world", "entry", "entry_start"):
        for _ in range(draw(st.integers(0, 2))):
            add(scope)
    npcs = []
    for n in range(draw(st.integers(0, 3))):
        npc_id = f"npc.{n}"
        priority = draw(st.integers(0, 3))
        for tier in range(draw(st.integers(1, 4))):
            add("npc", npc_id, tier, priority)
        npcs.append((npc_id, draw(st.integers(0, 4))))
    texts = {name: draw(st.none() | sentences(most)) for name, most in
             (("game_state", 40), ("player", 6), ("rng", 2), ("input", 60))}
    # A budget from a little under core and ruleset to a little over the whole game, so that every
    # rung, from nothing cut to a refusal, comes up.
    size = sum(tokens(s.content) + 8 for s in segments) + sum(tokens(t) + 12 for t in texts.values() if t)
    floor = sum(tokens(s.content) + 8 for s in segments if s.scope in ("core", "ruleset")) - 4
    assemble_args = args(first_turn=draw(st.booleans()), npcs=npcs, game_state=texts["game_state"],
                         player=texts["player"], rng=texts["rng"], input_text=texts["input"],
                         token_budget=max(1, floor + (size - floor) * draw(st.integers(0, 110)) // 100),
                         npc_token_budget=draw(st.none() | st.integers(0, 300)))
    return segments, assemble_args


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(games())
def test_any_game_is_exact_within_budget_in_scope_order_or_refused(
        game: tuple[list[SegmentRecord], AssembleArgs]) -> None:
    """For random segments, texts and budgets: either tokensEstimated is the tokenizer's count of the
    prompt and at most tokenBudget, core and ruleset are shown whole, and the blocks come in scope
    order (meta.order too); or the call is refused: SEGMENTS_CORE_OVERBUDGET (only when core and
    ruleset as the prompt joins them pass the budget, with their exact count and the budget) or
    CONTEXT_INPUT_TOO_LARGE."""
    segments, assemble_args = game
    budget = assemble_args.token_budget
    assert budget is not None
    fixed = [block(scope, "\n".join(s.content for s in segments if s.scope == scope))
             for scope in ("core", "ruleset") if any(s.scope == scope for s in segments)]
    refused: SegmentsCoreOverbudget | InputTooLarge | None = None
    try:
        result = go(segments, assemble_args)
    except (SegmentsCoreOverbudget, InputTooLarge) as error:
        refused = error
    if isinstance(refused, SegmentsCoreOverbudget):
        assert refused.fields["tokenBudget"] == budget < refused.fields["coreTokens"]
        assert refused.fields["coreTokens"] == prompt_tokens(*fixed)
        return
    if refused is not None:
        assert refused.data_code == "CONTEXT_INPUT_TOO_LARGE"
        return
    assert_exact_within(result, budget)
    for expected in fixed:
        assert expected in result.prompt
    assert result.prompt.startswith("\n\n".join(fixed))
    shown = [scope for scope in SCOPES if f"=== {scope.upper()}_BEGIN ===\n" in result.prompt]
    assert result.meta["order"] == shown
    starts = [result.prompt.index(f"=== {scope.upper()}_BEGIN ===\n") for scope in shown]
    assert starts == sorted(starts)
    dropped = set(truncated(result).get("droppedScopes", []))
    assert not dropped & {"core", "ruleset"}
