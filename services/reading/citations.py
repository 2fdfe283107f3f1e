"""Page citations in a reading-companion answer, checked against the reading window (pure, no I/O).

The runtime answer prompt asks the model to cite "(p12) or (pp12–13)" for each claim, and the
seed's citation rule is: an answer citing a page outside pages ``start``–``end`` is rejected and
the model is asked to restate using the allowed range only. This module is that check.

**Citations** (:func:`parse_citations`) are read only inside a parenthesised group, ``(…)`` or
``（…）``, and a group may hold several, separated by commas, semicolons, ``、``, "and" or "和":

* Latin style: ``p12``, ``p. 12``, ``pp12–13``, ``pp. 12-13``, ``pp 12–13``, ``page(s) 12``, any
  case; after one labelled item, bare numbers continue the list (``(pp. 12, 14–15)``);
* Chinese style: ``第12页``, ``第12–13页``, ``第12页至第13页``, ``第3、7页``; a ``第`` number never
  closed by ``页`` (``第3章``) is not a citation;
* between two numbers: hyphen, en dash, em dash (and the other Unicode dashes), ``~`` or ``至``;
* full-width forms (digits, parentheses, ``ｐ``, punctuation) read as their ASCII twins; offsets
  always index the original text, since that mapping is one character to one character;
* a paragraph suffix is the page (``p12.3`` is page 12), since the prompt labels evidence
  ``p{page}.{intra}`` and a model may echo it.

A label never starts inside a word ("(help12)", "(step 3)") and needs a digit after it, so text
without an ASCII or full-width digit never yields a citation; Chinese numerals (第十二页) are not
read, for the same reason. Page numbers outside parentheses ("see p12") are not citations: the
claim they sit in then counts as uncited, which asks for a restate anyway. A citation is kept but
marked malformed (:attr:`Citation.problem`) when a page is 0, a range is reversed (13–12 is
reported, never swapped) or a page exceeds :data:`MAX_PAGE`.

**Claims** (:func:`split_claims`) are sentences, best effort: a line break always ends one (so
bullets without full stops are claims of their own); ``。！？`` end one wherever they stand,
``.!?`` only before whitespace, the line's end or a parenthesis. Closing quotes and brackets
after the mark stay with the sentence, and so do citation groups after it ("He left. (p12)"), as
does a line holding nothing but citation groups (it closes the sentence above). A full stop does
not end a sentence after a known abbreviation ("e.g.", "Mr.", "pp."), a single capital initial
("J. K."), or before a lowercase word; decimals never split (no space after the point). Marks
inside “…”, 「…」, 『…』 do not split until the quote closes. Markdown headings, bold-only lines and
lines holding only a bullet, number or rule marker are not claims; a bullet or number before a
sentence is not part of it.

**Validation** (:func:`validate`): every citation whose written pages reach below ``start`` or
above ``end`` is *outside* (malformed ones included: "(pp13–12)" in a window ending at 12 still
names page 13); a claim with no well-formed citation is *uncited*. A sentence with no citation at
all is not a claim, and so never uncited, when it is a question, a lead-in ending with a colon,
or one of a small set of window statements (:data:`WINDOW_STATEMENTS_EN`, ``_ZH``: "That is
beyond page 12.", "outside the current reading window", "not enough evidence", "这超出了当前阅读范
围", "证据不足", …); a sentence that also cites a page is always a claim.

When anything is wrong, :attr:`Validation.restate` is the prompt asking the model to restate using
pages ``start``–``end`` only, in Chinese when CJK characters outnumber Latin letters in the answer
(citations aside), else in English. It names the allowed range, the outside pages, the uncited
statements and the malformed citations, and quotes the whole previous answer: the text came from
the model and goes back only to the model, which cannot fix an answer it cannot see. It adds
nothing from the book. The restate must therefore never be shown to the reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

Language = Literal["en", "zh"]

# Far above any real book (a 4M-token serial at 400 tokens a page is 10,000 pages); it bounds
# the pages a single range expands to.
MAX_PAGE: Final = 99_999

# The full-width ASCII block (digits, parentheses, letters, punctuation) maps one to one onto ASCII,
# so offsets in the normalised text are offsets in the original.
_WIDTH: Final = str.maketrans({chr(code): chr(code - 0xFEE0) for code in range(0xFF01, 0xFF5F)})

_DASHES: Final = "\\-\u2010\u2011\u2012\u2013\u2014\u2015\u2212~\u301c至"
_GROUP: Final = re.compile(r"\(([^()\n]*)\)")
_LATIN_LABEL: Final = re.compile(r"(?:pages?|pp?)\.?\s*(?=[0-9])", re.IGNORECASE)
_CJK_LABEL: Final = re.compile(r"第\s*(?=[0-9])")
# A number, its paragraph suffix ignored, optionally a range; neither end may run into a word.
_NUMBER: Final = r"([0-9]+)(?:\.[0-9]+)?(?![0-9A-Za-z])"
_RANGE: Final = re.compile(
    rf"{_NUMBER}(?:\s*页?\s*[{_DASHES}]\s*(?:(?:pages?|pp?)\.?\s*|第\s*)?{_NUMBER})?", re.IGNORECASE
)
_PAGE_CLOSE: Final = re.compile(r"\s*页")
_SEPARATOR: Final = re.compile(r"\s*[,;、/]\s*|\s+(?:and|&)\s+|\s*[和及与]\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Citation:
    """One cited page or range; ``raw == text[start_char:end_char]`` (the item, not its group).

    ``pages`` is (first, last) as written, so a reversed range stays reversed (a number of more
    than nine digits reads as 10**9); ``problem`` says why a citation is malformed ("page 0",
    "reversed range", "page too large"), None when it is not.
    """

    start_char: int
    end_char: int
    pages: tuple[int, int]
    raw: str
    problem: str | None = None

    @property
    def malformed(self) -> bool:
        return self.problem is not None


@dataclass(frozen=True, slots=True)
class Claim:
    """A sentence of the answer; ``text == answer[start:end]``."""

    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ClaimCitations:
    """A claim, the citations inside it, and the pages its well-formed citations cover (sorted)."""

    text: str
    pages: list[int]
    citations: list[Citation]


@dataclass(frozen=True, slots=True)
class Validation:
    """The check of one answer against pages ``start``–``end``; ``restate`` is None when ``ok``.

    ``non_claims`` are the sentences read as questions, lead-ins or window statements.
    """

    claims: list[ClaimCitations]
    outside: list[Citation]
    uncited: list[str]
    malformed: list[str]
    ok: bool
    restate: str | None
    non_claims: list[str]


# --- citations ---------------------------------------------------------------------------------


def _page(digits: str) -> int:
    # Capped before int(): a number of thousands of digits would exceed Python's conversion limit.
    return int(digits) if len(digits) <= 9 else 10**9


def _citation(text: str, start: int, end: int, first: str, last: str | None) -> Citation:
    pages = (_page(first), _page(last if last is not None else first))
    problem = None
    if min(pages) == 0:
        problem = "page 0"
    elif pages[1] < pages[0]:
        problem = "reversed range"
    elif pages[1] > MAX_PAGE:
        problem = "page too large"
    return Citation(start, end, pages, text[start:end], problem)


def _scan_group(text: str, norm: str, lo: int, hi: int) -> list[Citation]:
    """The citations between ``lo`` and ``hi`` (a group's inside), in order."""
    found: list[Citation] = []
    pending: list[tuple[int, int, str, str | None]] = []  # Chinese items waiting for their 页
    mode: Literal["latin", "cjk"] | None = None
    after_separator = False
    pos = lo
    while pos < hi:
        latin = _LATIN_LABEL.match(norm, pos, hi)
        if latin and pos > lo and norm[pos - 1].isascii() and norm[pos - 1].isalpha():
            latin = None  # "(help12)": a label never starts inside a word
        cjk = _CJK_LABEL.match(norm, pos, hi)
        if (label := latin or cjk) is not None:
            if latin:
                pending.clear()  # a Latin item breaks an unclosed "第3、"
            mode = "latin" if latin else "cjk"
            item_start, range_at = pos, label.end()
        elif mode is not None and after_separator and norm[pos].isdigit():
            # A bare number continuing the list: "(pp. 3, 7)", "（第3、7页）".
            item_start = range_at = pos
        elif mode is not None and (separator := _SEPARATOR.match(norm, pos, hi)):
            after_separator = True
            pos = separator.end()
            continue
        else:
            mode, after_separator = None, False
            pending.clear()
            pos += 1
            continue
        after_separator = False
        numbers = _RANGE.match(norm, range_at, hi)
        if numbers is None:  # "p12a": the label led nowhere
            mode = None
            pending.clear()
            pos = range_at
            continue
        pos = numbers.end()
        if mode == "latin":
            found.append(_citation(text, item_start, pos, numbers[1], numbers[2]))
            continue
        pending.append((item_start, pos, numbers[1], numbers[2]))
        if close := _PAGE_CLOSE.match(norm, pos, hi):
            last_start, _, first, last = pending.pop()
            found.extend(_citation(text, s, e, a, b) for s, e, a, b in pending)
            found.append(_citation(text, last_start, close.end(), first, last))
            pending.clear()
            mode = None
            pos = close.end()
    return found


def _groups(text: str) -> list[tuple[int, int, list[Citation]]]:
    """Every parenthesised group holding at least one citation: (start, end, citations)."""
    norm = text.translate(_WIDTH)
    groups = []
    for match in _GROUP.finditer(norm):
        citations = _scan_group(text, norm, match.start(1), match.end(1))
        if citations:
            groups.append((match.start(), match.end(), citations))
    return groups


def parse_citations(text: str) -> list[Citation]:
    """Every citation in ``text``, in order, malformed ones included."""
    return [citation for _, _, citations in _groups(text) for citation in citations]


# --- claims ------------------------------------------------------------------------------------

_CJK_ENDS: Final = "。！？"
_ENDS: Final = ".!?" + _CJK_ENDS
_OPEN_QUOTES: Final = "“「『"
_CLOSE_QUOTES: Final = "”」』"
_CLOSERS: Final = "\"'’)]）】" + _CLOSE_QUOTES
_ABBREVIATIONS: Final = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "cf", "no", "vol", "ch", "fig", "p", "pp",
    "approx", "ca", "mt", "capt", "col", "gen", "lt", "sgt", "rev", "hon", "ft", "sec",
})
_DOTTED_WORD: Final = re.compile(r"[A-Za-z]+(?:\.[A-Za-z]+)*$")
_HEADING: Final = re.compile(r"^\s{0,3}(?:#{1,6}(?:\s.*)?|\*\*[^*]+\*\*[:：]?)\s*$")
_MARKER_ONLY: Final = re.compile(r"^\s*(?:[-*+•·>]+|\d+[.)、]|[-*_=]{3,})?\s*$")
_BULLET: Final = re.compile(
    r"\s*(?:[-*+•·]\s+|\d{1,3}[.)]\s+|(?:\d{1,3}|[一二三四五六七八九十]{1,3})、\s*|>\s*)+"
)


def _abbreviation_before(text: str, line_start: int, dot: int) -> bool:
    """Whether the full stop at ``dot`` closes an abbreviation or an initial rather than a sentence."""
    # Only the last few characters are read: no abbreviation is longer, and this keeps a line of
    # many full stops linear.
    word = _DOTTED_WORD.search(text, max(line_start, dot - 12), dot)
    if word is None:
        return False
    token = word[0]
    return "." in token or token.lower() in _ABBREVIATIONS or (len(token) == 1 and token.isupper())


def _sentence_end(text: str, line_start: int, mark: int, after: int, line_end: int,
                  quoted: bool, groups: dict[int, int]) -> bool:
    """Whether the end marks from ``mark`` (closers included up to ``after``) end a sentence."""
    marks = text[mark:after].rstrip(_CLOSERS)
    if not quoted and any(ch in _CJK_ENDS for ch in marks):
        return True
    following = text[after] if after < line_end else ""
    if following and not following.isspace() and after not in groups and following not in "(（":
        return False
    if marks == ".":
        if _abbreviation_before(text, line_start, mark):
            return False
        rest = text[after:line_end].lstrip()
        if rest[:1].isascii() and rest[:1].islower():
            return False  # "approx. five", "etc. and"
    return True


def _attach_groups(text: str, pos: int, line_end: int, groups: dict[int, int]) -> int:
    """The end of the citation groups (and the marks right after them) that follow ``pos``."""
    while True:
        probe = pos
        while probe < line_end and text[probe] in " \t\u3000":
            probe += 1
        if probe not in groups:
            return pos
        pos = groups[probe]
        while pos < line_end and (text[pos] in _ENDS or text[pos] in _CLOSERS):
            pos += 1


def _line_segments(text: str, start: int, end: int, groups: dict[int, int]) -> list[tuple[int, int]]:
    segments = []
    segment_start = pos = start
    depth = 0
    while pos < end:
        if pos in groups:
            pos = groups[pos]
            continue
        ch = text[pos]
        if ch in _OPEN_QUOTES:
            depth += 1
        elif ch in _CLOSE_QUOTES:
            depth = max(0, depth - 1)
        if ch not in _ENDS:
            pos += 1
            continue
        after = pos
        while after < end and text[after] in _ENDS:
            after += 1
        quoted = depth > 0
        while after < end and text[after] in _CLOSERS:
            if text[after] in _CLOSE_QUOTES:
                depth = max(0, depth - 1)
            after += 1
        if depth == 0 and _sentence_end(text, start, pos, after, end, quoted, groups):
            after = _attach_groups(text, after, end, groups)
            segments.append((segment_start, after))
            segment_start = after
        pos = after
    segments.append((segment_start, end))
    return segments


def _has_words(text: str, start: int, end: int, groups: dict[int, int]) -> bool:
    """Whether a letter, digit or CJK character stands between ``start`` and ``end``, groups aside."""
    pos = start
    while pos < end:
        if pos in groups:
            pos = groups[pos]
            continue
        if text[pos].isalnum():
            return True
        pos += 1
    return False


def _split(text: str, groups: dict[int, int]) -> list[Claim]:
    claims: list[Claim] = []
    line_start = 0
    while line_start <= len(text):
        line_end = text.find("\n", line_start)
        line_end = len(text) if line_end < 0 else line_end
        line = text[line_start:line_end]
        if not (_HEADING.match(line) or _MARKER_ONLY.match(line)):
            # The marker goes first, so "1. Han left." is not read as the sentence "1.".
            content = _BULLET.match(text, line_start, line_end)
            content_start = content.end() if content else line_start
            for start, end in _line_segments(text, content_start, line_end, groups):
                while start < end and text[start].isspace():
                    start += 1
                while end > start and text[end - 1].isspace():
                    end -= 1
                if start >= end:
                    continue
                if _has_words(text, start, end, groups):
                    claims.append(Claim(text[start:end], start, end))
                elif claims and any(start <= g < end for g in groups):
                    # Citations standing alone close the sentence before them.
                    previous = claims[-1]
                    claims[-1] = Claim(text[previous.start:end], previous.start, end)
        line_start = line_end + 1
    return claims


def split_claims(text: str) -> list[Claim]:
    """The sentences of ``text`` in order, without overlap, each ``text[start:end]``."""
    return _split(text, {start: end for start, end, _ in _groups(text)})


# --- validation --------------------------------------------------------------------------------

WINDOW_STATEMENTS_EN: Final = re.compile(
    r"\b(?:is|are|lies|lie|falls|fall|goes|go|comes|come)\s+(?:beyond|after|past)\s+(?:page|p\.?)\s*\d+"
    r"|\b(?:outside|beyond)\s+(?:of\s+)?(?:the|your|this|my)\s+(?:current\s+)?(?:reading\s+)?"
    r"(?:window|range)\b"
    r"|\bbeyond\s+what\s+(?:you|you've|you\s+have)\s+(?:read|reached)"
    r"|\b(?:haven't|have\s+not|not\s+yet)\s+(?:read|reached|covered)\b"
    r"|\b(?:not|no)\s+(?:enough|sufficient)\s+(?:evidence|information|context)"
    r"|\binsufficient\s+(?:evidence|information|context)"
    r"|\b(?:don't|do\s+not|doesn't|does\s+not)\s+have\s+(?:enough|sufficient)"
    r"|\b(?:cannot|can\s+not|can't)\s+(?:answer|say|tell)\b",
    re.IGNORECASE,
)
WINDOW_STATEMENTS_ZH: Final = re.compile(
    r"超出(?:了)?(?:当前|目前|你的|您的)?(?:的)?阅读(?:范围|窗口)|阅读(?:范围|窗口)(?:之|以)外"
    r"|(?:还|尚)?(?:没有|没|未)(?:读到|读过)|(?:没有|缺乏|缺少)(?:足够的?)?(?:证据|信息|依据)"
    r"|(?:证据|信息|依据)不足|无法(?:回答|确定|判断)"
)
_CJK: Final = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN: Final = re.compile("[A-Za-z\u00c0-\u024f]")


def _outside(citation: Citation, start: int, end: int) -> bool:
    return min(citation.pages) < start or max(citation.pages) > end


def _is_non_claim(text: str) -> bool:
    bare = text.replace("’", "'").rstrip(_CLOSERS + " \t")
    if bare.endswith(("?", "？", ":", "：")):
        return True
    return bool(WINDOW_STATEMENTS_EN.search(bare) or WINDOW_STATEMENTS_ZH.search(bare))


def answer_language(answer: str, citations: Iterable[Citation] = ()) -> Language:
    """"zh" when CJK characters outnumber Latin letters in ``answer`` (citations aside), else "en"."""
    parts, pos = [], 0
    for citation in citations:
        parts.append(answer[pos:citation.start_char])
        pos = citation.end_char
    parts.append(answer[pos:])
    rest = "".join(parts)
    return "zh" if len(_CJK.findall(rest)) > len(_LATIN.findall(rest)) else "en"


def format_pages(pages: tuple[int, int], language: Language) -> str:
    """A page or range as the prompt cites it: p12 / pp12–13, 第12页 / 第12–13页."""
    first, last = pages
    if language == "zh":
        return f"第{first}页" if first == last else f"第{first}–{last}页"
    return f"p{first}" if first == last else f"pp{first}–{last}"


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def restate_prompt(answer: str, start: int, end: int, outside: Sequence[Citation],
                   uncited: Sequence[str], malformed: Sequence[str], language: Language) -> str:
    """The prompt asking the model to restate ``answer`` using pages ``start``–``end`` only."""
    example_range = (start, start + 1) if end > start else (start, start)
    if language == "zh":
        window = f"第{start}–{end}页" if end > start else f"第{start}页"
        lines = ["你的回答未通过页码校验："]
        if outside:
            pages = "、".join(_unique(format_pages(c.pages, "zh") for c in outside))
            lines.append(f"- {window}以外的引用：{pages}。")
        if uncited:
            lines.append("- 以下陈述没有标注页码：")
            lines.extend(f"  · {text}" for text in uncited)
        if malformed:
            lines.append(f"- 以下引用格式有误：{'、'.join(_unique(malformed))}。")
        lines += [
            "",
            f"你只知道本书{window}的内容。请只根据{window}重新回答：每个事实陈述都要标注页码，"
            f"例如（{format_pages((start, start), 'zh')}）或（{format_pages(example_range, 'zh')}），"
            f"不要引用{window}以外的页码。不要透露、推测或提及第{end}页之后的内容。"
            f"如果{window}中没有足够的证据，请明确说明。",
            "",
            "你之前的回答：",
            f'"""{answer}"""',
        ]
        return "\n".join(lines)
    window = f"pages {start}–{end}" if end > start else f"page {start}"
    lines = ["Your answer failed the page-citation check:"]
    if outside:
        pages = ", ".join(_unique(format_pages(c.pages, "en") for c in outside))
        lines.append(f"- Citations outside {window}: {pages}.")
    if uncited:
        lines.append("- These statements cite no page:")
        lines.extend(f"  · {text}" for text in uncited)
    if malformed:
        lines.append(f"- These citations are malformed: {', '.join(_unique(malformed))}.")
    lines += [
        "",
        f"You ONLY know content from {window} of this book. Restate the answer using {window} only: "
        f"cite the page number(s) for each factual statement, like ({format_pages((start, start), 'en')}) "
        f"or ({format_pages(example_range, 'en')}), and cite no page outside {window}. Do NOT reveal, "
        f"speculate about, or reference events beyond page {end}. If you lack sufficient evidence "
        f"within {window}, say so explicitly.",
        "",
        "Your previous answer:",
        f'"""{answer}"""',
    ]
    return "\n".join(lines)


def validate(answer: str, start: int, end: int) -> Validation:
    """Check ``answer``'s citations against pages ``start``–``end`` (1 ≤ start ≤ end)."""
    if not 1 <= start <= end:
        raise ValueError(f"invalid reading window {start}–{end}")
    groups = _groups(answer)
    citations = [citation for _, _, found in groups for citation in found]
    claims: list[ClaimCitations] = []
    uncited: list[str] = []
    non_claims: list[str] = []
    index = 0
    for claim in _split(answer, {group_start: group_end for group_start, group_end, _ in groups}):
        # Claims and citations are both in text order and claims never overlap: one forward walk.
        while index < len(citations) and citations[index].start_char < claim.start:
            index += 1
        inside = []
        while index < len(citations) and citations[index].end_char <= claim.end:
            inside.append(citations[index])
            index += 1
        if not inside and _is_non_claim(claim.text):
            non_claims.append(claim.text)
            continue
        well_formed = [c for c in inside if not c.malformed]
        pages = sorted({page for c in well_formed for page in range(c.pages[0], c.pages[1] + 1)})
        claims.append(ClaimCitations(claim.text, pages, inside))
        if not pages:
            uncited.append(claim.text)
    outside = [c for c in citations if _outside(c, start, end)]
    malformed = [c.raw for c in citations if c.malformed]
    ok = not (outside or uncited or malformed)
    restate = None
    if not ok:
        language = answer_language(answer, citations)
        restate = restate_prompt(answer, start, end, outside, uncited, malformed, language)
    return Validation(claims, outside, uncited, malformed, ok, restate, non_claims)
