"""Small hand-made plans for engine tests: sections of item, window and text parts, no headers
unless asked, so that rendered sizes are easy to reason about."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from services.context.budget import make_budget
from services.context.candidates import candidates
from services.context.engine import Request, assemble
from services.context.memo import NoMemo
from services.context.models import Assembly, BudgetProfile, Item, Origin, Window
from services.context.plan import PartKind, PartPlan, Plan, SectionPlan, StepPlan
from services.context.reduce import State
from services.context.templates import resolve_texts
from tests.services.context.factory import PROJECT, counter

_SOURCES: dict[PartKind, str] = {"items": "test", "window": "document.window", "text": "literal"}


def part(id_: str, kind: PartKind = "items", *, source: str | None = None, **fields: Any) -> PartPlan:
    """A part with no header; items parts take their source from their id."""
    default = id_ if kind == "items" else _SOURCES[kind]
    return PartPlan(id=id_, source=source or default, kind=kind, **fields)


def section(id_: str, *parts: PartPlan, **fields: Any) -> SectionPlan:
    return SectionPlan(id=id_, parts=parts, **fields)


def step(section_id: str, step_name: Any, id_: str | None = None, **fields: Any) -> StepPlan:
    return StepPlan(section=section_id, id=id_ or step_name, step=step_name, **fields)


def plan(*sections: SectionPlan, trim: Iterable[StepPlan] = (), last_resort: Iterable[str] = (),
         variables: Mapping[str, str] | None = None) -> Plan:
    return Plan(name="test", sections=sections, trim=tuple(trim), last_resort=tuple(last_resort),
                variables=dict(variables or {}))


def thing(id_: str, section_id: str, part_id: str, text: str, key: float = 0.5, *,
          origin: Origin = "user", group: str | None = None, tier: int | None = None) -> Item:
    """An item of ``section_id``/``part_id`` with its exact token count."""
    return Item(id=id_, layer=section_id, section=part_id, source=part_id, text=text,
                tokens=counter().count(text), key=key, key_name="priority", project_id=PROJECT,
                origin=origin, group=group, tier=tier)


def request(the_plan: Plan, items: Iterable[Item] = (), *, total: int = 100_000, language: str = "en",
            window: Window | None = None, instruction: str | None = None,
            variables: Mapping[str, str] | None = None, facts: Iterable[str] = ()) -> Request:
    """A request whose budget total is exactly ``total`` (no output reserve, no system prompt)."""
    return Request(project_id=PROJECT, language=language, plan=the_plan,
                   profile=BudgetProfile(context_window=total, output_reserve=0), system_prompt_tokens=0,
                   items=tuple(items), window=window, instruction=instruction,
                   instruction_tokens=counter().count(instruction or ""), variables=variables or {},
                   facts=frozenset(facts))


def run(the_plan: Plan, items: Iterable[Item] = (), **kwargs: Any) -> Assembly:
    """Assemble ``request(the_plan, items, **kwargs)``."""
    return assemble(request(the_plan, items, **kwargs), counter())


def start(the_plan: Plan, items: Iterable[Item] = (), **kwargs: Any) -> State:
    """The engine's state just before reduction, as :func:`assemble` builds it."""
    req = request(the_plan, items, **kwargs)
    memo = NoMemo()
    budget = make_budget(req.profile, the_plan, req.system_prompt_tokens)
    found = candidates(the_plan, req.items, req.window, budget, memo, explain=True)
    texts = resolve_texts(the_plan, req.language, req.variables, req.facts, req.instruction)
    state = State.start(req, the_plan, budget, counter().count, memo, found.screened, texts)
    state.named = found.named
    state.kept.update(found.ordered)
    return state


def size(state: State, section_id: str) -> int:
    """The exact count of one section as it renders now."""
    return state.count(state.text(section_id))
