"""The assembly pipeline for any plan: resolve, screen, reduce, render, hash.

Pure and deterministic: it takes a plan, gathered items, the window and the
caller's variables and returns an :class:`Assembly`. The returned
``token_count`` is the tokenizer's count of the returned prompt and never
exceeds the budget total.

Reduction runs the plan's ``trim`` list in order: a ``cap`` step whenever its
section is over its cap, a ``fit`` step while the prompt (estimated from its
sections' counts) is over the total. Then the exact count of the rendered
prompt is checked, and while it is over, the plan's ``last_resort`` sections
are cut in turn (:mod:`services.context.reduce`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from services.context.budget import MAX_INPUT_TOKENS, make_budget
from services.context.candidates import candidates
from services.context.counting import CountCache
from services.context.hashing import hash_prefixes, sha256_hex
from services.context.memo import Memo, NoMemo
from services.context.models import Assembly, BudgetProfile, Item, ItemReport, LayerResult, Window
from services.context.plan import Plan, holds
from services.context.reduce import State, fit, verify
from services.context.screening import check_scope, dropped
from services.context.templates import resolve_texts
from services.errors import InputTooLarge


@dataclass(frozen=True, slots=True)
class Request:
    """Everything one assembly needs, already gathered."""

    project_id: str
    language: str
    plan: Plan
    profile: BudgetProfile  # context window and output reserve
    system_prompt_tokens: int
    items: tuple[Item, ...]
    window: Window | None
    instruction: str | None = None
    instruction_tokens: int = 0
    warnings: tuple[str, ...] = ()
    variables: Mapping[str, str] = field(default_factory=dict)
    facts: frozenset[str] = frozenset()
    variable_tokens: int = 0  # the caller's variables, counted towards the input cap
    # Report every candidate's fate (Assembly.reports). context:assemble does not send them, and a
    # report per dropped candidate (hundreds of retrieved passages) costs more than the drop itself.
    explain: bool = True


def _gathered(plan: Plan, items: tuple[Item, ...]) -> tuple[int, int]:
    """Tokens and characters of the items the input cap counts: all but passages from the
    project's index (at most MAX_RETRIEVED chunks of about 200 tokens, bounded apart and trimmed
    by the budget like any candidate: not the writer's input)."""
    bounded = plan.bounded_parts
    counted = [i for i in items if (i.layer, i.section) not in bounded]
    return sum(max(i.tokens, 0) for i in counted), sum(len(i.text) for i in counted)


def fresh_chars(request: Request) -> int:
    """Characters of text the assembly may have to count: the window, the instruction, the
    variables and the gathered items, except passages from the index (counted when indexed, at most
    MAX_RETRIEVED of them: only those kept are rendered and counted). The measure of its work that
    decides whether it runs off the event loop."""
    window = request.window
    chars = _gathered(request.plan, request.items)[1]
    chars += len(request.instruction or "") + sum(map(len, request.variables.values()))
    return chars + (len(window.before) + len(window.after) if window else 0)


def _check_input_size(request: Request) -> None:
    window = request.window
    gathered = _gathered(request.plan, request.items)[0]
    gathered += request.instruction_tokens + request.variable_tokens
    gathered += (window.tokens_before + window.tokens_after) if window else 0
    if gathered > MAX_INPUT_TOKENS:
        raise InputTooLarge(tokens=gathered, limit=MAX_INPUT_TOKENS)


def _active(request: Request) -> tuple[Plan, list[Item], list[ItemReport]]:
    """The plan without the sections and parts whose conditions do not hold; the items that go
    in what is left; and a report for each item that went with a section or part."""
    facts = request.facts
    sections = []
    for section in request.plan.sections:
        if not holds(section.condition, facts):
            continue
        parts = tuple(p for p in section.parts if holds(p.condition, facts))
        sections.append(replace(section, parts=parts) if len(parts) != len(section.parts) else section)
    if len(sections) == len(request.plan.sections) and all(
            a is b for a, b in zip(sections, request.plan.sections, strict=True)):
        return request.plan, list(request.items), []
    plan = replace(request.plan, sections=tuple(sections))
    kept = {(s.id, p.id) for s in sections for p in s.parts}
    planned = {(s.id, p.id) for s in request.plan.sections for p in s.parts}
    items: list[Item] = []
    reports: list[ItemReport] = []
    for item in request.items:
        where = (item.layer, item.section)
        if where in planned and where not in kept:
            reports.append(dropped(item, "condition"))
        else:
            items.append(item)  # screening judges the rest, malformed ones included
    return plan, items, reports


def _reports(state: State) -> list[ItemReport]:
    if not state.request.explain:
        return []
    # Positional: a keyword call costs a quarter more, and there are hundreds.
    included = [
        ItemReport(i.id, i.layer, i.section, i.source, i.tokens, i.key, i.key_name, "included", None,
                   i.tokens, i.group, i.tier)
        for section in state.plan.sections for i in state.kept[section.id]
    ]
    if state.trimmed_items:
        for report, i in zip(included, (i for s in state.plan.sections for i in state.kept[s.id]),
                             strict=True):
            reason = state.trimmed_items.get(id(i))
            if reason is not None:
                report.fate, report.reason = "trimmed", reason
                report.tokens = state.full_tokens.get(id(i), i.tokens)
    window = state.request.window
    holder = state.window_section
    if window is not None and holder is not None and (window.before or window.after):
        part = holder.window_part
        full = window.tokens_before + window.tokens_after
        kept = state.count(state.before) + state.count(state.after)
        cut = state.window_cut
        included.append(ItemReport(
            id="window", layer=holder.id, section=part.id if part else "window", source="document",
            tokens=full, key=0.0, key_name="distance", fate="trimmed" if cut else "included",
            reason="budget" if cut else None, kept_tokens=kept))
    return included + state.reports


def assemble(request: Request, counter: CountCache, memo: Memo | None = None) -> Assembly:
    """Build the prompt for ``request`` within its budget, explaining every choice."""
    memo = memo or NoMemo()
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = round((now - clock) * 1000, 3)
        clock = now

    check_scope(request.items, request.project_id)
    _check_input_size(request)
    plan, items, conditioned = _active(request)
    budget = make_budget(request.profile, plan, request.system_prompt_tokens)
    found = candidates(plan, items, request.window, budget, memo, request.explain)
    found.screened.reports[:0] = conditioned
    state = State.start(request, plan, budget, counter.count, memo, found.screened,
                        resolve_texts(plan, request.language, request.variables, request.facts,
                                      request.instruction))
    state.tail, state.named = found.tail, found.named
    state.kept.update(found.ordered)
    lap("screen")
    fit(state, caps_only=True)
    lap("rules")
    fit(state, caps_only=False)
    lap("budget")
    prompt, ends, tokens, texts = verify(state)
    lap("render")
    hashes, sizes = hash_prefixes(prompt, ends)
    lap("hash")
    stable = [s.id for s in plan.sections if s.stable]
    stable_end = ends[stable[-1]] if stable else 0
    # The hash of the last stable section's end is the hash of prompt[:stable_end]: the stable prefix's.
    stable_hash = hashes[stable[-1]] if stable else sha256_hex("")
    layers = {
        s.id: LayerResult(tokens=state.size(s.id), truncated=s.id in state.truncated,
                          text=texts[s.id], items=len(state.kept[s.id]), role=s.role,
                          chunks=any(p.bounded for p in s.parts))
        for s in plan.sections
    }
    stable_ends = tuple((s, sizes[s]) for s in stable)
    return Assembly(
        prompt=prompt, token_count=tokens, stable_prefix=prompt[:stable_end], stable_prefix_hash=stable_hash,
        prefix_hashes=hashes, layers=layers, budget=budget, warnings=tuple(state.warnings),
        reports=tuple(_reports(state)), timings_ms=timings, reductions=tuple(state.reductions),
        stable_ends=stable_ends, profile=plan.name, part_texts=dict(state.texts),
    )


__all__ = ["Request", "assemble", "fresh_chars"]
