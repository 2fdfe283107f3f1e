"""An assembly's candidates screened, set apart and ordered, kept for its neighbours.

Screening, the precut and ordering read the window only through two small
sets: the candidates it knocks out (:func:`screening.window_knocks`) and the
items it names (:func:`reduce.mentioned`). The rest of what they read is the
plan, the gathered items and the budget's total. Neighbouring keystrokes, and
the requests of a burst to one document, gather the very same item objects and
their windows knock out and name the same few, so the work is done once and
kept in the project's memo under those (the entry holds the plan and the items,
so the ids in its key stay theirs). Each caller gets its own lists: the
reduction changes them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from services.context.memo import Memo
from services.context.models import Budget, Item, Window
from services.context.occurs import make_near
from services.context.plan import Plan
from services.context.precut import Tail, split
from services.context.reduce import mentioned, order_items
from services.context.screening import Screened, screen, window_knocks


@dataclass(frozen=True, slots=True)
class Candidates:
    screened: Screened
    ordered: dict[str, list[Item]]  # each section's kept candidates in render order
    tail: Tail | None  # those set apart for the first step to drop (precut), when no report is asked
    named: frozenset[str]  # ids of the items named near the cursor, for ordering them again


def candidates(plan: Plan, items: Sequence[Item], window: Window | None, budget: Budget, memo: Memo,
               explain: bool) -> Candidates:
    """``items`` screened, set apart (unless ``explain``: a report of every candidate's fate
    orders them all) and ordered, as :func:`screen`, :func:`split` and :func:`order_items` give
    them, for the caller to change."""
    held = (plan, tuple(items))
    ids = (id(plan), tuple(map(id, held[1])))
    knocks, named = _near_window(plan, held, ids, window, memo)
    minimums = tuple(budget.minimums.items())
    key = (*ids, knocks, named, explain, budget.total, minimums)

    def make() -> tuple[Screened, dict[str, list[Item]], Tail | None]:
        screened = screen(plan, items, window, memo, knocks, explain)
        ordered, tail = (screened.items, None) if explain else split(plan, budget, screened.items, memo)
        return screened, order_items(plan, ordered, named, memo), tail

    screened, ordered, tail = memo.candidates(key, held, make, lambda: sum(len(i.text) for i in items))
    return Candidates(
        screened=Screened(list(screened.items), list(screened.reports), list(screened.warnings),
                          set(screened.capped)),
        ordered={section: list(kept) for section, kept in ordered.items()},
        tail=Tail(tail.section, list(tail.items)) if tail is not None else None,
        named=named)


def _near_window(plan: Plan, held: tuple[Plan, tuple[Item, ...]], ids: Hashable, window: Window | None,
                 memo: Memo) -> tuple[frozenset[int], frozenset[str]]:
    """The positions of the candidates the window knocks out, and the ids of those it names: from
    what stands in the window's document when the memo knows it (services/context/occurs.py), else
    by searching the window."""
    items = held[1]
    occurs = memo.occurs(window.document) if window is not None and window.document is not None else None
    if occurs is None or window is None:
        return window_knocks(plan, items, window, memo), mentioned(plan, items, window)
    near = occurs.near(ids, held, lambda: make_near(plan.window_deduped, plan.mentioned_first, items, occurs,
                                                    memo.norm))
    before, after = window.before, window.after
    return near.knocks(before, after, window.start, window.cursor + len(after)), near.named(before, after)


__all__ = ["Candidates", "candidates"]
