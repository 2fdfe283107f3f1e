"""context:assemble and context:inspect as one service.

Resolve the request (project settings, skill, budget profile, document
window), gather every provider concurrently with a deadline, run the pure
engine off the event loop, and compare the stable prefix with the previous
assembly of the same (project, document, skill).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from services.assembly.faults import FailingTokenizer, Fault, Faults
from services.assembly.prefixes import Prefix, PrefixMemory
from services.concurrency.gate import Gate
from services.concurrency.limiter import KeyedLimiter
from services.context.budget import MAX_INPUT_TOKENS, make_budget
from services.context.counting import CountCache
from services.context.engine import Request, assemble
from services.context.hashing import divergence
from services.context.models import (
    DEFAULT_PROFILE,
    Assembly,
    BudgetProfile,
    Divergence,
    Item,
    Layer,
    Window,
)
from services.context.skills import Skill, get_skill
from services.errors import InputTooLarge
from services.sources.base import GatherContext, Provider
from services.sources.relevance import features
from services.sources.window import cut_window
from services.tokenizer import Tokenizer
from services.tokenizer.estimate import ConservativeEstimate
from services.tokenizer.registry import TokenizerRegistry

_log = structlog.get_logger("context.service")

UNAVAILABLE = {
    "zh": {"kg": "知识图谱数据未注入", "memory": "记忆数据未注入", "retrieval": "检索数据未注入",
           "constraints": "创作约束未注入"},
    "en": {"kg": "knowledge graph data not injected", "memory": "memory data not injected",
           "retrieval": "retrieved passages not injected", "constraints": "constraints not injected"},
}
FALLBACK = {"zh": "分词器异常，已回退到默认预算与保守估算", "en": "tokenizer failed; default budget and a "
            "conservative estimate used"}
_COUNT_PIECE = 4096  # characters counted at a time when checking the input size
# Assemblies of all documents doing work at once; the rest wait their turn, in order, before any of
# their work (and any provider deadline) starts. The work is CPU-bound and mostly holds the GIL, so
# more at once only interleaves them: each takes longer and queued thread jobs pass the deadlines.
ASSEMBLY_CONCURRENCY = 4


class SettingsLike(Protocol):
    @property
    def language(self) -> str: ...
    @property
    def narrative_person(self) -> str: ...
    @property
    def style_notes(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def tokenizer_path(self) -> str | None: ...
    @property
    def skill_prompts(self) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True)
class AssembleRequest:
    project_id: str
    document_id: str
    cursor_position: int
    skill_id: str
    additional_input: str = ""


@dataclass(frozen=True, slots=True)
class Outcome:
    assembly: Assembly
    system_prompt: str
    stable_prefix_unchanged: bool
    divergence: Divergence | None
    tokenizer: str
    exact: bool


@dataclass(frozen=True, slots=True)
class _Prepared:
    window: Window
    system_tokens: int
    instruction: str
    instruction_tokens: int
    cursor_features: frozenset[str]


@dataclass(frozen=True)
class Collaborators:
    settings: Callable[[str], Awaitable[SettingsLike]]
    read_document: Callable[[str, str], Awaitable[str]]
    profiles: Callable[[str], Awaitable[BudgetProfile]]
    providers: Sequence[Provider]
    tokenizers: TokenizerRegistry


class ContextService:
    def __init__(self, collaborators: Collaborators, *, deadline: float = 2.0,
                 faults: Faults | None = None, prefixes: PrefixMemory | None = None,
                 limiter: KeyedLimiter | None = None, concurrency: int = ASSEMBLY_CONCURRENCY) -> None:
        self._c = collaborators
        self._deadline = deadline
        self.concurrency = concurrency
        self.gate = Gate(concurrency)
        # A document's queue is judged by how long the work already at the gate will take.
        self.limiter = limiter or KeyedLimiter(pace=self.gate.expected)
        self.faults = faults or Faults()
        self._prefixes = prefixes or PrefixMemory()
        self._counters: dict[int, CountCache] = {}

    async def assemble(self, request: AssembleRequest, *, override: BudgetProfile | None = None,
                       remember: bool = True) -> Outcome:
        """Assemble within the per-document concurrency limit (CONTEXT_BACKPRESSURE past it, or
        when the wait for a slot would pass the deadline), then within the global one
        (``concurrency`` at once, the others wait in arrival order)."""
        async with self.limiter.slot((request.project_id, request.document_id)), self.gate.turn():
            return await self._assemble(request, override, remember)

    async def _assemble(self, request: AssembleRequest, override: BudgetProfile | None,
                        remember: bool) -> Outcome:
        settings = await self._c.settings(request.project_id)
        skill = get_skill(request.skill_id)
        language = settings.language if settings.language in UNAVAILABLE else "en"
        system_prompt = settings.skill_prompts.get(skill.id) or skill.prompt_for(language)
        counter, warnings = self._counter(settings, system_prompt, language)
        profile = override or await self._c.profiles(request.project_id)
        if warnings:
            profile = DEFAULT_PROFILE
        text = await self._c.read_document(request.project_id, request.document_id)
        prepared = await asyncio.to_thread(self._prepare, request, text, skill, system_prompt, profile,
                                           counter)
        ctx = GatherContext(project_id=request.project_id, document_id=request.document_id,
                            language=language, skill=skill, window=prepared.window,
                            additional_input=request.additional_input, counter=counter,
                            cursor_features=prepared.cursor_features)
        gathered, gather_warnings = await self._gather(ctx)
        items = (*self._settings_items(settings, request.project_id, counter), *gathered)
        engine_request = Request(
            project_id=request.project_id, language=language, profile=profile,
            system_prompt_tokens=prepared.system_tokens, items=items, window=prepared.window,
            instruction=prepared.instruction or None, instruction_tokens=prepared.instruction_tokens,
            warnings=(*warnings, *gather_warnings))
        assembly = await asyncio.to_thread(assemble, engine_request, counter)
        return self._outcome(request, assembly, system_prompt, counter, remember)

    def _counter(self, settings: SettingsLike, system_prompt: str,
                 language: str) -> tuple[CountCache, tuple[str, ...]]:
        tokenizer: Tokenizer = self._c.tokenizers.for_model(settings.model, settings.tokenizer_path)
        if Fault.TOKENIZER in self.faults:
            tokenizer = FailingTokenizer(tokenizer.info)  # type: ignore[assignment]
        counter = self._cached(tokenizer)
        try:
            counter.count(system_prompt)
        except Exception as exc:  # any tokenizer failure: fall back rather than fail the writer
            _log.warning("context.budget_fallback", exc_type=type(exc).__name__)
            return self._cached(ConservativeEstimate()), (f"CONTEXT_BUDGET_FALLBACK: {FALLBACK[language]}",)
        return counter, ()

    def _cached(self, tokenizer: Tokenizer) -> CountCache:
        if isinstance(tokenizer, FailingTokenizer | ConservativeEstimate):
            return CountCache(tokenizer)
        key = id(tokenizer)
        if key not in self._counters:
            self._counters[key] = CountCache(tokenizer)
        return self._counters[key]

    @staticmethod
    def _prepare(request: AssembleRequest, text: str, skill: Skill, system_prompt: str,
                 profile: BudgetProfile, counter: CountCache) -> _Prepared:
        """The CPU part of resolving: the input-size check, the budget and the window."""
        instruction = request.additional_input.strip()
        instruction_tokens = _count_capped(instruction, MAX_INPUT_TOKENS, counter)
        system_tokens = counter.count(system_prompt)
        budget = make_budget(profile, system_tokens)
        window_tokens = min(budget.total, max(budget.shares[Layer.IMMEDIATE],
                                              budget.minimums[Layer.IMMEDIATE]))
        window = cut_window(text, request.cursor_position, skill, window_tokens, counter)
        near = features(window.before + window.after)  # once here, for every provider that ranks by it
        return _Prepared(window, system_tokens, instruction, instruction_tokens, near)

    async def _gather(self, ctx: GatherContext) -> tuple[list[Item], list[str]]:
        results = await asyncio.gather(*(self._run(p, ctx) for p in self._c.providers))
        items: list[Item] = []
        warnings: list[str] = []
        for provider, result in zip(self._c.providers, results, strict=True):
            if result is None:
                warning = f"{provider.warning}: {UNAVAILABLE[ctx.language].get(provider.name, provider.name)}"
                if warning not in warnings:
                    warnings.append(warning)
            else:
                items.extend(result)
        if Fault.FOREIGN_ITEM in self.faults:
            items.append(Item(id="foreign:1", layer=Layer.RETRIEVED, section="passages", source="retrieval",
                              text="foreign passage", tokens=2, key=1.0, key_name="score",
                              project_id="foreign-project"))
        return items, warnings

    async def _run(self, provider: Provider, ctx: GatherContext) -> Sequence[Item] | None:
        try:
            if provider.name in self.faults:
                raise RuntimeError("injected fault")
            async with asyncio.timeout(self._deadline):
                return await provider.gather(ctx)
        except Exception as exc:  # a failing source degrades the prompt, never the request
            _log.warning("context.provider_failed", provider=provider.name, project_id=ctx.project_id,
                         exc_type=type(exc).__name__)
            return None

    @staticmethod
    def _settings_items(settings: SettingsLike, project_id: str, counter: CountCache) -> list[Item]:
        items = []
        if settings.narrative_person.strip():
            label = "叙述人称：" if settings.language == "zh" else "Narrative person: "
            text = label + settings.narrative_person.strip()
            items.append(Item(id="settings:narrative", layer=Layer.RULES, section="narrative",
                              source="project", text=text, tokens=counter.count(text), key=1.0,
                              key_name="priority", project_id=project_id, origin="project"))
        if settings.style_notes.strip():
            text = settings.style_notes.strip()
            items.append(Item(id="settings:style", layer=Layer.SETTINGS, section="style", source="project",
                              text=text, tokens=counter.count(text), key=1.0, key_name="confidence",
                              project_id=project_id, origin="project"))
        return items

    def _outcome(self, request: AssembleRequest, assembly: Assembly, system_prompt: str,
                 counter: CountCache, remember: bool) -> Outcome:
        key = (request.project_id, request.document_id, request.skill_id)
        previous = self._prefixes.previous(key)
        unchanged = previous is not None and previous.hash == assembly.stable_prefix_hash
        rules_end = len(assembly.layers[Layer.RULES].text.encode("utf-8", "surrogatepass"))
        diverged = None
        if previous is not None and not unchanged:
            diverged = divergence(previous.text, assembly.stable_prefix,
                                  max(previous.rules_end, rules_end))
        if remember:
            self._prefixes.remember(key, Prefix(assembly.stable_prefix_hash, assembly.stable_prefix,
                                                rules_end))
        _log.info("context.assembled", project_id=request.project_id, document_id=request.document_id,
                  skill=request.skill_id, tokens=assembly.token_count, total=assembly.budget.total,
                  prefix_hash=assembly.stable_prefix_hash[:16], unchanged=unchanged,
                  warnings=len(assembly.warnings))
        info = counter.info
        return Outcome(assembly=assembly, system_prompt=system_prompt, stable_prefix_unchanged=unchanged,
                       divergence=diverged, tokenizer=info.encoding, exact=info.exact)


def _count_capped(text: str, cap: int, counter: CountCache) -> int:
    """Count ``text`` piece by piece, refusing as soon as it passes ``cap`` tokens."""
    total = 0
    for start in range(0, len(text), _COUNT_PIECE):
        total += counter.tokenizer.count(text[start:start + _COUNT_PIECE])
        if total > cap:
            raise InputTooLarge(limit=cap)
    return total
