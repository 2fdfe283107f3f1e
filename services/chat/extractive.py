"""The deterministic rolling summary of the command chat, used when no client can run a model.

:func:`summarize_intents` keeps only intent-relevant facts, one short sentence each, in English
or Chinese (Chinese when most of the new messages are; on a tie, the previous summary's language):

* "User is trying to open a chapter by number." / "用户在按编号打开章节。" (or by name, or a
  document), "User is moving through the chapters in order." / "用户在按顺序浏览章节。";
* "User asked for chapter 5." / "用户要打开第五章。", "User asked for 《灯塔》." / "用户要打开《灯塔》。",
  "User asked for the next chapter." / "用户要打开下一章。";
* "User is working in project Moonfall." / "用户在项目“月落”中工作。";
* "User searched for storm." / "用户搜索了“暴风雨”。";
* "User wants to create a document called Dawn." / "用户要新建文档《黎明》。".

Facts are read from each message with :func:`~services.chat.targets.find_target`; a message that
implies no target contributes nothing. Facts of the previous summary are read back (in either
language, so a summary can switch language), and a sentence that is not one of these facts is
kept as it is. The mode of opening ("by number", "by name", "in order") and the project are one
fact each, so a newer one replaces the older; any other fact is replaced only by the same fact
again. The newest facts come last; when they do not all fit in ``max_chars`` the oldest go
first, whole (a fact is never cut, and one longer than ``max_chars`` is left out). When there
are no facts at all, the summary is one neutral line counting the messages: "User has sent 3
messages with no navigation request yet." / "用户已发送 3 条消息，尚无导航请求。".

A name or query is never copied beyond its first :data:`MAX_NAME_CHARS` characters, so no whole
user message lands in the summary. Reading a summary back gives the same summary:
``summarize_intents(summarize_intents(p, m), [])`` is ``summarize_intents(p, m)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from services.chat.targets import Language, Target, describe, find_target, has_cjk, messages_language

MAX_NAME_CHARS: Final = 40
DEFAULT_MAX_CHARS: Final = 600

_SEPARATOR: Final = {"en": " ", "zh": ""}
_NOUN_ZH: Final = {"chapter": "章节", "document": "文档"}
_UNSAFE_BARE: Final = re.compile(r"[.!?。！？\"“”《》]|^\s|\s$")
_NO_QUOTES: Final = str.maketrans("", "", '"“”《》「」『』‘’')
_QUOTE_CLOSERS: Final = {'"': '"', "“": "”", "《": "》", "「": "」", "『": "』"}


# The requests English fact sentences read back as (a name is checked against them).
def _as_project(name: str) -> str:
    return f"open project {name}"


def _as_search(name: str) -> str:
    return f"search for {name}"


def _as_create(name: str) -> str:
    return f"create a chapter called {name}"


@dataclass(frozen=True, slots=True)
class _Fact:
    """One fact: its identity (facts with the same key replace each other) and both renderings."""

    key: tuple[object, ...]
    en: str
    zh: str

    def text(self, language: Language) -> str:
        return self.zh if language == "zh" else self.en


def _short(name: str) -> str:
    """A name without quote marks, whitespace collapsed, cut to its first :data:`MAX_NAME_CHARS` characters.

    Quote marks go so that the name cannot end the quotes the summary sets it in.
    """
    return " ".join(name.translate(_NO_QUOTES).split())[:MAX_NAME_CHARS].rstrip()


def _bare_en(name: str, command: Callable[[str], str]) -> str:
    """A name set bare in an English sentence, quoted when it would not read back as itself.

    ``command`` makes the request the sentence reads back as (see :func:`_read_fact`); a name
    holding sentence marks, or one that reads back as something else ("called"), is quoted.
    """
    if _UNSAFE_BARE.search(name):
        return f'"{name}"'
    target = find_target(command(name))
    return name if target is not None and target.name == name else f'"{name}"'


def _mode(kind: Literal["chapter", "document"], how: Literal["number", "name", "order"]) -> _Fact:
    """The fact of how the user is opening documents (one fact: a newer one replaces it)."""
    noun_zh = _NOUN_ZH[kind]
    if how == "order":
        return _Fact(("mode",), f"User is moving through the {kind}s in order.",
                     f"用户在按顺序浏览{noun_zh}。")
    by_zh = "编号" if how == "number" else "名称"
    return _Fact(("mode",), f"User is trying to open a {kind} by {how}.", f"用户在按{by_zh}打开{noun_zh}。")


def _facts_of(target: Target) -> list[_Fact]:
    """The facts a target stands for (a mode fact before its request, where there is one)."""
    if target.name is not None:
        target = replace(target, name=_short(target.name) or None)
    name = target.name
    if target.kind == "project":
        if target.action != "open" or name is None:
            return []
        return [_Fact(("project",), f"User is working in project {_bare_en(name, _as_project)}.",
                      f"用户在项目“{name}”中工作。")]
    noun_zh = _NOUN_ZH[target.kind]
    if target.action == "search":
        if name is None:
            return []
        return [_Fact(("search", name.casefold()), f"User searched for {_bare_en(name, _as_search)}.",
                      f"用户搜索了“{name}”。")]
    if target.action == "create":
        key = ("create", target.kind, target.number, None if name is None else name.casefold())
        if target.number is not None:
            return [_Fact(key, f"User wants to create {target.kind} {target.number}.",
                          f"用户要新建{describe(target, 'zh').removeprefix('新的')}。")]
        if name is None:
            return [_Fact(key, f"User wants to create a new {target.kind}.", f"用户要新建{noun_zh}。")]
        return [_Fact(key, f"User wants to create a {target.kind} called {_bare_en(name, _as_create)}.",
                      f"用户要新建{noun_zh}《{name}》。")]
    if target.relative is not None:
        mode = _mode(target.kind, "order")
    elif target.number is not None:
        mode = _mode(target.kind, "number")
    elif name is not None:
        mode = _mode(target.kind, "name")
    else:
        return []
    kind = target.kind if name is None else None  # a name is the same request whatever it is called
    asked = _Fact(("asked", kind, target.number, None if name is None else name.casefold(), target.relative),
                  f"User asked for {describe(target, 'en')}.", f"用户要打开{describe(target, 'zh')}。")
    return [mode, asked]


# --- reading a previous summary back ------------------------------------------------------------

_MODE_EN: Final = re.compile(r"^User is trying to open an? (chapter|document) by (number|name)\.$")
_ORDER_EN: Final = re.compile(r"^User is moving through the (chapter|document)s in order\.$")
_MODE_ZH: Final = re.compile("^用户在按(编号|名称)打开(章节|文档)。$")
_ORDER_ZH: Final = re.compile("^用户在按顺序浏览(章节|文档)。$")
_NEUTRAL_EN: Final = re.compile(r"^User has sent (\d{1,9}) messages? with no navigation request yet\.$")
_NEUTRAL_ZH: Final = re.compile("^用户已发送 ?(\\d{1,9}) ?条消息，尚无导航请求。$")
_FACT_FORMS: Final[tuple[tuple[re.Pattern[str], Callable[[str], str]], ...]] = (
    (re.compile(r"^User asked for (.+)\.$"), lambda rest: f"open {rest}"),
    (re.compile(r"^User is working in project (.+)\.$"), _as_project),
    (re.compile(r"^User searched for (.+)\.$"), _as_search),
    (re.compile(r"^User wants to create (.+)\.$"), lambda rest: f"create {rest}"),
    (re.compile("^用户要打开(.+)。$"), lambda rest: f"打开{rest}"),
    (re.compile("^用户在(项目“.+”)中工作。$"), lambda rest: f"打开{rest}"),
    (re.compile("^用户搜索了(.+)。$"), lambda rest: f"搜索{rest}"),
    (re.compile("^用户要新建(.+)。$"), lambda rest: f"新建{rest}"),
)
_EXPECTED_ACTION: Final = ("open", "open", "search", "create") * 2


def _sentences(text: str) -> list[str]:
    """``text`` split after . ! ? 。 ！ ？ outside quotes ("." only before a space or the end)."""
    sentences: list[str] = []
    start = 0
    closer: str | None = None
    for i, ch in enumerate(text):
        if closer is not None:
            if ch == closer:
                closer = None
            continue
        if ch in _QUOTE_CLOSERS and _QUOTE_CLOSERS[ch] in text[i + 1:]:
            closer = _QUOTE_CLOSERS[ch]
        elif ch in "!?。！？" or (ch == "." and (i + 1 == len(text) or text[i + 1].isspace())):
            sentences.append(text[start:i + 1].strip())
            start = i + 1
    sentences.append(text[start:].strip())
    return [sentence for sentence in sentences if sentence]


def _kind(noun: str) -> Literal["chapter", "document"]:
    return "chapter" if noun in ("chapter", "章节") else "document"


def _read_fact(sentence: str) -> _Fact | int | None:
    """A sentence of a previous summary as a fact, as a neutral line's count, or None if it is neither."""
    for neutral in (_NEUTRAL_EN, _NEUTRAL_ZH):
        counted = neutral.match(sentence)
        if counted is not None:
            return int(counted.group(1))
    mode = _MODE_EN.match(sentence)
    if mode is not None:
        return _mode(_kind(mode.group(1)), "number" if mode.group(2) == "number" else "name")
    mode = _MODE_ZH.match(sentence)
    if mode is not None:
        return _mode(_kind(mode.group(2)), "number" if mode.group(1) == "编号" else "name")
    for order_form in (_ORDER_EN, _ORDER_ZH):
        order = order_form.match(sentence)
        if order is not None:
            return _mode(_kind(order.group(1)), "order")
    for (form, as_command), action in zip(_FACT_FORMS, _EXPECTED_ACTION, strict=True):
        found = form.match(sentence)
        if found is None:
            continue
        target = find_target(as_command(found.group(1)))
        if target is None or target.action != action:
            return None
        facts = _facts_of(target)
        return facts[-1] if facts else None
    return None


# --- the summary --------------------------------------------------------------------------------


def _add(facts: list[_Fact], fact: _Fact) -> None:
    """Add ``fact`` as the newest, replacing any fact with its key or its words."""
    facts[:] = [kept for kept in facts if kept.key != fact.key and kept.en != fact.en and kept.zh != fact.zh]
    facts.append(fact)


def _fit(texts: Sequence[str], separator: str, max_chars: int) -> str:
    """The newest texts (from the end) that fit in ``max_chars`` together, joined, oldest first."""
    kept: list[str] = []
    size = 0
    for text in reversed([t for t in texts if len(t) <= max_chars]):
        extra = len(text) + (len(separator) if kept else 0)
        if size + extra > max_chars:
            break
        kept.append(text)
        size += extra
    return separator.join(reversed(kept))


def _summary_language(summary: str) -> Language:
    """The language a summary is written in: that of most of its sentences' subjects ("User" / "用户"),
    else "zh" when it holds more CJK characters than Latin letters."""
    sentences = _sentences(summary)
    chinese = sum(1 for sentence in sentences if sentence.startswith("用户"))
    english = sum(1 for sentence in sentences if sentence.startswith("User"))
    if chinese != english:
        return "zh" if chinese > english else "en"
    cjk = sum(1 for ch in summary if has_cjk(ch))
    latin = sum(1 for ch in summary if ch.isascii() and ch.isalpha())
    return "zh" if cjk > latin else "en"


def summarize_intents(previous: str | None, user_messages: Sequence[str],
                      max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The rolling summary of ``previous`` (the last summary, or None) and the user's newer messages.

    See the module docstring for the facts kept and the rules; the result is never longer than
    ``max_chars`` (``""`` when not even one fact fits).
    """
    if max_chars < 0:
        raise ValueError("max_chars must not be negative")
    previous = previous.strip() if previous else ""
    language: Language = messages_language(user_messages, _summary_language(previous))
    facts: list[_Fact] = []
    quiet = 0
    for sentence in _sentences(previous):
        read = _read_fact(sentence)
        if isinstance(read, int):
            quiet += read
        elif read is not None:
            _add(facts, read)
        else:
            _add(facts, _Fact(("other", sentence), sentence, sentence))
    for message in user_messages:
        target = find_target(message)
        new = [] if target is None else _facts_of(target)
        quiet += 0 if new else 1
        for fact in new:
            _add(facts, fact)
    if not facts:
        line = (f"用户已发送 {quiet} 条消息，尚无导航请求。" if language == "zh" else
                f"User has sent {quiet} message{'' if quiet == 1 else 's'} with no navigation request yet.")
        return line if len(line) <= max_chars else ""
    return _fit([fact.text(language) for fact in facts], _SEPARATOR[language], max_chars)
