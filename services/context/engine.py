"""The assembly pipeline: screen, shape Rules, fit the budget, render, hash.

Pure and deterministic: it takes gathered items, the window and a budget
profile and returns an :class:`Assembly`. The returned ``token_count`` is the
tokenizer's count of the returned prompt and never exceeds the budget total.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from services.context.budget import MAX_INPUT_TOKENS, make_budget, rules_allowance
from services.context.counting import CountCache
from services.context.hashing import prefix_hashes, sha256_hex
from services.context.models import (
    LAYER_ORDER,
    TRIM_ORDER,
    Assembly,
    Budget,
    BudgetProfile,
    Item,
    ItemReport,
    Layer,
    LayerResult,
    Window,
)
from services.context.render import join_layers, render_sections, render_window
from services.context.screening import check_scope, dropped, screen
from services.context.trim import keep_head, keep_tail
from services.errors import InputTooLarge

_log = structlog.get_logger("context.engine")
_MAX_FIX_ROUNDS = 64


@dataclass(frozen=True, slots=True)
class Request:
    """Everything one assembly needs, already gathered."""

    project_id: str
    language: str
    profile: BudgetProfile
    system_prompt_tokens: int
    items: tuple[Item, ...]
    window: Window | None
    instruction: str | None = None
    instruction_tokens: int = 0
    warnings: tuple[str, ...] = ()


@dataclass
class _State:
    request: Request
    budget: Budget
    count: Callable[[str], int]
    kept: dict[Layer, list[Item]]
    before: str
    after: str
    reports: list[ItemReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    truncated: set[Layer] = field(default_factory=set)

    def text(self, layer: Layer) -> str:
        if layer is Layer.IMMEDIATE:
            window = self.request.window
            cut = None if window is None else Window(self.before, self.after, window.start,
                                                      window.cursor, 0, 0)
            return render_window(cut, self.request.instruction, self.request.language)
        return render_sections(layer, self.kept[layer], self.request.language)

    def sizes(self) -> dict[Layer, int]:
        return {layer: self.count(self.text(layer)) for layer in LAYER_ORDER}

    def drop(self, item: Item, reason: str) -> None:
        self.kept[item.layer].remove(item)
        self.reports.append(dropped(item, reason))
        self.truncated.add(item.layer)


def _order(layer: Layer, items: list[Item], mentioned: set[str]) -> list[Item]:
    """Render order inside a layer: its sections in order, most important first."""
    def rank(item: Item) -> tuple[object, ...]:
        if item.section == "constraints":
            return (item.origin != "user", -item.key, item.id)
        if item.section == "entities":
            return (item.id not in mentioned, -item.key, item.id)
        return (-item.key, item.id)

    return sorted(items, key=rank)


def _mentioned(items: list[Item], window: Window | None) -> set[str]:
    text = (window.before + window.after) if window else ""
    return {i.id for i in items if any(name and name in text for name in i.names)}


def _over(state: _State, sizes: dict[Layer, int]) -> int:
    separators = sum(1 for layer in LAYER_ORDER if sizes[layer]) - 1
    return sum(sizes.values()) + max(separators, 0) - state.budget.total


def _shape_rules(state: _State, mentioned: set[str]) -> None:
    """Above its share, Rules warns and sheds kg content: least relevant entities, then kg constraints."""
    allowance = rules_allowance(state.budget)
    size = state.count(state.text(Layer.RULES))
    if size <= allowance:
        return
    state.warnings.append(f"CONTEXT_RULES_OVERBUDGET: rules use {size} tokens, share is {allowance}")
    _log.warning("context.rules_overbudget", project_id=state.request.project_id, tokens=size,
                 allowance=allowance)
    rules = state.kept[Layer.RULES]
    entities = [i for i in rules if i.section == "entities"]
    kg_constraints = sorted((i for i in rules if i.section == "constraints" and i.origin == "kg"),
                            key=lambda i: (i.key, i.id))
    for item in [*reversed(entities), *kg_constraints]:
        if size <= allowance:
            return
        reason = "rules_relevance" if item.section == "entities" else "rules_overbudget"
        state.drop(item, reason)
        if item.section == "constraints":
            _log.info("context.constraint_cut", project_id=state.request.project_id, constraint=item.id)
        size = state.count(state.text(Layer.RULES))


def _shrink_items(state: _State, layer: Layer, target: int, floor: int) -> None:
    """Drop the lowest-key items of ``layer`` until it fits ``target``, never going under ``floor``."""
    size = state.count(state.text(layer))
    while size > target and state.kept[layer]:
        lowest = min(state.kept[layer], key=lambda i: (i.key, i.id))
        rest = [i for i in state.kept[layer] if i is not lowest]
        if floor and state.count(render_sections(layer, rest, state.request.language)) < floor:
            return  # the minimum is a guarantee: keep whole items rather than fall below it
        state.drop(lowest, "budget")
        size = state.count(state.text(layer))


def _shrink_window(state: _State, target: int) -> None:
    """Cut the window from its far ends so the Immediate layer fits ``target`` tokens."""
    window = state.request.window
    if window is None or not (state.before or state.after):
        return
    size = state.count(state.text(Layer.IMMEDIATE))
    body = state.count(state.before) + state.count(state.after)
    room = max(body - (size - target), 0)
    after_share = state.count(state.after) / body if body else 0.0
    after_room = int(room * after_share)
    state.before = keep_tail(state.before, room - after_room, state.count)
    state.after = keep_head(state.after, after_room, state.count)
    state.truncated.add(Layer.IMMEDIATE)


def _shrink(state: _State, layer: Layer, target: int, floor: int = 0) -> None:
    if layer is Layer.IMMEDIATE:
        _shrink_window(state, target)
    else:
        _shrink_items(state, layer, target, floor)


def _fit(state: _State) -> None:
    """Trim Retrieved, Settings, Immediate to their minimums, then below them if needed."""
    sizes = state.sizes()
    for below_minimum in (False, True):
        for layer in TRIM_ORDER:
            over = _over(state, sizes)
            if over <= 0:
                return
            floor = 0 if below_minimum else state.budget.minimums[layer]
            target = max(floor, sizes[layer] - over)
            if target >= sizes[layer]:
                continue
            if below_minimum:
                state.warnings.append(f"CONTEXT_BELOW_MINIMUM: {layer.value} cut below its minimum")
            _shrink(state, layer, target, floor)
            sizes[layer] = state.count(state.text(layer))


def _verify(state: _State) -> tuple[str, dict[Layer, int], int]:
    """Render and count the real prompt; trim further while the exact count is over."""
    for _ in range(_MAX_FIX_ROUNDS):
        texts = {layer: state.text(layer) for layer in LAYER_ORDER}
        prompt, ends = join_layers(texts)
        tokens = state.count(prompt)
        excess = tokens - state.budget.total
        if excess <= 0:
            return prompt, ends, tokens
        _trim_excess(state, texts, excess)
    raise InputTooLarge("The context could not be fitted to the budget", total=state.budget.total)


def _trim_excess(state: _State, texts: dict[Layer, str], excess: int) -> None:
    for layer in (*TRIM_ORDER, Layer.RULES):
        size = state.count(texts[layer])
        has_content = bool(state.kept[layer]) or (layer is Layer.IMMEDIATE and (state.before or state.after))
        if size and has_content:
            if layer is Layer.RULES:
                state.warnings.append("CONTEXT_RULES_TRUNCATED: user rules cut to fit the budget")
            _shrink(state, layer, max(size - excess, 0))
            return
    raise InputTooLarge("The fixed parts of the context exceed the budget", total=state.budget.total)


def _check_input_size(request: Request) -> None:
    window = request.window
    gathered = sum(max(i.tokens, 0) for i in request.items) + request.instruction_tokens
    gathered += (window.tokens_before + window.tokens_after) if window else 0
    if gathered > MAX_INPUT_TOKENS:
        raise InputTooLarge(tokens=gathered, limit=MAX_INPUT_TOKENS)


def _reports(state: _State) -> list[ItemReport]:
    included = [
        ItemReport(id=i.id, layer=i.layer, section=i.section, source=i.source, tokens=i.tokens,
                   key=i.key, key_name=i.key_name, fate="included", kept_tokens=i.tokens)
        for layer in LAYER_ORDER for i in state.kept[layer]
    ]
    window = state.request.window
    if window is not None and (window.before or window.after):
        full = window.tokens_before + window.tokens_after
        kept = state.count(state.before) + state.count(state.after)
        cut = Layer.IMMEDIATE in state.truncated
        included.append(ItemReport(
            id="window", layer=Layer.IMMEDIATE, section="window", source="document", tokens=full,
            key=0.0, key_name="distance", fate="trimmed" if cut else "included",
            reason="budget" if cut else None, kept_tokens=kept))
    return included + state.reports


def assemble(request: Request, counter: CountCache) -> Assembly:
    """Build the prompt for ``request`` within its budget, explaining every choice."""
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = round((now - clock) * 1000, 3)
        clock = now

    check_scope(request.items, request.project_id)
    _check_input_size(request)
    screened = screen(request.items, request.window)
    budget = make_budget(request.profile, request.system_prompt_tokens)
    mentioned = _mentioned(screened.items, request.window)
    kept = {layer: _order(layer, [i for i in screened.items if i.layer is layer], mentioned)
            for layer in LAYER_ORDER}
    window = request.window
    state = _State(request=request, budget=budget, count=counter.count, kept=kept,
                   before=window.before if window else "", after=window.after if window else "",
                   reports=list(screened.reports), warnings=[*request.warnings, *screened.warnings])
    state.truncated |= {r.layer for r in screened.reports if r.reason == "candidate_limit"}
    lap("screen")
    _shape_rules(state, mentioned)
    lap("rules")
    _fit(state)
    lap("budget")
    prompt, ends, tokens = _verify(state)
    lap("render")
    hashes = prefix_hashes(prompt, ends)
    lap("hash")
    stable_end = ends[Layer.SETTINGS]
    layers = {
        layer: LayerResult(tokens=state.count(state.text(layer)), truncated=layer in state.truncated,
                           text=state.text(layer), items=len(state.kept[layer]))
        for layer in LAYER_ORDER
    }
    return Assembly(
        prompt=prompt, token_count=tokens, stable_prefix=prompt[:stable_end],
        stable_prefix_hash=sha256_hex(prompt[:stable_end]), prefix_hashes=hashes, layers=layers,
        budget=budget, warnings=tuple(state.warnings), reports=tuple(_reports(state)), timings_ms=timings,
    )
