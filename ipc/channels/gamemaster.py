"""segments:assemble: the seed's ``assemblePrompt(args)`` over the wire (thin: GameMaster does the work).

Params are exactly the seed's ``AssembleArgs`` plus ``projectId``; the result is
exactly its ``AssembleResult`` (``meta.truncated`` and ``meta.emptyScopes`` only
when there is something to say), with the tokenizer the counts were made with.
"""

from __future__ import annotations

from pydantic import Field

from ipc.channels.projects import ProjectScoped
from ipc.context import CallContext
from ipc.errors import (
    Backpressure,
    InputTooLarge,
    InvalidParams,
    ProfileNotFound,
    ProjectNotFound,
    ScopeViolation,
    SegmentsCoreOverbudget,
)
from ipc.models import OmitNone, WireModel
from ipc.registry import Registry
from services.segments.assembler import AssembleArgs, GameMaster, Npc
from services.segments.records import RefId, Tier

MAX_TEXT = 262_144  # characters of each dynamic text


class NpcParam(WireModel):
    npc_id: RefId
    tier: Tier


class SegmentsAssembleParams(ProjectScoped):
    entry_point_id: RefId
    world_id: RefId
    ruleset_id: RefId
    game_id: str | None = Field(default=None, max_length=200)
    is_first_turn: bool = False
    game_state_text: str | None = Field(default=None, max_length=MAX_TEXT)
    player_text: str | None = Field(default=None, max_length=MAX_TEXT)
    rng_text: str | None = Field(default=None, max_length=MAX_TEXT)
    input_text: str | None = Field(default=None, max_length=MAX_TEXT)
    npcs: list[NpcParam] = Field(default_factory=list, max_length=200)
    token_budget: int | None = Field(default=None, ge=1, le=10_000_000)
    npc_token_budget: int | None = Field(default=None, ge=0, le=10_000_000)
    locale: str | None = Field(default=None, max_length=35)

    def args(self) -> AssembleArgs:
        return AssembleArgs(
            project_id=self.project_id, entry_point_id=self.entry_point_id, world_id=self.world_id,
            ruleset_id=self.ruleset_id, game_id=self.game_id, is_first_turn=self.is_first_turn,
            game_state_text=self.game_state_text, player_text=self.player_text, rng_text=self.rng_text,
            input_text=self.input_text, npcs=tuple(Npc(n.npc_id, n.tier) for n in self.npcs),
            token_budget=self.token_budget, npc_token_budget=self.npc_token_budget, locale=self.locale)


class DroppedTier(WireModel):
    npc_id: str
    from_tier: int
    to_tier: int


class InputTrimmed(WireModel):
    from_chars: int
    to_chars: int


class Truncated(OmitNone):
    dropped_scopes: list[str] | None = None
    npc_dropped_tiers: list[DroppedTier] | None = None
    dropped_npcs: list[str] | None = None
    input_trimmed: InputTrimmed | None = None
    player_trimmed: InputTrimmed | None = None
    game_state_compressed: bool | None = None
    npc_cues: bool | None = Field(default=None, description="the NPCs left stand as short behaviour cues")


class SegmentsMeta(OmitNone):
    order: list[str]
    segment_ids_by_scope: dict[str, list[int]]
    tokens_estimated: int = Field(description="counted exactly with the project's tokenizer")
    tokenizer: str
    exact: bool
    empty_scopes: list[str] | None = Field(default=None, description="scopes with nothing to show")
    truncated: Truncated | None = None


class SegmentsAssembleResult(WireModel):
    prompt: str
    meta: SegmentsMeta


def register_game_master(registry: Registry, game_master: GameMaster) -> None:
    @registry.method("segments:assemble", params=SegmentsAssembleParams, result=SegmentsAssembleResult,
                     summary="The game master's prompt from the project's segments in scope order "
                             "(the game-master profile), with what was truncated.",
                     errors=(ProjectNotFound, InvalidParams, SegmentsCoreOverbudget, InputTooLarge,
                             Backpressure, ScopeViolation, ProfileNotFound))
    async def assemble(params: SegmentsAssembleParams, ctx: CallContext) -> SegmentsAssembleResult:
        return SegmentsAssembleResult.model_validate(await game_master.assemble(params.args()))
