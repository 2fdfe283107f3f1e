"""context:* and debug:faults:set: the engine on the wire."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from pydantic import Field

from ipc.context import CallContext
from ipc.errors import (
    Backpressure,
    BudgetConflict,
    DocumentNotFound,
    Forbidden,
    InputTooLarge,
    InspectForbidden,
    InvalidParams,
    ProfileInvalid,
    ProfileNotFound,
    ProjectNotFound,
    ScopeViolation,
    SkillNotFound,
)
from ipc.models import WireModel
from ipc.registry import Registry
from services.assembly.faults import Fault
from services.assembly.profiles import BudgetProfiles
from services.assembly.service import AssembleRequest, ContextService, Outcome
from services.context.budget import validate_profile
from services.context.models import LAYER_ORDER, BudgetProfile, Layer, LayerResult
from services.profiles.plans import DEFAULT_PROFILE_NAME

_ASSEMBLE_ERRORS = (ProjectNotFound, DocumentNotFound, SkillNotFound, InvalidParams, InputTooLarge,
                    ScopeViolation, Backpressure, ProfileNotFound, ProfileInvalid)


MAX_VARIABLES = 64
MAX_VARIABLE_CHARS = 262_144
VariableName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.]{0,95}$")]


class AssembleParams(WireModel):
    project_id: str = Field(min_length=1, max_length=64)
    document_id: str | None = Field(default=None, min_length=1, max_length=1024)
    cursor_position: int | None = Field(default=None, ge=0)
    skill_id: str | None = Field(default=None, min_length=1, max_length=64)
    additional_input: str | None = None
    profile_id: str = Field(default=DEFAULT_PROFILE_NAME, min_length=1, max_length=64,
                            description="the assembly profile (default: novel)")
    variables: dict[VariableName, Annotated[str, Field(max_length=MAX_VARIABLE_CHARS)]] = Field(
        default_factory=dict, max_length=MAX_VARIABLES,
        description="caller values for the profile's ${name} placeholders, conditions and request.<name> "
                    "sections; never expanded as templates themselves")

    def request(self) -> AssembleRequest:
        return AssembleRequest(project_id=self.project_id, document_id=self.document_id,
                               cursor_position=self.cursor_position, skill_id=self.skill_id,
                               additional_input=self.additional_input or "", profile_id=self.profile_id,
                               variables=dict(self.variables))


class LayerInfo(WireModel):
    tokens: int
    truncated: bool


class RetrievedInfo(LayerInfo):
    chunks: int


class BudgetInfo(WireModel):
    context_window: int
    output_reserve: int
    system_prompt_tokens: int
    total: int


class PrefixDivergence(WireModel):
    layer: str
    byte_offset: int


class TokenizerUse(WireModel):
    encoding: str
    exact: bool


class StepInfo(WireModel):
    step: str
    tokens_before: int
    tokens_after: int
    estimated: bool = Field(description="tokensBefore is the count after plus each dropped item's own count: "
                                        "the section was not counted whole before this drop")


class ReductionInfo(StepInfo):
    section: str


class SectionInfo(WireModel):
    id: str
    role: str
    tokens: int
    truncated: bool
    items: int
    steps: list[StepInfo]


class MessageInfo(WireModel):
    role: str
    content: str


class AssembleResult(WireModel):
    prompt: str
    token_count: int
    stable_prefix_hash: str
    stable_prefix_unchanged: bool
    layers: dict[str, RetrievedInfo | LayerInfo]
    warnings: list[str]
    budget: BudgetInfo
    prefix_hashes: dict[str, str]
    prefix_divergence: PrefixDivergence | None
    system_prompt: str
    tokenizer: TokenizerUse
    profile_id: str
    sections: list[SectionInfo]
    messages: list[MessageInfo]
    reductions: list[ReductionInfo]


class BudgetArithmetic(WireModel):
    total: int
    shares: dict[str, float]
    minimums: dict[str, float]
    used: dict[str, float]


class Candidate(WireModel):
    id: str
    layer: str
    section: str
    source: str
    tokens: int
    key: float
    key_name: str
    fate: str
    kept_tokens: int
    reason: str | None


class InspectResult(AssembleResult):
    candidates: list[Candidate]
    layer_texts: dict[str, str]
    arithmetic: BudgetArithmetic
    timings_ms: dict[str, float]


class LayerNumbers(WireModel):
    rules: float
    settings: float
    retrieved: float
    immediate: float


class RatiosPatch(WireModel):
    rules: float | None = Field(default=None, ge=0, le=1)
    settings: float | None = Field(default=None, ge=0, le=1)
    retrieved: float | None = Field(default=None, ge=0, le=1)
    immediate: float | None = Field(default=None, ge=0, le=1)


class MinimumsPatch(WireModel):
    rules: int | None = Field(default=None, ge=0)
    settings: int | None = Field(default=None, ge=0)
    retrieved: int | None = Field(default=None, ge=0)
    immediate: int | None = Field(default=None, ge=0)


class BudgetPatch(WireModel):
    context_window: int | None = Field(default=None, gt=0, le=10_000_000)
    output_reserve: int | None = Field(default=None, ge=0)
    ratios: RatiosPatch | None = None
    minimums: MinimumsPatch | None = None

    def apply(self, profile: BudgetProfile) -> BudgetProfile:
        ratios = tuple(_pick(self.ratios, layer, profile.ratio(layer)) for layer in LAYER_ORDER)
        minimums = tuple(int(_pick(self.minimums, layer, profile.minimum(layer))) for layer in LAYER_ORDER)
        return replace(profile,
                       context_window=self.context_window or profile.context_window,
                       output_reserve=profile.output_reserve if self.output_reserve is None
                       else self.output_reserve,
                       ratios=ratios, minimums=minimums)  # type: ignore[arg-type]


def _pick(patch: RatiosPatch | MinimumsPatch | None, layer: Layer, current: float) -> float:
    value = getattr(patch, layer.value) if patch is not None else None
    return current if value is None else value


class InspectParams(AssembleParams):
    budget_override: BudgetPatch | None = None


class ProjectRef(WireModel):
    project_id: str = Field(min_length=1, max_length=64)


class BudgetUpdateParams(BudgetPatch):
    project_id: str = Field(min_length=1, max_length=64)
    version: int = Field(ge=1)


class BudgetProfileWire(WireModel):
    project_id: str
    version: int
    context_window: int
    output_reserve: int
    ratios: LayerNumbers
    minimums: LayerNumbers


class FaultsParams(WireModel):
    faults: list[Fault] = Field(max_length=8)


class FaultsResult(WireModel):
    faults: list[Fault]


def _per_layer(values: dict[Layer, float]) -> LayerNumbers:
    return LayerNumbers(**{layer.value: values[layer] for layer in LAYER_ORDER})


def _profile_wire(project_id: str, profile: BudgetProfile) -> BudgetProfileWire:
    return BudgetProfileWire(
        project_id=project_id, version=profile.version, context_window=profile.context_window,
        output_reserve=profile.output_reserve,
        ratios=_per_layer({layer: profile.ratio(layer) for layer in LAYER_ORDER}),
        minimums=_per_layer({layer: profile.minimum(layer) for layer in LAYER_ORDER}))


def _layer(result: LayerResult) -> RetrievedInfo | LayerInfo:
    if result.chunks:
        return RetrievedInfo(tokens=result.tokens, truncated=result.truncated, chunks=result.items)
    return LayerInfo(tokens=result.tokens, truncated=result.truncated)


def result_fields(outcome: Outcome) -> dict[str, object]:
    a = outcome.assembly
    steps: dict[str, list[StepInfo]] = {}
    for r in a.reductions:
        steps.setdefault(r.section, []).append(
            StepInfo(step=r.step, tokens_before=r.tokens_before, tokens_after=r.tokens_after,
                     estimated=r.estimated))
    return {
        "prompt": a.prompt, "token_count": a.token_count, "stable_prefix_hash": a.stable_prefix_hash,
        "stable_prefix_unchanged": outcome.stable_prefix_unchanged,
        "layers": {name: _layer(layer) for name, layer in a.layers.items()},
        "warnings": list(a.warnings),
        "budget": BudgetInfo(context_window=a.budget.context_window, output_reserve=a.budget.output_reserve,
                             system_prompt_tokens=a.budget.system_prompt_tokens, total=a.budget.total),
        "prefix_hashes": dict(a.prefix_hashes),
        "prefix_divergence": None if outcome.divergence is None else PrefixDivergence(
            layer=outcome.divergence.layer, byte_offset=outcome.divergence.byte_offset),
        "system_prompt": outcome.system_prompt,
        "tokenizer": TokenizerUse(encoding=outcome.tokenizer, exact=outcome.exact),
        "profile_id": a.profile,
        "sections": [SectionInfo(id=name, role=layer.role, tokens=layer.tokens, truncated=layer.truncated,
                                 items=layer.items, steps=steps.get(name, []))
                     for name, layer in a.layers.items()],
        "messages": [MessageInfo(role=m.role, content=m.content) for m in a.messages(outcome.system_prompt)],
        "reductions": [ReductionInfo(section=r.section, step=r.step, tokens_before=r.tokens_before,
                                     tokens_after=r.tokens_after, estimated=r.estimated)
                       for r in a.reductions],
    }


def _inspect_result(outcome: Outcome) -> InspectResult:
    a = outcome.assembly
    return InspectResult(
        **result_fields(outcome),
        candidates=[Candidate(id=r.id, layer=r.layer, section=r.section, source=r.source,
                              tokens=r.tokens, key=r.key, key_name=r.key_name, fate=r.fate,
                              kept_tokens=r.kept_tokens, reason=r.reason) for r in a.reports],
        layer_texts={k: v.text for k, v in a.layers.items()},
        arithmetic=BudgetArithmetic(
            total=a.budget.total,
            shares={k: float(v) for k, v in a.budget.shares.items()},
            minimums={k: float(v) for k, v in a.budget.minimums.items()},
            used={k: float(v.tokens) for k, v in a.layers.items()}),
        timings_ms=a.timings_ms)


def register_context(registry: Registry, service: ContextService, profiles: BudgetProfiles) -> None:
    @registry.method("context:assemble", params=AssembleParams, result=AssembleResult,
                     summary="Assemble a profile's prompt (default: novel's four layers) within the budget.",
                     errors=_ASSEMBLE_ERRORS)
    async def assemble(params: AssembleParams, ctx: CallContext) -> AssembleResult:
        # The result does not list candidates (context:inspect does), so none are explained.
        outcome = await service.assemble(replace(params.request(), explain=False))
        return AssembleResult(**result_fields(outcome))

    @registry.method("context:inspect", params=InspectParams, result=InspectResult,
                     summary="Assemble and explain every candidate (debug mode, inspector token only).",
                     errors=(InspectForbidden, *_ASSEMBLE_ERRORS))
    async def inspect(params: InspectParams, ctx: CallContext) -> InspectResult:
        if not ctx.is_inspector:
            raise InspectForbidden()
        override = None
        if params.budget_override is not None:
            override = validate_profile(params.budget_override.apply(await profiles.get(params.project_id)))
        outcome = await service.assemble(params.request(), override=override, remember=False)
        return _inspect_result(outcome)

    @registry.method("context:budget:get", params=ProjectRef, result=BudgetProfileWire,
                     summary="The project's budget profile and its version.", errors=(ProjectNotFound,))
    async def budget_get(params: ProjectRef, ctx: CallContext) -> BudgetProfileWire:
        return _profile_wire(params.project_id, await profiles.get(params.project_id))

    @registry.method("context:budget:update", params=BudgetUpdateParams, result=BudgetProfileWire,
                     summary="Change the budget profile if `version` is still current.",
                     errors=(ProjectNotFound, BudgetConflict, InvalidParams))
    async def budget_update(params: BudgetUpdateParams, ctx: CallContext) -> BudgetProfileWire:
        current = await profiles.get(params.project_id)
        if current.version != params.version:
            raise BudgetConflict(currentVersion=current.version)
        updated = await profiles.update(params.project_id, params.version, params.apply(current))
        return _profile_wire(params.project_id, updated)

    @registry.method("debug:faults:set", params=FaultsParams, result=FaultsResult,
                     summary="Switch on injected faults for degradation tests (debug mode, inspector token "
                             "only).",
                     errors=(Forbidden, InspectForbidden))
    async def faults_set(params: FaultsParams, ctx: CallContext) -> FaultsResult:
        if not ctx.debug:
            raise Forbidden("debug:faults:set is only available in debug mode")
        if not ctx.is_inspector:  # faults are global: a renderer could switch every client's sources off
            raise InspectForbidden("debug:faults:set needs debug mode and the inspector token")
        service.faults.set(frozenset(params.faults))
        return FaultsResult(faults=sorted(service.faults.active))
