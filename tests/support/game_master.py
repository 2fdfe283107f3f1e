"""The game-master profile on the engine, without a socket or a database.

:class:`EngineAssembler` stands in for the context service behind
:class:`services.segments.assembler.GameMaster`: it binds the built-in
``game-master`` plan to the request's variables, gathers items with the real
:class:`SegmentsProvider` from in-memory segments, decides the facts as the
assembly service does (a variable whose value is not blank, ``false``, ``0``
or ``no``) and runs the pure engine with the bundled ``cl100k_base`` counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.assembly.service import NO_SKILL, AssembleRequest, Outcome
from services.context.counting import CountCache
from services.context.engine import Request, assemble
from services.context.models import Assembly, BudgetProfile, Window
from services.context.plan import Plan
from services.profiles.plans import BuiltInPlans
from services.segments.active import ActiveSegments
from services.segments.assembler import AssembleArgs, GameMaster, Npc
from services.segments.provider import SegmentsProvider
from services.segments.records import SegmentRecord
from services.sources.base import GatherContext
from tests.services.context.factory import counter

PROJECT = "p-game"
ENTRY, WORLD, RULESET = "ep.whispercross", "world.mystika", "ruleset.classic_v1"
PLAN: Plan = BuiltInPlans().resolved["game-master"].plan
_WHEN = datetime(2024, 1, 1, tzinfo=UTC)
_FALSE = ("false", "0", "no")


def segment(id_: int, scope: str, content: str, ref_id: str | None = None, *, tier: int = 0,
            priority: int = 0, locale: str | None = None, active: bool = True,
            project_id: str = PROJECT) -> SegmentRecord:
    """A stored segment as the segment service returns it."""
    if ref_id is None:
        ref_id = {"ruleset": RULESET, "world": WORLD, "entry": ENTRY, "entry_start": ENTRY}.get(scope)
    return SegmentRecord(id=id_, project_id=project_id, scope=scope, ref_id=ref_id,
                         content=content, tier=tier, type=None, priority=priority, active=active,
                         locale=locale, version=1, created_at=_WHEN, updated_at=_WHEN)


def tokens(text: str) -> int:
    """The bundled tokenizer's exact count of ``text``."""
    return counter().count(text)


def _request_texts(plan: Plan, variables: Mapping[str, str]) -> str:
    names = sorted({p.source.removeprefix("request.") for s in plan.sections for p in s.parts
                    if p.kind == "text" and p.source.startswith("request.")})
    return "\n".join(variables[n] for n in names if n in variables)


@dataclass
class EngineAssembler:
    """An :class:`services.segments.assembler.Assembler` that runs the engine on ``segments``."""

    segments: Sequence[SegmentRecord]
    project_id: str = PROJECT
    language: str = "en"
    requests: list[AssembleRequest] = field(default_factory=list)
    assemblies: list[Assembly] = field(default_factory=list)

    async def assemble(self, request: AssembleRequest) -> Outcome:
        self.requests.append(request)
        count: CountCache = counter()
        plan = PLAN.bind(request.variables)
        assert isinstance(plan.context_window, int)
        active = ActiveSegments.of(self.segments)

        async def fetch(project_id: str) -> ActiveSegments:
            assert project_id == self.project_id
            return active

        ctx = GatherContext(project_id=request.project_id, document_id="", language=self.language,
                            skill=NO_SKILL, window=Window("", "", 0, 0, 0, 0), additional_input="",
                            counter=count, placement=plan.placement(), variables=request.variables)
        items = tuple(await SegmentsProvider(fetch).gather(ctx))
        values = {**plan.variables, **request.variables}
        facts = frozenset({"always", *(name for name, value in values.items()
                                       if value.strip() and value.strip().lower() not in _FALSE)})
        assembly = assemble(Request(
            project_id=request.project_id, language=self.language, plan=plan,
            profile=BudgetProfile(context_window=plan.context_window,
                                  output_reserve=int(plan.output_reserve)),
            system_prompt_tokens=0, items=items, window=None, variables=request.variables, facts=facts,
            variable_tokens=count.count(_request_texts(plan, request.variables))), count)
        self.assemblies.append(assembly)
        info = count.info
        return Outcome(assembly=assembly, system_prompt="", stable_prefix_unchanged=False, divergence=None,
                       tokenizer=info.encoding, exact=info.exact)


def args(*, first_turn: bool = False, npcs: Sequence[tuple[str, int]] = (), game_state: str | None = None,
         player: str | None = None, rng: str | None = None, input_text: str | None = None,
         token_budget: int | None = None, npc_token_budget: int | None = None,
         locale: str | None = None) -> AssembleArgs:
    """The seed's ``AssembleArgs`` for the test project's entry point, world and ruleset."""
    return AssembleArgs(project_id=PROJECT, entry_point_id=ENTRY, world_id=WORLD, ruleset_id=RULESET,
                        is_first_turn=first_turn, game_state_text=game_state, player_text=player,
                        rng_text=rng, input_text=input_text,
                        npcs=tuple(Npc(npc_id, tier) for npc_id, tier in npcs),
                        token_budget=token_budget, npc_token_budget=npc_token_budget, locale=locale)


@dataclass
class Run:
    """One ``segments:assemble`` on the engine: the seed's result and the assembly behind it."""

    prompt: str
    meta: dict[str, Any]
    assembly: Assembly
    engine: EngineAssembler


async def run(segments: Sequence[SegmentRecord], assemble_args: AssembleArgs) -> Run:
    """``GameMaster.assemble`` over :class:`EngineAssembler` (errors propagate)."""
    engine = EngineAssembler(segments)
    result = await GameMaster(engine).assemble(assemble_args)
    return Run(prompt=result["prompt"], meta=result["meta"], assembly=engine.assemblies[-1], engine=engine)
