"""The assembly pipeline: screen, shape Rules, fit the budget, render, hash.

Pure and deterministic: it takes gathered items, the window and a budget
profile and returns an :class:`Assembly`. The returned ``token_count`` is the
tokenizer's count of the returned prompt and never exceeds the budget total.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from services.context.budget import MAX_INPUT_TOKENS, make_budget, rules_allowance
from services.context.counting import CountCache
from services.context.hashing import prefix_hashes
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
from services.context.trim import first_true, keep_head, keep_tail
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

    def without(self, layer: Layer, gone: Sequence[Item]) -> list[Item]:
        """``layer``'s kept items minus ``gone``, in render order."""
        skip = {id(i) for i in gone}
        return [i for i in self.kept[layer] if id(i) not in skip]

    def drop(self, layer: Layer, gone: Sequence[Item], reason: str | Callable[[Item], str]) -> None:
        """Drop ``gone`` from ``layer`` (in that order, for the reports)."""
        if not gone:
            return
        # Screening keeps one item per id, so identity is equality here (and much cheaper).
        self.kept[layer] = self.without(layer, gone)
        for item in gone:
            self.reports.append(dropped(item, reason if isinstance(reason, str) else reason(item)))
        self.truncated.add(layer)


@functools.lru_cache(maxsize=16384)
def natural_id(item_id: str) -> tuple[str, int, str]:
    """Ids in creation order: ``constraint:9`` before ``constraint:10``."""
    prefix, _, suffix = item_id.rpartition(":")
    return (prefix, int(suffix), "") if suffix.isdigit() else (prefix, -1, suffix)


def _order(layer: Layer, items: list[Item], mentioned: set[str]) -> list[Item]:
    """Render order inside a section: user before kg constraints, entities named near the
    cursor first, then by key (highest first), then oldest first."""
    def rank(item: Item) -> tuple[bool, float, tuple[str, int, str]]:
        if item.section == "constraints":
            demoted = item.origin != "user"
        elif item.section == "entities":
            demoted = item.id not in mentioned
        else:
            demoted = False
        return (demoted, -item.key, natural_id(item.id))

    return sorted(items, key=rank)


def _mentioned(items: list[Item], window: Window | None) -> set[str]:
    text = (window.before + window.after) if window else ""
    return {i.id for i in items if i.names and any(name and name in text for name in i.names)}


def _first_fit(fits: Callable[[int], bool], last: int, guess: int) -> int:
    """The smallest ``k`` in ``1..last`` with ``fits(k)``, given ``fits(last)`` and not ``fits(0)``;
    probes gallop out from ``guess`` and then bisect, so a good guess costs two calls."""
    return first_true(fits, 0, last, min(max(guess, 1), last))


def _guess(sequence: Sequence[Item], excess: int) -> int:
    """How many items of ``sequence`` to drop to shed ``excess`` tokens, by their own counts."""
    shed = 0
    for n, item in enumerate(sequence, start=1):
        shed += max(item.tokens, 0) + 1  # + its separator
        if shed >= excess:
            return n
    return len(sequence)


def _drops_needed(state: _State, layer: Layer, sequence: Sequence[Item], size: int | None,
                  target: int, floor: int = 0) -> int:
    """How many items the one-at-a-time loop drops from the front of ``sequence``.

    That loop drops the next item, recounts the layer and stops as soon as it
    fits ``target``; with a ``floor`` it stops instead just before a drop that
    would leave the layer under ``floor``. Removing a whole item never makes the
    layer's count larger, so the stopping point is found here with a few exact
    counts (``_first_fit``) instead of one count per dropped item. ``size`` is
    the layer's current count if known; otherwise the whole layer is counted
    only when at most one item turns out to go (the others show it is over).
    """
    if not sequence or (size is not None and size <= target):
        return 0
    counts = {} if size is None else {0: size}

    def size_after(k: int) -> int:
        if k not in counts:
            counts[k] = state.count(render_sections(layer, state.without(layer, sequence[:k]),
                                                    state.request.language))
        return counts[k]

    last = len(sequence)
    if size_after(last) <= target:
        estimate = size if size is not None else sum(max(i.tokens, 0) + 1 for i in state.kept[layer])
        stop = _first_fit(lambda k: size_after(k) <= target, last, _guess(sequence, estimate - target))
        if stop == 1 and size_after(0) <= target:
            return 0  # it fitted already
    else:
        stop = last  # nothing fits: the loop drops them all
    if floor and size_after(stop) < floor:
        # The loop checks the layer without the next item before dropping it.
        stop = _first_fit(lambda k: size_after(k) < floor, stop, stop) - 1
    return stop


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
                            key=lambda i: (i.key, natural_id(i.id)))
    sequence = [*reversed(entities), *kg_constraints]
    gone = sequence[:_drops_needed(state, Layer.RULES, sequence, size, allowance)]
    state.drop(Layer.RULES, gone,
               lambda i: "rules_relevance" if i.section == "entities" else "rules_overbudget")
    cut = [item.id for item in gone if item.section == "constraints"]
    if cut:  # one line for all, each by id: a log line costs more than the cut itself
        _log.info("context.constraints_cut", project_id=state.request.project_id, constraints=cut)


def _shrink_items(state: _State, layer: Layer, target: int, floor: int, size: int | None = None) -> int:
    """Drop the lowest-key items of ``layer`` until it fits ``target``, never going under ``floor``.

    ``size`` is the layer's current count when the caller has it. Returns how many items went.
    """
    sequence = sorted(state.kept[layer], key=lambda i: (i.key, natural_id(i.id)))  # lowest first
    gone = sequence[:_drops_needed(state, layer, sequence, size, target, floor)]
    state.drop(layer, gone, "budget")
    return len(gone)


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


def _shrink(state: _State, layer: Layer, target: int, floor: int = 0, size: int | None = None) -> None:
    if layer is Layer.IMMEDIATE:
        _shrink_window(state, target)
    else:
        _shrink_items(state, layer, target, floor, size)


def _fit(state: _State) -> None:
    """Trim Retrieved, Settings, Immediate to their minimums, then below them if needed.

    An item layer is not counted whole before its turn: its target does not
    depend on its own size, and once items are dropped the smaller counts show
    it was over (see ``_drops_needed``). The decisions are the same as with every
    layer counted up front.
    """
    sizes: dict[Layer, int] = {}

    def size_of(layer: Layer) -> int:
        if layer not in sizes:
            sizes[layer] = state.count(state.text(layer))
        return sizes[layer]

    for below_minimum in (False, True):
        for layer in TRIM_ORDER:
            others = [size_of(other) for other in LAYER_ORDER if other is not layer]
            lazy = layer not in sizes and layer is not Layer.IMMEDIATE
            # An item layer with items renders a header, so it counts at least one token.
            filled = sum(1 for size in others if size) + bool(state.kept[layer] if lazy else size_of(layer))
            room = state.budget.total - sum(others) - max(filled - 1, 0)  # over = size - room
            floor = 0 if below_minimum else state.budget.minimums[layer]
            target = max(floor, room)
            if lazy:
                if _shrink_items(state, layer, target, floor):
                    if below_minimum:
                        state.warnings.append(f"CONTEXT_BELOW_MINIMUM: {layer.value} cut below its minimum")
                    sizes[layer] = state.count(state.text(layer))
                    continue
                # Nothing dropped: it fitted target, or the floor kept everything (first pass only).
                if size_of(layer) <= room:
                    return
                continue
            if size_of(layer) <= room:
                return
            if target >= sizes[layer]:
                continue
            if below_minimum:
                state.warnings.append(f"CONTEXT_BELOW_MINIMUM: {layer.value} cut below its minimum")
            _shrink(state, layer, target, floor, sizes[layer])
            sizes[layer] = state.count(state.text(layer))


def _verify(state: _State) -> tuple[str, dict[Layer, int], int, dict[Layer, str]]:
    """Render and count the real prompt; trim further while the exact count is over.

    Returns the prompt, where each layer ends in it, its count and each layer's text.
    """
    for _ in range(_MAX_FIX_ROUNDS):
        texts = {layer: state.text(layer) for layer in LAYER_ORDER}
        prompt, ends = join_layers(texts)
        tokens = state.count(prompt)
        excess = tokens - state.budget.total
        if excess <= 0:
            return prompt, ends, tokens, texts
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
    # Passages from the project's index are not the writer's input: they are bounded apart (at
    # most MAX_RETRIEVED chunks of about 200 tokens) and trimmed by the budget like any candidate.
    window = request.window
    gathered = sum(max(i.tokens, 0) for i in request.items if i.section != "passages")
    gathered += request.instruction_tokens
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
    prompt, ends, tokens, texts = _verify(state)
    lap("render")
    hashes = prefix_hashes(prompt, ends)
    lap("hash")
    stable_end = ends[Layer.SETTINGS]
    layers = {
        layer: LayerResult(tokens=state.count(texts[layer]), truncated=layer in state.truncated,
                           text=texts[layer], items=len(state.kept[layer]))
        for layer in LAYER_ORDER
    }
    return Assembly(
        # The Settings prefix hash is the hash of prompt[:stable_end]: the stable prefix's.
        prompt=prompt, token_count=tokens, stable_prefix=prompt[:stable_end],
        stable_prefix_hash=hashes[Layer.SETTINGS], prefix_hashes=hashes, layers=layers,
        budget=budget, warnings=tuple(state.warnings), reports=tuple(_reports(state)), timings_ms=timings,
    )
