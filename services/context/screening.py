"""Before budgeting: refuse foreign items, skip malformed ones and duplicates."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from services.context.models import Item, ItemReport, Layer, Window
from services.context.render import SECTIONS
from services.errors import ScopeViolation

MAX_RETRIEVED = 200

_log = structlog.get_logger("context.screening")


@dataclass
class Screened:
    items: list[Item]
    reports: list[ItemReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def dropped(item: Item, reason: str) -> ItemReport:
    # Positional: a frozen dataclass's keyword call costs a quarter more, and there are hundreds.
    return ItemReport(item.id, item.layer, item.section, item.source, max(item.tokens, 0), item.key,
                      item.key_name, "dropped", reason)


def check_scope(items: Sequence[Item], project_id: str) -> None:
    """An item from another project fails the whole request, loudly."""
    for item in items:
        if item.project_id != project_id:
            _log.warning("security.scope_violation", project_id=project_id, item_id=item.id,
                         item_project_id=item.project_id, layer=item.layer.value, source=item.source)
            raise ScopeViolation(layer=item.layer.value, itemId=item.id)


def _valid(item: Item) -> bool:
    return (item.tokens >= 0 and bool(item.text) and not item.text.isspace()
            and item.section in SECTIONS[item.layer]
            and item.key == item.key)  # NaN keys would make ordering meaningless


@functools.lru_cache(maxsize=8192)
def _norm(text: str) -> str:
    """``text`` without whitespace (cached: the same records come back every assembly)."""
    return "".join(text.split())


def _overlaps(span: tuple[int, int] | None, window: Window | None) -> bool:
    if span is None or window is None:
        return False
    end = window.cursor + len(window.after)
    return span[0] < end and window.start < span[1]


def screen(items: Sequence[Item], window: Window | None) -> Screened:
    """Keep valid, distinct items; cap Retrieved candidates at :data:`MAX_RETRIEVED`."""
    result = Screened(items=[])
    window_text = _norm((window.before + window.after) if window else "")
    seen: set[str] = set()
    invalid = 0
    for item in items:
        reason, norm = _reason_to_skip(item, window, window_text, seen)
        if reason is None:
            result.items.append(item)
            seen.add(item.id)
            if item.layer is not Layer.RULES:
                seen.add("text:" + norm)
        else:
            invalid += reason == "invalid"
            result.reports.append(dropped(item, reason))
    if invalid:
        result.warnings.append(f"CONTEXT_LAYER_INVALID: {invalid} malformed item(s) skipped")
    _cap_retrieved(result)
    return result


def _reason_to_skip(item: Item, window: Window | None, window_text: str,
                    seen: set[str]) -> tuple[str | None, str]:
    """Why ``item`` is skipped (None: kept), and its whitespace-free text ("" for Rules)."""
    if not _valid(item):
        return "invalid", ""
    if item.id in seen:
        return "duplicate", ""
    if item.layer is Layer.RULES:
        return None, ""  # rules are injected even when the window mentions them
    norm = _norm(item.text)
    if "text:" + norm in seen:
        return "duplicate", norm
    if item.layer is Layer.RETRIEVED and (_overlaps(item.span, window) or (norm and norm in window_text)):
        return "duplicate", norm
    return None, norm


def _cap_retrieved(result: Screened) -> None:
    retrieved = sorted((i for i in result.items if i.layer is Layer.RETRIEVED), key=lambda i: -i.key)
    over = retrieved[MAX_RETRIEVED:]
    if not over:
        return
    # Ids are unique after screening, so identity is equality here (and list.remove was quadratic).
    gone = {id(item) for item in over}
    result.items = [item for item in result.items if id(item) not in gone]
    result.reports.extend(dropped(item, "candidate_limit") for item in over)
