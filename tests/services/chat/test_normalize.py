"""Normalization of command-chat messages: fillers out, repeats collapsed, meaning kept."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.chat import normalize as normalize_module
from services.chat.normalize import Normalized, Normalizer, normalize

_FILLERS_FILE = Path(normalize_module.__file__).with_name("fillers.json")


def _norm(text: str) -> str:
    return normalize(text).normalized


# --- the seed and the issue -------------------------------------------------------------------


def test_the_seeds_example() -> None:
    """The seed's example: "how about workspace workspace 5" normalizes to "workspace 5"."""
    result = normalize("how about workspace workspace 5")
    assert result == Normalized(original="how about workspace workspace 5", normalized="workspace 5")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("open workspace workspace 5", "open workspace 5"),
        ("how about workspace 12", "workspace 12"),
        ("workspace workspace 7", "workspace 7"),
        ("workspace 5", "workspace 5"),
    ],
)
def test_the_seeds_other_messages(message: str, expected: str) -> None:
    """The seed's payload and prompt-hardening messages normalize as its rules say."""
    assert _norm(message) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("打开第五章", "打开第五章"),
        ("open chapter 5", "open chapter 5"),
        ("how about chapter chapter 7", "chapter 7"),
        ("把灯塔那章调出来", "把灯塔那章调出来"),
        ("第五章第五章", "第五章"),
        ("workspace workspace 5", "workspace 5"),
    ],
)
def test_the_issues_examples(message: str, expected: str) -> None:
    """The issue's chat commands: plain commands are unchanged, fillers and repeats go."""
    assert _norm(message) == expected


@pytest.mark.parametrize("filler", ["请", "帮我", "麻烦", "能不能", "我想", "麻烦你", "给我", "可以", "请问"])
def test_chinese_fillers_are_stripped(filler: str) -> None:
    """Each Chinese filler the issue names (and the like) is stripped from the start of a command."""
    assert _norm(f"{filler}打开第五章") == "打开第五章"


@pytest.mark.parametrize(
    "filler",
    ["how about", "please", "can you", "could you", "would you", "I want to", "I'd like to", "what about"],
)
def test_english_fillers_are_stripped(filler: str) -> None:
    """Each English filler the issue names (and the like) is stripped from a command."""
    assert _norm(f"{filler} open chapter 5") == "open chapter 5"


def test_stacked_chinese_fillers_all_go() -> None:
    """Fillers one after another are all stripped ("麻烦帮我…", "能不能帮我…")."""
    assert _norm("麻烦帮我打开第五章") == "打开第五章"
    assert _norm("能不能帮我把灯塔那章调出来") == "把灯塔那章调出来"
    assert _norm("可以帮我打开第5章第5章吗") == "打开第5章吗"


def test_mixed_chinese_and_english() -> None:
    """A message mixing both languages loses the fillers and repeats of both."""
    assert _norm("please 帮我 open 第五章第五章") == "open 第五章"
    assert _norm("请 open chapter chapter 7 please") == "open chapter 7"
    assert _norm("how about 灯塔 那章") == "灯塔 那章"
    assert _norm("can you打开第5章") == "打开第5章"


# --- how fillers match ------------------------------------------------------------------------


def test_english_fillers_are_case_insensitive_and_span_any_whitespace() -> None:
    """English fillers match in any case, with any run of whitespace between their words."""
    assert _norm("HOW   ABOUT chapter 3") == "chapter 3"
    assert _norm("Could\tYou open chapter 3") == "open chapter 3"


def test_english_fillers_match_either_apostrophe() -> None:
    """"I'd like to" is stripped whether typed with a straight or a curly apostrophe."""
    assert _norm("I’d like to open chapter 2") == "open chapter 2"
    assert _norm("i'd like to open chapter 2") == "open chapter 2"


def test_english_fillers_match_whole_words_only() -> None:
    """A filler inside a longer word is not stripped ("pleasant", "umbrella", "scan you")."""
    assert _norm("open the pleasant chapter") == "open the pleasant chapter"
    assert _norm("open umbrella notes") == "open umbrella notes"
    assert _norm("scan your notes") == "scan your notes"


def test_chinese_fillers_match_only_at_a_clause_start() -> None:
    """A Chinese filler inside a word is kept: "申请书" keeps its 请, "有麻烦的那章" its 麻烦."""
    assert _norm("打开申请书那章") == "打开申请书那章"
    assert _norm("打开有麻烦的那章") == "打开有麻烦的那章"
    assert _norm("好的，请打开第三章") == "好的，打开第三章"


def test_dangling_separators_are_tidied() -> None:
    """Commas left leading, doubled or trailing by a removed filler are tidied."""
    assert _norm("Please, open chapter 5") == "open chapter 5"
    assert _norm("open chapter 5, please") == "open chapter 5"
    assert _norm("open, please, chapter 5") == "open, chapter 5"
    assert _norm("请，打开第五章") == "打开第五章"
    assert _norm("Please, open chapter 5, thanks") == "open chapter 5"


# --- what never changes -----------------------------------------------------------------------


def test_numbers_alone_never_collapse() -> None:
    """A repeated number is meaning, not a typo of a word: "5 5" and "1212" stay."""
    assert _norm("open 5 5") == "open 5 5"
    assert _norm("chapter 1212") == "chapter 1212"


def test_a_repeat_never_cuts_into_a_number() -> None:
    """A CJK repeat starting or ending inside a number is kept: "第12章第2章", "12第2第", "第5第51"."""
    assert _norm("第12章第2章") == "第12章第2章"
    assert _norm("12第2第") == "12第2第"
    assert _norm("第5第51") == "第5第51"
    assert _norm("第5章第5章1") == "第5章1"


def test_repeated_groups_of_words_and_spaced_cjk_repeats_collapse() -> None:
    """A repeated group of words ("chapter 5 chapter 5") or spaced CJK run ("第5章 第5章") collapses."""
    assert _norm("open chapter 5 chapter 5") == "open chapter 5"
    assert _norm("打开 第5章 第5章") == "打开 第5章"
    assert _norm("Chapter chapter CHAPTER 9") == "Chapter 9"


def test_single_character_cjk_repeats_stay() -> None:
    """Only runs of two or more CJK characters collapse: "谢谢", "看看", "五五" are words."""
    assert _norm("看看第五章") == "看看第五章"
    assert _norm("五五开") == "五五开"


def test_quoted_titles_are_left_as_they_are() -> None:
    """Quoted text is a name: fillers and repeats inside quotes or 《》 are kept."""
    assert _norm('please open "Please Please Me"') == 'open "Please Please Me"'
    assert _norm("我想看《我想你》") == "看《我想你》"
    assert _norm("打开「再见再见」") == "打开「再见再见」"


def test_a_message_of_only_filler_keeps_its_original() -> None:
    """If every word is filler, the trimmed original is kept rather than an empty message."""
    assert _norm("please") == "please"
    assert _norm("  how about  ") == "how about"
    assert _norm("请帮我") == "请帮我"
    assert _norm("  thanks,   please ") == "thanks, please"


@pytest.mark.parametrize("blank", ["", " ", "\t\n ", "\u3000"])
def test_whitespace_only_normalizes_to_empty(blank: str) -> None:
    """A message of nothing but whitespace has nothing to keep: it normalizes to "", original kept."""
    assert normalize(blank) == Normalized(original=blank, normalized="")


def test_whitespace_collapses_and_trims() -> None:
    """Runs of any whitespace (tabs, newlines, the ideographic space) become one space; ends trimmed."""
    assert _norm("  open\t\tchapter \n 5  ") == "open chapter 5"
    assert _norm("打开\u3000第五章") == "打开 第五章"


# --- the data ---------------------------------------------------------------------------------


def test_builtin_fillers_are_the_shipped_json() -> None:
    """The built-in normalizer's phrases are exactly fillers.json's, per language, in both languages."""
    data = json.loads(_FILLERS_FILE.read_text(encoding="utf-8"))
    assert set(data) == {"en", "zh"}
    built = Normalizer.builtin()
    assert {k: list(v) for k, v in built.fillers.items()} == data
    for phrase in ["how about", "please", "can you", "could you"]:
        assert phrase in data["en"]
    for phrase in ["请", "帮我", "麻烦", "能不能", "我想"]:
        assert phrase in data["zh"]


def test_a_normalizer_from_custom_data_strips_those_phrases_only() -> None:
    """Fillers are data: a normalizer built from other phrases strips those and not the built-in ones."""
    custom = Normalizer({"en": ["yo", "gimme"], "zh": ["劳驾"]})
    assert custom.normalize("yo gimme chapter 5").normalized == "chapter 5"
    assert custom.normalize("劳驾打开第五章").normalized == "打开第五章"
    assert custom.normalize("please open chapter 5").normalized == "please open chapter 5"
    assert custom.normalize("请打开第五章").normalized == "请打开第五章"


def test_a_normalizer_from_json_text() -> None:
    """``Normalizer.from_json`` reads the same {"en": [...], "zh": [...]} shape as the shipped file."""
    custom = Normalizer.from_json('{"en": ["hey"], "fr": ["s\'il vous plaît"]}')
    assert custom.normalize("hey open chapter 5 s'il vous plaît").normalized == "open chapter 5"
    assert set(custom.fillers) == {"en", "fr"}


def test_a_normalizer_with_no_fillers_still_collapses() -> None:
    """With no phrases at all, repeats and whitespace still collapse."""
    bare = Normalizer({})
    assert bare.normalize("please  workspace workspace 5").normalized == "please workspace 5"


@pytest.mark.parametrize(
    "document",
    ["[]", '{"en": "please"}', '{"en": [1]}', '{"en": [" "]}', '{"en": ["chapter 5"]}', "{"],
)
def test_malformed_filler_data_is_refused(document: str) -> None:
    """Filler data that is not an object of lists of non-blank, digit-free phrases is refused."""
    with pytest.raises(ValueError, match=r".+"):
        Normalizer.from_json(document)


def test_results_and_normalizers_are_immutable() -> None:
    """A Normalized result and a Normalizer cannot be changed once built (safe to share)."""
    result = normalize("open chapter 5")
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, "normalized", "x")  # noqa: B010 - the attribute is the point
    built = Normalizer.builtin()
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, "fillers", {})  # noqa: B010 - the attribute is the point
    with pytest.raises(TypeError):
        built.fillers["en"] = ("x",)  # type: ignore[index]


def test_the_module_function_uses_the_builtin_fillers() -> None:
    """``normalize(text)`` is ``Normalizer.builtin().normalize(text)``."""
    for message in ["how about workspace workspace 5", "麻烦帮我打开第五章", "  "]:
        assert normalize(message) == Normalizer.builtin().normalize(message)


# --- invariants -------------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "how about", "please", "Please", "can you", "could you", "I'd like to", "thanks", "um",
        "请", "帮我", "麻烦", "能不能", "我想", "可以", "给我",
        "workspace", "chapter", "Chapter", "open", "打开", "第五章", "第5章", "灯塔", "那章", "申请",
        "5", "12", "7", "1", "五", "哈",
        ",", "，", "、", "。", "?", "？", ":", "'", "’", '"', "“", "”", "《", "》", "「", "」",
        " ", "  ", "\t", "\n", "\u3000", "",
    ]
)
_MESSAGES = st.one_of(
    st.lists(_PIECES, max_size=24).map("".join),
    st.lists(_PIECES, max_size=24).map(" ".join),
    st.text(max_size=60),
    st.text(alphabet="ab 5五章第请,，\"《》", max_size=40),
)


@settings(max_examples=600, deadline=None)
@given(_MESSAGES)
def test_normalizing_twice_is_normalizing_once(message: str) -> None:
    """Idempotence: normalize(normalize(x).normalized).normalized == normalize(x).normalized."""
    once = _norm(message)
    assert _norm(once) == once


@settings(max_examples=600, deadline=None)
@given(_MESSAGES)
def test_never_empty_for_a_non_blank_message(message: str) -> None:
    """A message with any non-whitespace character never normalizes to ""; the original is kept."""
    result = normalize(message)
    assert result.original == message
    assert (result.normalized == "") == (message.strip() == "")


@settings(max_examples=600, deadline=None)
@given(_MESSAGES)
def test_numbers_survive_and_the_result_is_tidy(message: str) -> None:
    """Every number in the message is still in the result; no result grows or has loose spaces."""
    result = _norm(message)
    assert set(re.findall(r"\d+", result)) == set(re.findall(r"\d+", message))
    assert len(result) <= len(message.strip())
    assert result == result.strip()
    assert not re.search(r"\s\s", result)
    assert not re.search(r"[^ \S]", result)
