"""Candidates that can never fit, set apart before they are ordered and fitted.

A section whose first reduction is the plan's first ``fit`` step, a ``drop_lowest`` in key
order, loses whole items lowest key first until it fits a target that is never more than the
budget's total (or the step's floor, when that is larger): the room the rest of the prompt leaves.
When its highest items alone count over that target, every item below them goes. With hundreds
of retrieved passages and room for a dozen, most of an assembly's candidates are such items.

:func:`split` sets apart the candidates below the highest ones that hold an eighth more tokens
than the total, before ordering. The step counts the rest exactly (neighbouring assemblies with
the same rest share the count): when it is over the target, so is every larger set (removing an
item never makes a section count more, as the drop's own search assumes), and the candidates set
apart go first, as part of its drop: its reduction's estimated ``before`` counts them, as it would
have. If the rest fits after all, they are ordered back in and the step runs on every candidate.
Only when no report of every candidate's fate is asked for (explain off): such a report orders
them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.context.memo import Memo, NaturalId
from services.context.models import Budget, Item
from services.context.plan import Plan, StepPlan


@dataclass(frozen=True, slots=True)
class Tail:
    """The items set apart from ``section``: lowest first, the order its first step drops them in."""

    section: str
    items: list[Item]


def first_drop(plan: Plan) -> StepPlan | None:
    """The plan's first ``fit`` step, when it drops whole items in key order from a section that
    nothing counts before it (no ``cap`` step of its own), that holds no window and whose drops are
    not logged by id (the ids of tied items set apart could be logged in another order); else None."""
    active = {s.id for s in plan.sections}
    fits = [s for s in plan.trim if s.target == "fit" and s.section in active]
    if not fits:
        return None
    step = fits[0]
    if (step.step != "drop_lowest" or step.groups or step.keep or step.order != "key"
            or any(order != "key" for order in step.part_orders.values())
            or any(s.section == step.section and s.target == "cap" for s in plan.trim)):
        return None
    section = next((s for s in plan.sections if s.id == step.section), None)
    if section is None or section.window_part is not None or any(p.audit for p in section.parts):
        return None
    return step


def split(plan: Plan, budget: Budget, items: Sequence[Item], memo: Memo) -> tuple[list[Item], Tail | None]:
    """``items`` without the first drop's lowest candidates that its section cannot hold, and
    those (None when there are none). The highest candidates kept hold an eighth more tokens than
    the bound, so that the step rarely finds the rest within its target and needs them back."""
    step = first_drop(plan)
    if step is None:
        return list(items), None
    floor = budget.minimums.get(step.section, 0) if step.floor == "minimum" else 0
    bound = max(budget.total, floor)
    natural = memo.natural_id
    # The step's order (reduce._sequence): part after part as the step lists them, each lowest key
    # first, then oldest first.
    rank = {part: n for n, part in enumerate(step.parts or ())}
    candidates = [(rank.get(i.section, 0), i.key, natural(i.id), i) for i in items
                  if i.layer == step.section and (step.origin is None or i.origin == step.origin)
                  and (step.parts is None or i.section in rank)]
    candidates.sort(key=_order)
    wanted = bound + bound // 8 + 32
    held = 0
    start = len(candidates)
    while start > 1 and held <= wanted:
        start -= 1
        held += max(candidates[start][3].tokens, 0) + 1
    if held <= wanted:
        return list(items), None
    # Items tied with the first one kept may be dropped in either order: they all stay.
    while start > 0 and _order(candidates[start - 1]) == _order(candidates[start]):
        start -= 1
    if start == 0:
        return list(items), None
    tail = [entry[3] for entry in candidates[:start]]
    gone = {id(i) for i in tail}
    return [i for i in items if id(i) not in gone], Tail(step.section, tail)


def _order(entry: tuple[int, float, NaturalId, Item]) -> tuple[int, float, NaturalId]:
    return entry[0], entry[1], entry[2]


__all__ = ["Tail", "first_drop", "split"]
