"""Screening and ordering, shared by the assemblies that gather the very same items.

Neighbouring keystrokes, and the requests of a burst at cursors a few characters apart, mostly
gather the same item objects: providers keep their items between assemblies, and a kept search
result gives the kept Retrieved items. What screening and ordering make of them depends on the
window in two ways only: which retrieved passages are already in it (:func:`in_window`), and which
entities are named in it (:func:`mentioned_in`). Both are judged for every request; the rest
(validity, duplicates, candidate limits, each section's order) is kept in the project's memo under
the items' identities and those two judgements, and copied out.

The items are held by the entries, so the identities in their keys cannot be reused while they live.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.context.memo import Memo
from services.context.models import Item, Window
from services.context.plan import Plan
from services.context.reduce import mentioned_in, order_items
from services.context.screening import Screened, in_window, item_parts, screen, window_text

Shape = tuple[tuple[str, int | None, tuple[tuple[str, str, str, str], ...]], ...]


@dataclass(frozen=True, slots=True)
class _Judged:
    """What of the items the window is asked about."""

    against_window: tuple[tuple[int, Item, str], ...]  # position, item, whitespace-free text
    named: tuple[Item, ...]  # the items whose part puts those named near the cursor first


@dataclass(slots=True)
class _Items:
    """These very items, seen ``seen`` times; what the window is asked about, from the second on."""

    items: tuple[Item, ...]
    seen: int = 0
    judged: _Judged | None = None


@dataclass(frozen=True, slots=True)
class _Outcome:
    items: tuple[Item, ...]
    screened: Screened
    ordered: dict[str, list[Item]]


def _shape(plan: Plan) -> Shape:
    """What of the plan screening and ordering read."""
    return tuple((s.id, s.candidates, tuple((p.id, p.kind, p.dedupe, p.rank) for p in s.parts))
                 for s in plan.sections)


def _judged(plan: Plan, items: Sequence[Item], memo: Memo) -> _Judged:
    parts = item_parts(plan)
    against, named = [], []
    for n, item in enumerate(items):
        part = parts.get((item.layer, item.section))
        if part is None:
            continue
        if part.dedupe == "window":
            against.append((n, item, memo.norm(item.text)))
        if part.rank == "mentioned_first":
            named.append(item)
    return _Judged(tuple(against), tuple(named))


def screen_and_order(plan: Plan, items: Sequence[Item], window: Window | None,
                     memo: Memo) -> tuple[Screened, dict[str, list[Item]]]:
    """:func:`screen` and :func:`order_items` of ``items``, the same as run afresh.

    Items seen for the first time are screened and ordered afresh, with no more work: most
    requests of a burst gather items of their own (features of the text around the cursor that no
    neighbour shares). From the second time on, the window is judged and the rest kept.
    """
    held = tuple(items)
    key = (_shape(plan), tuple(map(id, held)))
    seen = memo.recall(("items", key), lambda: _Items(held))
    seen.seen += 1
    if seen.seen == 1:
        screened = screen(plan, held, window, memo)
        return screened, order_items(plan, screened.items, window, memo)
    judged = seen.judged
    if judged is None:
        judged = seen.judged = _judged(plan, held, memo)
    text = window_text(window)
    inside = frozenset(n for n, item, item_norm in judged.against_window
                       if in_window(item, item_norm, window, text))
    mentioned = frozenset(mentioned_in(judged.named, window))

    def fresh() -> _Outcome:
        screened = screen(plan, held, window, memo, in_window_at=inside)
        return _Outcome(held, screened, order_items(plan, screened.items, window, memo, mentioned=mentioned))

    outcome = memo.recall(("screened", key, inside, mentioned), fresh)
    kept = outcome.screened
    copied = Screened(items=list(kept.items), reports=list(kept.reports), warnings=list(kept.warnings))
    return copied, {section: list(found) for section, found in outcome.ordered.items()}


__all__ = ["screen_and_order"]
