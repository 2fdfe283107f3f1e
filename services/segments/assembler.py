"""segments:assemble: the segment assembler's ``assemblePrompt(args)`` (seed 001) on the game-master profile.

The seed's arguments become the profile's variables, the engine assembles the
``game-master`` profile like any other, and its reductions and item fates are
read back into the seed's ``meta``: which scopes made the prompt, which
segments, how many tokens (counted exactly with the project's tokenizer, not
four characters a token), and what was truncated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from services.assembly.service import AssembleRequest, Outcome
from services.context.models import Assembly
from services.errors import InputTooLarge, SegmentsCoreOverbudget
from services.segments.records import SCOPES

PROFILE = "game-master"
DEFAULT_TOKEN_BUDGET = 8000
DEFAULT_NPC_TOKEN_BUDGET = 600


class Assembler(Protocol):
    async def assemble(self, request: AssembleRequest) -> Outcome: ...


@dataclass(frozen=True, slots=True)
class Npc:
    npc_id: str
    tier: int


@dataclass(frozen=True, slots=True)
class AssembleArgs:
    """The seed's ``AssembleArgs``, plus the project it reads segments from."""

    project_id: str
    entry_point_id: str
    world_id: str
    ruleset_id: str
    game_id: str | None = None
    is_first_turn: bool = False
    game_state_text: str | None = None
    player_text: str | None = None
    rng_text: str | None = None
    input_text: str | None = None
    npcs: Sequence[Npc] = field(default_factory=tuple)
    token_budget: int | None = None
    npc_token_budget: int | None = None
    locale: str | None = None

    def variables(self) -> dict[str, str]:
        values = {
            "entryPointId": self.entry_point_id, "worldId": self.world_id, "rulesetId": self.ruleset_id,
            "isFirstTurn": "true" if self.is_first_turn else "false",
            "npcs": json.dumps([{"npcId": n.npc_id, "tier": n.tier} for n in self.npcs]),
            "tokenBudget": str(self.token_budget or DEFAULT_TOKEN_BUDGET),
            "npcTokenBudget": str(DEFAULT_NPC_TOKEN_BUDGET if self.npc_token_budget is None
                                  else self.npc_token_budget),
        }
        optional = {"gameId": self.game_id, "locale": self.locale, "gameStateText": self.game_state_text,
                    "playerText": self.player_text, "rngText": self.rng_text, "inputText": self.input_text}
        values.update({name: value for name, value in optional.items() if value is not None})
        return values


class GameMaster:
    """Runs ``segments:assemble`` through the context service."""

    def __init__(self, context: Assembler) -> None:
        self._context = context

    async def assemble(self, args: AssembleArgs) -> dict[str, Any]:
        """The seed's ``AssembleResult``: ``{prompt, meta}``."""
        variables = args.variables()
        request = AssembleRequest(project_id=args.project_id, profile_id=PROFILE, variables=variables)
        try:
            outcome = await self._context.assemble(request)
        except InputTooLarge as exc:
            # Core and ruleset are the profile's never-cut sections: alone over the budget, say so.
            fixed, budget = exc.fields.get("fixedTokens"), int(variables["tokenBudget"])
            if isinstance(fixed, int) and fixed > budget:
                raise SegmentsCoreOverbudget(coreTokens=fixed, tokenBudget=budget) from None
            raise
        return {"prompt": outcome.assembly.prompt, "meta": meta(outcome, args)}


def meta(outcome: Outcome, args: AssembleArgs) -> dict[str, Any]:
    """The seed's ``meta``, with the tokenizer the counts were made with."""
    assembly = outcome.assembly
    layers = assembly.layers
    found: dict[str, Any] = {
        "order": [scope for scope in SCOPES if scope in layers and layers[scope].text],
        "segmentIdsByScope": _segment_ids(assembly),
        "tokensEstimated": assembly.token_count,
        "tokenizer": outcome.tokenizer,
        "exact": outcome.exact,
    }
    # Empty for want of content: not emptied by the budget, and not left out by design.
    reduced = {r.section for r in assembly.reductions}
    empty = [scope for scope in SCOPES if scope in layers and not layers[scope].text and scope not in reduced]
    if not args.is_first_turn and "entry_start" in empty:
        empty.remove("entry_start")
    if empty:
        found["emptyScopes"] = empty
    truncated = _truncated(assembly, args)
    if truncated:
        found["truncated"] = truncated
    return found


def _segment_ids(assembly: Assembly) -> dict[str, list[int]]:
    ids: dict[str, list[int]] = {scope: [] for scope in SCOPES}
    for report in assembly.reports:
        if report.fate != "dropped" and report.id.startswith("segment:") and report.layer in ids:
            ids[report.layer].append(int(report.id.removeprefix("segment:")))
    return ids


def _truncated(assembly: Assembly, args: AssembleArgs) -> dict[str, Any]:
    truncated: dict[str, Any] = {}
    dropped = [r.section for r in assembly.reductions if r.kind == "drop_section"]
    if dropped:
        truncated["droppedScopes"] = dropped
    tiers = _dropped_tiers(assembly)
    if tiers:
        truncated["npcDroppedTiers"] = tiers
    gone = list(dict.fromkeys(r.group for r in assembly.reports if r.reason == "npc_budget" and r.group))
    if gone:
        truncated["droppedNpcs"] = gone
    for scope, text, name in (("input", args.input_text, "inputTrimmed"),
                              ("player", args.player_text, "playerTrimmed")):
        if text and any(r.section == scope and r.kind != "drop_section" for r in assembly.reductions):
            kept = assembly.part_texts.get((scope, scope), "")
            truncated[name] = {"fromChars": len(text), "toChars": len(kept)}
    # Dropped is compressed to nothing: the seed reports a short game state under a tiny budget so.
    if any(r.section == "game_state" for r in assembly.reductions):
        truncated["gameStateCompressed"] = True
    if any(r.section == "npc" and r.kind == "summary_cue" for r in assembly.reductions):
        truncated["npcCues"] = True  # the NPCs left stand as short behaviour cues
    return truncated


def _dropped_tiers(assembly: Assembly) -> list[dict[str, Any]]:
    """Per NPC that lost tiers to a tier reduction: the highest tier it had and the highest the
    tier reduction left it (whatever later steps did to the NPC block)."""
    had: dict[str, int] = {}
    left: dict[str, int] = {}
    lowered: list[str] = []
    for report in assembly.reports:
        if report.group is None or report.tier is None or report.layer != "npc":
            continue
        had[report.group] = max(had.get(report.group, 0), report.tier)
        if report.reason != "lower_tier":
            left[report.group] = max(left.get(report.group, 0), report.tier)
        elif report.group not in lowered:
            lowered.append(report.group)
    return [{"npcId": npc, "fromTier": had[npc], "toTier": left.get(npc, 0)} for npc in lowered]
