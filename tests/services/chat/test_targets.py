"""What a chat message asks for: targets in both languages, and their descriptions."""

from __future__ import annotations

import dataclasses
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.chat.targets import (
    MAX_SCAN_CHARS,
    Target,
    describe,
    find_target,
    has_cjk,
    messages_language,
)


def _key(target: Target | None) -> tuple[object, ...] | None:
    if target is None:
        return None
    return (target.action, target.kind, target.number, target.name, target.relative, target.language)


# --- find_target: the examples -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "number"),
    [
        ("open chapter 5", "chapter", 5), ("chapter 5", "chapter", 5), ("ch 5", "chapter", 5),
        ("ch05", "chapter", 5),
        ("ch05.md", "chapter", 5),
        ("ch. 5", "chapter", 5),
        ("Chapter-5", "chapter", 5),
        ("open chapter five", "chapter", 5), ("open chapter twenty-one", "chapter", 21),
        ("chapter IV", "chapter", 4),
        ("the fifth chapter", "chapter", 5),
        ("open the 5th chapter", "chapter", 5),
        ("open doc 3", "document", 3), ("the second document", "document", 2), ("open 5", "document", 5),
        ("find chapter 5", "chapter", 5), ("open chapter 15", "chapter", 15), ("chapter 50", "chapter", 50),
    ],
)
def test_english_numbered_references(text: str, kind: str, number: int) -> None:
    """English chapter and document numbers, in digits, words, ordinals or Roman numerals, open them."""
    assert _key(find_target(text)) == ("open", kind, number, None, None, "en")


@pytest.mark.parametrize(
    ("text", "kind", "number"),
    [
        ("第五章", "chapter", 5),
        ("第5章", "chapter", 5),
        ("第 12 章", "chapter", 12),
        ("打开第五章", "chapter", 5),
        ("第十二章", "chapter", 12), ("第一百零五章", "chapter", 105), ("第５章", "chapter", 5),
        ("把第五章打开", "chapter", 5), ("打开第一卷第五章", "chapter", 5), ("章节5", "chapter", 5),
        ("第三个文档", "document", 3), ("第二篇", "document", 2), ("打开5", "document", 5),
        ("找一下第五章", "chapter", 5), ("请打开第二十三章吧", "chapter", 23),
    ],
)
def test_chinese_numbered_references(text: str, kind: str, number: int) -> None:
    """Chinese chapter numbers (第五章, 第5章, 第 12 章) and document numbers (第三个文档) open them."""
    assert _key(find_target(text)) == ("open", kind, number, None, None, "zh")


@pytest.mark.parametrize(
    ("text", "kind", "name"),
    [
        ("把灯塔那章调出来", "chapter", "灯塔"),
        ("打开《灯塔》", "document", "灯塔"),
        ("灯塔那章", "chapter", "灯塔"),
        ("灯塔那一章", "chapter", "灯塔"),
        ("关于灯塔的那一章", "chapter", "灯塔"),
        ("打开灯塔", "document", "灯塔"),
        ("打开灯塔守望者那一章吧", "chapter", "灯塔守望者"), ("找一下灯塔那章", "chapter", "灯塔"),
        ("把《灯塔》那章调出来", "chapter", "灯塔"), ("打开「月光」", "document", "月光"),
        ("我想看看灯塔那章", "chapter", "灯塔"),
    ],
)
def test_chinese_named_references(text: str, kind: str, name: str) -> None:
    """Chinese names are cleaned of 那章 / 那一章 / 的那章 and verbs; a quoted title is kept as quoted."""
    assert _key(find_target(text)) == ("open", kind, None, name, None, "zh")


@pytest.mark.parametrize(
    ("text", "kind", "name"),
    [
        ("open the lighthouse chapter", "chapter", "lighthouse"),
        ('open "The Lighthouse"', "document", "The Lighthouse"),
        ("open “The Lighthouse”", "document", "The Lighthouse"),
        ("open chapter The Lighthouse", "chapter", "Lighthouse"),
        ("open the chapter called The Lighthouse", "chapter", "Lighthouse"),
        ("show me the lighthouse chapter", "chapter", "lighthouse"),
        ("the lighthouse chapter", "chapter", "lighthouse"),
        ("go to the storm", "document", "storm"),
        ("open notes.md", "document", "notes.md"),
        ("open the lighthouse one", "document", "lighthouse"),
    ],
)
def test_english_named_references(text: str, kind: str, name: str) -> None:
    """English names are cleaned of articles and "chapter"; a quoted title keeps its words and case."""
    assert _key(find_target(text)) == ("open", kind, None, name, None, "en")


@pytest.mark.parametrize(
    ("text", "kind", "move", "language"),
    [
        ("next chapter", "chapter", "next", "en"), ("the next one", "document", "next", "en"),
        ("how about the next one", "document", "next", "en"), ("previous one", "document", "previous", "en"),
        ("open the previous chapter", "chapter", "previous", "en"), ("next", "document", "next", "en"),
        ("previous", "document", "previous", "en"), ("go to the next document", "document", "next", "en"),
        ("下一章", "chapter", "next", "zh"), ("上一章", "chapter", "previous", "zh"),
        ("是上一章", "chapter", "previous", "zh"), ("不是这个，是上一章", "chapter", "previous", "zh"),
        ("下一个", "document", "next", "zh"), ("打开上一个", "document", "previous", "zh"),
        ("前一章", "chapter", "previous", "zh"), ("后一章", "chapter", "next", "zh"),
        ("下一篇", "document", "next", "zh"),
        ("之后一章", "chapter", "next", "zh"), ("不是这个是下一章", "chapter", "next", "zh"),
    ],
)
def test_relative_references(text: str, kind: str, move: str, language: str) -> None:
    """Next and previous, in both languages, alone or with a noun; a correction after 不是 wins."""
    assert _key(find_target(text)) == ("open", kind, None, None, move, language)


@pytest.mark.parametrize(
    ("text", "name", "language"),
    [
        ("open project Moonfall", "Moonfall", "en"), ("project Moonfall", "Moonfall", "en"),
        ("switch to the Moonfall project", "Moonfall", "en"), ("project: Moonfall", "Moonfall", "en"),
        ("open workspace Research", "Research", "en"), ('open project "Moon Fall"', "Moon Fall", "en"),
        ("打开项目 月落", "月落", "zh"), ("打开项目月落", "月落", "zh"), ("打开月落这个项目", "月落", "zh"),
        ("切换到项目“月落”", "月落", "zh"),
    ],
)
def test_project_references(text: str, name: str, language: str) -> None:
    """Projects (and the seed's workspaces) are opened by name in both languages."""
    assert _key(find_target(text)) == ("open", "project", None, name, None, language)


@pytest.mark.parametrize(
    ("text", "query", "language"),
    [
        ("search for storm", "storm", "en"), ("search storm", "storm", "en"), ("find storm", "storm", "en"),
        ('search for "the storm"', "the storm", "en"), ("look for the old keeper", "the old keeper", "en"),
        ("搜索 暴风雨", "暴风雨", "zh"), ("搜索暴风雨", "暴风雨", "zh"), ("搜一下暴风雨", "暴风雨", "zh"),
        ("查找“暴风雨”", "暴风雨", "zh"),
    ],
)
def test_searches(text: str, query: str, language: str) -> None:
    """A search carries its query in ``name``; a quoted query loses its quotes."""
    assert _key(find_target(text)) == ("search", "document", None, query, None, language)


@pytest.mark.parametrize(
    ("text", "kind", "number", "name", "language"),
    [
        ("new chapter called Dawn", "chapter", None, "Dawn", "en"),
        ("create a new document named Dawn", "document", None, "Dawn", "en"),
        ('add a chapter titled "Dawn"', "chapter", None, "Dawn", "en"),
        ("new chapter", "chapter", None, None, "en"), ("create chapter 6", "chapter", 6, None, "en"),
        ("新建文档 黎明", "document", None, "黎明", "zh"),
        ("新建文档《黎明》", "document", None, "黎明", "zh"),
        ("新建一章 叫黎明", "chapter", None, "黎明", "zh"),
        ("新建一个章节，名字叫黎明", "chapter", None, "黎明", "zh"),
        ("新建第六章", "chapter", 6, None, "zh"), ("创建一个新文档", "document", None, None, "zh"),
    ],
)
def test_creating_documents(
    text: str, kind: str, number: int | None, name: str | None, language: str
) -> None:
    """A new chapter or document, named after "called" / 叫 (even in the next clause) or numbered."""
    assert _key(find_target(text)) == ("create", kind, number, name, None, language)


@pytest.mark.parametrize(
    "text",
    ["hello", "what's the weather", "谢谢", "你好", "今天天气怎么样", "看看天气", "thanks!", "", "   ",
     "what should I write next", "open it", "open", "search", "我不喜欢那章", "下个月", "上个月的事",
     "what's in this chapter", "create a new project called X", "新建项目 X", "go back", "5",
     "User is trying to open a chapter by number.", "用户在按编号打开章节。", "不是这个",
     "User has sent 3 messages with no navigation request yet.", "用户已发送 3 条消息，尚无导航请求。",
     "打开最后一章", "打开最新的那章", "open the last chapter"],
)
def test_nothing_navigational_is_none(text: str) -> None:
    """Greetings, chatter, generic words, unsupported creations and summary lines name no target."""
    assert find_target(text) is None


def test_the_last_clause_with_a_target_wins() -> None:
    """A correction comes last: "not chapter 5 but chapter 6" and "不是第五章，是第六章" ask for 6."""
    assert _key(find_target("not chapter 5 but chapter 6")) == ("open", "chapter", 6, None, None, "en")
    assert _key(find_target("不是第五章，是第六章")) == ("open", "chapter", 6, None, None, "zh")
    assert _key(find_target("no, the previous one")) == ("open", "document", None, None, "previous", "en")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("open 《下一章》", ("open", "document", None, "下一章", None, "zh")),
        ('open "chapter 5 notes"', ("open", "document", None, "chapter 5 notes", None, "en")),
        ('search for "chapter 5"', ("search", "document", None, "chapter 5", None, "en")),
        ('open project "next"', ("open", "project", None, "next", None, "en")),
        ("打开《项目 月落》", ("open", "document", None, "项目 月落", None, "zh")),
    ],
)
def test_words_inside_quotes_are_a_title_not_a_command(text: str, expected: tuple[object, ...]) -> None:
    """Quoted text is a title or query as written: the words in it are never read as commands."""
    assert _key(find_target(text)) == expected


def test_stray_quote_marks_are_not_part_of_a_name() -> None:
    """An unpaired quote mark at the edge of a name is dropped; a name of nothing but one names nothing."""
    assert _key(find_target("调出来open》")) == ("open", "document", None, "open", None, "zh")
    assert find_target("project《项目") is None
    assert _key(find_target("open project Moonfall》")) == ("open", "project", None, "Moonfall", None, "en")


def test_language_follows_cjk_in_the_text() -> None:
    """``language`` is "zh" when the message holds CJK anywhere, even in a quoted title."""
    assert find_target("open 《灯塔》") == Target("open", "document", name="灯塔", language="zh")
    assert find_target("open chapter 5") == Target("open", "chapter", number=5, language="en")


def test_summary_lines_read_as_targets() -> None:
    """The extractive summary's request lines name their targets again (for the unsupported fallback)."""
    assert _key(find_target("User asked for chapter 5.")) == ("open", "chapter", 5, None, None, "en")
    assert _key(find_target('User asked for "The Lighthouse".')) == (
        "open", "document", None, "The Lighthouse", None, "en")
    assert _key(find_target("用户要打开《灯塔》。")) == ("open", "document", None, "灯塔", None, "zh")
    assert _key(find_target("用户在项目“月落”中工作。")) == ("open", "project", None, "月落", None, "zh")
    assert _key(find_target("User searched for storm.")) == ("search", "document", None, "storm", None, "en")


def test_only_the_start_of_a_huge_message_is_read() -> None:
    """A request past :data:`MAX_SCAN_CHARS` characters is not read (commands are short)."""
    assert find_target("x " * MAX_SCAN_CHARS + "chapter 5") is None
    assert _key(find_target("chapter 5 " + "x " * MAX_SCAN_CHARS)) == ("open", "chapter", 5, None, None, "en")


def test_target_is_frozen() -> None:
    """A target is an immutable value."""
    target = Target("open", "chapter", number=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.number = 6  # type: ignore[misc]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_find_target_never_raises_on_arbitrary_text(text: str) -> None:
    """Any text gives a well-formed target or None, never an exception."""
    target = find_target(text)
    if target is not None:
        assert target.language == ("zh" if has_cjk(unicodedata.normalize("NFKC", text)) else "en")
        assert target.number is None or target.number >= 0
        assert target.name is None or target.name.strip() == target.name != ""
        assert describe(target)


_PIECES = st.sampled_from([
    "open", "chapter", "ch", "5", "五", "第", "章", "那章", "把", "调出来", "打开", "《", "》", '"', "“", "”",
    "project", "项目", "search", "搜索", "new", "新建", "called", "叫", "next", "下一", "上一", "不是", "not",
    "but", "，", ",", ".", "。", " ", "the", "one", "twenty", "-", "first", "灯塔", "Lighthouse", "个",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=20).map("".join))
def test_find_target_never_raises_on_command_like_text(text: str) -> None:
    """Text built from the words commands are made of gives a target or None, never an exception."""
    target = find_target(text)
    if target is not None:
        assert describe(target, "zh")
        assert describe(target, "en")


# --- describe ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "zh", "en"),
    [
        (Target("open", "chapter", number=5), "第五章", "chapter 5"),
        (Target("open", "document", number=3), "第三个文档", "document 3"),
        (Target("open", "chapter", name="灯塔"), "《灯塔》", "《灯塔》"),
        (Target("open", "document", name="The Lighthouse"), "《The Lighthouse》", '"The Lighthouse"'),
        (Target("open", "chapter", relative="next"), "下一章", "the next chapter"),
        (Target("open", "chapter", relative="previous"), "上一章", "the previous chapter"),
        (Target("open", "document", relative="next"), "下一个文档", "the next document"),
        (Target("open", "project", name="Moonfall"), "项目“Moonfall”", "project Moonfall"),
        (Target("search", "document", name="storm"), "搜索“storm”", 'a search for "storm"'),
        (Target("create", "chapter", name="Dawn"), "新章节《Dawn》", 'a new chapter called "Dawn"'),
        (Target("create", "document"), "新文档", "a new document"),
        (Target("create", "chapter", number=6), "新的第六章", "a new chapter 6"),
        (Target("open", "chapter", number=5, name="灯塔"), "第五章《灯塔》", "chapter 5, 《灯塔》"),
    ],
)
def test_describe_in_both_languages(target: Target, zh: str, en: str) -> None:
    """Descriptions name the target in either language; CJK names take 《》 in English too."""
    assert describe(target, "zh") == zh
    assert describe(target, "en") == en


def test_describe_defaults_to_the_targets_language() -> None:
    """Without a language, a target is described in the language of its message."""
    assert describe(find_target("打开第五章")) == "第五章"  # type: ignore[arg-type]
    assert describe(find_target("open project Moonfall")) == "project Moonfall"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [(["打开第五章", "谢谢", "ok"], "zh"), (["open chapter 5", "下一章", "thanks"], "en"), ([], "en"),
     (["下一章", "next"], "en")],
)
def test_messages_language_is_the_majority(messages: list[str], expected: str) -> None:
    """The language of a conversation is that of most of its messages; a tie gives the default."""
    assert messages_language(messages) == expected
    assert messages_language(["下一章", "next"], "zh") == "zh"
