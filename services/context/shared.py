"""Screening and ordering, shared by the assemblies that gather the very same items.

Neighbouring keystrokes, and the requests of a burst at cursors a few characters apart, mostly
gather the same item objects: providers keep their items between assemblies, and a kept search
result gives the kept Retrieved items. What screening and ordering make of them depends on the
window in two ways only: which retrieved passages are already in it (:func:`in_window`), and which
entities are named in it (:func:`mentioned_in`). Both are judged for every request; the rest
(validity, duplicates, candidate limits, each section's order) is kept in the project's memo under
the items' identities and those two judgements, and copied out.

The items are held by the entry, so the identities in its key cannot be reused while it lives.
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
    """What of the items the window is asked about, for these very items."""

    items: tuple[Item, ...]
    against_window: tuple[tuple[int, Item, str], ...]  # position, item, whitespace-free text
    named: tuple[Item, ...]  # the items whose part puts those named near the cursor first


@dataclass(frozen=True, slots=True)
class _Outcome:
    items: tuple[Item, ...]
    screened: Screened
    ordered: dict[str, list[Item]]


def _shape(plan: Plan) -> Shape:
    """What of the plan screening and ordering read."""
    return tuple((s.id, s.candidates, tuple((p.id, p.kind, p.dedupe, p.rank) for p in s.parts))
                 for s in plan.sections)


def _judged(plan: Plan, items: tuple[Item, ...], memo: Memo) -> _Judged:
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
    return _Judged(items, tuple(against), tuple(named))


def screen_and_order(plan: Plan, items: Sequence[Item], window: Window | None,
                     memo: Memo) -> tuple[Screened, dict[str, list[Item]]]:
    """:func:`screen` and :func:`order_items` of ``items``, the same as run afresh."""
    held = tuple(items)
    key = (_shape(plan), tuple(map(id, held)))
    judged = memo.recall(("judged", key), lambda: _judged(plan, held, memo))
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
