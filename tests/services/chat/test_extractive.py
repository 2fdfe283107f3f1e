"""The deterministic rolling summary: intent facts only, both languages, newest kept, always bounded."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.chat.extractive import DEFAULT_MAX_CHARS, MAX_NAME_CHARS, summarize_intents
from services.chat.targets import find_target

# --- the facts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "summary"),
    [
        (["open chapter 5"], "User is trying to open a chapter by number. User asked for chapter 5."),
        (["ch05"], "User is trying to open a chapter by number. User asked for chapter 5."),
        (
            ["open the lighthouse chapter"],
            'User is trying to open a chapter by name. User asked for "lighthouse".',
        ),
        (["open document 3"], "User is trying to open a document by number. User asked for document 3."),
        (["next chapter"], "User is moving through the chapters in order. User asked for the next chapter."),
        (["search for storm"], "User searched for storm."),
        (["new chapter called Dawn"], "User wants to create a chapter called Dawn."),
        (["create a new document"], "User wants to create a new document."),
        (["create chapter 6"], "User wants to create chapter 6."),
        (["open project Moonfall"], "User is working in project Moonfall."),
    ],
)
def test_english_facts(messages: list[str], summary: str) -> None:
    """Each kind of English request becomes its short fact sentence(s)."""
    assert summarize_intents(None, messages) == summary


@pytest.mark.parametrize(
    ("messages", "summary"),
    [
        (["打开第五章"], "用户在按编号打开章节。用户要打开第五章。"),
        (["把灯塔那章调出来"], "用户在按名称打开章节。用户要打开《灯塔》。"),
        (["下一章"], "用户在按顺序浏览章节。用户要打开下一章。"),
        (["搜索 暴风雨"], "用户搜索了“暴风雨”。"),
        (["新建文档 黎明"], "用户要新建文档《黎明》。"),
        (["新建第六章"], "用户要新建第六章。"),
        (["打开项目 月落"], "用户在项目“月落”中工作。"),
    ],
)
def test_chinese_facts(messages: list[str], summary: str) -> None:
    """Mostly Chinese messages give the same facts in Chinese."""
    assert summarize_intents(None, messages) == summary


def test_a_cjk_name_in_an_english_summary_keeps_its_title_marks() -> None:
    """In an English summary a Chinese title is written 《灯塔》 (the issue's example)."""
    summary = summarize_intents(None, ["把灯塔那章调出来", "thanks", "ok"])
    assert summary == "User is trying to open a chapter by name. User asked for 《灯塔》."


def test_the_language_follows_most_messages() -> None:
    """The summary's language is that of most of the new messages."""
    assert summarize_intents(None, ["打开第五章", "下一章", "chapter 7"]).startswith("用户")
    assert summarize_intents(None, ["open chapter 5", "next chapter", "下一章"]).startswith("User")


def test_messages_without_navigation_contribute_nothing() -> None:
    """Greetings and chatter add no fact; the request among them is all that is kept."""
    assert summarize_intents(None, ["hello", "open chapter 5", "what's the weather", "谢谢"]) == (
        "User is trying to open a chapter by number. User asked for chapter 5."
    )


@pytest.mark.parametrize(
    ("previous", "messages", "summary"),
    [
        (None, ["hello"], "User has sent 1 message with no navigation request yet."),
        (None, ["hello", "what's the weather"], "User has sent 2 messages with no navigation request yet."),
        (None, [], "User has sent 0 messages with no navigation request yet."),
        (None, ["你好", "谢谢"], "用户已发送 2 条消息，尚无导航请求。"),
        (
            "User has sent 2 messages with no navigation request yet.",
            ["thanks"],
            "User has sent 3 messages with no navigation request yet.",
        ),
        ("用户已发送 2 条消息，尚无导航请求。", ["谢谢", "好"], "用户已发送 4 条消息，尚无导航请求。"),
    ],
)
def test_a_neutral_line_when_nothing_is_found(
    previous: str | None, messages: list[str], summary: str
) -> None:
    """Without any fact the summary counts the messages so far in one neutral line (rolling too)."""
    assert summarize_intents(previous, messages) == summary


def test_a_fact_replaces_the_neutral_line() -> None:
    """Once a request is made, the neutral line of the previous summary goes."""
    previous = "User has sent 4 messages with no navigation request yet."
    assert summarize_intents(previous, ["chapter 2"]) == (
        "User is trying to open a chapter by number. User asked for chapter 2."
    )


# --- deduplication, replacement and the rolling summary ------------------------------------------


def test_facts_are_deduplicated_and_the_repeat_is_the_newest() -> None:
    """Asking twice for one chapter keeps one fact, now in the newest place."""
    summary = summarize_intents(None, ["chapter 5", "search storm", "chapter 5"])
    assert summary == (
        "User searched for storm. User is trying to open a chapter by number. User asked for chapter 5."
    )


def test_a_newer_mode_replaces_the_older() -> None:
    """How the user opens (by number, by name, in order) is one fact: the newest replaces it."""
    summary = summarize_intents(None, ["chapter 5", "open the lighthouse chapter"])
    assert summary == (
        'User asked for chapter 5. User is trying to open a chapter by name. User asked for "lighthouse".'
    )


def test_a_newer_project_replaces_the_older() -> None:
    """The project worked in is one fact: switching projects replaces it."""
    summary = summarize_intents("User is working in project Moonfall.", ["open project Sunrise"])
    assert summary == "User is working in project Sunrise."


def test_previous_facts_are_kept_and_new_ones_follow() -> None:
    """The previous summary's facts stay (rolling) and the new facts come after them."""
    previous = "User is trying to open a chapter by number. User asked for chapter 5."
    assert summarize_intents(previous, ["search for storm", "hello"]) == (
        "User is trying to open a chapter by number. User asked for chapter 5. User searched for storm."
    )


def test_previous_facts_switch_language_with_the_messages() -> None:
    """Facts of an English summary are written again in Chinese when the new messages are Chinese."""
    previous = "User is working in project Moonfall. User asked for chapter 5."
    assert summarize_intents(previous, ["下一章"]) == (
        "用户在项目“Moonfall”中工作。用户要打开第五章。用户在按顺序浏览章节。用户要打开下一章。"
    )
    back = summarize_intents("用户在按编号打开章节。用户要打开第五章。", ["open project Moonfall"])
    assert back == (
        "User is trying to open a chapter by number. User asked for chapter 5. "
        "User is working in project Moonfall."
    )


def test_the_previous_summarys_language_holds_without_messages() -> None:
    """With no new messages the summary stays in its own language, even holding the other script."""
    english = "User is trying to open a chapter by name. User asked for 《灯塔》."
    assert summarize_intents(english, []) == english
    chinese = "用户在按名称打开文档。用户要打开《The Lighthouse》。"
    assert summarize_intents(chinese, []) == chinese


def test_sentences_of_a_model_summary_are_kept_verbatim() -> None:
    """A previous summary's sentences that are not known facts (a model wrote them) stay as they are."""
    previous = "The user prefers short answers. User asked for chapter 5."
    assert summarize_intents(previous, ["open chapter 9"]) == (
        "The user prefers short answers. User asked for chapter 5. "
        "User is trying to open a chapter by number. User asked for chapter 9."
    )


def test_names_with_sentence_marks_are_quoted() -> None:
    """A name holding a full stop is quoted, so the summary still reads back sentence by sentence."""
    summary = summarize_intents(None, ["search for Mr. Smith"])
    assert summary == 'User searched for "Mr. Smith".'
    assert summarize_intents(summary, []) == summary


@pytest.mark.parametrize(
    "messages",
    [
        ["调出来open》"],
        ["project《called"],
        ["", "项目叫called"],
        ['搜索openopenopen五"chapter"'],
        ["search for called"],
        ["open project called Moonfall"],
        ['search for "chapter 5"'],
    ],
)
def test_odd_names_read_back_as_themselves(messages: list[str]) -> None:
    """Names with stray quote marks or words the sentence uses are written so they read back unchanged."""
    summary = summarize_intents(None, messages)
    assert summarize_intents(summary, []) == summary
    if any(find_target(message) for message in messages):  # the same request again adds nothing
        assert summarize_intents(summary, messages) == summary


def test_a_fact_read_back_as_verbatim_text_is_not_repeated() -> None:
    """A sentence kept verbatim and the same fact made again are one fact, not two."""
    previous = "User searched for storm. The user likes the sea."
    assert summarize_intents(previous + " The user likes the sea.", ["search for storm"]) == (
        "The user likes the sea. User searched for storm."
    )


# --- bounds --------------------------------------------------------------------------------------


def test_the_oldest_facts_go_first_and_whole() -> None:
    """Over the limit, the oldest facts are dropped whole; the newest request is always kept."""
    messages = [f"open chapter {n}" for n in range(1, 60)]
    summary = summarize_intents(None, messages, 200)
    assert len(summary) <= 200
    assert summary.endswith("User is trying to open a chapter by number. User asked for chapter 59.")
    assert summary.startswith("User asked for chapter ")
    assert "chapter 1." not in summary
    full = summarize_intents(None, messages, 100_000)
    assert full.endswith(summary)


def test_the_default_limit_is_600() -> None:
    """Without max_chars the summary stays within 600 characters."""
    assert DEFAULT_MAX_CHARS == 600
    assert len(summarize_intents(None, [f"第{n}章" for n in range(1, 300)])) <= 600


def test_a_limit_too_small_for_any_fact_gives_an_empty_summary() -> None:
    """When not even the newest fact fits, the summary is empty rather than cut mid-sentence."""
    assert summarize_intents(None, ["open chapter 5"], 10) == ""
    assert summarize_intents(None, ["hello"], 10) == ""
    assert summarize_intents(None, ["open chapter 5"], 0) == ""
    assert summarize_intents(None, ["open chapter 5"], 25) == "User asked for chapter 5."


def test_a_negative_limit_is_an_error() -> None:
    """max_chars below zero is a programming error."""
    with pytest.raises(ValueError, match="max_chars"):
        summarize_intents(None, [], -1)


def test_long_names_are_cut_to_forty_characters() -> None:
    """A name is copied up to 40 characters, so a long message never lands in the summary whole."""
    name = "the chapter where the keeper finally climbs the stairs at night"
    summary = summarize_intents(None, [f'open "{name}"'])
    assert MAX_NAME_CHARS == 40
    assert name not in summary
    assert f'"{name[:40].rstrip()}"' in summary


# --- properties ----------------------------------------------------------------------------------

_COMMANDS = st.sampled_from(
    [
        "open chapter 5",
        "chapter 15",
        "ch05.md",
        "第五章",
        "第 12 章",
        "把灯塔那章调出来",
        "打开《灯塔》",
        "open the lighthouse chapter",
        'open "The Lighthouse"',
        "next chapter",
        "the next one",
        "下一章",
        "上一章",
        "不是这个，是上一章",
        "open project Moonfall",
        "打开项目 月落",
        "search for storm",
        "搜索 暴风雨",
        "new chapter called Dawn",
        "新建文档 黎明",
        "hello",
        "谢谢",
        "what's the weather",
        "search for Mr. Smith",
        "create chapter 6",
        "新建第六章",
        "open doc 3",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.none(), st.text(max_size=700)),
    st.lists(st.text(max_size=200), max_size=12),
    st.integers(min_value=0, max_value=700),
)
def test_the_summary_never_exceeds_max_chars(
    previous: str | None, messages: list[str], max_chars: int
) -> None:
    """For any previous summary, messages and limit, the summary is at most max_chars long."""
    assert len(summarize_intents(previous, messages, max_chars)) <= max_chars


@settings(max_examples=200, deadline=None)
@given(st.lists(_COMMANDS, max_size=15), st.integers(min_value=0, max_value=700))
def test_commands_never_exceed_max_chars_either(messages: list[str], max_chars: int) -> None:
    """Real commands, many of them, still give a summary within the limit, made of whole sentences."""
    summary = summarize_intents(None, messages, max_chars)
    assert len(summary) <= max_chars
    assert summary == "" or summary.endswith((".", "。"))


@settings(max_examples=200, deadline=None)
@given(st.lists(_COMMANDS, max_size=10), st.lists(_COMMANDS, max_size=10))
def test_reading_a_summary_back_changes_nothing(first: list[str], second: list[str]) -> None:
    """A summary rolled with no new messages is itself, and rolling twice equals rolling the facts once."""
    summary = summarize_intents(None, first)
    assert summarize_intents(summary, []) == summary
    rolled = summarize_intents(summary, second)
    assert summarize_intents(rolled, []) == rolled


@settings(max_examples=100, deadline=None)
@given(st.lists(_COMMANDS, max_size=10))
def test_the_summary_is_deterministic(messages: list[str]) -> None:
    """The same inputs give the same summary."""
    assert summarize_intents(None, messages) == summarize_intents(None, list(messages))


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", min_size=MAX_NAME_CHARS + 10, max_size=200))
def test_a_long_name_is_never_copied_whole(name: str) -> None:
    """Whatever the name, no more than its first 40 characters reach the summary."""
    name = " ".join(name.split())
    summary = summarize_intents(None, [f'open "{name}"', f"search for {name}"])
    if len(name) > MAX_NAME_CHARS:
        assert name not in summary


def test_each_summary_line_names_a_target_again() -> None:
    """The request facts read back as targets (what the unsupported fallback relies on)."""
    summary = summarize_intents(None, ["把灯塔那章调出来"])
    target = find_target(summary)
    assert target is not None
    assert (target.action, target.name) == ("open", "灯塔")
