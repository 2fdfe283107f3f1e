"""Resolving chat targets against real documents and projects, and the replies around them."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.chat.resolve import (
    MAX_MATCHES,
    SUPPORTED_INTENTS,
    DocumentCandidate,
    Match,
    Resolution,
    clarification,
    implied_target,
    intent_of,
    natural_key,
    not_supported,
    reading_order,
    resolve_document,
    resolve_project,
)
from services.chat.targets import Target, find_target

D = DocumentCandidate

ENGLISH_BOOK = (
    D("ch05.md", "# Chapter 5: The Lighthouse"),
    D("ch15.md", "Chapter 15: Storm"),
    D("ch50.md", None),
    D("ch2.md", "Chapter 2"),
    D("ch10.md", "Chapter 10: Lighthouse Keeper"),
)
CHINESE_BOOK = (
    D("chapters/第五章 灯塔.md", "# 第五章 灯塔"),
    D("chapters/第十二章 灯塔守望者.md", "第十二章 灯塔守望者"),
    D("chapters/第一章 开端.md", "第一章 开端"),
    D("chapters/第二章.md", "第二章 雪夜"),
)


def _ids(resolution: Resolution) -> list[str]:
    return [match.document_id for match in resolution.matches]


def _open(text: str) -> Target:
    target = find_target(text)
    assert target is not None, text
    return target


# --- by number -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("chapter 5", "ch05.md"),
        ("chapter 15", "ch15.md"),
        ("chapter 50", "ch50.md"),
        ("ch 2", "ch2.md"),
        ("第十章", "ch10.md"),
        ("open chapter fifteen", "ch15.md"),
    ],
)
def test_a_number_matches_only_that_number(message: str, expected: str) -> None:
    """Chapter 5 matches ch05 only, never chapter 15 or ch50 (numbers are read whole)."""
    resolution = resolve_document(_open(message), ENGLISH_BOOK)
    assert resolution.status == "match"
    assert _ids(resolution) == [expected]
    assert resolution.matches[0].score == 1.0


def test_a_missing_number_is_none() -> None:
    """A number no document carries resolves to nothing (no nearest guess)."""
    assert resolve_document(_open("chapter 7"), ENGLISH_BOOK) == Resolution("none", ())


@pytest.mark.parametrize(
    ("title", "document_id"),
    [
        ("第五章 灯塔", "a.md"),
        ("第5章", "a.md"),
        ("Chapter 5", "a.md"),
        ("Chapter Five: Dawn", "a.md"),
        ("CHAPTER V", "a.md"),
        (None, "ch05.md"),
        (None, "chapter-5.md"),
        (None, "chapter_05.md"),
        (None, "Ch.5.md"),
        (None, "第五章.md"),
        (None, "drafts/part 5.md"),
        ("第五篇", "a.md"),
    ],
)
def test_numbers_are_read_from_titles_and_filenames(title: str | None, document_id: str) -> None:
    """Chapter and document markers in either script, in the title or the filename, carry a number."""
    documents = [D(document_id, title), D("other.md", "Chapter 15"), D("third.md", "第五十章")]
    resolution = resolve_document(Target("open", "chapter", number=5), documents)
    assert _ids(resolution) == [document_id]
    assert resolution.matches[0].score == 1.0


@pytest.mark.parametrize(
    ("title", "document_id"),
    [
        (None, "05-opening.md"),
        (None, "5.md"),
        ("5. Dawn", "x.md"),
        ("五、灯塔", "x.md"),
        (None, "05 灯塔.md"),
    ],
)
def test_a_leading_number_counts_a_little_less(title: str | None, document_id: str) -> None:
    """A title or filename starting with the number matches it with score 0.9."""
    resolution = resolve_document(Target("open", "chapter", number=5), [D(document_id, title), D("15-x.md")])
    assert resolution.status == "match"
    assert resolution.matches[0] == Match(document_id, title, 0.9, resolution.matches[0].why)


def test_a_marker_beats_a_leading_number() -> None:
    """ "ch05.md" (a marker) is a clearer chapter 5 than "05-notes.md" (a leading number)."""
    resolution = resolve_document(Target("open", "chapter", number=5), [D("05-notes.md"), D("ch05.md")])
    assert (resolution.status, _ids(resolution)) == ("match", ["ch05.md"])


def test_the_same_number_in_two_volumes_is_ambiguous() -> None:
    """Two documents carrying the same chapter number are ambiguous, listed in reading order."""
    documents = [D("第二卷/第五章 大海.md"), D("第一卷/第五章 灯塔.md")]
    resolution = resolve_document(_open("第五章"), documents)
    assert resolution.status == "ambiguous"
    assert _ids(resolution) == ["第一卷/第五章 灯塔.md", "第二卷/第五章 大海.md"]


def test_a_part_number_is_not_a_chapter_number() -> None:
    """"Part 2, Chapter 5" is chapter 5 for a chapter target; a document target reads the part too."""
    documents = [D("a.md", "Part 2, Chapter 5"), D("b.md", "Chapter 2"), D("c.md", "Part 3")]
    assert _ids(resolve_document(Target("open", "chapter", number=2), documents)) == ["b.md"]
    assert _ids(resolve_document(Target("open", "chapter", number=3), documents)) == ["c.md"]
    assert _ids(resolve_document(Target("open", "document", number=2), documents)) == ["a.md", "b.md"]


def test_a_name_with_the_number_breaks_the_tie() -> None:
    """A target with both a number and a name prefers the numbered document whose name matches."""
    documents = [D("第一卷/第五章 灯塔.md"), D("第二卷/第五章 大海.md")]
    resolution = resolve_document(Target("open", "chapter", number=5, name="大海"), documents)
    assert (resolution.status, _ids(resolution)) == ("match", ["第二卷/第五章 大海.md"])


def test_without_numbers_the_nth_document_in_reading_order() -> None:
    """When no document carries a number, chapter n is the nth document in reading order (score 0.6)."""
    documents = [D("opening.md", "Opening"), D("middle.md", "The Middle"), D("end.md", "Ending")]
    resolution = resolve_document(_open("chapter 2"), documents)
    assert resolution.status == "match"
    assert resolution.matches[0].document_id == "middle.md"  # end, middle, opening
    assert resolution.matches[0].score == 0.6
    assert "2nd document in reading order" in resolution.matches[0].why
    assert resolve_document(_open("chapter 4"), documents).status == "none"
    assert resolve_document(Target("open", "chapter", number=0), documents).status == "none"


def test_the_nth_fallback_does_not_apply_when_some_document_carries_numbers() -> None:
    """One numbered document is enough to read numbers as labels, not positions."""
    documents = [D("opening.md", "Opening"), D("ch07.md", None), D("end.md", "Ending")]
    assert resolve_document(_open("chapter 2"), documents).status == "none"


def test_chinese_book_numbers() -> None:
    """Chinese chapter headings answer Chinese and English numbers alike."""
    assert _ids(resolve_document(_open("第5章"), CHINESE_BOOK)) == ["chapters/第五章 灯塔.md"]
    assert _ids(resolve_document(_open("chapter 12"), CHINESE_BOOK)) == ["chapters/第十二章 灯塔守望者.md"]
    assert resolve_document(_open("第三章"), CHINESE_BOOK).status == "none"


# --- by name -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected", "exact"),
    [
        ("open the lighthouse chapter", "ch05.md", True),
        ('open "Lighthouse Keeper"', "ch10.md", True),
        ("open keeper", "ch10.md", False),
        ("open lighthose", "ch05.md", False),
        ("open STORM", "ch15.md", True),
    ],
)
def test_english_names_match_titles_fuzzily(message: str, expected: str, exact: bool) -> None:
    """English names match case-insensitively by words, with typos and partial titles tolerated."""
    resolution = resolve_document(_open(message), ENGLISH_BOOK)
    assert (resolution.status, _ids(resolution)) == ("match", [expected])
    assert (resolution.matches[0].score == 1.0) is exact


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("把灯塔那章调出来", "chapters/第五章 灯塔.md"),
        ("打开《灯塔守望者》", "chapters/第十二章 灯塔守望者.md"),
        ("打开守望者", "chapters/第十二章 灯塔守望者.md"),
        ("打开雪", "chapters/第二章.md"),
        ("打开开端", "chapters/第一章 开端.md"),
    ],
)
def test_chinese_names_match_titles_by_substring(message: str, expected: str) -> None:
    """CJK names match anywhere in a title (chapter labels like 第五章 set aside); an exact title wins."""
    resolution = resolve_document(_open(message), CHINESE_BOOK)
    assert (resolution.status, _ids(resolution)) == ("match", [expected])


def test_two_documents_titled_the_same_are_ambiguous() -> None:
    """A name matching two documents equally well returns both, best first then reading order."""
    documents = [D("b.md", "第九章 灯塔"), D("a.md", "第五章 灯塔"), D("c.md", "第二章 大海")]
    resolution = resolve_document(_open("把灯塔那章调出来"), documents)
    assert resolution.status == "ambiguous"
    assert _ids(resolution) == ["a.md", "b.md"]
    assert {m.score for m in resolution.matches} == {1.0}


def test_two_parts_of_one_title_are_ambiguous() -> None:
    """灯塔（上） and 灯塔（下） both hold 灯塔 with the same share: ambiguous."""
    documents = [D("a.md", "第三章 灯塔（上）"), D("b.md", "第四章 灯塔（下）"), D("c.md", "第九章 大海")]
    resolution = resolve_document(_open("打开灯塔"), documents)
    assert (resolution.status, _ids(resolution)) == ("ambiguous", ["a.md", "b.md"])


def test_an_exact_title_beats_a_longer_one() -> None:
    """ "Lighthouse" opens "Lighthouse", not "Lighthouse Keeper"; "Lighthouse Keeper" opens the keeper."""
    documents = [D("a.md", "Lighthouse Keeper"), D("b.md", "Lighthouse")]
    assert _ids(resolve_document(Target("open", "chapter", name="Lighthouse"), documents)) == ["b.md"]
    assert _ids(resolve_document(Target("open", "chapter", name="Lighthouse Keeper"), documents)) == ["a.md"]
    assert _ids(
        resolve_document(Target("open", "chapter", name="灯塔"), [D("x.md", "灯塔守望者"), D("y.md", "灯塔")])
    ) == ["y.md"]


def test_a_name_in_two_longer_titles_is_ambiguous() -> None:
    """ "Lighthouse" in "Lighthouse Keeper" and "Lighthouse Beam" (neither exact) is ambiguous."""
    documents = [D("a.md", "Lighthouse Keeper"), D("b.md", "Lighthouse Beam"), D("c.md", "Storm")]
    resolution = resolve_document(Target("open", "chapter", name="lighthouse"), documents)
    assert (resolution.status, _ids(resolution)) == ("ambiguous", ["a.md", "b.md"])


def test_ambiguity_lists_at_most_ten() -> None:
    """However many documents tie, an ambiguous resolution lists at most ten, in reading order."""
    documents = [D(f"ch{i}.md", "灯塔") for i in range(12, 0, -1)]
    resolution = resolve_document(Target("open", "chapter", name="灯塔"), documents)
    assert resolution.status == "ambiguous"
    assert _ids(resolution) == [f"ch{i}.md" for i in range(1, MAX_MATCHES + 1)]


def test_names_match_filenames_without_extension_or_punctuation() -> None:
    """Without a title the filename is the name: extension, dashes and case do not matter."""
    documents = [D("the-old-keeper.md"), D("storm_notes.txt"), D("01-opening.md")]
    assert _ids(resolve_document(_open("open the old keeper"), documents)) == ["the-old-keeper.md"]
    assert _ids(resolve_document(_open("open Storm Notes"), documents)) == ["storm_notes.txt"]
    assert _ids(resolve_document(_open("open 01-opening.md"), documents)) == ["01-opening.md"]
    assert _ids(resolve_document(_open("open opening"), documents)) == ["01-opening.md"]


def test_unrelated_or_empty_names_match_nothing() -> None:
    """A name sharing nothing with any document, or only stop words, is none."""
    assert resolve_document(_open("open the weather"), ENGLISH_BOOK).status == "none"
    assert resolve_document(Target("open", "chapter", name="the"), ENGLISH_BOOK).status == "none"
    assert resolve_document(Target("open", "chapter", name="大海"), CHINESE_BOOK).status == "none"


def test_why_never_quotes_the_user() -> None:
    """``why`` names the rule that matched, not the user's words."""
    for match in resolve_document(_open("把灯塔那章调出来"), CHINESE_BOOK).matches:
        assert "灯塔" not in match.why


# --- relative and reading order ------------------------------------------------------------------


def test_reading_order_is_natural() -> None:
    """Ids sort naturally: ch2 before ch10, 第五章 before 第十二章, directory by directory."""
    ids = ["ch10.md", "ch2.md", "ch1.md", "part2/ch1.md", "part1/ch3.md", "part10/a.md"]
    ordered = [d.document_id for d in reading_order([D(i) for i in ids])]
    assert ordered == ["ch1.md", "ch2.md", "ch10.md", "part1/ch3.md", "part2/ch1.md", "part10/a.md"]
    chinese = [d.document_id for d in reading_order(list(CHINESE_BOOK))]
    assert chinese == [
        "chapters/第一章 开端.md",
        "chapters/第二章.md",
        "chapters/第五章 灯塔.md",
        "chapters/第十二章 灯塔守望者.md",
    ]


def test_reading_order_keeps_the_first_of_a_repeated_id() -> None:
    """A document listed twice is kept once (its first listing)."""
    assert reading_order([D("a.md", "first"), D("a.md", "second")]) == (D("a.md", "first"),)


@given(st.lists(st.text(alphabet="ab01239十五章第/-.", max_size=12), max_size=12))
def test_reading_order_is_total_and_stable(ids: list[str]) -> None:
    """Natural order is a total order: any shuffle of the ids sorts the same way."""
    shuffled = list(ids)
    random.Random(0).shuffle(shuffled)
    assert sorted(ids, key=natural_key) == sorted(shuffled, key=natural_key)


@pytest.mark.parametrize(
    ("message", "current", "expected"),
    [
        ("next chapter", "ch05.md", "ch10.md"),
        ("previous chapter", "ch05.md", "ch2.md"),
        ("下一章", "ch10.md", "ch15.md"),
        ("上一章", "ch15.md", "ch10.md"),
        ("the next one", "ch2.md", "ch05.md"),
    ],
)
def test_next_and_previous_follow_reading_order(message: str, current: str, expected: str) -> None:
    """Next and previous step through reading order from the current document."""
    resolution = resolve_document(_open(message), ENGLISH_BOOK, current)
    assert (resolution.status, _ids(resolution)) == ("match", [expected])


@pytest.mark.parametrize(
    ("message", "current"),
    [
        ("next chapter", "ch50.md"),
        ("previous chapter", "ch2.md"),
        ("下一章", None),
        ("next chapter", "gone.md"),
    ],
)
def test_next_and_previous_stop_at_the_ends(message: str, current: str | None) -> None:
    """Past either end, without a current document or with an unknown one, the answer is none."""
    assert resolve_document(_open(message), ENGLISH_BOOK, current) == Resolution("none", ())


def test_a_project_target_is_not_a_document() -> None:
    """Project targets resolve to none among documents (they go to resolve_project)."""
    assert resolve_document(_open("open project Moonfall"), [D("Moonfall.md")]).status == "none"


def test_no_documents_resolve_to_none() -> None:
    """An empty project resolves every target to none."""
    for message in ("chapter 5", "打开灯塔", "next chapter"):
        assert resolve_document(_open(message), [], "ch05.md").status == "none"


# --- projects ------------------------------------------------------------------------------------

PROJECTS = (
    ("p1", "Moonfall"),
    ("p2", "Moonfall Sequel"),
    ("p3", "Sunrise"),
    ("p4", "月落"),
    ("p5", "月落续集"),
)


@pytest.mark.parametrize(
    ("name", "expected", "status"),
    [
        ("Moonfall", ["p1"], "match"),
        ("moonfall", ["p1"], "match"),
        ("sequel", ["p2"], "match"),
        ("月落", ["p4"], "match"),
        ("续集", ["p5"], "match"),
        ("p3", ["p3"], "match"),
        ("Moonfal", ["p1"], "match"),
        ("Winter", [], "none"),
        ("", [], "none"),
    ],
)
def test_projects_resolve_by_name_and_id(name: str, expected: list[str], status: str) -> None:
    """Projects match by name (exact, fuzzy, CJK substring) or by id; the match carries the id."""
    resolution = resolve_project(name, PROJECTS)
    assert (resolution.status, _ids(resolution)) == (status, expected)


def test_projects_with_the_same_name_are_ambiguous() -> None:
    """Two projects of one name are ambiguous; the match's title is the project's name."""
    resolution = resolve_project("Moonfall", [("b", "Moonfall"), ("a", "Moonfall"), ("c", "Dawn")])
    assert resolution.status == "ambiguous"
    assert [(m.document_id, m.title) for m in resolution.matches] == [("a", "Moonfall"), ("b", "Moonfall")]


# --- replies -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "zh", "en"),
    [
        ("第五章", "你是想打开第五章吗？", "Do you want to open chapter 5?"),
        ("chapter 5", "你是想打开第五章吗？", "Do you want to open chapter 5?"),
        ("把灯塔那章调出来", "你是想打开《灯塔》吗？", "Do you want to open 《灯塔》?"),
        (
            'open "The Lighthouse"',
            "你是想打开《The Lighthouse》吗？",
            'Do you want to open "The Lighthouse"?',
        ),
        ("下一章", "你是想打开下一章吗？", "Do you want to open the next chapter?"),
        ("open project Moonfall", "你是想打开项目“Moonfall”吗？", "Do you want to open project Moonfall?"),
        ("search for storm", "你是想搜索“storm”吗？", 'Do you want to search for "storm"?'),
        (
            "新建文档 黎明",
            "你是想新建文档《黎明》吗？",
            "Do you want to create a new document called 《黎明》?",
        ),
        (
            "new chapter called Dawn",
            "你是想新建章节《Dawn》吗？",
            'Do you want to create a new chapter called "Dawn"?',
        ),
        ("新建第六章", "你是想新建第六章吗？", "Do you want to create a new chapter 6?"),
    ],
)
def test_clarification_in_either_language(message: str, zh: str, en: str) -> None:
    """Clarifications ask in the language given, and in the target's own by default; they end with ?."""
    target = _open(message)
    assert clarification(target, "zh") == zh
    assert clarification(target, "en") == en
    assert clarification(target) == (zh if target.language == "zh" else en)


def test_not_supported_lists_what_the_chat_can_do() -> None:
    """The unsupported reply names the four supported intents, in either language."""
    assert not_supported("en") == (
        "That is not supported yet. I can: open a project, open a document or "
        "chapter by name or number, search, create a document."
    )
    assert (
        not_supported("zh")
        == "暂时还不支持这个操作。我可以：打开项目、按名称或编号打开文档或章节、搜索、新建文档。"
    )
    assert SUPPORTED_INTENTS == ("open_project", "open_document", "search", "create_document")


@pytest.mark.parametrize(
    ("message", "intent"),
    [
        ("open project Moonfall", "open_project"),
        ("第五章", "open_document"),
        ("next one", "open_document"),
        ("search storm", "search"),
        ("new chapter", "create_document"),
    ],
)
def test_intent_of_a_target(message: str, intent: str) -> None:
    """Each target maps to the intent that carries it out, one of the supported ones."""
    assert intent_of(_open(message)) == intent
    assert intent in SUPPORTED_INTENTS
    assert intent_of(Target("create", "project", name="X")) == "unsupported"


# --- the implied target --------------------------------------------------------------------------


def test_implied_target_prefers_the_newest_message() -> None:
    """The newest message implying a target wins over older ones and over the summary."""
    messages = ["open chapter 4", "hmm", "open chapter 6", "what?"]
    target = implied_target(messages, "User asked for chapter 9.")
    assert target == Target("open", "chapter", number=6, language="en")


def test_implied_target_falls_back_to_the_summarys_newest_fact() -> None:
    """Without a target in the messages, the summary's last fact implying one is used."""
    summary = (
        "User is trying to open a chapter by number. User asked for chapter 4. User asked for chapter 5."
    )
    assert implied_target(["hmm", "what?"], summary) == Target("open", "chapter", number=5, language="en")
    assert implied_target([], "用户在按编号打开章节。用户要打开第五章。") == Target(
        "open", "chapter", number=5, language="zh"
    )


def test_implied_target_speaks_the_messages_language() -> None:
    """The target speaks the language most messages are in, whatever language its source used."""
    target = implied_target(["你好", "谢谢", "嗯"], "User asked for chapter 5.")
    assert target == Target("open", "chapter", number=5, language="zh")
    assert clarification(target) == "你是想打开第五章吗？"
    english = implied_target(["hello", "what?"], "User asked for 《灯塔》.")
    assert english == Target("open", "document", name="灯塔", language="en")
    assert clarification(english) == "Do you want to open 《灯塔》?"


def test_nothing_implied_is_none() -> None:
    """No target in messages or summary: None (the caller replies not_supported)."""
    assert implied_target(["hello", "谢谢"], None) is None
    assert implied_target([], "User has sent 2 messages with no navigation request yet.") is None
    assert implied_target([], None) is None


# --- invariants ----------------------------------------------------------------------------------

_TITLES = st.sampled_from(
    [
        "第五章 灯塔",
        "Chapter 5",
        "Lighthouse",
        "灯塔守望者",
        "Storm",
        None,
        "",
        "# 5. Dawn",
        "第十五章",
        "ch50",
        "Chapter Fifteen",
    ]
)
_DOCS = st.lists(
    st.builds(D, st.text(alphabet="ch0159第五章灯塔/-.md", min_size=1, max_size=10), _TITLES),
    max_size=15,
    unique_by=lambda d: d.document_id,
)
_TARGETS = st.sampled_from(
    [
        _open(m)
        for m in (
            "chapter 5",
            "第五章",
            "打开灯塔",
            "open lighthouse",
            "next chapter",
            "上一章",
            "open storm",
            "chapter 15",
            "第十二章",
        )
    ]
)


@settings(max_examples=200, deadline=None)
@given(_TARGETS, _DOCS, st.one_of(st.none(), st.text(alphabet="ch0159第五章/.md", max_size=6)))
def test_resolutions_are_well_formed(
    target: Target, documents: Sequence[DocumentCandidate], current: str | None
) -> None:
    """Any resolution is well formed and independent of the order the documents come in.

    Status agrees with the count; at most ten matches, best first, distinct known ids, scores in 0..1.
    """
    resolution = resolve_document(target, documents, current)
    count = len(resolution.matches)
    assert resolution.status == ("none" if count == 0 else "match" if count == 1 else "ambiguous")
    assert count <= MAX_MATCHES
    known = {d.document_id for d in documents}
    assert all(m.document_id in known and 0 < m.score <= 1 for m in resolution.matches)
    scores = [m.score for m in resolution.matches]
    assert scores == sorted(scores, reverse=True)
    assert len({m.document_id for m in resolution.matches}) == count
    assert resolve_document(target, list(reversed(documents)), current) == resolution
