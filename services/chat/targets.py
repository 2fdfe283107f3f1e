"""What a command-chat message asks for: a project, a chapter or document, a search or a new document.

Pure and deterministic, Chinese and English. :func:`find_target` reads one (normalized) message
and returns the :class:`Target` it implies, or None when nothing navigational is implied; the
LLM parses the message into an intent first, and this module backs it up: it is what the fallback
uses when the LLM answers ``unsupported`` and what the extractive summary records.

How a message is read:

* it is NFKC-normalized (full-width digits and letters become ASCII) and only its first
  :data:`MAX_SCAN_CHARS` characters are read (commands are short);
* it is split into clauses at punctuation outside quotes and at "but" / "而是" / "但是"; a clause
  that negates ("不是这个", "not this one") is skipped, so "不是这个，是上一章" asks for the previous
  chapter; when several clauses name a target, the last one wins (a correction comes last);
* each clause is tried, in order, as:

  - creating a document ("new chapter called Dawn", "新建文档 黎明"); creating a *project* is not
    something the app does, and such a clause names nothing;
  - a search ("search for storm", "搜索 暴风雨"); a "search" for an unquoted chapter reference
    opens it instead, a quoted query is searched as written;
  - a numbered chapter or document ("chapter 5", "ch05.md", "the fifth chapter", "第五章",
    "第 12 章", "第三个文档");
  - a project ("open project Moonfall", "打开项目 月落");
  - a relative move ("next chapter", "the previous one", "下一章", "上一个");
  - a name ("打开《灯塔》", "把灯塔那章调出来", "open the lighthouse chapter",
    "open \\"The Lighthouse\\"").

A name is cleaned of the words around it (articles, "chapter", 那章, 那一章, 的那章, 章节, sentence
particles); a quoted name is kept exactly as quoted, and words inside quotes are never read as
commands ("open 《下一章》" opens a title). A name that is only generic words ("it", "this one",
"by number", "这个", "最后") names nothing. ``language`` is "zh" when the message holds CJK.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from services.chat.numerals import (
    CHINESE_NUMBER,
    ENGLISH_NUMBER,
    ENGLISH_ORDINAL,
    MAX_DIGITS,
    ZH_NUMERAL_CHARS,
    chinese_numeral,
    parse_number,
    parse_roman,
)

Action = Literal["open", "search", "create"]
Kind = Literal["chapter", "document", "project"]
Relative = Literal["next", "previous"]
Language = Literal["zh", "en"]

# Only the start of a message is read: commands are short, and every pattern stays cheap.
MAX_SCAN_CHARS: Final = 2_000
# A clause is read as creating something from its first few create verbs only.
_MAX_CREATE_VERBS: Final = 4

_CJK_CHARS: Final = (
    "\u3007\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0002ffff\U00030000-\U0003134f"
)
_HAS_CJK: Final = re.compile(f"[{_CJK_CHARS}]")


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK character (Han, kana or Hangul)."""
    return _HAS_CJK.search(text) is not None


def messages_language(messages: Sequence[str], default: Language = "en") -> Language:
    """"zh" when most of ``messages`` hold CJK, "en" when most do not, ``default`` on a tie."""
    chinese = sum(1 for message in messages if has_cjk(message))
    other = len(messages) - chinese
    if chinese == other:
        return default
    return "zh" if chinese > other else "en"


@dataclass(frozen=True, slots=True)
class Target:
    """What one message asks for.

    ``action`` is what to do, ``kind`` what it is done to. An ``open`` target carries a
    ``number`` (chapter 5), a ``name`` (a title fragment such as "灯塔") or a ``relative`` move
    (next / previous, from the document that is open); a ``search`` target carries its query in
    ``name``; a ``create`` target may carry the new document's ``name`` or ``number``; a
    ``project`` target (always ``open``) carries the project's ``name``. ``language`` is the
    language of the message the target came from.
    """

    action: Action
    kind: Kind
    number: int | None = None
    name: str | None = None
    relative: Relative | None = None
    language: Language = "en"


# --- reading a message --------------------------------------------------------------------------

_NUMBER: Final = f"(?:\\d{{1,{MAX_DIGITS}}}|{ENGLISH_NUMBER})"
_ZH_NUMBER: Final = f"(?:\\d{{1,{MAX_DIGITS}}}|{CHINESE_NUMBER})"
_NOT_WORD_AFTER: Final = r"(?![A-Za-z0-9])"
_NOT_WORD_BEFORE: Final = r"(?<![A-Za-z0-9])"

_EN_CHAPTER: Final = r"(?:chapters?|chap|ch)"
_EN_DOCUMENT: Final = r"(?:documents?|docs?|files?|entry|entries|scenes?|sections?|parts?|notes?)"
_EN_PROJECT: Final = r"(?:projects?|workspaces?)"
_ZH_CHAPTER_WORDS: Final = ("章节", "章", "节", "回")
_ZH_CHAPTER: Final = "(?:章节|章|节|回)"
_ZH_DOCUMENT: Final = "(?:个文档|份文档|篇文档|个文件|份文件|文档|文件|部分|篇|个|份|集)"
_ZH_PROJECT: Final = "(?:项目|工作区|工程)"

_OPEN_STRONG_EN: Final = (
    r"(?:open(?:ed|s|ing)?|go(?:ing)?\s+to|goto|jump\s+to|switch\s+to|take\s+me\s+to|bring\s+up|"
    r"pull\s+up|load|navigate\s+to|head\s+to|back\s+to|return\s+to|asked\s+for)"
)
_OPEN_WEAK_EN: Final = r"(?:show(?:\s+me)?|view|read|edit|display|find|get|see|give\s+me)"
_OPEN_STRONG_ZH: Final = (
    "(?:打开|调出来|调出|切换到|切到|跳转到|跳到|转到|翻到|进入|回到|定位到|打开来|要打开)"
)
_OPEN_WEAK_ZH: Final = "(?:看看|看一下|显示|查看|找到|找出|编辑|读一下|阅读|我要看|要看)"

_QUOTES: Final = {'"': '"', "“": "”", "「": "」", "『": "』", "《": "》", "‘": "’"}
_QUOTED: Final = re.compile(r'"([^"]*)"|“([^”]*)”|「([^」]*)」|『([^』]*)』|《([^》]*)》|‘([^’]*)’')

_SPLIT_WORDS: Final = re.compile(r"\s+(?:but|instead|rather)\s+|而是|但是|不过", re.IGNORECASE)
_ABBREVIATIONS: Final = frozenset({"ch", "chap", "no", "nr", "vol", "pt", "doc", "mr", "mrs", "dr", "st"})
_CLAUSE_MARKS: Final = frozenset(",;!?。，；！？、\n")

_NEGATED_ZH: Final = re.compile("^(?:不是|不要|别|不对|不)(.*?)(?:而是|是|要)(.+)$")
_NEGATION_ZH: Final = re.compile("^(?:不是|不要|别|不对)")
_NEGATION_EN: Final = re.compile(r"^(?:not|no|nope|don'?t|isn'?t|wrong)\b", re.IGNORECASE)

_LEAD_ZH: Final = re.compile(
    "^(?:那就|那么|还是|换成|改成|我要|我想|就是|就|是|那|嗯|哦|好的|好|对|要|用户|请)\\s*"
)
_LEAD_EN: Final = re.compile(
    r"^(?:ok(?:ay)?|so|then|and|yes|yeah|well|i\s+mean|actually|maybe|how\s+about|what\s+about|"
    r"let'?s|let\s+me|i\s+want\s+to|i\s+want|i'?d\s+like\s+to|can\s+you|could\s+you|please|"
    r"it'?s|it\s+is|user\s+is|user)\b\s*",
    re.IGNORECASE,
)
_TRAIL_ZH: Final = re.compile("\\s*(?:吧|呢|啊|吗|呀|了|哈|嘛|一下|给我)$")
_TRAIL_EN: Final = re.compile(r"\s*\b(?:please|now|again|for\s+me|thanks|thank\s+you)$", re.IGNORECASE)

_GENERIC_EN: Final = frozenset({
    "it", "this", "that", "these", "those", "one", "ones", "them", "something", "anything",
    "everything", "me", "up", "here", "there", "again", "now", "by", "number", "name", "order",
    "in", "a", "an", "the", "new", "other", "another", "same", "last", "latest", "final",
    "current", "chapter", "chapters", "document", "documents", "doc", "docs", "file", "files",
    "project", "projects", "please", "some", "all", "next", "previous", "of", "to", "for", "with",
    "and", "or", "my", "our", "your", "which", "what", "where", "is", "on",
})
_GENERIC_ZH: Final = frozenset({
    "这个", "那个", "它", "这", "那", "一下", "一个", "东西", "什么", "哪个", "哪", "文档", "章节", "章",
    "项目", "文件", "这里", "那里", "下", "上", "别的", "其他", "另一个", "新的", "名称", "编号",
    "最后", "最新", "最前", "开头", "结尾", "第一",
})
_PRONOUN_START_ZH: Final = re.compile("^(?:我|你|他|她|它|咱|您)")

# Names: words around a name that are not part of it.
_NAME_LEAD_EN: Final = re.compile(
    r"^(?:(?:the|a|an|my|our|that|this)\s+|(?:chapter|document|doc|file)\s+(?:(?:called|named|titled|"
    r"about|on)\s+)?|(?:called|named|titled|about)\s+|(?:one|chapter|document)\s+(?:about|called|named)\s+)",
    re.IGNORECASE,
)
_NAME_TRAIL_EN: Final = re.compile(
    r"\s+(?:chapters?|documents?|docs?|files?|one|please|again|now|for\s+me|to\s+me)$", re.IGNORECASE
)
_NAME_TRAIL_KIND_EN: Final = re.compile(r"\s+(chapters?|documents?|docs?|files?|one)$", re.IGNORECASE)
_NAME_LEAD_ZH: Final = re.compile("^(?:那个|这个|那篇|这篇|那|这|关于|名为|叫做|叫)")
_NAME_TRAIL_ZH: Final = re.compile(
    "(?:的)?(?:那|这)?(?:一)?(章节|章|节|回|篇|个文档|份文档|篇文档|个文件|文档|文件|个)$"
)
_NAME_PARTICLES_ZH: Final = re.compile("(?:吧|呢|啊|吗|呀|了|来|出来|一下|给我|看看)$")

# Creating.
_CREATE_EN: Final = re.compile(
    r"\b(?:create|add|make|start|write|begin)\b\s+(?:(?:a|an|another|one)\s+)?(?:new\s+)?"
    r"|\bnew\b\s*",
    re.IGNORECASE,
)
_CREATE_ZH: Final = re.compile(
    "(?:新建|创建|新增|添加|新开|建立|(?:开|写|建|加)(?:一个|一篇|一份|一)?新的?)\\s*(?:一个|一篇|一份|一|个)?"
    "\\s*(?:新的?)?\\s*"
)
_CREATE_KIND_EN: Final = re.compile(
    rf"^(?:(?P<chapter>{_EN_CHAPTER})|(?P<document>{_EN_DOCUMENT})|(?P<project>{_EN_PROJECT}))\b\s*",
    re.IGNORECASE,
)
_CREATE_KIND_ZH: Final = re.compile(
    "^(?:(?P<chapter>章节|章|节)|(?P<document>文档|文件|篇)|(?P<project>项目|工作区|工程))\\s*"
)
_NAMING: Final = re.compile(
    r"^[\s:：,，-]*(?:(?:called|named|titled|with\s+the\s+title|about)\b|叫做|名字叫|名字是|名为|名叫|"
    r"标题是|标题为|题为|题目是|叫)?[\s:：]*",
    re.IGNORECASE,
)

# Searching.
_SEARCH_EN: Final = re.compile(
    r"\b(?:search(?:ed|es|ing)?|look(?:ed|ing|s)?\s+(?:for|up)|find|grep)\b(?:\s+for\b)?\s*",
    re.IGNORECASE,
)
_SEARCH_ZH: Final = re.compile(
    "(?:搜索|搜寻|搜一下|搜一搜|查找|查询|检索|查一下|找一下|找找|搜)(?:了|一下)?\\s*"
)

# Numbered references.
_NUMBERED: Final = (
    (re.compile(rf"{_NOT_WORD_BEFORE}{_EN_CHAPTER}\s*[.#:_-]?\s*({_NUMBER}){_NOT_WORD_AFTER}",
                re.IGNORECASE), "chapter"),
    (re.compile(r"(?<![A-Za-z])chapter\s+([ivxlc]{1,8})(?![A-Za-z])", re.IGNORECASE), "chapter-roman"),
    (re.compile(rf"{_NOT_WORD_BEFORE}{_EN_DOCUMENT}\s*[.#:_-]?\s*({_NUMBER}){_NOT_WORD_AFTER}",
                re.IGNORECASE), "document"),
    (re.compile(rf"{_NOT_WORD_BEFORE}({ENGLISH_ORDINAL})\s+(?:{_EN_CHAPTER}){_NOT_WORD_AFTER}",
                re.IGNORECASE), "chapter"),
    (re.compile(rf"{_NOT_WORD_BEFORE}({ENGLISH_ORDINAL})\s+(?:{_EN_DOCUMENT}|one){_NOT_WORD_AFTER}",
                re.IGNORECASE), "document"),
    (re.compile(f"第\\s*({_ZH_NUMBER})\\s*{_ZH_CHAPTER}"), "chapter"),
    (re.compile(f"第\\s*({_ZH_NUMBER})\\s*{_ZH_DOCUMENT}"), "document"),
    (re.compile(f"(?:章节|章)\\s*({_ZH_NUMBER})(?![\\d{ZH_NUMERAL_CHARS}])"), "chapter"),
    (re.compile(f"(?:文档|文件)\\s*({_ZH_NUMBER})(?![\\d{ZH_NUMERAL_CHARS}])"), "document"),
)
_VERB_NUMBER: Final = re.compile(
    rf"^(?:{_OPEN_STRONG_EN}|{_OPEN_WEAK_EN})\s+(?:(?:number|no\.?|#)\s*)?({_NUMBER}|{CHINESE_NUMBER})$"
    f"|^(?:{_OPEN_STRONG_ZH}|{_OPEN_WEAK_ZH})\\s*(?:第)?({_ZH_NUMBER})$",
    re.IGNORECASE,
)

# Relative moves.
_RELATIVE_EN: Final = re.compile(
    rf"{_NOT_WORD_BEFORE}(next|following|previous|prev|preceding|prior)\s+"
    rf"(?:(?P<chapter>{_EN_CHAPTER})|(?P<document>{_EN_DOCUMENT}|one)){_NOT_WORD_AFTER}",
    re.IGNORECASE,
)
_RELATIVE_EN_ALONE: Final = re.compile(
    rf"^(?:(?:{_OPEN_STRONG_EN}|go|move|skip)\s+)?(?:to\s+)?(?:the\s+)?(next|previous|prev)$",
    re.IGNORECASE,
)
_RELATIVE_ZH: Final = re.compile(
    "(?:(?<![一以])(下|上)\\s*一?|(?<![最])(前|后)\\s*一)\\s*"
    "(?:(?P<chapter>章节|章|节|回)|(?P<document>个文档|份文档|篇文档|个文件|篇|份|部分|"
    "个(?!月|星期|礼拜|周|人|世纪|小时|钟)))"
)

# Projects.
_PROJECT_EN: Final = re.compile(rf"{_NOT_WORD_BEFORE}{_EN_PROJECT}\b\s*[:#]?\s*(.+)$", re.IGNORECASE)
_PROJECT_EN_BEFORE: Final = re.compile(
    rf"^(?:{_OPEN_STRONG_EN}|{_OPEN_WEAK_EN})\s+(?:the\s+)?(.+?)\s+{_EN_PROJECT}$", re.IGNORECASE
)
_PROJECT_ZH: Final = re.compile(f"{_ZH_PROJECT}\\s*[:：]?\\s*(.+)$")
_PROJECT_ZH_BEFORE: Final = re.compile(
    f"(?:{_OPEN_STRONG_ZH}|{_OPEN_WEAK_ZH})\\s*(.+?)\\s*(?:这个|那个)?{_ZH_PROJECT}$"
)
_PROJECT_TRAIL: Final = re.compile("(?:中工作|里工作|中|里|下)$")

# Names.
_BA_ZH: Final = re.compile(
    "把\\s*(.+?)\\s*(?:给我)?(?:调出来|调出|打开来|打开|拿出来|找出来|翻出来|翻开|调取|显示出来|显示|切换过去)"
)
_STRONG_REST: Final = re.compile(
    rf"{_NOT_WORD_BEFORE}{_OPEN_STRONG_EN}\s+(.+)$|{_OPEN_STRONG_ZH}\s*(.+)$", re.IGNORECASE
)
_WEAK_REST: Final = re.compile(
    rf"{_NOT_WORD_BEFORE}{_OPEN_WEAK_EN}\s+(.+)$|{_OPEN_WEAK_ZH}\s*(.+)$", re.IGNORECASE
)
_BARE_ZH: Final = re.compile(
    "^(.+?)\\s*(?:的)?\\s*(?:那|这)\\s*一?\\s*(章节|章|节|回|篇|个文档|份文档|个文件|个)$"
)
_BARE_EN: Final = re.compile(
    r"^(?:the|that|this)\s+(.+?)\s+(chapter|document|doc|file|one)$"
    r"|^(?:the\s+)?(chapter|document|doc)\s+(?:called|named|titled|about)\s+(.+)$",
    re.IGNORECASE,
)
_QUOTE_POINTER: Final = re.compile(
    r"^(?:(?:user\s+)?(?:asked\s+for|wants?|requested|chose|picked)|用户?(?:要|想要)?|要|想要)?$",
    re.IGNORECASE,
)
_CHAPTER_WORD: Final = re.compile(rf"{_NOT_WORD_BEFORE}{_EN_CHAPTER}{_NOT_WORD_AFTER}|章|节|回",
                                  re.IGNORECASE)
_KIND_WORD: Final = re.compile(
    rf"{_NOT_WORD_BEFORE}(?:{_EN_CHAPTER}|{_EN_DOCUMENT}){_NOT_WORD_AFTER}|章|节|回|文档|文件|篇",
    re.IGNORECASE,
)
_WHITESPACE: Final = re.compile(r"\s+")
_STRAY_QUOTES: Final = '"“”《》「」『』‘’'
_EDGE_PUNCTUATION: Final = " \t,.;:!?，。；：！？、~～-—…()（）[]【】"


@dataclass(frozen=True, slots=True)
class _Found:
    action: Action
    kind: Kind
    number: int | None = None
    name: str | None = None
    relative: Relative | None = None


def _prepare(text: str) -> str:
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text[: MAX_SCAN_CHARS * 2]))[
        :MAX_SCAN_CHARS
    ].strip()


def _clauses(text: str) -> list[str]:
    """``text`` split at clause punctuation outside quotes (a "." only before a space or the end)."""
    clauses: list[str] = []
    start = 0
    closer: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if closer is not None:
            if ch == closer:
                closer = None
        elif ch in _QUOTES and (ch != '"' or '"' in text[i + 1:]) and _QUOTES[ch] in text[i + 1:]:
            closer = _QUOTES[ch]
        elif ch in _CLAUSE_MARKS or (ch == "." and (i + 1 == len(text) or text[i + 1] == " ")
                                     and not _is_abbreviation(text, i)):
            clauses.append(text[start:i])
            start = i + 1
        i += 1
    clauses.append(text[start:])
    out: list[str] = []
    for clause in clauses:
        out.extend(part.strip() for part in _split_words(clause))
    return [clause for clause in out if clause]


def _split_words(clause: str) -> list[str]:
    """A clause split at "but", "而是" and the like, outside quotes."""
    if _QUOTED.search(clause) is None:
        return _SPLIT_WORDS.split(clause)
    return [clause]


def _is_abbreviation(text: str, dot: int) -> bool:
    start = dot
    while start > 0 and text[start - 1].isalpha():
        start -= 1
    return text[start:dot].lower() in _ABBREVIATIONS


def _strip_edges(text: str) -> str:
    return text.strip(_EDGE_PUNCTUATION)


def _positive(clause: str) -> str | None:
    """The clause with a negated part set aside, or None when all of it is negated."""
    clause = _strip_edges(clause)
    corrected = _NEGATED_ZH.match(clause)
    if corrected is not None and corrected.group(2).strip():
        return _strip_edges(corrected.group(2))
    if _NEGATION_ZH.match(clause) or _NEGATION_EN.match(clause):
        return None
    return clause


def _trim(clause: str) -> str:
    """The clause without leading particles ("是", "那就", "ok") and trailing ones ("吧", "please")."""
    previous = None
    while previous != clause:
        previous = clause
        clause = _strip_edges(_LEAD_ZH.sub("", _LEAD_EN.sub("", clause)))
        clause = _strip_edges(_TRAIL_ZH.sub("", _TRAIL_EN.sub("", clause)))
    return clause


def _is_generic(name: str) -> bool:
    if has_cjk(name):
        compact = name.replace(" ", "")
        return compact in _GENERIC_ZH or compact in {f"{g}{k}" for g in ("这", "那") for k in
                                                       ("章", "一章", "篇", "个", "份")}
    words = re.findall(r"[A-Za-z0-9']+", name.lower())
    return not words or all(word in _GENERIC_EN for word in words)


def _matches_outside(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The matches of ``pattern`` in ``text`` that do not start inside quoted text (a title)."""
    spans = [(quoted.start(), quoted.end()) for quoted in _QUOTED.finditer(text)]
    position = 0
    while position <= len(text):
        match = pattern.search(text, position)
        if match is None:
            return
        if any(start < match.start() < end for start, end in spans):
            position = match.start() + 1  # a match inside a title: look again just after its start
            continue
        yield match
        position = max(match.end(), match.start() + 1)


def _outside(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The first match of ``pattern`` in ``text`` outside quoted text, or None."""
    return next(_matches_outside(pattern, text), None)


def _quoted(text: str) -> tuple[str, re.Match[str]] | None:
    match = _QUOTED.search(text)
    if match is None:
        return None
    inner = next(group for group in match.groups() if group is not None)
    return inner.strip(), match


def _clean_name(raw: str) -> tuple[str | None, Kind | None]:
    """A name fragment cleaned of the words around it, and the kind those words named."""
    text = _strip_edges(raw)
    quoted = _quoted(text)
    if quoted is not None and quoted[1].start() == 0:
        kind: Kind | None = "chapter" if _CHAPTER_WORD.search(text[quoted[1].end():]) else None
        return (quoted[0] or None), kind
    kind = None
    previous = None
    while previous != text:
        previous = text
        trail = _NAME_TRAIL_KIND_EN.search(text) or _NAME_TRAIL_ZH.search(text)
        if trail is not None and trail.start() > 0:
            word = trail.group(1).lower()
            if kind is None:
                kind = "chapter" if (word.startswith("chapter") or word in _ZH_CHAPTER_WORDS) else "document"
        text = _NAME_LEAD_EN.sub("", text)
        text = _NAME_TRAIL_EN.sub("", text)
        text = _NAME_LEAD_ZH.sub("", text) if has_cjk(text) else text
        text = _NAME_TRAIL_ZH.sub("", text) if has_cjk(text) else text
        text = _NAME_PARTICLES_ZH.sub("", text) if has_cjk(text) else text
        text = _TRAIL_EN.sub("", text)
        text = _strip_edges(text)
    text = _strip_edges(text.strip(_STRAY_QUOTES))
    if not text or _is_generic(text) or _PRONOUN_START_ZH.match(text):
        return None, kind
    return text, kind


def _numbered(clause: str) -> _Found | None:
    for pattern, kind in _NUMBERED:
        match = _outside(pattern, clause)
        if match is None:
            continue
        value = parse_roman(match.group(1)) if kind == "chapter-roman" else parse_number(match.group(1))
        if value is not None:
            return _Found("open", "document" if kind == "document" else "chapter", number=value)
    bare = _VERB_NUMBER.match(clause)
    if bare is not None:
        value = parse_number(bare.group(1) or bare.group(2))
        if value is not None:
            return _Found("open", "document", number=value)
    return None


def _relative(clause: str) -> _Found | None:
    match = _outside(_RELATIVE_EN, clause)
    if match is not None:
        move: Relative = "next" if match.group(1).lower() in ("next", "following") else "previous"
        return _Found("open", "chapter" if match.group("chapter") else "document", relative=move)
    match = _RELATIVE_EN_ALONE.match(clause)
    if match is not None:
        move = "next" if match.group(1).lower() == "next" else "previous"
        return _Found("open", "document", relative=move)
    match = _outside(_RELATIVE_ZH, clause)
    if match is not None:
        word = match.group(1) or match.group(2)
        move = "next" if word in ("下", "后") else "previous"
        return _Found("open", "chapter" if match.group("chapter") else "document", relative=move)
    return None


def _project(clause: str) -> _Found | None:
    for pattern in (_PROJECT_EN_BEFORE, _PROJECT_ZH_BEFORE, _PROJECT_EN, _PROJECT_ZH):
        match = _outside(pattern, clause)
        if match is None:
            continue
        raw = _strip_edges(match.group(1))
        quoted = _quoted(raw)
        if quoted is not None and quoted[1].start() == 0:
            if quoted[0]:
                return _Found("open", "project", name=quoted[0])  # a quoted name is taken as written
            continue
        raw = _PROJECT_TRAIL.sub("", raw) if has_cjk(raw) else raw
        name = _strip_edges(_NAME_LEAD_EN.sub("", _NAMING.sub("", _strip_edges(raw.strip(_STRAY_QUOTES)))))
        if name and not _is_generic(name):
            return _Found("open", "project", name=name)
    return None


def _search(clause: str) -> _Found | None:
    for pattern in (_SEARCH_EN, _SEARCH_ZH):
        match = _outside(pattern, clause)
        if match is None:
            continue
        query = _strip_edges(clause[match.end():])
        quoted = _quoted(query)
        if quoted is not None and quoted[1].start() == 0 and quoted[1].end() == len(query):
            if quoted[0]:
                return _Found("search", "document", name=quoted[0])  # quoted text is searched as written
            continue
        if not query or _is_generic(query):
            continue
        if _numbered(query) or _relative(query) or _outside(_KIND_WORD, query):
            # "find chapter 5", "找一下灯塔那章": a reference to open, not a search.
            return _relative(query) or _from_rest(query, require_kind=False)
        return _Found("search", "document", name=query)
    return None


def _create(clause: str) -> _Found | Literal[False] | None:
    """A document to create; False when the clause creates something the app cannot (a project)."""
    for verb, kinds in ((_CREATE_EN, _CREATE_KIND_EN), (_CREATE_ZH, _CREATE_KIND_ZH)):
        for seen, match in enumerate(_matches_outside(verb, clause)):
            if seen == _MAX_CREATE_VERBS:
                break
            rest = clause[match.end():]
            numbered = _numbered(rest)
            if numbered is not None and numbered.kind != "project":
                return _Found("create", numbered.kind, number=numbered.number)
            kind_match = kinds.match(rest)
            if kind_match is None:
                continue
            if kind_match.group("project"):
                return False
            kind: Kind = "chapter" if kind_match.group("chapter") else "document"
            tail = _strip_edges(_NAMING.sub("", rest[kind_match.end():], count=1))
            if not tail:
                return _Found("create", kind)
            number = parse_number(tail)
            if number is not None:
                return _Found("create", kind, number=number)
            quoted = _quoted(tail)
            name = quoted[0] if quoted is not None and quoted[1].start() == 0 else tail
            return _Found("create", kind, name=name or None)
    return None


def _named(clause: str) -> _Found | None:
    quoted = _quoted(clause)
    if quoted is not None and quoted[0]:
        around = _strip_edges(clause[: quoted[1].start()] + " " + clause[quoted[1].end():])
        around = _trim(around)
        verb = _outside(_STRONG_REST, clause) or _outside(_WEAK_REST, clause)
        if verb is not None or _KIND_WORD.search(around) or _QUOTE_POINTER.match(around):
            kind: Kind = "chapter" if _CHAPTER_WORD.search(around) else "document"
            return _Found("open", kind, name=quoted[0])
    ba = _outside(_BA_ZH, clause)
    if ba is not None:
        found = _from_rest(ba.group(1), require_kind=False)
        if found is not None:
            return found
    strong = _outside(_STRONG_REST, clause)
    if strong is not None:
        return _from_rest(strong.group(1) or strong.group(2), require_kind=False)
    weak = _outside(_WEAK_REST, clause)
    if weak is not None:
        return _from_rest(weak.group(1) or weak.group(2), require_kind=True)
    bare = _BARE_ZH.match(clause)
    if bare is not None and len(bare.group(1)) <= 20:
        return _from_rest(clause, require_kind=True)
    bare = _BARE_EN.match(clause)
    if bare is not None and len((bare.group(1) or bare.group(4) or "").split()) <= 6:
        return _from_rest(clause, require_kind=bare.group(1) is not None)
    return None


def _from_rest(rest: str, *, require_kind: bool) -> _Found | None:
    numbered = _numbered(rest)
    if numbered is not None:
        return numbered
    quoted = _quoted(rest)
    if quoted is not None and quoted[0]:
        kind: Kind = "chapter" if _CHAPTER_WORD.search(rest[quoted[1].end():]) else "document"
        return _Found("open", kind, name=quoted[0])
    name, kind_hint = _clean_name(rest)
    if name is None:
        return None
    if kind_hint is None:
        lead = re.match(r"^\s*(?:the\s+)?(chapter|document|doc|file)\b", rest, re.IGNORECASE)
        if lead is not None:
            kind_hint = "chapter" if lead.group(1).lower() == "chapter" else "document"
    if require_kind and kind_hint is None:
        return None
    return _Found("open", kind_hint or "document", name=name)


def _parse_clause(clause: str) -> _Found | None:
    clause = _trim(clause)
    if not clause:
        return None
    created = _create(clause)
    if created is False:
        return None
    if created is not None:
        return created
    for detect in (_search, _numbered, _project, _relative, _named):
        found = detect(clause)
        if found is not None:
            return found
    return None


def find_target(text: str) -> Target | None:
    """The target ``text`` asks for (see the module docstring), or None when it implies none."""
    prepared = _prepare(text)
    if not prepared:
        return None
    language: Language = "zh" if has_cjk(prepared) else "en"
    clauses = _clauses(prepared)
    found: _Found | None = None
    for index, raw in enumerate(clauses):
        clause = _positive(raw)
        if clause is None:
            continue
        parsed = _parse_clause(clause)
        if parsed is None:
            continue
        if (parsed.action == "create" and parsed.name is None and parsed.number is None
                and index + 1 < len(clauses)):
            parsed = _named_by_next(parsed, clauses[index + 1])
        found = parsed
    if found is None:
        return None
    return Target(found.action, found.kind, found.number, found.name, found.relative, language)


def _named_by_next(found: _Found, following: str) -> _Found:
    """A create target named in the next clause ("新建一个章节，名字叫黎明")."""
    naming = _NAMING.match(following)
    if naming is None or naming.end() == 0 or not re.search(r"[A-Za-z叫名题]", naming.group(0)):
        return found
    name = _strip_edges(following[naming.end():])
    quoted = _quoted(name)
    if quoted is not None and quoted[1].start() == 0:
        name = quoted[0]
    return replace(found, name=name) if name else found


# --- describing a target ------------------------------------------------------------------------


def _quote(name: str, language: Language) -> str:
    if language == "zh" or has_cjk(name):
        return f"《{name}》"
    return f"“{name}”" if '"' in name else f'"{name}"'


def describe(target: Target, language: Language | None = None) -> str:
    """A short text naming what ``target`` points at, for clarifications and summaries.

    In ``language`` (the target's own by default): "第五章" / "chapter 5", "《灯塔》" /
    "\\"The Lighthouse\\"" (a name holding CJK is set in 《》 in English too), "下一章" / "the next
    chapter", "项目“月落”" / "project Moonfall", "搜索“暴风雨”" / "a search for \\"storm\\"",
    "新章节《黎明》" / "a new chapter called \\"Dawn\\"".
    """
    lang = target.language if language is None else language
    zh = lang == "zh"
    name = target.name
    if target.kind == "project":
        if name is None:
            return "项目" if zh else "a project"
        return f"项目“{name}”" if zh else f"project {name}"
    if target.action == "search":
        query = name or ""
        return f"搜索“{query}”" if zh else f'a search for "{query}"'
    noun_zh = "章节" if target.kind == "chapter" else "文档"
    if target.action == "create":
        if zh:
            if target.number is not None:
                return f"新的{_numbered_zh(target)}"
            return f"新{noun_zh}" + (_quote(name, lang) if name else "")
        noun = target.kind
        if target.number is not None:
            return f"a new {noun} {target.number}"
        return f"a new {noun}" + (f" called {_quote(name, lang)}" if name else "")
    if target.relative is not None:
        if zh:
            step = "下" if target.relative == "next" else "上"
            return f"{step}一章" if target.kind == "chapter" else f"{step}一个文档"
        return f"the {target.relative} {target.kind}"
    parts: list[str] = []
    if target.number is not None:
        parts.append(_numbered_zh(target) if zh else f"{target.kind} {target.number}")
    if name is not None:
        parts.append(_quote(name, lang))
    if not parts:
        return ("一个章节" if target.kind == "chapter" else "一个文档") if zh else f"a {target.kind}"
    return ("" if zh else ", ").join(parts)


def _numbered_zh(target: Target) -> str:
    number = chinese_numeral(target.number) if target.number is not None else ""
    return f"第{number}章" if target.kind == "chapter" else f"第{number}个文档"
