"""context:assemble and context:inspect as one service.

Resolve the request (the profile's plan, project settings, skill, budget,
document window), gather the providers of the plan's sources concurrently with
a deadline, run the pure engine off the event loop, and compare the stable
prefix with the previous assembly of the same (project, document, skill, profile).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol

import structlog

from services.assembly.faults import FailingTokenizer, Fault, Faults
from services.assembly.prefixes import Prefix, PrefixMemory
from services.caches import (
    Gathered,
    LineFeatures,
    WindowFeatures,
    gathered_cache,
    line_features_cache,
    window_features_cache,
)
from services.concurrency.gate import ASSEMBLY_CONCURRENCY, Gate
from services.concurrency.limiter import KeyedLimiter
from services.concurrency.offload import off_loop
from services.context.budget import MAX_INPUT_TOKENS, make_budget, window_allowance
from services.context.counting import CountCache
from services.context.engine import Request, assemble, fresh_chars
from services.context.hashing import divergence
from services.context.memo import ProjectMemos
from services.context.models import (
    DEFAULT_PROFILE,
    LAYER_ORDER,
    Assembly,
    BudgetProfile,
    Divergence,
    Item,
    Window,
)
from services.context.plan import Plan
from services.context.skills import Skill, get_skill
from services.errors import InputTooLarge, InvalidInput
from services.profiles.catalog import PUBLISHED
from services.profiles.plans import DEFAULT_PROFILE_NAME, BuiltInPlans, PlanSource
from services.sources.base import GatherContext, Provider
from services.sources.kept import keep_items, kept_items
from services.sources.relevance import features, features_by_line, union_by_line
from services.sources.window import cut_window
from services.tokenizer import Tokenizer
from services.tokenizer.estimate import ConservativeEstimate
from services.tokenizer.registry import TokenizerRegistry

_log = structlog.get_logger("context.service")

UNAVAILABLE = {
    "zh": {"kg": "知识图谱数据未注入", "memory": "记忆数据未注入", "retrieval": "检索数据未注入",
           "constraints": "创作约束未注入", "segments": "提示片段未注入"},
    "en": {"kg": "knowledge graph data not injected", "memory": "memory data not injected",
           "retrieval": "retrieved passages not injected", "constraints": "constraints not injected",
           "segments": "prompt segments not injected"},
}
FALLBACK = {"zh": "分词器异常，已回退到默认预算与保守估算", "en": "tokenizer failed; default budget and a "
            "conservative estimate used"}
TOKENIZER_INVALID = {
    "zh": {"missing": "项目设置的分词器文件已不存在", "unreadable": "项目设置的分词器文件无法读取",
           "not_a_tokenizer": "项目设置的分词器文件不是有效的 tokenizer.json"},
    "en": {"missing": "the project's tokenizer file is gone", "unreadable": "the project's tokenizer file "
           "cannot be read", "not_a_tokenizer": "the project's tokenizer file is not a valid tokenizer.json"},
}
TOKENIZER_INSTEAD = {"zh": "，已改用 {encoding} 计数", "en": "; counted with {encoding} instead"}
TOKENIZER_ESTIMATE = {"zh": "本机没有 {encoding} 编码，计数为估算",
                      "en": "{encoding} is not on this machine; counts are estimates"}
MAX_COUNTERS = 16  # token count caches kept, one per tokenizer in use
_COUNT_PIECE = 4096  # characters counted at a time when checking the input size
# The longest a provider waits for its parts to load (the vector store and the encoder after a start).
LOAD_DEADLINE = 30.0


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
    document_id: str | None = None
    cursor_position: int | None = None
    skill_id: str | None = None
    additional_input: str = ""
    profile_id: str = DEFAULT_PROFILE_NAME
    variables: Mapping[str, str] = field(default_factory=dict)
    # From a server-side caller, never a client: values for published ${...} names (a character
    # conversation's names and memories) and providers of its own items (its message history).
    published: Mapping[str, str] = field(default_factory=dict)
    providers: tuple[Provider, ...] = ()
    explain: bool = True  # Outcome.assembly.reports: every candidate's fate (context:inspect, profiles)


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
    window: Window | None
    system_tokens: int
    instruction: str
    instruction_tokens: int
    variable_tokens: int
    cursor_features: frozenset[str]


@dataclass(frozen=True)
class Collaborators:
    settings: Callable[[str], Awaitable[SettingsLike]]
    read_document: Callable[[str, str], Awaitable[str]]
    profiles: Callable[[str], Awaitable[BudgetProfile]]
    providers: Sequence[Provider]
    tokenizers: TokenizerRegistry
    plans: PlanSource = field(default_factory=lambda: BuiltInPlans())


class ContextService:
    def __init__(self, collaborators: Collaborators, *, deadline: float = 2.0,
                 faults: Faults | None = None, prefixes: PrefixMemory | None = None,
                 limiter: KeyedLimiter | None = None, concurrency: int = ASSEMBLY_CONCURRENCY,
                 memos: ProjectMemos | None = None, line_features: LineFeatures | None = None,
                 window_features: WindowFeatures | None = None, kept: Gathered | None = None,
                 gate: Gate | None = None) -> None:
        self._c = collaborators
        self._deadline = deadline
        self.gate = gate or Gate(concurrency)
        self.concurrency = self.gate.width
        # A document's queue is judged by how long the work already at the gate will take.
        self.limiter = limiter or KeyedLimiter(pace=self.gate.expected)
        self.faults = faults or Faults()
        self._prefixes = prefixes or PrefixMemory()
        self._memos = memos or ProjectMemos()
        # Relevance features of the window's lines, per project: neighbouring keystrokes share most.
        self._line_features = line_features if line_features is not None else line_features_cache()
        self._window_features = window_features if window_features is not None else window_features_cache()
        # The settings' items, kept with the very settings record they came from (until an update):
        # the same item objects at every assembly let the engine's memo recognise the same items.
        self._kept = kept if kept is not None else gathered_cache()
        self._counters: dict[int, CountCache] = {}

    async def assemble(self, request: AssembleRequest, *, override: BudgetProfile | None = None,
                       remember: bool = True) -> Outcome:
        """Assemble within the per-document concurrency limit (CONTEXT_BACKPRESSURE past it, or
        when the wait for a slot would pass the deadline), then within the global one
        (``concurrency`` at once, the others wait in arrival order)."""
        plan = _bind(await self._c.plans.plan(request.project_id, request.profile_id), request.variables)
        _check_request(request, plan)
        key = (request.project_id, request.document_id or "")
        async with self.limiter.slot(key), self.gate.turn():
            return await self._assemble(request, plan, override, remember)

    async def _assemble(self, request: AssembleRequest, plan: Plan, override: BudgetProfile | None,
                        remember: bool) -> Outcome:
        settings = await self._c.settings(request.project_id)
        skill = get_skill(request.skill_id) if request.skill_id is not None else None
        language = settings.language if settings.language in UNAVAILABLE else "en"
        system_prompt = ""
        if skill is not None:
            system_prompt = settings.skill_prompts.get(skill.id) or skill.prompt_for(language)
        await self._load_tokenizer(settings)
        counter, fallback, warnings = self._counter(request.project_id, settings, system_prompt, language)
        profile = override or await self._c.profiles(request.project_id)
        if fallback:
            profile = DEFAULT_PROFILE
        if isinstance(plan.context_window, int):  # the profile's own window, e.g. a game's token budget
            profile = replace(profile, context_window=plan.context_window,
                              output_reserve=int(plan.output_reserve))
        elif not fallback and plan.name == DEFAULT_PROFILE_NAME:  # the project's table is novel's
            plan = plan.with_budgets(dict(zip(LAYER_ORDER, profile.ratios, strict=True)),
                                     dict(zip(LAYER_ORDER, profile.minimums, strict=True)))
        text = None
        if plan.window_section is not None and request.document_id is not None:
            text = await self._c.read_document(request.project_id, request.document_id)
        reading = len(text or "") + len(request.additional_input) + sum(map(len, request.variables.values()))
        prepared = await off_loop(reading, self._prepare, request, plan, text, skill, system_prompt, profile,
                                  counter)
        window = prepared.window or Window("", "", 0, 0, 0, 0)
        ctx = GatherContext(project_id=request.project_id, document_id=request.document_id or "",
                            language=language, skill=skill or NO_SKILL, window=window,
                            additional_input=request.additional_input, counter=counter,
                            cursor_features=prepared.cursor_features, placement=plan.placed,
                            variables=request.variables)
        gathered, gather_warnings = await self._gather(ctx, plan, request.providers)
        items = (*self._settings_items(settings, request.project_id, counter, ctx), *gathered)
        # Published values win: a caller cannot pose as the project or the system.
        variables = {**{k: v for k, v in request.variables.items() if k not in PUBLISHED},
                     **request.published, **_published(request, settings, language)}
        engine_request = Request(
            project_id=request.project_id, language=language, plan=plan, profile=profile,
            system_prompt_tokens=prepared.system_tokens, items=tuple(i for i in items if i.layer),
            window=prepared.window, instruction=prepared.instruction or None,
            instruction_tokens=prepared.instruction_tokens, warnings=(*warnings, *gather_warnings),
            variables=variables, facts=_facts(plan, items, {**plan.variables, **variables},
                                              prepared),
            variable_tokens=prepared.variable_tokens, explain=request.explain)
        memo = self._memos.for_project(request.project_id)
        assembly = await off_loop(fresh_chars(engine_request), assemble, engine_request, counter, memo)
        return self._outcome(request, assembly, system_prompt, counter, remember)

    async def counter(self, project_id: str) -> CountCache:
        """The token counter assemblies of ``project_id`` use (its model's tokenizer), for callers
        that size what they pass in (a character conversation's memory block)."""
        settings = await self._c.settings(project_id)
        language = settings.language if settings.language in UNAVAILABLE else "en"
        await self._load_tokenizer(settings)
        return self._counter(project_id, settings, "", language)[0]

    async def _load_tokenizer(self, settings: SettingsLike) -> None:
        """Load the project's tokenizer on a worker thread if it is not ready (an encoding takes a
        fraction of a second, a tokenizer file up to seconds): the loop answers others meanwhile."""
        if not self._c.tokenizers.ready(settings.model, settings.tokenizer_path):
            await asyncio.to_thread(self._c.tokenizers.for_model, settings.model, settings.tokenizer_path)

    def _counter(self, project_id: str, settings: SettingsLike, system_prompt: str,
                 language: str) -> tuple[CountCache, bool, tuple[str, ...]]:
        """(counter, whether it is the conservative fallback, warnings): a tokenizer file that does
        not load is TOKENIZER_INVALID (the default encoding counts); an encoding not on this machine
        is CONTEXT_TOKENIZER_ESTIMATE (its estimate counts); a tokenizer that fails is
        CONTEXT_BUDGET_FALLBACK (a conservative estimate counts, with the default budget)."""
        tokenizers = self._c.tokenizers
        tokenizer, problem = tokenizers.for_project(project_id, settings.model, settings.tokenizer_path)
        warnings: tuple[str, ...] = ()
        if problem is not None:
            warnings = (f"{problem.code}: {TOKENIZER_INVALID[language][problem.reason]}"
                        f"{TOKENIZER_INSTEAD[language].format(encoding=problem.fallback_encoding)}",)
        if not tokenizer.info.exact:  # the model's encoding is not bundled and not in tiktoken's cache
            warnings = (*warnings, "CONTEXT_TOKENIZER_ESTIMATE: "
                        + TOKENIZER_ESTIMATE[language].format(encoding=tokenizer.info.encoding))
        if Fault.TOKENIZER in self.faults:
            tokenizer = FailingTokenizer(tokenizer.info)  # type: ignore[assignment]
        counter = self._cached(tokenizer)
        try:
            counter.count(system_prompt or "x")
        except Exception as exc:  # any tokenizer failure: fall back rather than fail the writer
            _log.warning("context.budget_fallback", exc_type=type(exc).__name__)
            return (self._cached(ConservativeEstimate()), True,
                    (*warnings, f"CONTEXT_BUDGET_FALLBACK: {FALLBACK[language]}"))
        return counter, False, warnings

    def _cached(self, tokenizer: Tokenizer) -> CountCache:
        if isinstance(tokenizer, FailingTokenizer | ConservativeEstimate):
            return CountCache(tokenizer)
        key = id(tokenizer)
        if key not in self._counters:
            # A tokenizer file loaded again after it changed brings a new tokenizer: bounded.
            while len(self._counters) >= MAX_COUNTERS:
                del self._counters[next(iter(self._counters))]
            self._counters[key] = CountCache(tokenizer)
        return self._counters[key]

    def _prepare(self, request: AssembleRequest, plan: Plan, text: str | None, skill: Skill | None,
                 system_prompt: str, profile: BudgetProfile, counter: CountCache) -> _Prepared:
        """The CPU part of resolving: the input-size check, the budget and the window."""
        instruction = request.additional_input.strip()
        instruction_tokens = _count_capped(instruction, MAX_INPUT_TOKENS, counter)
        variable_tokens = _count_capped("\n".join(_request_texts(plan, request.variables)), MAX_INPUT_TOKENS,
                                        counter)
        system_tokens = counter.count(system_prompt)
        budget = make_budget(profile, plan, system_tokens)
        holder = plan.window_section
        if holder is None or text is None or skill is None or request.cursor_position is None:
            return _Prepared(None, system_tokens, instruction, instruction_tokens, variable_tokens,
                             frozenset())
        window = cut_window(text, request.cursor_position, skill, window_allowance(budget, holder), counter)
        # Once here, off the event loop, for every provider that ranks by it.
        project_id = request.project_id
        near = features_by_line(window.before + window.after, partial(self._known_features, project_id),
                                partial(self._features_between, project_id))
        return _Prepared(window, system_tokens, instruction, instruction_tokens, variable_tokens, near)

    def _known_features(self, project_id: str, line: str) -> frozenset[str]:
        return self._line_features.get_or_make(project_id, line, partial(features, line))

    def _features_between(self, project_id: str, lines: tuple[str, ...]) -> frozenset[str]:
        def make() -> tuple[frozenset[str], int]:
            found = union_by_line(lines, partial(self._known_features, project_id))
            return found, sum(map(len, lines)) + sum(map(len, found)) + len(lines)

        return self._window_features.get_or_make(project_id, lines, make)[0]

    async def _gather(self, ctx: GatherContext, plan: Plan,
                      own: Sequence[Provider] = ()) -> tuple[list[Item], list[str]]:
        wanted = plan.sources
        providers = [p for p in (*self._c.providers, *own) if wanted.intersection(p.sources)]
        results = await asyncio.gather(*(self._run(p, ctx) for p in providers))
        items: list[Item] = []
        warnings: list[str] = []
        for provider, result in zip(providers, results, strict=True):
            if result is None:
                warning = f"{provider.warning}: {UNAVAILABLE[ctx.language].get(provider.name, provider.name)}"
                if warning not in warnings:
                    warnings.append(warning)
            else:
                items.extend(result)
        if Fault.FOREIGN_ITEM in self.faults:
            # Planted where retrieved chunks go, as a compromised vector store would deliver it.
            layer, part = ctx.place("retrieval.passages") or next(iter(ctx.placement.values()), ("", ""))
            items.append(Item(id="foreign:1", layer=layer or "foreign", section=part, source="retrieval",
                              text="foreign passage", tokens=2, key=1.0, key_name="score",
                              project_id="foreign-project"))
        return items, warnings

    async def _run(self, provider: Provider, ctx: GatherContext) -> Sequence[Item] | None:
        try:
            if provider.name in self.faults:
                raise RuntimeError("injected fault")
            ready = getattr(provider, "ready", None)
            if ready is not None:  # parts still loading (retrieval just after a start): waited for apart
                async with asyncio.timeout(LOAD_DEADLINE):
                    await ready(ctx.project_id)
            async with asyncio.timeout(self._deadline):
                return await provider.gather(ctx)
        except Exception as exc:  # a failing source degrades the prompt, never the request
            _log.warning("context.provider_failed", provider=provider.name, project_id=ctx.project_id,
                         exc_type=type(exc).__name__)
            return None

    def _settings_items(self, settings: SettingsLike, project_id: str, counter: CountCache,
                        ctx: GatherContext) -> list[Item]:
        narrative, style = ctx.place("project.narrative"), ctx.place("project.style")
        key = ("settings", narrative, style, counter)
        found = kept_items(self._kept, project_id, key, (settings,))
        if found is not None:
            return found
        made = self._make_settings_items(settings, project_id, counter, narrative, style)
        return keep_items(self._kept, project_id, key, (settings,), made)

    @staticmethod
    def _make_settings_items(settings: SettingsLike, project_id: str, counter: CountCache,
                             narrative: tuple[str, str] | None, style: tuple[str, str] | None) -> list[Item]:
        items = []
        if narrative and settings.narrative_person.strip():
            label = "叙述人称：" if settings.language == "zh" else "Narrative person: "
            text = label + settings.narrative_person.strip()
            items.append(Item(id="settings:narrative", layer=narrative[0], section=narrative[1],
                              source="project", text=text, tokens=counter.count(text), key=1.0,
                              key_name="priority", project_id=project_id, origin="project"))
        if style and settings.style_notes.strip():
            text = settings.style_notes.strip()
            items.append(Item(id="settings:style", layer=style[0], section=style[1], source="project",
                              text=text, tokens=counter.count(text), key=1.0, key_name="confidence",
                              project_id=project_id, origin="project"))
        return items

    def _outcome(self, request: AssembleRequest, assembly: Assembly, system_prompt: str,
                 counter: CountCache, remember: bool) -> Outcome:
        key = (request.project_id, request.document_id or "", request.skill_id or "", assembly.profile)
        previous = self._prefixes.previous(key)
        unchanged = previous is not None and previous.hash == assembly.stable_prefix_hash
        diverged = None
        if previous is not None and not unchanged:
            ends = _widest(previous.ends, assembly.stable_ends)
            diverged = divergence(previous.text, assembly.stable_prefix, ends)
        if remember:
            self._prefixes.remember(key, Prefix(assembly.stable_prefix_hash, assembly.stable_prefix,
                                                assembly.stable_ends))
        _log.info("context.assembled", project_id=request.project_id, document_id=request.document_id,
                  skill=request.skill_id, profile=assembly.profile, tokens=assembly.token_count,
                  total=assembly.budget.total, prefix_hash=assembly.stable_prefix_hash[:16],
                  unchanged=unchanged, warnings=len(assembly.warnings), reductions=len(assembly.reductions))
        info = counter.info
        return Outcome(assembly=assembly, system_prompt=system_prompt, stable_prefix_unchanged=unchanged,
                       divergence=diverged, tokenizer=info.encoding, exact=info.exact)


NO_SKILL = Skill("none", {"en": ""}, after_share=0.0)


def _bind(plan: Plan, variables: Mapping[str, str]) -> Plan:
    try:
        return plan.bind(variables)
    except ValueError as exc:
        raise InvalidInput(f"Variable {exc.args[0]} must be a whole number of tokens",
                           variable=str(exc.args[0])) from None


def _check_request(request: AssembleRequest, plan: Plan) -> None:
    """A profile with a document window needs the document, the cursor and the skill."""
    if plan.window_section is None:
        return
    missing = [name for name, value in (("documentId", request.document_id),
                                        ("cursorPosition", request.cursor_position),
                                        ("skillId", request.skill_id)) if value is None]
    if missing:
        raise InvalidInput(f"Profile {plan.name!r} reads the document: {', '.join(missing)} required",
                           missing=missing)


def _request_texts(plan: Plan, variables: Mapping[str, str]) -> list[str]:
    names = {p.source.removeprefix("request.") for s in plan.sections for p in s.parts
             if p.kind == "text" and p.source.startswith("request.")}
    return [variables[n] for n in sorted(names) if n in variables]


def _published(request: AssembleRequest, settings: SettingsLike, language: str) -> dict[str, str]:
    """The facts about the request that ${project.*} and ${system.*} placeholders read."""
    return {"project.id": request.project_id, "project.language": language, "project.model": settings.model,
            "system.skill": request.skill_id or "", "system.profile": request.profile_id}


def _facts(plan: Plan, items: Sequence[Item], variables: Mapping[str, str],
           prepared: _Prepared) -> frozenset[str]:
    """``always``; each variable whose value (sent, else its default) is not empty, "false", "0"
    or "no"; and each fact of a source that gave something (the document window and the
    instruction included)."""
    truthy = {name for name, value in variables.items() if value.strip() and value.strip().lower()
              not in ("false", "0", "no")}
    if not plan.facts:
        return frozenset({"always", *truthy})
    by_place = {where: source for source, where in plan.placed.items()}
    given = {by_place.get((i.layer, i.section)) for i in items}
    if any(i.layer == "" for i in items):
        given |= {i.section for i in items if i.layer == ""}
    if prepared.window is not None and (prepared.window.before or prepared.window.after):
        given.add("document.window")
    if prepared.instruction:
        given.add("instruction")
    facts = {fact for fact, source in plan.facts.items() if source in given}
    return frozenset({"always", *truthy, *facts})


def _widest(old: Sequence[tuple[str, int]], new: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """Each stable section's end, the larger of two prefixes'."""
    ends = dict(old)
    for name, end in new:
        ends[name] = max(ends.get(name, 0), end)
    order = [name for name, _ in new] + [name for name, _ in old if name not in dict(new)]
    return [(name, ends[name]) for name in order]


def _count_capped(text: str, cap: int, counter: CountCache) -> int:
    """Count ``text`` piece by piece, refusing as soon as it passes ``cap`` tokens (``tokens``: those
    counted until then, a lower bound: the rest is never counted)."""
    if len(text) <= _COUNT_PIECE:
        return counter.count(text)  # one piece: the kept count, if this text came before
    total = 0
    for start in range(0, len(text), _COUNT_PIECE):
        total += counter.tokenizer.count(text[start:start + _COUNT_PIECE])
        if total > cap:
            raise InputTooLarge(limit=cap, tokens=total)
    return total
