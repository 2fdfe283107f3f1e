"""A book's chapters, pages and paragraphs, derived deterministically from its documents.

Each document is a chapter (in the order given; :func:`reading_order` is the natural order of
document ids) and every chapter starts a new page; pages are numbered across the book from 1.

* Paragraphs are blocks of non-blank lines (lines are split on ``\\n`` only: ``str.splitlines``
  would also break at a form feed, which is a page marker here). A paragraph's span is trimmed of
  surrounding whitespace, so every non-whitespace character of a document outside the markers lies
  in exactly one paragraph and ``paragraph.text == document[start:end]`` (offsets count code points,
  as the protocol's ``cursorPosition`` does).
* A document holding any marker -- a line holding only ``<!-- page -->`` (case and spaces inside
  the comment are free) or a form feed anywhere -- is paged by its markers only, whatever the
  pages' sizes. Otherwise pages are filled greedily from the chapter's start with whole paragraphs,
  at most ``page_tokens`` tokens each (the sum of the paragraphs' exact counts). A paragraph larger
  than a page alone is cut into pieces of at most ``page_tokens``: at sentence ends (``。！？.!?``,
  closing quotes kept; ``.!?`` only before whitespace), else at whitespace, else between
  characters. Each piece is a paragraph of its own. (A single character that counts more than a
  page cannot be cut further and stays over.)
* Pages with no paragraph are dropped, except that a chapter with no text keeps one empty page, so
  every chapter has a page range.

Hashes cover text only, never a number: a paragraph's is the sha256 of its text, a page's the
sha256 of its paragraphs' hashes, a chapter's the sha256 of its pages' hashes. So a page whose text
is unchanged keeps its hash when it is renumbered, and a summary of a unit is current only when the
unit's number (page number, paragraph label, chapter index and page range) and hash both still
match: a renumbered page must be summarised again because its summary cites page numbers.

Stability: the layout of a document up to a position depends only on the text before it, plus
-- for token pages -- whether the next paragraph fits on the current page. An edit inside a
paragraph therefore leaves every page before the first page holding that paragraph, before or
after the edit, unchanged (number, paragraphs and hash); that page is the edited page, or the one
before it when the edit shrank the page's first paragraph so that it now fits there. Adding a
document's first marker, or removing its last, switches the whole chapter between the two ways of
paging.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final, Literal

Count = Callable[[str], int]
Span = tuple[int, int]
PagedBy = Literal["markers", "tokens"]

DEFAULT_PAGE_TOKENS: Final = 400

_DIGITS = re.compile(r"(\d+)")
# A marker line (spaces and tabs, a trailing \r included, around the comment) or a form feed.
_MARKER = re.compile(r"^[^\S\n]*<!--[^\S\n]*page[^\S\n]*-->[^\S\n]*$|\f", re.IGNORECASE | re.MULTILINE)
_SENTENCE_END = re.compile(r"[。！？.!?]+[\"'”’」』）)\]》]*")
_CJK_ENDS = frozenset("。！？")
_WORD = re.compile(r"\S+")
_HEADING = re.compile(r"#{1,6}[^\S\n]+(.*?)(?:[^\S\n]+#+)?[^\S\n]*")


# --- reading order -------------------------------------------------------------------------------


def natural_key(document_id: str) -> tuple[tuple[object, ...], str]:
    """The sort key of :func:`reading_order`."""
    # NFKC folds full-width letters and digits; re.split with a group alternates text and digit runs,
    # so equal positions always hold the same type. Digit runs compare by value without int(), which
    # refuses very long runs: by length once leading zeros are gone, then by digits.
    parts: list[object] = []
    for i, part in enumerate(_DIGITS.split(unicodedata.normalize("NFKC", document_id).casefold())):
        if i % 2:
            digits = "".join(str(unicodedata.decimal(c)) for c in part).lstrip("0")
            parts.append((len(digits), digits))
        else:
            parts.append(part)
    return tuple(parts), document_id


def reading_order(document_ids: Iterable[str]) -> list[str]:
    """Document ids in reading order: natural sort, digit runs compared as numbers, case-insensitive.

    ``ch2.md < ch10.md``, ``第2章 < 第10章``, ``Ch3 < ch4``; full-width forms count as their plain
    forms. Ids equal but for case or leading zeros are ordered by their code points, so the order is
    total. Chinese numerals (第二章) are text, not numbers.
    """
    return sorted(document_ids, key=natural_key)


# --- the book ------------------------------------------------------------------------------------


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A paragraph (or a piece of one too large for a page) and where it lies in its document."""

    page: int
    intra: int
    document_id: str
    start: int
    end: int
    text: str
    tokens: int
    hash: str

    @property
    def label(self) -> str:
        """``p{page}.{intra}``, the paragraph's name in prompts and citations."""
        return f"p{self.page}.{self.intra}"


@dataclass(frozen=True, slots=True)
class Page:
    number: int
    chapter_index: int
    paragraphs: tuple[Paragraph, ...]
    tokens: int
    hash: str


@dataclass(frozen=True, slots=True)
class Chapter:
    index: int
    document_id: str
    title: str | None
    start_page: int
    end_page: int
    paged_by: PagedBy
    hash: str


@dataclass(frozen=True)
class Book:
    chapters: tuple[Chapter, ...]
    pages: tuple[Page, ...]
    paragraphs: tuple[Paragraph, ...]
    page_tokens: int

    @cached_property
    def _by_document(self) -> dict[str, tuple[Chapter, list[int], list[int]]]:
        # Per document: its chapter, and its paragraphs' starts and pages, for bisection.
        found: dict[str, tuple[Chapter, list[int], list[int]]] = {
            c.document_id: (c, [], []) for c in self.chapters}
        for p in self.paragraphs:
            found[p.document_id][1].append(p.start)
            found[p.document_id][2].append(p.page)
        return found

    def page(self, number: int) -> Page:
        if not 1 <= number <= len(self.pages):
            raise IndexError(f"page {number} is not in 1..{len(self.pages)}")
        return self.pages[number - 1]

    def page_of(self, document_id: str, offset: int) -> int:
        """The page a reader at ``offset`` of the document is on.

        That is the page of the last paragraph starting at or before ``offset`` (the blank lines
        after a paragraph belong to its page), or the chapter's first page before its first
        paragraph. Raises ``KeyError`` for a document not in the book.
        """
        if document_id not in self._by_document:
            raise KeyError(document_id)
        chapter, starts, pages = self._by_document[document_id]
        i = bisect_right(starts, offset) - 1
        return chapter.start_page if i < 0 else pages[i]

    def paragraphs_in(self, document_id: str, start: int, end: int) -> tuple[Paragraph, ...]:
        """The document's paragraphs that overlap its characters ``start``..``end`` (none for a
        document not in the book)."""
        if document_id not in self._by_document:
            return ()
        _, starts, _ = self._by_document[document_id]
        first = max(bisect_right(starts, start) - 1, 0)
        last = bisect_right(starts, max(end - 1, start))
        mine = self._paragraphs_of[document_id]
        return tuple(p for p in mine[first:last] if p.start < max(end, start + 1) and p.end > start)

    @cached_property
    def _paragraphs_of(self) -> dict[str, list[Paragraph]]:
        found: dict[str, list[Paragraph]] = {c.document_id: [] for c in self.chapters}
        for p in self.paragraphs:
            found[p.document_id].append(p)
        return found

    def paragraphs_between(self, start_page: int, end_page: int) -> tuple[Paragraph, ...]:
        """The paragraphs of pages ``start_page``..``end_page`` (inclusive), in order."""
        if start_page < 1 or end_page < start_page:
            raise ValueError(f"not a page range: {start_page}..{end_page}")
        return tuple(p for page in self.pages[start_page - 1:end_page] for p in page.paragraphs)

    def layout(self) -> dict[str, Any]:
        """The result of ``reading:layout``: chapters with their page ranges, pages with their counts."""
        return {
            "pageTokens": self.page_tokens,
            "pageCount": len(self.pages),
            "chapters": [
                {
                    "index": c.index,
                    "documentId": c.document_id,
                    "title": c.title,
                    "startPage": c.start_page,
                    "endPage": c.end_page,
                    "pagedBy": c.paged_by,
                    "hash": c.hash,
                    "pages": [
                        {"number": page.number, "paragraphs": len(page.paragraphs), "tokens": page.tokens,
                         "hash": page.hash}
                        for page in self.pages[c.start_page - 1:c.end_page]
                    ],
                }
                for c in self.chapters
            ],
        }


def lay_out(documents: Sequence[tuple[str, str]], count: Count,
            page_tokens: int = DEFAULT_PAGE_TOKENS) -> Book:
    """The book of ``(document_id, text)`` pairs, in the order given, with ``count`` exact tokens."""
    if page_tokens < 1:
        raise ValueError("page_tokens must be at least 1")
    ids = [d for d, _ in documents]
    if len(set(ids)) != len(ids):
        raise ValueError("a document is listed twice")
    chapters: list[Chapter] = []
    pages: list[Page] = []
    for index, (document_id, text) in enumerate(documents, start=1):
        spans, paged_by = _page_spans(text, count, page_tokens)
        first = len(pages) + 1
        for spans_of_page in spans:
            number = len(pages) + 1
            paragraphs = tuple(
                Paragraph(number, intra, document_id, s, e, text[s:e], n, _sha(text[s:e]))
                for intra, (s, e, n) in enumerate(spans_of_page, start=1))
            pages.append(Page(number, index, paragraphs, sum(p.tokens for p in paragraphs),
                              _sha("\n".join(p.hash for p in paragraphs))))
        chapter_hash = _sha("\n".join(p.hash for p in pages[first - 1:]))
        chapters.append(Chapter(index, document_id, _title(text), first, len(pages), paged_by, chapter_hash))
    return Book(tuple(chapters), tuple(pages), tuple(p for page in pages for p in page.paragraphs),
                page_tokens)


def _title(text: str) -> str | None:
    """The text of the document's first non-blank line when it is a Markdown heading (``# Title``)."""
    for line in text.split("\n"):
        if line.strip():
            heading = _HEADING.fullmatch(line.strip())
            return heading.group(1) if heading and heading.group(1) else None
    return None


# --- pages of one document -----------------------------------------------------------------------


def _page_spans(text: str, count: Count, limit: int) -> tuple[list[list[tuple[int, int, int]]], PagedBy]:
    """The document's pages, each a list of ``(start, end, tokens)`` paragraphs; never empty."""
    markers = [m.span() for m in _MARKER.finditer(text)]
    if markers:
        bounds = [0, *(x for span in markers for x in span), len(text)]
        pages = [[(s, e, count(text[s:e])) for s, e in _blocks(text, bounds[i], bounds[i + 1])]
                 for i in range(0, len(bounds), 2)]
        return [page for page in pages if page] or [[]], "markers"
    filled: list[list[tuple[int, int, int]]] = [[]]
    used = 0
    for s, e in _blocks(text, 0, len(text)):
        n = count(text[s:e])
        pieces = [(s, e, n)] if n <= limit else [
            (a, b, count(text[a:b])) for a, b in _cut(text, s, e, count, limit)]
        for piece in pieces:
            if filled[-1] and used + piece[2] > limit:
                filled.append([])
                used = 0
            filled[-1].append(piece)
            used += piece[2]
    return filled, "tokens"


def _blocks(text: str, start: int, end: int) -> list[Span]:
    """Paragraphs of ``text[start:end]``: runs of non-blank lines, trimmed of surrounding whitespace."""
    found: list[Span] = []
    first: int | None = None
    last = start
    pos = start
    while pos <= end:
        newline = text.find("\n", pos, end)
        line_end = end if newline < 0 else newline
        line = text[pos:line_end]
        if line.strip():
            if first is None:
                first = pos + len(line) - len(line.lstrip())
            last = pos + len(line.rstrip())
        elif first is not None:
            found.append((first, last))
            first = None
        if newline < 0:
            break
        pos = newline + 1
    if first is not None:
        found.append((first, last))
    return found


def _trim(text: str, start: int, end: int) -> Span:
    piece = text[start:end]
    return start + len(piece) - len(piece.lstrip()), end - len(piece) + len(piece.rstrip())


def _sentences(text: str, start: int, end: int) -> list[Span]:
    units: list[Span] = []
    begin = start
    for m in _SENTENCE_END.finditer(text, start, end):
        # "3.14", "e.g.x": an ASCII stop ends a sentence only before whitespace or the end.
        if _CJK_ENDS.isdisjoint(m.group()) and m.end() < end and not text[m.end()].isspace():
            continue
        units.append(_trim(text, begin, m.end()))
        begin = m.end()
    units.append(_trim(text, begin, end))
    return [u for u in units if u[0] < u[1]]


def _words(text: str, start: int, end: int) -> list[Span]:
    return [m.span() for m in _WORD.finditer(text, start, end)]


def _cut(text: str, start: int, end: int, count: Count, limit: int, level: int = 0) -> list[Span]:
    """``text[start:end]`` in pieces of at most ``limit`` tokens: at sentences, else words, else characters.

    Pieces are filled greedily from the start, so a piece depends only on the text up to just past it.
    """
    if level == 2:
        return _characters(text, start, end, count, limit)
    units = (_sentences if level == 0 else _words)(text, start, end)
    pieces: list[Span] = []
    i = 0
    while i < len(units):
        s, e = units[i]
        if count(text[s:e]) > limit:
            pieces.extend(_cut(text, s, e, count, limit, level + 1))
            i += 1
            continue
        i += 1
        while i < len(units) and count(text[s:units[i][1]]) <= limit:
            e = units[i][1]
            i += 1
        pieces.append((s, e))
    return pieces


def _characters(text: str, start: int, end: int, count: Count, limit: int) -> list[Span]:
    pieces: list[Span] = []
    while start < end:
        # The longest prefix within the limit, by bisection; at least one character.
        lo, hi = start + 1, end
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(text[start:mid]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        pieces.append((start, lo))
        start = lo
    return pieces
