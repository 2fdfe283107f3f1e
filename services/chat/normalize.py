"""Normalization of command-chat messages before anything else sees them (Chinese and English).

Three steps, repeated until nothing changes (so normalizing twice is normalizing once):

* **filler phrases** are stripped. The phrases are data, per language (``fillers.json`` in this
  package, or any mapping given to :class:`Normalizer`). A phrase written in Latin script matches
  anywhere on word boundaries, case-insensitively, with any run of whitespace between its words
  and either apostrophe (``'`` or ``’``); a phrase holding CJK characters matches only at the start
  of a clause (the start of the message, or after whitespace or punctuation), since Chinese has no
  word boundaries and "请" is also the end of "申请";
* **immediately repeated tokens** collapse to one: a repeated Latin word or group of up to four
  words, case-insensitively ("workspace workspace 5" → "workspace 5"), and a repeated run of 2 to 32
  CJK characters or digits holding at least one CJK character ("第五章第五章" → "第五章");
* **whitespace** collapses to single spaces and the message is trimmed; separators left dangling
  by a removed phrase (a leading comma, ", ," in the middle, a trailing comma) are tidied.

Meaning-bearing text is kept: a group of digits alone never collapses ("5 5" stays), no filler
holds a digit, a repeated run never starts or ends inside a number, and quoted text (``"…"``,
``“…”``, ``‘…’``, ``「…」``, ``『…』``, ``《…》``) is left as it is, so a title in quotes keeps its
words. A message that is nothing but filler keeps its original text (whitespace collapsed): the
normalized form of a non-blank message is never empty.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Final

FILLERS_RESOURCE: Final = "fillers.json"

_CJK: Final = (
    "\u3007\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0002ffff\U00030000-\U0003134f"
)
_HAS_CJK: Final = re.compile(f"[{_CJK}]")
# What counts as part of a Latin word, for boundaries (the apostrophe too: "I'd").
_LATIN: Final = "A-Za-z0-9\u00c0-\u024f"
_LATIN_WORD: Final = f"[{_LATIN}]+(?:['’][{_LATIN}]+)*"
_NOT_AFTER_LATIN: Final = f"(?<![{_LATIN}'’])"
_NOT_BEFORE_LATIN: Final = f"(?![{_LATIN}'’])"
_HAS_LETTER: Final = re.compile(r"[^\W\d_]")

# A repeated group of one to four Latin words, separated by whitespace.
_REPEATED_WORDS: Final = re.compile(
    f"{_NOT_AFTER_LATIN}({_LATIN_WORD}(?:\\s+{_LATIN_WORD}){{0,3}})(?:\\s+\\1{_NOT_BEFORE_LATIN})+",
    re.IGNORECASE,
)
# A repeated run of 2..32 CJK characters or digits, the repeats optionally spaced apart.
_REPEATED_RUN: Final = re.compile(f"(?<!\\d)([{_CJK}0-9]{{2,32}}?)(?:\\s*\\1)+")

# Where a clause starts, for CJK fillers: not right after a character that is neither
# whitespace nor punctuation (so: at the start, or after a space or a mark).
_CLAUSE_MARKS: Final = r",，.。!！?？、;；:：~～…\-—()（）\[\]【】"
_AT_CLAUSE_START: Final = f"(?<![^\\s{_CLAUSE_MARKS}])"

# Quoted text, left untouched. Straight double quotes pair with each other; the rest by kind.
_QUOTED: Final = re.compile(r'"[^"]*"|“[^”]*”|‘[^’]*’|「[^」]*」|『[^』]*』|《[^》]*》')

_WHITESPACE: Final = re.compile(r"\s+")
_SEPARATORS: Final = ",，、;；"
_SPACE_BEFORE_SEPARATOR: Final = re.compile(r"\s+([,;])(?=\s|$)")
_SEPARATOR_RUN: Final = re.compile(f"([{_SEPARATORS}])(?:\\s*[{_SEPARATORS}])+")
_DANGLING_START: Final = re.compile(f"^[\\s{_SEPARATORS}:：]+")
_DANGLING_END: Final = re.compile(f"[\\s{_SEPARATORS}:：]+$")


@dataclass(frozen=True, slots=True)
class Normalized:
    """A chat message as the user typed it and as the intent parser gets it."""

    original: str
    normalized: str


def _latin_phrase(phrase: str) -> str:
    """The pattern of a Latin-script filler: its words, any whitespace between, either apostrophe."""
    words = phrase.split()
    return r"\s+".join(
        "".join("['’]" if ch in "'’" else re.escape(ch) for ch in word) for word in words
    )


def _alternation(phrases: Iterable[str], as_pattern: Callable[[str], str]) -> str:
    """The phrases as one alternation, longest first (so "麻烦你" wins over "麻烦")."""
    ordered = sorted(set(phrases), key=lambda p: (-len(p), p))
    return "|".join(as_pattern(p) for p in ordered)


def _collapse_whitespace(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _keep_numbers_whole(match: re.Match[str]) -> str:
    """A CJK repeat, collapsed unless it is digits alone or would cut a number at its end."""
    run = match.group(1)
    if not _HAS_CJK.search(run):
        return match.group(0)
    end = match.end()
    if run[-1].isdigit() and end < len(match.string) and match.string[end].isdigit():
        return match.group(0)
    return run


def _words_with_a_letter(match: re.Match[str]) -> str:
    """A Latin repeat, collapsed to its first occurrence unless it is numbers alone ("5 5")."""
    group = match.group(1)
    return group if _HAS_LETTER.search(group) else match.group(0)


@dataclass(frozen=True, slots=True, init=False)
class Normalizer:
    """Normalizes chat messages with the filler phrases it is built from (immutable once built).

    ``fillers`` maps a language code to its phrases; the code is a label only: each phrase is
    matched by its script (see the module docstring), so a mixed Chinese and English message
    loses the fillers of both.
    """

    fillers: Mapping[str, tuple[str, ...]]
    _latin: re.Pattern[str] | None = field(repr=False)
    _cjk: re.Pattern[str] | None = field(repr=False)

    def __init__(self, fillers: Mapping[str, Iterable[str]]) -> None:
        cleaned: dict[str, tuple[str, ...]] = {}
        for language, phrases in fillers.items():
            if not isinstance(language, str) or isinstance(phrases, str):
                raise ValueError("fillers map a language code to a list of phrases")
            kept: list[str] = []
            for phrase in phrases:
                if not isinstance(phrase, str) or not phrase.strip():
                    raise ValueError(f"filler phrases of {language!r} must be non-blank strings")
                if any(ch.isdigit() for ch in phrase):
                    raise ValueError(f"filler phrase {phrase!r} holds a digit: numbers are never filler")
                kept.append(_collapse_whitespace(phrase))
            cleaned[language] = tuple(kept)
        every = [p for phrases in cleaned.values() for p in phrases]
        latin = [p for p in every if not _HAS_CJK.search(p)]
        cjk = [p for p in every if _HAS_CJK.search(p)]
        object.__setattr__(self, "fillers", MappingProxyType(cleaned))
        object.__setattr__(
            self,
            "_latin",
            re.compile(
                f"{_NOT_AFTER_LATIN}(?:{_alternation(latin, _latin_phrase)}){_NOT_BEFORE_LATIN}",
                re.IGNORECASE,
            )
            if latin
            else None,
        )
        object.__setattr__(
            self,
            "_cjk",
            re.compile(f"{_AT_CLAUSE_START}(?:{_alternation(cjk, re.escape)})") if cjk else None,
        )

    @classmethod
    def from_json(cls, document: str | bytes) -> Normalizer:
        """A normalizer from a JSON object ``{"en": [...], "zh": [...]}`` (ValueError if malformed)."""
        data = json.loads(document)
        if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
            raise ValueError('fillers JSON must be an object of lists: {"en": [...], "zh": [...]}')
        return cls(data)

    @classmethod
    def builtin(cls) -> Normalizer:
        """A normalizer from the filler phrases shipped with Strata (``services/chat/fillers.json``)."""
        text = resources.files("services.chat").joinpath(FILLERS_RESOURCE).read_text(encoding="utf-8")
        return cls.from_json(text)

    def normalize(self, text: str) -> Normalized:
        """``text`` with fillers stripped, repeats collapsed and whitespace collapsed.

        A message of nothing but whitespace normalizes to ``""``; any other message to a
        non-empty text (its whole original, whitespace collapsed, if every word of it is filler).
        """
        current = _collapse_whitespace(text)
        while True:
            following = self._pass(current)
            if following == current:
                break
            current = following
        if not current:
            current = _collapse_whitespace(text)
        return Normalized(original=text, normalized=current)

    def _pass(self, text: str) -> str:
        """One round of every step; each step only ever shortens the text, so rounds end."""
        pieces: list[str] = []
        start = 0
        for quoted in _QUOTED.finditer(text):
            pieces.append(self._clean(text[start : quoted.start()]))
            pieces.append(quoted.group(0))
            start = quoted.end()
        pieces.append(self._clean(text[start:]))
        joined = _collapse_whitespace("".join(pieces))
        return _DANGLING_END.sub("", _DANGLING_START.sub("", joined))

    def _clean(self, text: str) -> str:
        """The steps on unquoted text."""
        if self._latin is not None:
            text = self._latin.sub("", text)
        if self._cjk is not None:
            text = self._cjk.sub("", text)
        text = _SPACE_BEFORE_SEPARATOR.sub(r"\1", text)
        text = _SEPARATOR_RUN.sub(r"\1", text)
        text = _REPEATED_WORDS.sub(_words_with_a_letter, text)
        return _REPEATED_RUN.sub(_keep_numbers_whole, text)


_BUILTIN: Final = Normalizer.builtin()


def normalize(text: str) -> Normalized:
    """``text`` normalized with the built-in filler phrases (an immutable normalizer built at import)."""
    return _BUILTIN.normalize(text)
