"""Graded reduction: each section's ladder of steps, run in the plan's ``trim`` order.

The steps, cheapest loss first (docs/profiles.md):

* ``drop_lowest``: drop whole items, lowest ordering key first (or in reverse render
  order), down to the section's minimum unless the step's floor is ``none``;
* ``cut_far_end``: cut the text around the cursor from its far ends (or a text part
  from its end), on a sentence boundary;
* ``trim_chars``: cut each text to ``chars`` characters, on a sentence boundary;
* ``summary_cue``: replace the section by a short cue;
* ``lower_tier``: drop the highest tier of every group of tiered items, a tier at a time;
* ``drop_section``: remove the section.

Every step that changes something is recorded with the section's tokens
before and after it, and every item it removes keeps a reason.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import TYPE_CHECKING

import structlog

from services.context.budget import cap, warning_line
from services.context.memo import Memo
from services.context.models import Budget, Item, ItemReport, Reduction, Window
from services.context.plan import Plan, SectionPlan, StepPlan, localize
from services.context.precut import Tail
from services.context.render import SEPARATOR, Frame, join_sections, render_section, window_body, wrap
from services.context.screening import Screened, dropped
from services.context.trim import first_true, keep_head, keep_sentences, keep_tail
from services.errors import InputTooLarge

if TYPE_CHECKING:
    from services.context.engine import Request

_log = structlog.get_logger("context.reduce")
_MAX_FIX_ROUNDS = 64
Rank = tuple[bool, float, tuple[str, int, str]]  # an item's place in render order
_TOKENS = attrgetter("tokens")
UNCOUNTED = -1  # the section was not counted before the step
_ENDS = frozenset("。！？!?.…\n")
_CLOSERS = frozenset("\"'”’」』）)】")
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class CountKey:
    """A memo key for the count of a section rendered with some items: it names the section's parts,
    the items and the tokenizer's cache by identity (``held`` holds them, so their ids stay theirs),
    with the part texts, the language and the separator."""

    key: tuple[Hashable, ...]
    held: tuple[object, tuple[Item, ...], object]
    texts: dict[str, str]

    def chars(self) -> int:
        """The characters of text it holds, for the memo's bound."""
        return sum(len(i.text) for i in self.held[1]) + sum(map(len, self.texts.values()))


@dataclass
class State:
    request: Request
    plan: Plan
    budget: Budget
    count: Callable[[str], int]
    memo: Memo
    kept: dict[str, list[Item]]
    texts: dict[tuple[str, str], str]
    before: str
    after: str
    window_section: SectionPlan | None
    reports: list[ItemReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    truncated: set[str] = field(default_factory=set)
    reductions: list[Reduction] = field(default_factory=list)
    trimmed_items: dict[int, str] = field(default_factory=dict)  # id(item) -> reason its text was cut
    full_tokens: dict[int, int] = field(default_factory=dict)  # id(cut item) -> its tokens before any cut
    window_cut: bool = False
    sizes: dict[str, int] = field(default_factory=dict)  # section id -> its exact count, while unchanged
    frames: dict[tuple[str, str], Frame] = field(default_factory=dict)  # each part's, for this language
    cues: dict[str, str] = field(default_factory=dict)  # section id -> the cue that replaced it
    tail: Tail | None = None  # candidates its first step drops, set apart (services/context/precut.py)
    named: frozenset[str] = frozenset()  # ids of the items named near the cursor (mentioned())

    @classmethod
    def start(
        cls,
        request: Request,
        plan: Plan,
        budget: Budget,
        count: Callable[[str], int],
        memo: Memo,
        screened: Screened,
        texts: dict[tuple[str, str], str],
    ) -> State:
        window = request.window
        state = cls(
            request=request,
            plan=plan,
            budget=budget,
            count=count,
            memo=memo,
            kept={s.id: [] for s in plan.sections},
            texts=texts,
            before=window.before if window else "",
            after=window.after if window else "",
            window_section=plan.window_section,
            reports=list(screened.reports),
            warnings=[*request.warnings, *screened.warnings],
        )
        state.truncated |= screened.capped
        return state

    def section(self, section_id: str) -> SectionPlan:
        return self.plan.section(section_id)

    def part_texts(self, section: SectionPlan) -> dict[str, str]:
        texts = {p.id: self.texts.get((section.id, p.id), "") for p in section.parts if p.kind == "text"}
        window = section.window_part
        if window is not None:
            mark = localize(window.cursor, self.request.language)
            texts[window.id] = window_body(self.before, self.after, mark)
        return texts

    def text(self, section_id: str, items: Sequence[Item] | None = None) -> str:
        if items is None:
            self.settle(section_id)
        section = self.section(section_id)
        cue = self.cues.get(section_id)
        if cue is not None:  # the section stands replaced by its cue, in its first part's format
            return wrap(section.parts[0], cue, self.request.language) if section.parts else ""
        return render_section(
            section,
            self.kept[section_id] if items is None else items,
            self.part_texts(section),
            self.request.language,
            self.frames,
        )

    def has_window(self, section_id: str) -> bool:
        holder = self.window_section
        return holder is not None and holder.id == section_id and bool(self.before or self.after)

    def has_content(self, section_id: str) -> bool:
        return (
            bool(self.kept[section_id])
            or section_id in self.cues
            or self.has_window(section_id)
            or any(self.texts.get((section_id, p.id)) for p in self.section(section_id).parts)
        )

    def without(self, section_id: str, gone: Sequence[Item]) -> list[Item]:
        """The section's kept items minus ``gone``, in render order."""
        skip = {id(i) for i in gone}
        return [i for i in self.kept[section_id] if id(i) not in skip]

    def drop(self, section_id: str, gone: Sequence[Item], reason: str | Callable[[Item], str]) -> None:
        """Drop ``gone`` from the section (in that order, for the reports)."""
        if not gone:
            return
        # Screening keeps one item per id, so identity is equality here (and much cheaper).
        self.kept[section_id] = self.without(section_id, gone)
        if self.request.explain:
            for item in gone:
                report = dropped(item, reason if isinstance(reason, str) else reason(item))
                if self.full_tokens:  # an item cut earlier reports its size before the cut
                    report.tokens = self.full_tokens.get(id(item), report.tokens)
                self.reports.append(report)
        self.mark(section_id)
        for part in self.section(section_id).parts:
            if part.audit:  # one line for all, each by id: a log line costs more than the cut itself
                cut = [item.id for item in gone if item.section == part.id]
                if cut:
                    _log.info(f"context.{part.id}_cut", project_id=self.request.project_id, **{part.id: cut})

    def mark(self, section_id: str) -> None:
        """The section lost something: it is truncated, and its known size is stale."""
        self.truncated.add(section_id)
        self.sizes.pop(section_id, None)

    def settle(self, section_id: str) -> None:
        """Put the candidates set apart from the section back in order, should anything but its
        first step need the section whole (the plan's shape rules it out: a safeguard)."""
        tail = self.tail
        if tail is not None and tail.section == section_id:
            self.tail = None
            items = [*self.kept[section_id], *tail.items]
            self.kept[section_id] = order_items(self.plan, items, self.named, self.memo)[section_id]

    def take_tail(self, section_id: str) -> list[Item]:
        """The candidates set apart from the section, lowest first, for its first step to drop."""
        tail = self.tail
        if tail is None or tail.section != section_id:
            return []
        self.tail = None
        return tail.items

    def size(self, section_id: str) -> int:
        """The section's exact count as it is now (kept until it changes)."""
        self.settle(section_id)
        known = self.sizes.get(section_id)
        if known is None:
            known = self.sizes[section_id] = self.counted(section_id, self.kept[section_id])
        return known

    def counted(self, section_id: str, items: Sequence[Item]) -> int:
        """The exact count of the section rendered with ``items``. Kept in the project's memo for the
        very same items, part texts, language and tokenizer: neighbouring requests that kept the
        same items count them once. A section holding the window (new at every request) or standing
        replaced by its cue is counted afresh."""
        named = self.count_key(section_id, items)
        if named is None:
            return self.count(self.text(section_id, items))
        section, kept, texts = self.section(section_id), named.held[1], named.texts
        language, frames = self.request.language, self.frames
        return self.memo.count_of(
            named.key, named.held, lambda: self.count(render_section(section, kept, texts, language, frames)),
            named.chars)

    def count_key(self, section_id: str, items: Sequence[Item]) -> CountKey | None:
        """What the count of the section rendered with ``items`` depends on (None for a section whose
        count is never kept: one holding the window, or standing replaced by its cue)."""
        section = self.section(section_id)
        if section_id in self.cues or section.window_part is not None:
            return None
        texts = self.part_texts(section)
        counter = getattr(self.count, "__self__", self.count)  # the tokenizer's cache, not this bound method
        held = (section.parts, tuple(items), counter)
        key = (section.id, section.separator, tuple(map(id, held[0])), tuple(map(id, held[1])),
               tuple(texts.items()), self.request.language, id(counter))
        return CountKey(key, held, texts)

    def record(self, step: StepPlan | str, section_id: str, before: int, after: int,
               gone: Sequence[Item] = ()) -> None:
        """Report a step; a ``before`` of :data:`UNCOUNTED` is estimated from what ``gone`` held."""
        name = step if isinstance(step, str) else step.id
        estimated = before == UNCOUNTED
        if estimated:
            before = after + sum(map(_TOKENS, gone)) + len(gone)  # screened: no negative counts
        kind = step if isinstance(step, str) else step.step
        self.reductions.append(Reduction(section_id, name, before, after, estimated, kind))
        self.sizes[section_id] = after


# --- ordering -------------------------------------------------------------------------------


def mentioned(plan: Plan, items: Sequence[Item], window: Window | None) -> frozenset[str]:
    """Ids of the items of parts ranked ``mentioned_first`` one of whose names stands in the text
    around the cursor: all that ordering reads of the window."""
    if window is None:
        return frozenset()
    ranked = plan.mentioned_first
    contains = (window.before + window.after).__contains__
    # map/filter/any keep the per-name loop in C: this runs over every entity at every assembly.
    return frozenset(i.id for i in items if i.names and (i.layer, i.section) in ranked
                     and any(map(contains, filter(None, i.names))))


def order_items(
    plan: Plan, items: Sequence[Item], named: Collection[str], memo: Memo
) -> dict[str, list[Item]]:
    """Each section's items in render order: by the part's rank (the writer's own first, or those
    ``named`` near the cursor first: :func:`mentioned`), then by key (highest first), then oldest
    first; or, for a part ranked ``given``, in the order the source gave them."""
    ranks = {(s.id, p.id): p.rank for s in plan.sections for p in s.parts}
    by_rank: dict[str, list[tuple[int, Item]]] = {}
    for n, item in enumerate(items):
        by_rank.setdefault(ranks[(item.layer, item.section)], []).append((n, item))
    natural = memo.natural_id
    keyed: list[tuple[Rank, Item]] = []
    for how, found in by_rank.items():
        if how == "given":
            keyed += (((False, 0.0, ("", n, "")), i) for n, i in found)
        elif how == "user_first":
            keyed += (((i.origin != "user", -i.key, natural(i.id)), i) for _, i in found)
        elif how == "mentioned_first":
            keyed += (((i.id not in named, -i.key, natural(i.id)), i) for _, i in found)
        else:
            keyed += (((False, -i.key, natural(i.id)), i) for _, i in found)
    by_section: dict[str, list[tuple[Rank, Item]]] = {
        s.id: [] for s in plan.sections}
    for entry in keyed:
        by_section[entry[1].layer].append(entry)
    return {sid: [item for _, item in sorted(found, key=_first)] for sid, found in by_section.items()}


def _first(entry: tuple[Rank, Item]) -> Rank:
    return entry[0]


# --- drop_lowest ------------------------------------------------------------------------------


def _guess(sequence: Sequence[Item], excess: int) -> int:
    """How many items of ``sequence`` to drop to shed ``excess`` tokens, by their own counts."""
    shed = 0
    for n, item in enumerate(sequence, start=1):
        shed += max(item.tokens, 0) + 1  # + its separator
        if shed >= excess:
            return n
    return len(sequence)


def drops_needed(
    state: State, section_id: str, sequence: Sequence[Item], size: int | None, target: int, floor: int = 0,
    *, remember: bool = False,
) -> tuple[int, int, int | None]:
    """How many items a one-at-a-time loop drops from the front of ``sequence``, the section's
    count before (:data:`UNCOUNTED` if it was not needed) and after (None if not counted).

    That loop drops the next item, recounts the section and stops as soon as it
    fits ``target``; with a ``floor`` it stops instead just before a drop that
    would leave the section under ``floor``. Removing a whole item never makes
    the count larger, so the stopping point is found with a few exact counts
    (:func:`first_true`, galloping from a guess) instead of one per item.
    ``size`` is the section's current count if known. The answer depends only on the counts of
    the section with the very same items, so with ``remember`` it is kept in the project's memo
    with them: a section capped at every assembly (a project's rules, whose cap the budget fixes)
    is cut the same way until its items or their order change. A fit step's target moves with the
    window at every keystroke, so its answers are not kept: they would only push the counts out.
    """
    named = state.count_key(section_id, state.kept[section_id]) if remember else None
    if named is None or not sequence:
        return _drops_needed(state, section_id, sequence, size, target, floor)
    return state.memo.kept(
        ("drops", named.key, tuple(map(id, sequence)), size, target, floor), (named.held, tuple(sequence)),
        lambda: _drops_needed(state, section_id, sequence, size, target, floor), named.chars)


def _drops_needed(
    state: State, section_id: str, sequence: Sequence[Item], size: int | None, target: int, floor: int
) -> tuple[int, int, int | None]:
    if not sequence or (size is not None and size <= target):
        return 0, size or 0, size
    counts = {} if size is None else {0: size}

    def size_after(k: int) -> int:
        if k not in counts:
            counts[k] = state.counted(section_id, state.without(section_id, sequence[:k]))
        return counts[k]

    last = len(sequence)
    if size_after(last) <= target:
        estimate = size if size is not None else sum(max(i.tokens, 0) + 1 for i in state.kept[section_id])
        guess = min(max(_guess(sequence, estimate - target), 1), last)
        stop = first_true(lambda k: size_after(k) <= target, 0, last, guess)
        if stop == 1 and size_after(0) <= target:
            return 0, counts[0], counts[0]  # it fitted already
    else:
        stop = last  # nothing fits: the loop drops them all
    if floor and size_after(stop) < floor:
        # The loop checks the section without the next item before dropping it.
        stop = first_true(lambda k: size_after(k) < floor, 0, stop, stop) - 1
    return stop, counts.get(0, UNCOUNTED), counts.get(stop)


def _sequence(state: State, section_id: str, step: StepPlan) -> list[Item]:
    """The step's candidates, first to go first."""
    items = [i for i in state.kept[section_id] if step.origin is None or i.origin == step.origin]
    parts: list[str | None] = [None] if step.parts is None else list(step.parts)
    natural = state.memo.natural_id
    sequence: list[Item] = []
    for part in parts:
        group = items if part is None else [i for i in items if i.section == part]
        if step.part_orders.get(part or "", step.order) == "reverse":
            sequence.extend(reversed(group))
        else:
            sequence.extend(sorted(group, key=lambda i: (i.key, natural(i.id))))
    return sequence


def _reason(step: StepPlan) -> str | Callable[[Item], str]:
    """Why the step's drops went: one reason, or each part's own."""
    if not step.part_reasons:
        return step.reason
    return lambda item: step.part_reasons.get(item.section, step.reason)


def _drop_groups(state: State, section_id: str, step: StepPlan, target: int, floor: int,
                 size: int | None) -> tuple[list[Item], int]:
    """Drop whole groups, lowest key first (of equal keys, the one listed last), while over ``target``."""
    before = size if size is not None else state.count(state.text(section_id))
    groups: dict[str, list[Item]] = {}
    for item in _sequence(state, section_id, replace(step, order="reverse")):
        groups.setdefault(item.group or item.id, []).append(item)
    ranked = sorted(groups.values(), key=lambda members: max(i.key for i in members))
    current, gone = before, []
    for members in ranked[:max(len(ranked) - step.keep, 0)]:
        if current <= target:
            break
        after = state.count(state.text(section_id, state.without(section_id, members)))
        if floor and after < floor:
            break
        state.drop(section_id, members, _reason(step))
        current = after
        gone += members
    return gone, before


def drop_lowest(
    state: State, section_id: str, step: StepPlan, target: int, floor: int, size: int | None
) -> tuple[list[Item], int]:
    """Returns the items that went and the section's count before (:data:`UNCOUNTED` if the
    section was not counted whole before: the drop did not need it)."""
    if step.groups:
        state.settle(section_id)
        return _drop_groups(state, section_id, step, target, floor, size)
    tail = state.take_tail(section_id)
    sequence = _sequence(state, section_id, step)
    if step.keep:
        sequence = sequence[:max(len(sequence) - step.keep, 0)]
    # With candidates set apart, the rest's exact count (kept in the memo for its neighbours) tells
    # whether it is over the target, and where the search for the stopping point starts.
    known = state.counted(section_id, state.kept[section_id]) if tail else size
    stop, before, after = drops_needed(state, section_id, sequence, known, target, floor,
                                       remember=step.target == "cap")
    if tail:
        if not stop:  # the rest fits: the candidates set apart might stay, so they are ordered back in
            state.tail = Tail(section_id, tail)
            state.settle(section_id)
            return drop_lowest(state, section_id, step, target, floor, size)
        # The rest counts over the target (a drop was needed), so every candidate below it goes too:
        # they go first, and the section was never counted whole, as without setting them apart.
        before = UNCOUNTED
    gone = [*tail, *sequence[:stop]]
    state.drop(section_id, gone, _reason(step))
    if after is not None:
        state.sizes[section_id] = after  # counted on the way: the section as the drop left it
    return gone, before


# --- text steps ---------------------------------------------------------------------------------


def _cut_window(state: State, section_id: str, target: int) -> None:
    """Cut the window from its far ends so its section fits ``target`` tokens."""
    size = state.count(state.text(section_id))
    body = state.count(state.before) + state.count(state.after)
    room = max(body - (size - target), 0)
    after_share = state.count(state.after) / body if body else 0.0
    after_room = int(room * after_share)
    state.before = keep_tail(state.before, room - after_room, state.count)
    state.after = keep_head(state.after, after_room, state.count)
    state.window_cut = True
    state.mark(section_id)


def _text_keys(state: State, section_id: str, step: StepPlan | None) -> list[tuple[str, str]]:
    parts = state.section(section_id).parts
    return [
        (section_id, p.id)
        for p in parts
        if p.kind == "text" and (step is None or step.parts is None or p.id in step.parts)
    ]


def cut_far_end(state: State, section_id: str, step: StepPlan | None, target: int) -> bool:
    if state.has_window(section_id):
        _cut_window(state, section_id, target)
        return True
    changed = False
    for key in reversed(_text_keys(state, section_id, step)):
        # Where the cut falls can change how the delimiters around the text count, so the
        # section is counted again after each cut, and cut again while it is still over.
        for _ in range(_MAX_FIX_ROUNDS):
            excess = state.count(state.text(section_id)) - target
            text = state.texts.get(key, "")
            if excess <= 0 or not text:
                break
            room = max(state.count(text) - excess, 0)
            if step is not None and step.boundary == "sentence":
                head = keep_sentences(text, room, state.count)
                if not head and step.floor == "minimum":
                    break  # no sentence end fits: left whole, for a step that may empty it
                state.texts[key] = head
            else:
                state.texts[key] = keep_head(text, room, state.count)
            changed = True
    if changed:
        state.mark(section_id)
    return changed


def cut_chars(text: str, chars: int) -> str:
    """The head of ``text`` within ``chars`` characters, ending a sentence if one ends in it."""
    if len(text) <= chars:
        return text
    head = text[:chars]
    for i in range(len(head) - 1, 0, -1):
        if head[i] in _ENDS:
            j = i + 1
            while j < len(head) and head[j] in _CLOSERS:
                j += 1
            return head[:j].rstrip()
    return head


def _rewrite_texts(state: State, section_id: str, step: StepPlan, change: Callable[[str], str]) -> bool:
    changed = False
    for key in _text_keys(state, section_id, step):
        text = state.texts.get(key, "")
        new = change(text)
        if new != text:
            state.texts[key] = new
            changed = True
    kept = []
    for item in state.kept[section_id]:
        new = change(item.text) if step.parts is None or item.section in step.parts else item.text
        if new != item.text:
            full = state.full_tokens.pop(id(item), item.tokens)
            item = replace(item, text=new, tokens=state.count(new))
            state.trimmed_items[id(item)] = step.reason if step.reason != "budget" else step.step
            state.full_tokens[id(item)] = full
            changed = True
        kept.append(item)
    state.kept[section_id] = kept
    if changed:
        state.mark(section_id)
    return changed


def trim_chars(state: State, section_id: str, step: StepPlan) -> bool:
    limit = step.chars or 800
    return _rewrite_texts(state, section_id, step, lambda text: cut_chars(text, limit))


def summary_cue(state: State, section_id: str, step: StepPlan) -> bool:
    cue = localize(step.cue, state.request.language)
    if cue:
        had = state.has_content(section_id)
        state.drop(section_id, list(state.kept[section_id]),
                   step.reason if step.reason != "budget" else "summary_cue")
        for key in _text_keys(state, section_id, None):
            state.texts[key] = ""
        if state.has_window(section_id):
            state.before = state.after = ""
            state.window_cut = True
        state.cues[section_id] = cue
        state.mark(section_id)
        return had
    limit = step.chars or 400

    def shorten(text: str) -> str:
        return text if len(text) <= limit else cut_chars(text, max(limit - 1, 1)) + ELLIPSIS

    return _rewrite_texts(state, section_id, step, shorten)


def lower_tier(state: State, section_id: str, step: StepPlan, target: int) -> bool:
    changed = False
    while state.count(state.text(section_id)) > target:
        tiers: dict[str, set[int]] = {}
        for item in state.kept[section_id]:
            if item.tier is not None and item.group is not None:
                tiers.setdefault(item.group, set()).add(item.tier)
        top = {group: max(found) for group, found in tiers.items() if len(found) > 1}
        if not top:
            break
        gone = [i for i in state.kept[section_id] if i.group in top and i.tier == top[i.group]]
        state.drop(section_id, gone, step.reason if step.reason != "budget" else "lower_tier")
        changed = True
    return changed


def drop_section(state: State, section_id: str, step: StepPlan) -> bool:
    had = state.has_content(section_id)
    state.drop(
        section_id,
        list(state.kept[section_id]),
        step.reason if step.reason != "budget" else "section_dropped",
    )
    for key in _text_keys(state, section_id, None):
        state.texts[key] = ""
    if state.has_window(section_id):
        state.before = state.after = ""
        state.window_cut = True
    state.cues.pop(section_id, None)
    state.mark(section_id)
    return had


def apply(state: State, section_id: str, step: StepPlan, target: int, floor: int, size: int | None) -> None:
    """Run one step on a section whose count is ``size`` (if known) towards ``target``."""
    before = size if size is not None else state.size(section_id)
    if step.step == "drop_lowest":
        gone, _ = drop_lowest(state, section_id, step, target, floor, before)
        if gone:
            state.record(step, section_id, before, state.size(section_id), gone)
        return
    if step.step == "cut_far_end":
        changed = cut_far_end(state, section_id, step, max(target, floor))
    elif step.step == "trim_chars":
        changed = trim_chars(state, section_id, step)
    elif step.step == "summary_cue":
        changed = summary_cue(state, section_id, step)
    elif step.step == "lower_tier":
        changed = lower_tier(state, section_id, step, target)
    else:
        changed = drop_section(state, section_id, step)
    if changed:
        state.record(step, section_id, before, state.size(section_id))


# --- the passes ---------------------------------------------------------------------------------


def _overbudget(state: State, section: SectionPlan, size: int, allowance: int) -> None:
    template = (
        section.overbudget_warning
        or "CONTEXT_SECTION_OVERBUDGET: {section} uses {tokens} tokens, its cap is {cap}"
    )
    state.warnings.append(
        template.replace("{section}", section.id)
        .replace("{tokens}", str(size))
        .replace("{cap}", str(allowance))
    )
    # Logged when the section's size is new to the project's memo, not at every keystroke: a project
    # whose rules outgrow their share would otherwise write a line per assembly.
    new: list[bool] = []
    state.memo.kept(("overbudget", section.id, size), (), lambda: new.append(True), _no_chars)
    if new:
        _log.warning(
            f"context.{section.id}_overbudget",
            project_id=state.request.project_id,
            tokens=size,
            allowance=allowance,
        )


def _no_chars() -> int:
    return 0


def _run_cap(state: State, step: StepPlan) -> None:
    section = state.section(step.section)
    allowance = cap(state.budget, section)
    size = state.size(section.id)
    if step.warn == "overbudget":
        line = warning_line(state.budget, section)
        if size > line:
            _overbudget(state, section, size, line)
    if size <= allowance:
        return
    floor = state.budget.minimums[section.id] if step.floor == "minimum" else 0
    apply(state, section.id, step, max(allowance, floor), floor, size)


def fit(state: State, caps_only: bool) -> None:
    """Run the plan's ``trim`` steps: with ``caps_only`` its ``cap`` steps, otherwise its ``fit``
    steps until the prompt (estimated from its sections' counts) fits the total.

    A section is not counted before its turn when its step drops whole items:
    its target does not depend on its own size, and once items are dropped the
    smaller counts show it was over (see :func:`drops_needed`).
    """
    active = {s.id for s in state.plan.sections}
    steps = [s for s in state.plan.trim if s.section in active and (s.target == "cap") == caps_only]
    if caps_only:
        for step in steps:
            _run_cap(state, step)
        return
    for step in steps:
        sid = step.section
        others = [state.size(o.id) for o in state.plan.sections if o.id != sid]
        lazy = sid not in state.sizes and step.step == "drop_lowest"
        # A section with content renders at least a header, so it counts at least one token.
        filled = sum(1 for size in others if size) + (
            state.has_content(sid) if lazy else bool(state.size(sid)))
        room = state.budget.total - sum(others) - max(filled - 1, 0)  # over = size - room
        floor = state.budget.minimums[sid] if step.floor == "minimum" else 0
        target = max(floor, room)
        if lazy:
            gone, before = drop_lowest(state, sid, step, target, floor, None)
            if gone:
                _below_minimum(state, step)
                state.record(step, sid, before, state.size(sid), gone)
                continue
            if state.size(sid) <= room:
                return
            continue
        size = state.size(sid)
        if size <= room:
            return
        if target >= size:
            continue
        _below_minimum(state, step)
        apply(state, sid, step, target, floor, size)


def _below_minimum(state: State, step: StepPlan) -> None:
    if step.warn == "below_minimum":
        state.warnings.append(f"CONTEXT_BELOW_MINIMUM: {step.section} cut below its minimum")


def verify(state: State) -> Verified:
    """Render and count the real prompt; cut further while the exact count is over.

    Returns the prompt, where each section ends in it, its count and each section's text.
    """
    for _ in range(_MAX_FIX_ROUNDS):
        texts = {s.id: state.text(s.id) for s in state.plan.sections}
        prompt, ends = join_sections(state.plan, texts)
        tokens = state.count(prompt)
        excess = tokens - state.budget.total
        if excess <= 0:
            return _given_back(state, (prompt, ends, tokens, texts))
        _last_resort(state, texts, excess)
    raise InputTooLarge("The context could not be fitted to the budget", total=state.budget.total)


Verified = tuple[str, dict[str, int], int, dict[str, str]]


def _given_back(state: State, verified: Verified) -> Verified:
    """``verified``, or the prompt with its window cut anew to take the room a last-resort cut of
    another section left (Rules truncated after the window was cut to nothing for them): the window
    is the lowest priority, but it must be in the prompt, and the budget then had room for it."""
    holder, window = state.window_section, state.request.window
    _, _, tokens, texts = verified
    room = state.budget.total - tokens
    if holder is None or window is None or room <= 0 or not state.window_cut or not any(
            r.step == "last_resort" and r.section != holder.id for r in state.reductions):
        return verified
    kept, size = (state.before, state.after), state.count(texts[holder.id])
    state.before, state.after = window.before, window.after
    _cut_window(state, holder.id, size + room)
    wider = {s.id: state.text(s.id) for s in state.plan.sections}
    wider_prompt, wider_ends = join_sections(state.plan, wider)
    wider_tokens = state.count(wider_prompt)
    if tokens < wider_tokens <= state.budget.total:
        state.record("give_back", holder.id, size, state.count(wider[holder.id]))
        return wider_prompt, wider_ends, wider_tokens, wider
    state.before, state.after = kept
    state.mark(holder.id)
    return verified


def _last_resort(state: State, texts: dict[str, str], excess: int) -> None:
    """Cut the first section of the plan's ``last_resort`` order that has something to cut."""
    active = {s.id for s in state.plan.sections}
    for section_id in (s for s in state.plan.last_resort if s in active):
        section = state.section(section_id)
        size = state.count(texts[section_id])
        if not size or not (state.kept[section_id] or state.has_window(section_id)):
            continue
        if section.truncated_warning or section.never:
            state.warnings.append(
                section.truncated_warning or f"CONTEXT_SECTION_TRUNCATED: {section_id} cut to fit the budget"
            )
        target = max(size - excess, 0)
        if state.has_window(section_id):
            _cut_window(state, section_id, target)
        else:
            everything = StepPlan(section=section_id, id="last_resort", step="drop_lowest", floor="none")
            drop_lowest(state, section_id, everything, target, 0, size)
        state.record("last_resort", section_id, size, state.count(state.text(section_id)))
        return
    # What is never cut, as the prompt would join it: a caller may explain the refusal with it; and
    # all that is left, none of which may be cut (text parts such as the instruction among it).
    never = SEPARATOR.join(t for s in state.plan.sections if s.never and (t := texts[s.id]))
    left, _ = join_sections(state.plan, texts)
    raise InputTooLarge("The fixed parts of the context exceed the budget", total=state.budget.total,
                        fixedTokens=state.count(never), uncutTokens=state.count(left))


__all__ = ["State", "apply", "cut_chars", "fit", "order_items", "verify"]
