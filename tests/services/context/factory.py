"""Build engine inputs for tests with exact token counts."""

from __future__ import annotations

import functools

from services.context.counting import CountCache
from services.context.models import Item, KeyName, Layer, Origin, Window
from services.tokenizer import resolve_tokenizer

PROJECT = "project-a"

_KEY_NAMES: dict[str, KeyName] = {
    "constraints": "priority", "narrative": "priority", "entities": "relevance",
    "preferences": "confidence", "style": "confidence", "passages": "score", "history": "score",
}
_LAYERS = {
    "constraints": Layer.RULES, "narrative": Layer.RULES, "entities": Layer.RULES,
    "preferences": Layer.SETTINGS, "style": Layer.SETTINGS,
    "passages": Layer.RETRIEVED, "history": Layer.RETRIEVED,
}


@functools.cache
def counter() -> CountCache:
    return CountCache(resolve_tokenizer())


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
