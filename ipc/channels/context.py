"""context:* and debug:faults:set: the engine on the wire."""

from __future__ import annotations

from dataclasses import replace

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
from services.context.models import LAYER_ORDER, BudgetProfile, Layer

_ASSEMBLE_ERRORS = (ProjectNotFound, DocumentNotFound, SkillNotFound, InvalidParams, InputTooLarge,
                    ScopeViolation, Backpressure)


class AssembleParams(WireModel):
    project_id: str = Field(min_length=1, max_length=64)
    document_id: str = Field(min_length=1, max_length=1024)
    cursor_position: int = Field(ge=0)
    skill_id: str = Field(min_length=1, max_length=64)
    additional_input: str | None = None

    def request(self) -> AssembleRequest:
        return AssembleRequest(project_id=self.project_id, document_id=self.document_id,
                               cursor_position=self.cursor_position, skill_id=self.skill_id,
                               additional_input=self.additional_input or "")


class LayerInfo(WireModel):
    tokens: int
    truncated: bool


class RetrievedInfo(LayerInfo):
    chunks: int


class Layers(WireModel):
    rules: LayerInfo
    settings: LayerInfo
    retrieved: RetrievedInfo
    immediate: LayerInfo


class BudgetInfo(WireModel):
    context_window: int
    output_reserve: int
    system_prompt_tokens: int
    total: int


class PerLayer(WireModel):
    rules: str
    settings: str
    retrieved: str
    immediate: str


class PrefixDivergence(WireModel):
    layer: str
    byte_offset: int


class TokenizerUse(WireModel):
    encoding: str
    exact: bool


class AssembleResult(WireModel):
    prompt: str
    token_count: int
    stable_prefix_hash: str
    stable_prefix_unchanged: bool
    layers: Layers
    warnings: list[str]
    budget: BudgetInfo
    prefix_hashes: PerLayer
    prefix_divergence: PrefixDivergence | None
    system_prompt: str
    tokenizer: TokenizerUse


class LayerNumbers(WireModel):
    rules: float
    settings: float
    retrieved: float
    immediate: float


class BudgetArithmetic(WireModel):
    total: int
    shares: LayerNumbers
    minimums: LayerNumbers
    used: LayerNumbers


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
    layer_texts: PerLayer
    arithmetic: BudgetArithmetic
    timings_ms: dict[str, float]


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


def _result_fields(outcome: Outcome) -> dict[str, object]:
    a = outcome.assembly
    layer = a.layers
    return {
        "prompt": a.prompt, "token_count": a.token_count, "stable_prefix_hash": a.stable_prefix_hash,
        "stable_prefix_unchanged": outcome.stable_prefix_unchanged,
        "layers": Layers(
            rules=LayerInfo(tokens=layer[Layer.RULES].tokens, truncated=layer[Layer.RULES].truncated),
            settings=LayerInfo(tokens=layer[Layer.SETTINGS].tokens,
                               truncated=layer[Layer.SETTINGS].truncated),
            retrieved=RetrievedInfo(tokens=layer[Layer.RETRIEVED].tokens,
                                    truncated=layer[Layer.RETRIEVED].truncated, chunks=a.retrieved_chunks),
            immediate=LayerInfo(tokens=layer[Layer.IMMEDIATE].tokens,
                                truncated=layer[Layer.IMMEDIATE].truncated)),
        "warnings": list(a.warnings),
        "budget": BudgetInfo(context_window=a.budget.context_window, output_reserve=a.budget.output_reserve,
                             system_prompt_tokens=a.budget.system_prompt_tokens, total=a.budget.total),
        "prefix_hashes": PerLayer(**{k.value: v for k, v in a.prefix_hashes.items()}),
        "prefix_divergence": None if outcome.divergence is None else PrefixDivergence(
            layer=outcome.divergence.layer.value, byte_offset=outcome.divergence.byte_offset),
        "system_prompt": outcome.system_prompt,
        "tokenizer": TokenizerUse(encoding=outcome.tokenizer, exact=outcome.exact),
    }


def _inspect_result(outcome: Outcome) -> InspectResult:
    a = outcome.assembly
    return InspectResult(
        **_result_fields(outcome),
        candidates=[Candidate(id=r.id, layer=r.layer.value, section=r.section, source=r.source,
                              tokens=r.tokens, key=r.key, key_name=r.key_name, fate=r.fate,
                              kept_tokens=r.kept_tokens, reason=r.reason) for r in a.reports],
        layer_texts=PerLayer(**{k.value: v.text for k, v in a.layers.items()}),
        arithmetic=BudgetArithmetic(
            total=a.budget.total,
            shares=_per_layer({k: float(v) for k, v in a.budget.shares.items()}),
            minimums=_per_layer({k: float(v) for k, v in a.budget.minimums.items()}),
            used=_per_layer({k: float(v.tokens) for k, v in a.layers.items()})),
        timings_ms=a.timings_ms)


def register_context(registry: Registry, service: ContextService, profiles: BudgetProfiles) -> None:
    @registry.method("context:assemble", params=AssembleParams, result=AssembleResult,
                     summary="Assemble the four-layer prompt for the cursor, within the budget.",
                     errors=_ASSEMBLE_ERRORS)
    async def assemble(params: AssembleParams, ctx: CallContext) -> AssembleResult:
        outcome = await service.assemble(params.request())
        return AssembleResult(**_result_fields(outcome))

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
                     summary="Switch on injected faults for degradation tests (debug mode only).",
                     errors=(Forbidden,))
    async def faults_set(params: FaultsParams, ctx: CallContext) -> FaultsResult:
        if not ctx.debug:
            raise Forbidden("debug:faults:set is only available in debug mode")
        service.faults.set(frozenset(params.faults))
        return FaultsResult(faults=sorted(service.faults.active))
