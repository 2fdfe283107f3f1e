"""The units a summary stands for -- a paragraph, a page, a chapter -- and which lack a current one.

A unit is named on the wire as the paragraph's label (``"p12.3"``), the page's number (``"12"``)
or the chapter's index (``"3"``). A stored summary is current while its unit still exists with
the same pages and the same content hash (:mod:`services.reading.layout`). A page is ready to be
rolled up once each of its paragraphs has a current summary, a chapter once each of its pages has.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from services.reading import prompts
from services.reading.layout import Book, Chapter, Page, Paragraph
from services.reading.summary import Level

_PARAGRAPH = re.compile(r"p([1-9][0-9]{0,5})\.([1-9][0-9]{0,5})")
_NUMBER = re.compile(r"[1-9][0-9]{0,5}")


@dataclass(frozen=True, slots=True)
class Unit:
    level: Level
    name: str  # "p12.3", "12" or "3"
    pages: tuple[int, int]  # the pages it covers, inclusive
    hash: str


@dataclass(frozen=True, slots=True)
class Stored:
    """A stored summary: the unit's hash it was made for, and its canonical rendering."""

    hash: str
    rendered: str


@dataclass(frozen=True, slots=True)
class Pending:
    unit: Unit
    system: str
    user: str


@dataclass(frozen=True, slots=True)
class Backlog:
    """What a level lacks: the units whose prompt is ready, and how many wait for the level below."""

    ready: tuple[Pending, ...]
    waiting: int
    current: int


def paragraph_unit(p: Paragraph) -> Unit:
    return Unit("paragraph", p.label, (p.page, p.page), p.hash)


def page_unit(page: Page) -> Unit:
    return Unit("page", str(page.number), (page.number, page.number), page.hash)


def chapter_unit(chapter: Chapter) -> Unit:
    # A chapter's summary cites page numbers: when its pages are renumbered (an earlier chapter
    # grew or shrank, another page size) it is no longer current, though its text is the same.
    pages = (chapter.start_page, chapter.end_page)
    made_for = f"{chapter.hash}\n{pages[0]}-{pages[1]}".encode()
    return Unit("chapter", str(chapter.index), pages, hashlib.sha256(made_for).hexdigest())


def units(book: Book, level: Level) -> list[Unit]:
    if level == "paragraph":
        return [paragraph_unit(p) for p in book.paragraphs]
    if level == "page":
        return [page_unit(p) for p in book.pages]
    return [chapter_unit(c) for c in book.chapters]


def find(book: Book, level: Level, name: str) -> Unit | None:
    """The unit named ``name`` at ``level`` in ``book``, if it exists."""
    name = name.strip()
    if level == "paragraph":
        found = _PARAGRAPH.fullmatch(name)
        if not found:
            return None
        page, intra = int(found.group(1)), int(found.group(2))
        if page > len(book.pages) or intra > len(book.page(page).paragraphs):
            return None
        return paragraph_unit(book.page(page).paragraphs[intra - 1])
    if not _NUMBER.fullmatch(name):
        return None
    number = int(name)
    if level == "page":
        return page_unit(book.page(number)) if number <= len(book.pages) else None
    return chapter_unit(book.chapters[number - 1]) if number <= len(book.chapters) else None


def is_current(unit: Unit, stored: Mapping[str, Stored]) -> bool:
    found = stored.get(unit.name)
    return found is not None and found.hash == unit.hash


def state(unit: Unit, stored: Mapping[str, Stored]) -> Literal["current", "stale", "missing"]:
    """Whether the unit's stored summary was made for its text as it is now."""
    found = stored.get(unit.name)
    if found is None:
        return "missing"
    return "current" if found.hash == unit.hash else "stale"


def backlog(book: Book, level: Level, stored: Mapping[Level, Mapping[str, Stored]]) -> Backlog:
    """The units of ``level`` without a current summary, each with the seed's prompt for it when
    the summaries it rolls up are all current."""
    own = stored.get(level, {})
    ready: list[Pending] = []
    waiting = current = 0
    for unit in units(book, level):
        if is_current(unit, own):
            current += 1
            continue
        parts = _parts(book, unit, stored)
        if parts is None:
            waiting += 1
            continue
        ready.append(_pending(book, unit, parts))
    return Backlog(tuple(ready), waiting, current)


def _parts(book: Book, unit: Unit, stored: Mapping[Level, Mapping[str, Stored]]) -> list[str] | None:
    """The current summaries ``unit`` rolls up, in order, or None while any is missing."""
    if unit.level == "paragraph":
        return []
    below: Sequence[Unit]
    if unit.level == "page":
        below = [paragraph_unit(p) for p in book.page(unit.pages[0]).paragraphs]
        level: Level = "paragraph"
    else:
        below = [page_unit(book.page(n)) for n in range(unit.pages[0], unit.pages[1] + 1)]
        level = "page"
    found = stored.get(level, {})
    if not all(is_current(u, found) for u in below):
        return None
    return [found[u.name].rendered for u in below]


def _pending(book: Book, unit: Unit, parts: list[str]) -> Pending:
    if unit.level == "paragraph":
        page, intra = (int(x) for x in unit.name[1:].split("."))
        system, user = prompts.paragraph_prompt(book.page(page).paragraphs[intra - 1])
    elif unit.level == "page":
        system, user = prompts.page_prompt(unit.pages[0], parts)
    else:
        system, user = prompts.chapter_prompt(int(unit.name), unit.pages[0], unit.pages[1], parts)
    return Pending(unit, system, user)
