"""Before budgeting: refuse foreign items, skip malformed ones and duplicates.

How strictly a part's items are screened is the plan's choice (``dedupe``):
by id only (rules are injected even when the window mentions them), also by
text, or also against the text around the cursor (retrieved passages).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from services.context.memo import Memo
from services.context.models import Item, ItemReport, Window
from services.context.occurs import norm
from services.context.plan import Plan
from services.errors import ScopeViolation

# The spec's cap on retrieved candidates (the novel profile's ``candidates``).
MAX_RETRIEVED = 200

_log = structlog.get_logger("context.screening")


@dataclass
class Screened:
    items: list[Item]
    reports: list[ItemReport] = field(default_factory=list)  # only when asked to explain
    warnings: list[str] = field(default_factory=list)
    capped: set[str] = field(default_factory=set)  # sections that lost candidates to their limit


def dropped(item: Item, reason: str) -> ItemReport:
    # Positional: a keyword call costs a quarter more, and there are hundreds.
    report = ItemReport(item.id, item.layer, item.section, item.source, max(item.tokens, 0), item.key,
                        item.key_name, "dropped", reason)
    if item.group is not None:
        report.group, report.tier = item.group, item.tier
    return report


def check_scope(items: Sequence[Item], project_id: str) -> None:
    """An item from another project fails the whole request, loudly."""
    for item in items:
        if item.project_id != project_id:
            _log.warning("security.scope_violation", project_id=project_id, item_id=item.id,
                         item_project_id=item.project_id, layer=item.layer, source=item.source)
            raise ScopeViolation(layer=item.layer, itemId=item.id)


def window_knocks(plan: Plan, items: Sequence[Item], window: Window | None, memo: Memo) -> frozenset[int]:
    """The positions in ``items`` of the candidates of parts deduplicated against the window that
    the window holds: a span that overlaps it, a text (whitespace aside) that stands in it, or a
    quote of the writer's text that stands in it or that it stands in. All that screening reads of
    the window."""
    deduped = plan.window_deduped
    if window is None or not deduped:
        return frozenset()
    # The window is new at every assembly: its text would only push the records' out of the memo.
    window_text = norm(window.before + window.after)
    start, end = window.start, window.cursor + len(window.after)
    text_of = memo.norm
    knocked = []
    # Inline, in one loop: it runs over every candidate (some 370) at every assembly.
    for n, item in enumerate(items):
        if (item.layer, item.section) not in deduped or not item.text:
            continue
        span = item.span
        if (span is not None and span[0] < end and start < span[1]) or (
                (text := text_of(item.text)) and text in window_text) or (
                item.quote and (quote := text_of(item.quote)) and window_text and (
                    quote in window_text or window_text in quote)):
            knocked.append(n)
    return frozenset(knocked)


def screen(plan: Plan, items: Sequence[Item], window: Window | None, memo: Memo,
           knocks: frozenset[int] | None = None, explain: bool = True) -> Screened:
    """Keep valid, distinct items; cap each section at its ``candidates``.

    An item is skipped as ``invalid`` (no part of the plan holds it, a negative count, blank text,
    a NaN key), else as a ``duplicate``: of an id kept before; for parts deduplicated by text or
    against the window, of a text kept before (whitespace aside); against the window, of a span
    that overlaps it or a text it holds (``knocks``: :func:`window_knocks`, found here when not
    given). One pass, the checks inline: it runs over every candidate (some 370 in a novel's
    assembly). A report of each skipped item only when ``explain``: nothing else reads them."""
    if knocks is None:
        knocks = window_knocks(plan, items, window, memo)
    parts = plan.item_parts
    result = Screened(items=[])
    keep, reports = result.items.append, result.reports
    # The ids and whitespace-free texts kept so far; a kept text is the memo's own string, whose
    # hash Python keeps.
    seen_ids: set[str] = set()
    seen_texts: set[str] = set()
    text_of = memo.norm
    invalid = 0
    for n, item in enumerate(items):
        part = parts.get((item.layer, item.section))
        text = item.text
        if part is None or item.tokens < 0 or not text or text.isspace() or item.key != item.key:
            invalid += 1  # a NaN key (unequal to itself) would make ordering meaningless
            if explain:
                reports.append(dropped(item, "invalid"))
            continue
        item_id = item.id
        if item_id in seen_ids:
            if explain:
                reports.append(dropped(item, "duplicate"))
            continue
        dedupe = part.dedupe
        if dedupe != "id":
            text = text_of(text)
            if text in seen_texts or (dedupe == "window" and n in knocks):
                if explain:
                    reports.append(dropped(item, "duplicate"))
                continue
            seen_texts.add(text)
        seen_ids.add(item_id)
        keep(item)
    if invalid:
        result.warnings.append(f"CONTEXT_LAYER_INVALID: {invalid} malformed item(s) skipped")
    for section in plan.sections:
        if section.candidates is not None:
            _cap(result, section.id, section.candidates, explain)
    return result


def _cap(result: Screened, section: str, limit: int, explain: bool) -> None:
    candidates = [i for i in result.items if i.layer == section]
    if len(candidates) <= limit:
        return  # the usual case: nothing to rank
    # Highest key first, equal keys in their order: a stable sort in reverse keeps them so.
    over = sorted(candidates, key=_key, reverse=True)[limit:]
    # Ids are unique after screening, so identity is equality here (and list.remove was quadratic).
    gone = {id(item) for item in over}
    result.items = [item for item in result.items if id(item) not in gone]
    result.capped.add(section)
    if explain:
        result.reports.extend(dropped(item, "candidate_limit") for item in over)


def _key(item: Item) -> float:
    return item.key
