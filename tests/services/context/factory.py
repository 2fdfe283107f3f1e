"""Build engine inputs for tests with exact token counts, for the built-in ``novel`` plan."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from services.context.counting import CountCache
from services.context.engine import Request
from services.context.models import DEFAULT_PROFILE, LAYER_ORDER, BudgetProfile, Item, KeyName, Origin, Window
from services.context.plan import Plan
from services.profiles.plans import BuiltInPlans
from services.tokenizer import resolve_tokenizer

PROJECT = "project-a"

_KEY_NAMES: dict[str, KeyName] = {
    "constraints": "priority", "narrative": "priority", "entities": "relevance",
    "preferences": "confidence", "style": "confidence", "passages": "score", "history": "score",
}
# The novel plan's placement: part id -> its section id.
_LAYERS = {
    "constraints": "rules", "narrative": "rules", "entities": "rules",
    "preferences": "settings", "style": "settings",
    "passages": "retrieved", "history": "retrieved",
}


@functools.cache
def counter() -> CountCache:
    return CountCache(resolve_tokenizer())


@functools.cache
def novel() -> Plan:
    """The built-in ``novel`` plan with its own (default) budget table."""
    return BuiltInPlans().resolved["novel"].plan


def novel_plan(profile: BudgetProfile = DEFAULT_PROFILE) -> Plan:
    """The ``novel`` plan with ``profile``'s ratios and minimums, as the assembly service applies a
    project's budget table to it."""
    return novel().with_budgets(dict(zip(LAYER_ORDER, profile.ratios, strict=True)),
                                dict(zip(LAYER_ORDER, profile.minimums, strict=True)))


def item(id_: str, section: str, text: str, key: float = 0.5, *, origin: Origin = "user",
         project_id: str = PROJECT, names: tuple[str, ...] = (), tokens: int | None = None,
         span: tuple[int, int] | None = None) -> Item:
    return Item(id=id_, layer=_LAYERS[section], section=section, source=section, text=text,
                tokens=counter().count(text) if tokens is None else tokens, key=key,
                key_name=_KEY_NAMES[section], project_id=project_id, origin=origin, names=names,
                span=span)


def window(before: str, after: str = "", start: int = 0) -> Window:
    return Window(before=before, after=after, start=start, cursor=start + len(before),
                  tokens_before=counter().count(before), tokens_after=counter().count(after))


def novel_request(items: Iterable[Item] = (), *, profile: BudgetProfile = DEFAULT_PROFILE,
                  language: str = "zh", window_: Window | None = None, instruction: str | None = None,
                  system_prompt_tokens: int = 40, plan: Plan | None = None,
                  variables: Mapping[str, str] | None = None,
                  facts: frozenset[str] = frozenset()) -> Request:
    """A request of the ``novel`` plan (with ``profile``'s budget table unless ``plan`` is given)."""
    return Request(project_id=PROJECT, language=language, plan=plan or novel_plan(profile), profile=profile,
                   system_prompt_tokens=system_prompt_tokens, items=tuple(items), window=window_,
                   instruction=instruction, instruction_tokens=counter().count(instruction or ""),
                   variables=variables or {}, facts=facts)
