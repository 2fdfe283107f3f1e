"""Candidates that can never fit, set apart before they are ordered and fitted.

A section whose first reduction is the plan's first ``fit`` step, a ``drop_lowest`` in key
order, loses whole items lowest key first until it fits a target that is never more than the
budget's total (or the step's floor, when that is larger): the room the rest of the prompt leaves.
So when the section holding only its highest items already counts over that bound, every item
below them is dropped by that step, whatever the rest of the prompt holds. With hundreds of
retrieved passages and room for a dozen, most of an assembly's candidates are such items.

:func:`split` sets them apart before ordering; the engine checks the bound with the section's
exact count (and orders them back in when it does not hold), and the step drops them first, as
part of what it drops: its reduction's ``before`` estimate counts them and an audited part logs
their ids, so the result is the one the step gives with every candidate ordered and fitted. Only
when no report of every candidate's fate is asked for (explain off): such a report orders them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.context.memo import Memo
from services.context.models import Budget, Item
from services.context.plan import Plan, StepPlan


@dataclass(frozen=True, slots=True)
class Tail:
    """The items set apart from ``section``: lowest first, the order its first step drops them in."""

    section: str
    items: list[Item]
    bound: int  # the section's other items must count more than this for the split to hold


def first_drop(plan: Plan) -> StepPlan | None:
    """The plan's first ``fit`` step, when it drops whole items in key order from a section that
    nothing counts before it (no ``cap`` step of its own) and that holds no window; else None."""
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
    if section is None or section.window_part is not None:
        return None
    return step


def split(plan: Plan, budget: Budget, items: Sequence[Item], memo: Memo) -> tuple[list[Item], Tail | None]:
    """``items`` without the first drop's lowest candidates that its section cannot hold, and
    those (None when there are none). The highest candidates kept hold at least an eighth more
    tokens than the bound, so that the exact check of the engine rarely fails."""
    step = first_drop(plan)
    if step is None:
        return list(items), None
    floor = budget.minimums.get(step.section, 0) if step.floor == "minimum" else 0
    bound = max(budget.total, floor)
    candidates = [i for i in items if i.layer == step.section
                  and (step.origin is None or i.origin == step.origin)
                  and (step.parts is None or i.section in step.parts)]
    natural = memo.natural_id
    candidates.sort(key=lambda i: (i.key, natural(i.id)))  # as the step drops them: lowest first
    wanted = bound + bound // 8 + 32
    held = 0
    for start in range(len(candidates) - 1, 0, -1):
        held += max(candidates[start].tokens, 0) + 1
        if held > wanted:
            tail = candidates[:start]
            gone = {id(i) for i in tail}
            return [i for i in items if id(i) not in gone], Tail(step.section, tail, bound)
    return list(items), None


__all__ = ["Tail", "first_drop", "split"]
