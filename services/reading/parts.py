"""The context parts of a reader's answer prompt, each carrying the pages it draws on (seed 000).

Three kinds, in the order they matter: the stored summaries of the chapters that lie wholly inside
the reading window, the stored summaries of the window's pages that bear on the question, and the
paragraphs of the window that the project's search (or, beside it, plain word overlap) finds for the
question. Only current summaries count (their unit's content hash unchanged), and a paragraph's text
comes from the book as it is now, never from the index: whatever the index holds, only the window's
own paragraphs can be quoted. Pure functions over a laid-out book.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from services.reading.layout import Book, Chapter, Paragraph
from services.reading.units import Stored, chapter_unit, is_current, page_unit
from services.reading.words import Words
from services.sources.relevance import features

Kind = Literal["chapter", "page", "paragraph"]
SOURCES: dict[Kind, str] = {"chapter": "reading.chapters", "page": "reading.pages",
                            "paragraph": "reading.evidence"}
MAX_PAGES = 24  # page summaries offered: the most relevant
MAX_EVIDENCE = 16  # paragraphs offered: the best found
EVIDENCE_FLOOR = 0.35  # a paragraph scoring under this share of the best one is not evidence
SNIPPET_CHARS = 600  # a longer paragraph is cut, at a sentence end when one is near
_ENDS = ("。", "！", "？", ". ", "! ", "? ", "；", "; ")


class HitLike(Protocol):
    """Where a search found something: a span of a document, and how good it is (0..1)."""

    @property
    def document_id(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def score(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of context: its item id, its kind, its text, the pages it draws on, and its key
    (higher is kept longer when the budget is short)."""

    id: str
    kind: Kind
    text: str
    pages: tuple[int, int]
    key: float

    @property
    def source(self) -> str:
        return SOURCES[self.kind]


def within(pages: tuple[int, int], start: int, end: int) -> bool:
    return start <= pages[0] <= pages[1] <= end


def pages_label(pages: tuple[int, int]) -> str:
    """``p12`` or ``pp12–13``: the seed's citation form."""
    first, last = pages
    return f"p{first}" if first == last else f"pp{first}–{last}"


def chapter_parts(book: Book, stored: Mapping[str, Stored], start: int, end: int,
                  question: frozenset[str], words: Words) -> list[Part]:
    """Current summaries of the chapters wholly inside ``start``..``end``, in reading order; the
    more a summary shares with the question the higher its key, later chapters breaking ties."""
    inside = [c for c in book.chapters if within((c.start_page, c.end_page), start, end)]
    parts = []
    for rank, chapter in enumerate(inside):
        unit = chapter_unit(chapter)
        if not is_current(unit, stored):
            continue
        summary = stored[unit.name].rendered
        key = words.overlap(question, features(summary)) + rank / (10 * len(inside))
        text = f"{_chapter_name(chapter)} ({pages_label(unit.pages)}): {summary}"
        parts.append(Part(f"chapter:{chapter.index}", "chapter", text, unit.pages, key))
    return parts


def _chapter_name(chapter: Chapter) -> str:
    title = (chapter.title or "").replace("\n", " ").strip()[:80]
    return f"Chapter {chapter.index} “{title}”" if title else f"Chapter {chapter.index}"


def page_parts(book: Book, stored: Mapping[str, Stored], start: int, end: int, question: frozenset[str],
               words: Words, found_on: Mapping[int, float], covered: Iterable[int]) -> list[Part]:
    """Current summaries of the window's pages that bear on the question, in page order.

    A page bears on it when its summary shares words with the question, when evidence for the
    question was found on it, or when no chapter summary covers it (the chapter being read); at
    most :data:`MAX_PAGES`, the most relevant.
    """
    summarised = set(covered)
    scored: list[tuple[float, Part]] = []
    for number in range(start, end + 1):
        unit = page_unit(book.page(number))
        if not is_current(unit, stored):
            continue
        summary = stored[unit.name].rendered
        key = (0.6 * words.overlap(question, features(summary)) + 0.3 * found_on.get(number, 0.0)
               + (0.1 if number not in summarised else 0.0))
        if key <= 0:
            continue
        key += number / (100 * end)  # later pages first among equals: nearer the reader
        scored.append((key, Part(f"page:{number}", "page", f"Page {number} (p{number}): {summary}",
                                 unit.pages, key)))
    best = sorted(scored, key=lambda s: -s[0])[:MAX_PAGES]
    return [part for _, part in sorted(best, key=lambda s: s[1].pages)]


def evidence_parts(book: Book, hits: Sequence[HitLike], start: int, end: int, question: frozenset[str],
                   words: Words) -> list[Part]:
    """The window's paragraphs found for the question, in reading order, at most
    :data:`MAX_EVIDENCE` and none far below the best: a paragraph the search hit scores the hit's
    score, more the more of the question's rare words it holds itself (a hit may span several
    paragraphs); any other paragraph of the window scores by those words alone, at a lower weight;
    each is quoted from the book as it is now."""
    first = _first_paragraphs(book)
    scores: dict[int, float] = {}
    for hit in hits:
        for p in book.paragraphs_in(hit.document_id, hit.start, hit.end):
            if start <= p.page <= end:
                at = first[p.page - 1] + p.intra - 1
                score = float(hit.score) * (0.3 + 0.7 * words.overlap(question, words.paragraphs[at]))
                scores[at] = max(scores.get(at, 0.0), score)
    if question:
        for at in range(first[start - 1], first[end]):
            overlap = words.overlap(question, words.paragraphs[at])
            if 0.6 * overlap > scores.get(at, 0.0):
                scores[at] = 0.6 * overlap
    best = max(scores.values(), default=0.0)
    chosen = sorted((at for at, score in scores.items() if score > 0 and score >= EVIDENCE_FLOOR * best),
                    key=lambda at: (-scores[at], at))[:MAX_EVIDENCE]
    return [_evidence(book.paragraphs[at], scores[at]) for at in sorted(chosen)]


def _evidence(p: Paragraph, score: float) -> Part:
    text = f"({p.label}) {snippet(p.text)}"
    return Part(f"paragraph:{p.label}", "paragraph", text, (p.page, p.page), score)


def _first_paragraphs(book: Book) -> list[int]:
    """Each page's first paragraph's position in ``book.paragraphs``, then their count."""
    first = [0]
    for page in book.pages:
        first.append(first[-1] + len(page.paragraphs))
    return first


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The paragraph on one line, cut near ``limit`` characters at a sentence end when one is near."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    for mark in _ENDS:
        at = cut.rfind(mark)
        if at >= limit // 2:
            return cut[:at + len(mark)].rstrip() + " …"
    return cut.rstrip() + " …"


def found_pages(parts: Iterable[Part]) -> dict[int, float]:
    """Page -> the best evidence score found on it."""
    found: dict[int, float] = {}
    for part in parts:
        found[part.pages[0]] = max(found.get(part.pages[0], 0.0), min(part.key, 1.0))
    return found
