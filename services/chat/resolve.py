"""Resolving a chat target against the project's real documents and projects, and the replies around it.

Pure and deterministic, Chinese and English.

:func:`resolve_document` finds the documents a :class:`~services.chat.targets.Target` points at:

* **by number**: a document carries a number when its title or filename has a chapter marker
  ("ch05.md", "chapter-5.md", "Chapter 5", "Chapter Five", "Chapter V", "第五章", "第5章"), a
  document marker ("part 3", "第三篇") or starts with one ("05-opening.md", "5. The Lighthouse",
  "五、灯塔"). A marker scores 1.0, a leading number 0.9; a chapter target reads document
  markers only where a field has no chapter marker ("Part 2, Chapter 5" is chapter 5). Numbers
  are read whole, so chapter 5 never matches "chapter 15" or "ch50". When no document carries a
  number at all, the number is the nth document in reading order (score 0.6). A name given with
  the number breaks ties.
* **by name**: a fuzzy match over title and filename (case-insensitive, NFKC, punctuation and the
  extension ignored, chapter labels like "第五章" or "Chapter 5:" set aside): Latin words are
  compared token by token (exact, plural, close spelling, prefix), CJK text by character pairs, so
  a CJK name that is a substring of a title covers it. The score is 0.7 × how much of the name is
  found plus 0.3 × how much of the field the name explains; an exact title scores 1.0. A name must
  be at least half found and score at least :data:`MIN_NAME_SCORE`.
* **relative**: the next or previous document after ``current_document_id`` in reading order;
  none at either end, or without a current document.

Reading order is the natural order of document ids: path by path, numbers (Arabic and Chinese)
compared as numbers, so "ch2" comes before "ch10" and "第五章" before "第十二章".

Matches within :data:`CLOSE` of the best are *close*: one close match is a ``match``; several are
``ambiguous`` (best first, at most :data:`MAX_MATCHES`); nothing is ``none``. A project target
resolves to none here (use :func:`resolve_project`); the target's action plays no part, so a
create or search target is resolved by its number or name like an open one.

:func:`resolve_project` applies the same name rules to ``(project id, project name)`` pairs; its
matches carry the project id in ``Match.document_id`` and the project name in ``Match.title``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from typing import Final, Literal

from services.chat.numerals import CHINESE_NUMBER, ENGLISH_NUMBER, ordinal_en, parse_number, parse_roman
from services.chat.targets import Language, Target, describe, find_target, has_cjk, messages_language

Status = Literal["match", "ambiguous", "none"]

SUPPORTED_INTENTS: Final = ("open_project", "open_document", "search", "create_document")
"""The intents the chat can carry out, in the order replies list them."""

CLOSE: Final = 0.05
"""Matches scoring within this of the best are close to it (several close ones are ambiguous)."""
MAX_MATCHES: Final = 10
MIN_NAME_SCORE: Final = 0.5
MIN_NAME_COVERAGE: Final = 0.5

_MARKED_SCORE: Final = 1.0
_LEADING_SCORE: Final = 0.9
_NTH_SCORE: Final = 0.6
_NUMBER_WEIGHT_WITH_NAME: Final = 0.8
_COVERAGE_WEIGHT: Final = 0.7
_PRECISION_WEIGHT: Final = 0.3
_FUZZY_RATIO: Final = 0.8
_FUZZY_WEIGHT: Final = 0.9
_PLURAL_WEIGHT: Final = 0.95
_PREFIX_WEIGHT: Final = 0.7
_MIN_FUZZY_LENGTH: Final = 4
_MAX_NUMBER_DIGITS: Final = 9
_MAX_KEY_DIGITS: Final = 18


@dataclass(frozen=True, slots=True)
class DocumentCandidate:
    """A document of the project: its id (a relative path such as "chapters/第五章 灯塔.md") and title.

    ``title`` is the document's first heading or first non-empty line when known (markdown
    heading marks are ignored), else None.
    """

    document_id: str
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Match:
    """One document (or project) a target may mean, with its score (0..1) and why it matched.

    For :func:`resolve_project`, ``document_id`` holds the project id and ``title`` its name.
    ``why`` names the rule that matched, never the user's text.
    """

    document_id: str
    title: str | None
    score: float
    why: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """The outcome: one ``match``, several close ones (``ambiguous``, best first) or ``none``."""

    status: Status
    matches: tuple[Match, ...]


NO_MATCH: Final = Resolution("none", ())


# --- reading order ------------------------------------------------------------------------------

_NATURAL_RUN: Final = re.compile(rf"\d+|{CHINESE_NUMBER}")
NaturalKey = tuple[tuple[tuple[tuple[int, int, str], ...], ...], str]


def natural_key(document_id: str) -> NaturalKey:
    """The sort key of reading order: path component by component, numbers compared as numbers.

    Arabic digits and Chinese numerals are numbers ("ch2" < "ch10", "第五章" < "第十二章");
    the rest compares case-insensitively; the id itself breaks ties, so the order is total.
    """
    parts: list[tuple[tuple[int, int, str], ...]] = []
    for component in unicodedata.normalize("NFKC", document_id).casefold().split("/"):
        key: list[tuple[int, int, str]] = []
        position = 0
        for run in _NATURAL_RUN.finditer(component):
            if run.start() > position:
                key.append((1, 0, component[position:run.start()]))
            text = run.group(0)
            if text.isdigit():
                digits = text.lstrip("0") or "0"
                value = int(digits) if len(digits) <= _MAX_KEY_DIGITS else 10**_MAX_KEY_DIGITS
            else:
                parsed = parse_number(text)
                value = -1 if parsed is None else parsed
            key.append((0, value, text) if value >= 0 else (1, 0, text))
            position = run.end()
        if position < len(component):
            key.append((1, 0, component[position:]))
        parts.append(tuple(key))
    return tuple(parts), document_id


def reading_order(documents: Sequence[DocumentCandidate]) -> tuple[DocumentCandidate, ...]:
    """The documents in reading order (see :func:`natural_key`), the first of each id only."""
    seen: dict[str, DocumentCandidate] = {}
    for document in documents:
        seen.setdefault(document.document_id, document)
    return tuple(sorted(seen.values(), key=lambda d: natural_key(d.document_id)))


# --- numbers in titles and filenames ------------------------------------------------------------

_NUM: Final = rf"(?:(\d{{1,{_MAX_NUMBER_DIGITS}}})(?!\d)|({ENGLISH_NUMBER})(?![A-Za-z]))"
_CHAPTER_MARKERS: Final = (
    re.compile(rf"(?<![A-Za-z])(?:chapter|chap|ch)[\s._:#-]*{_NUM}", re.IGNORECASE),
    re.compile(f"第\\s*(\\d{{1,{_MAX_NUMBER_DIGITS}}}|{CHINESE_NUMBER})\\s*(?:章|节|回)"),
)
_OTHER_MARKERS: Final = (
    re.compile(rf"(?<![A-Za-z])(?:part|document|doc|scene|section|episode)[\s._:#-]*{_NUM}", re.IGNORECASE),
    re.compile(f"第\\s*(\\d{{1,{_MAX_NUMBER_DIGITS}}}|{CHINESE_NUMBER})\\s*(?:篇|集|部分)"),
)
_ROMAN_MARKER: Final = re.compile(r"(?<![A-Za-z])chapter[\s._:#-]+([ivxlc]{1,8})(?![A-Za-z])", re.IGNORECASE)
_LEADING: Final = re.compile(
    rf"^\s*(?:(\d{{1,{_MAX_NUMBER_DIGITS}}})(?=$|[\s._\-:、)）])|({CHINESE_NUMBER})(?=[、.:\s]))"
)
_HEADING_MARKS: Final = re.compile(r"^[\s#>*_=~`-]+|[\s*_=~`]+$")
_EXTENSION: Final = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_LABEL: Final = re.compile(
    rf"(?<![A-Za-z])(?:chapter|chap|ch)[\s._:#-]*(?:\d+|{ENGLISH_NUMBER}|[ivxlc]{{1,8}})(?![A-Za-z0-9])"
    f"|第\\s*(?:\\d+|{CHINESE_NUMBER})\\s*(?:章|节|回|篇|集|部分|卷|部)"
    rf"|^\s*(?:\d+|{CHINESE_NUMBER})(?=$|[\s._\-:、)）])",
    re.IGNORECASE,
)


def _clean_title(title: str | None) -> str:
    if not title:
        return ""
    return _HEADING_MARKS.sub("", unicodedata.normalize("NFKC", title).strip())


def _stem(document_id: str) -> str:
    name = unicodedata.normalize("NFKC", document_id).rsplit("/", 1)[-1]
    return _EXTENSION.sub("", name)


def _marked(patterns: tuple[re.Pattern[str], ...], text: str) -> frozenset[int]:
    found_numbers: set[int] = set()
    for pattern in patterns:
        for found in pattern.finditer(text):
            value = parse_number(next(g for g in found.groups() if g is not None))
            if value is not None:
                found_numbers.add(value)
    return frozenset(found_numbers)


def _numbers(text: str, kind: str) -> tuple[frozenset[int], int | None]:
    """The numbers a field marks for a target of ``kind``, and the number the field starts with.

    A chapter target reads chapter markers ("Chapter 5", "ch05", "第五章", "Chapter V") and, only
    when there are none, document markers ("Part 2", "第二篇"): "Part 2, Chapter 5" is chapter 5,
    not chapter 2. A document target reads both.
    """
    chapters = set(_marked(_CHAPTER_MARKERS, text))
    for found in _ROMAN_MARKER.finditer(text):
        roman = parse_roman(found.group(1))
        if roman is not None:
            chapters.add(roman)
    others = _marked(_OTHER_MARKERS, text)
    marked = frozenset(chapters) if kind == "chapter" and chapters else others | chapters
    leading_match = _LEADING.match(text)
    leading = None
    if leading_match is not None:
        leading = parse_number(leading_match.group(1) or leading_match.group(2))
    return marked, leading


@dataclass(frozen=True, slots=True)
class _Fields:
    document: DocumentCandidate
    title: str
    stem: str


def _by_number(number: int, name: str | None, kind: str,
               documents: tuple[DocumentCandidate, ...]) -> list[Match]:
    fields = [_Fields(d, _clean_title(d.title), _stem(d.document_id)) for d in documents]
    numbered: list[Match] = []
    carries_numbers = False
    for field in fields:
        best = 0.0
        why = ""
        for label, text in (("title", field.title), ("filename", field.stem)):
            marked, leading = _numbers(text, kind)
            carries_numbers = carries_numbers or bool(marked) or leading is not None
            if number in marked and best < _MARKED_SCORE:
                best, why = _MARKED_SCORE, f"number {number} marked in the {label}"
            elif leading == number and best < _LEADING_SCORE:
                best, why = _LEADING_SCORE, f"{label} starts with number {number}"
        if best > 0:
            numbered.append(Match(field.document.document_id, field.document.title, best, why))
    if not carries_numbers and 1 <= number <= len(documents):
        document = documents[number - 1]
        numbered = [Match(document.document_id, document.title, _NTH_SCORE,
                          f"{ordinal_en(number)} document in reading order (no document carries numbers)")]
    if name is not None and numbered:
        query = _Units.of(name)
        by_id = {field.document.document_id: field for field in fields}
        reranked = []
        for match in numbered:
            field = by_id[match.document_id]
            named = _document_name_score(query, field)[0]
            score = _NUMBER_WEIGHT_WITH_NAME * match.score + (1 - _NUMBER_WEIGHT_WITH_NAME) * named
            reranked.append(replace(match, score=score))
        numbered = reranked
    return numbered


# --- names --------------------------------------------------------------------------------------

_TOKEN_RUN: Final = re.compile(r"[^\W_]+")
_CJK_SPLIT: Final = re.compile(
    "([\u3007\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0002ffff\U00030000-\U0003134f]+)"
)
_STOPWORDS: Final = frozenset({
    "the", "a", "an", "of", "and", "chapter", "chap", "ch", "document", "doc", "file", "md", "txt",
    "s", "project", "workspace",
})


@dataclass(frozen=True, slots=True)
class _Units:
    """A text as matching units: Latin-script words, CJK character pairs, lone CJK characters."""

    words: tuple[str, ...]
    pairs: tuple[str, ...]
    singles: tuple[str, ...]
    chars: frozenset[str]

    @property
    def size(self) -> int:
        return len(self.words) + len(self.pairs) + len(self.singles)

    @classmethod
    def of(cls, text: str) -> _Units:
        words: set[str] = set()
        pairs: set[str] = set()
        singles: set[str] = set()
        chars: set[str] = set()
        for run in _TOKEN_RUN.findall(unicodedata.normalize("NFKC", text).casefold()):
            for piece in _CJK_SPLIT.split(run):
                if not piece:
                    continue
                if has_cjk(piece):
                    chars.update(piece)
                    if len(piece) == 1:
                        singles.add(piece)
                    pairs.update(piece[i:i + 2] for i in range(len(piece) - 1))
                elif piece not in _STOPWORDS:
                    if piece.isdigit() and len(piece) <= _MAX_NUMBER_DIGITS:
                        piece = str(int(piece))
                    words.add(piece)
        return cls(tuple(sorted(words)), tuple(sorted(pairs)), tuple(sorted(singles)), frozenset(chars))


def _word_similarity(word: str, other: str) -> float:
    if word == other:
        return 1.0
    if word.rstrip("s") == other.rstrip("s") and word.rstrip("s"):
        return _PLURAL_WEIGHT
    if min(len(word), len(other)) < _MIN_FUZZY_LENGTH or word.isdigit() or other.isdigit():
        return 0.0
    ratio = SequenceMatcher(None, word, other).ratio()
    if ratio >= _FUZZY_RATIO:
        return ratio * _FUZZY_WEIGHT
    if word.startswith(other) or other.startswith(word):
        return _PREFIX_WEIGHT
    return 0.0


def _found(units: _Units, among: _Units) -> float:
    """How much of ``units`` is found in ``among`` (a sum of unit weights, 0..units.size)."""
    total = 0.0
    for word in units.words:
        total += max((_word_similarity(word, other) for other in among.words), default=0.0)
    total += sum(1.0 for pair in units.pairs if pair in among.pairs)
    total += sum(1.0 for single in units.singles if single in among.chars)
    return total


def _similarity(query: _Units, text: str) -> tuple[float, float]:
    """The score of ``text`` for the name ``query``, and the share of the name found in it."""
    field = _Units.of(text)
    if query.size == 0 or field.size == 0:
        return 0.0, 0.0
    coverage = min(1.0, _found(query, field) / query.size)
    precision = min(1.0, _found(field, query) / field.size)
    return _COVERAGE_WEIGHT * coverage + _PRECISION_WEIGHT * precision, coverage


def _name_score(query: _Units, variants: Sequence[tuple[str, str]]) -> tuple[float, str]:
    """The best score of the name over the labelled texts, and the label of the best one."""
    best = (0.0, "")
    for label, text in variants:
        if not text:
            continue
        score, coverage = _similarity(query, text)
        if coverage >= MIN_NAME_COVERAGE and score > best[0]:
            best = (score, label)
    return best


def _document_name_score(query: _Units, field: _Fields) -> tuple[float, str]:
    variants = (
        ("title", _LABEL.sub(" ", field.title)),
        ("filename", _LABEL.sub(" ", field.stem)),
        ("title", field.title),
        ("filename", field.stem),
    )
    return _name_score(query, variants)


def _by_name(name: str, documents: tuple[DocumentCandidate, ...]) -> list[Match]:
    query = _Units.of(_EXTENSION.sub("", unicodedata.normalize("NFKC", name).strip()))
    if query.size == 0:
        return []
    matches = []
    for document in documents:
        field = _Fields(document, _clean_title(document.title), _stem(document.document_id))
        score, label = _document_name_score(query, field)
        if score >= MIN_NAME_SCORE:
            why = f"the {label} is the name" if score >= 1.0 else f"the name matches the {label}"
            matches.append(Match(document.document_id, document.title, score, why))
    return matches


def _relative(move: str, documents: tuple[DocumentCandidate, ...], current: str | None) -> list[Match]:
    ids = [document.document_id for document in documents]
    if current is None or current not in ids:
        return []
    index = ids.index(current) + (1 if move == "next" else -1)
    if not 0 <= index < len(documents):
        return []
    document = documents[index]
    where = "after" if move == "next" else "before"
    why = f"{move}: {where} the current document in reading order"
    return [Match(document.document_id, document.title, 1.0, why)]


def _decide(matches: Sequence[Match]) -> Resolution:
    if not matches:
        return NO_MATCH
    rounded = [replace(match, score=round(match.score, 3)) for match in matches]
    ordered = sorted(rounded, key=lambda m: (-m.score, natural_key(m.document_id)))
    best = ordered[0].score
    close = [match for match in ordered if match.score >= best - CLOSE][:MAX_MATCHES]
    return Resolution("match" if len(close) == 1 else "ambiguous", tuple(close))


def resolve_document(target: Target, documents: Sequence[DocumentCandidate],
                     current_document_id: str | None = None) -> Resolution:
    """The documents ``target`` points at (see the module docstring for the rules)."""
    if target.kind == "project":
        return NO_MATCH
    ordered = reading_order(documents)
    if target.relative is not None:
        return _decide(_relative(target.relative, ordered, current_document_id))
    if target.number is not None:
        by_number = _by_number(target.number, target.name, target.kind, ordered)
        if by_number or target.name is None:
            return _decide(by_number)
    if target.name is not None:
        return _decide(_by_name(target.name, ordered))
    return NO_MATCH


def resolve_project(name: str, projects: Sequence[tuple[str, str]]) -> Resolution:
    """The projects ``name`` points at, from ``(project id, project name)`` pairs, by the name rules.

    An exact name or id (case-insensitive) scores 1.0. Matches carry the project id in
    ``document_id`` and the project name in ``title``.
    """
    wanted = unicodedata.normalize("NFKC", name).strip()
    query = _Units.of(wanted)
    seen: set[str] = set()
    matches: list[Match] = []
    for project_id, project_name in projects:
        if project_id in seen:
            continue
        seen.add(project_id)
        folded = wanted.casefold()
        if folded and folded == project_name.strip().casefold():
            matches.append(Match(project_id, project_name, 1.0, "the project name is the name"))
            continue
        if folded and folded == project_id.strip().casefold():
            matches.append(Match(project_id, project_name, 1.0, "the project id is the name"))
            continue
        if query.size == 0:
            continue
        score, label = _name_score(query, (("project name", project_name), ("project id", project_id)))
        if score >= MIN_NAME_SCORE:
            matches.append(Match(project_id, project_name, score, f"the name matches the {label}"))
    return _decide(matches)


# --- replies ------------------------------------------------------------------------------------


def intent_of(target: Target) -> str:
    """The chat intent carrying out ``target`` ("unsupported" for creating a project)."""
    if target.action == "open":
        return "open_project" if target.kind == "project" else "open_document"
    if target.action == "search":
        return "search"
    return "unsupported" if target.kind == "project" else "create_document"


def clarification(target: Target, language: Language | None = None) -> str:
    """A question checking that ``target`` is what the user meant, in ``language`` (the target's by default).

    "你是想打开第五章吗？" / "Do you want to open chapter 5?"; searches and new documents ask
    "你是想搜索“暴风雨”吗？" / "Do you want to search for \\"storm\\"?" and "你是想新建章节《黎明》吗？" /
    "Do you want to create a new chapter called \\"Dawn\\"?".
    """
    lang = target.language if language is None else language
    zh = lang == "zh"
    if target.action == "search":
        query = target.name or ""
        return f"你是想搜索“{query}”吗？" if zh else f'Do you want to search for "{query}"?'
    if target.action == "create":
        if zh:
            text = describe(target, "zh")
            return f"你是想新建{text.removeprefix('新的').removeprefix('新')}吗？"
        return f"Do you want to create {describe(target, 'en')}?"
    if zh:
        return f"你是想打开{describe(target, 'zh')}吗？"
    return f"Do you want to open {describe(target, 'en')}?"


_NOT_SUPPORTED: Final = {
    "en": "That is not supported yet. I can: open a project, open a document or chapter by name or number, "
          "search, create a document.",
    "zh": "暂时还不支持这个操作。我可以：打开项目、按名称或编号打开文档或章节、搜索、新建文档。",
}


def not_supported(language: Language) -> str:
    """The reply to a request the chat cannot carry out, listing what it can do."""
    return _NOT_SUPPORTED[language]


def implied_target(messages: Sequence[str], summary: str | None) -> Target | None:
    """The target the conversation implies, for a reply when the LLM answered ``unsupported``.

    ``messages`` are the user's messages, oldest first; the newest one implying a target wins,
    then the summary's last fact implying one. The target speaks the language of most of the
    messages (its own on a tie, or without messages).
    """
    found: Target | None = None
    for message in reversed(messages):
        found = find_target(message)
        if found is not None:
            break
    if found is None and summary:
        found = find_target(summary)
    if found is None:
        return None
    language = messages_language(messages, found.language)
    return found if language == found.language else replace(found, language=language)

