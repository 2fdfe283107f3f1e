"""Citations in reading-companion answers: parsing, claims, validation against the window, restate."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.reading.citations import (
    MAX_PAGE,
    Citation,
    answer_language,
    format_pages,
    parse_citations,
    split_claims,
    validate,
)


def pages_of(text: str) -> list[tuple[int, int]]:
    return [citation.pages for citation in parse_citations(text)]


# --- parse_citations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(p12)", [(12, 12)]),
        ("(pp12–13)", [(12, 13)]),
        ("(pp. 12-13)", [(12, 13)]),
        ("(p. 12)", [(12, 12)]),
        ("(pp 12–13)", [(12, 13)]),
        ("(pp12—13)", [(12, 13)]),
        ("(pp12~13)", [(12, 13)]),
        ("(pp12至13)", [(12, 13)]),
        ("(P12)", [(12, 12)]),
        ("(page 4)", [(4, 4)]),
        ("(pages 4–5)", [(4, 5)]),
        ("（p12）", [(12, 12)]),
        ("（ｐｐ１２–１３）", [(12, 13)]),
        ("（第12页）", [(12, 12)]),
        ("（第１２页）", [(12, 12)]),
        ("（第12–13页）", [(12, 13)]),
        ("（第12-13页）", [(12, 13)]),
        ("（第12至13页）", [(12, 13)]),
        ("（第12页至第13页）", [(12, 13)]),
        ("(第12页)", [(12, 12)]),
    ],
)
def test_each_supported_style_reads_its_pages(text: str, expected: list[tuple[int, int]]) -> None:
    """Every documented style (Latin, Chinese, full-width, each dash) reads as its first and last page."""
    assert pages_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(p3, p7)", [(3, 3), (7, 7)]),
        ("(pp. 3-4; p9)", [(3, 4), (9, 9)]),
        ("（第3页、第7页）", [(3, 3), (7, 7)]),
        ("（第3、7页）", [(3, 3), (7, 7)]),
        ("(pp. 12, 14–15)", [(12, 12), (14, 15)]),
        ("(p3 and p7)", [(3, 3), (7, 7)]),
        ("（第3页和第7页）", [(3, 3), (7, 7)]),
    ],
)
def test_a_group_holds_several_citations(text: str, expected: list[tuple[int, int]]) -> None:
    """Commas, semicolons, 、 and "and"/和 separate citations in one group; bare numbers continue a list."""
    assert pages_of(text) == expected


def test_offsets_and_raw_index_the_original_text() -> None:
    """Each citation's raw is the item as written, at its offsets in the original (full-width) text."""
    text = "Han left（ｐ１２）, then returned (pp. 3-4; p9)."
    citations = parse_citations(text)
    assert [c.raw for c in citations] == ["ｐ１２", "pp. 3-4", "p9"]
    assert all(text[c.start_char:c.end_char] == c.raw for c in citations)


@pytest.mark.parametrize(
    ("text", "problem", "pages"),
    [
        ("(pp13–12)", "reversed range", (13, 12)),
        ("（第13–12页）", "reversed range", (13, 12)),
        ("(p0)", "page 0", (0, 0)),
        ("(pp0-3)", "page 0", (0, 3)),
        (f"(p{MAX_PAGE + 1})", "page too large", (MAX_PAGE + 1, MAX_PAGE + 1)),
        ("(p" + "9" * 5000 + ")", "page too large", (10**9, 10**9)),
    ],
)
def test_malformed_citations_are_kept_and_marked(text: str, problem: str, pages: tuple[int, int]) -> None:
    """A reversed range stays as written (never swapped), and it, page 0 and absurd pages are malformed."""
    [citation] = parse_citations(text)
    assert (citation.pages, citation.problem, citation.malformed) == (pages, problem, True)


@pytest.mark.parametrize(
    "text",
    [
        "(pp are fine)",
        "(help12)",
        "(step 3)",
        "(app 12)",
        "(p12a)",
        "（第3章）",
        "(he was 12)",
        "see p12 and pp. 13-14",
        "(p12",
        "(第十二页)",
    ],
)
def test_things_that_are_not_citations(text: str) -> None:
    """No label inside a word, no chapter (第3章), no bare number, nothing outside parentheses or unclosed."""
    assert parse_citations(text) == []


def test_a_paragraph_id_cites_its_page() -> None:
    """p12.3 (a paragraph label the prompt shows) cites page 12."""
    assert pages_of("(p12.3)") == [(12, 12)]


def test_other_words_in_a_group_do_not_hide_a_citation() -> None:
    """A group with prose around the citation still yields it, so an outside page cannot hide."""
    assert pages_of("(see p13)") == [(13, 13)]
    assert pages_of("（第3章第12页）") == [(12, 12)]


# --- split_claims --------------------------------------------------------------------------------


def claim_texts(text: str) -> list[str]:
    return [claim.text for claim in split_claims(text)]


def test_english_and_chinese_sentences() -> None:
    """. ! ? end a sentence before a space; 。！？ end one anywhere."""
    assert claim_texts("Han left (p3). Did he? Yes! 他走了。她来了！真的？") == [
        "Han left (p3).", "Did he?", "Yes!", "他走了。", "她来了！", "真的？"]


def test_a_citation_after_the_end_mark_stays_with_its_sentence() -> None:
    """"He left. (p12)" and "他走了。（第12页）" keep the citation with the sentence it closes."""
    assert claim_texts("He left. (p12) She came (p13).") == ["He left. (p12)", "She came (p13)."]
    assert claim_texts("他走了（第12页）。她来了。（第13页）她笑了。") == [
        "他走了（第12页）。", "她来了。（第13页）", "她笑了。"]


def test_a_line_of_citations_closes_the_sentence_above() -> None:
    """A line holding only citations belongs to the sentence before it."""
    assert claim_texts("Han left.\n(p12)") == ["Han left.\n(p12)"]


def test_abbreviations_decimals_and_initials_do_not_split() -> None:
    """e.g., Mr., pp., initials, decimals and a full stop before a lowercase word do not end a sentence."""
    text = "Mr. Han met J. K. Su, e.g. at the pier, 3.5 km away, approx. five times (pp. 3-4). He left."
    assert claim_texts(text) == [
        "Mr. Han met J. K. Su, e.g. at the pier, 3.5 km away, approx. five times (pp. 3-4).", "He left."]


def test_quotations_end_where_they_close() -> None:
    """A mark inside “…” does not split; the closing quote ends the sentence when a space follows."""
    assert claim_texts("He said, “Go home. Now.” She left.") == ["He said, “Go home. Now.”", "She left."]
    quoted = "“我不信你。你别跟来。”苏晚说（第7页）。"
    assert claim_texts(quoted) == [quoted]


def test_headings_markers_and_blank_lines_are_not_claims() -> None:
    """Headings, bold-only lines, bare markers, rules and blank lines are skipped; bullets are stripped."""
    text = ("## Answer\n**Who is Han**\n-\n---\n\n   \n"
            "- Han is a fisherman (p3)\n1. He lives alone (p4).\n一、他很穷（第5页）")
    assert claim_texts(text) == ["Han is a fisherman (p3)", "He lives alone (p4).", "他很穷（第5页）"]


def test_each_line_is_its_own_sentence() -> None:
    """A line break ends a sentence, so bullets without full stops are separate claims."""
    assert claim_texts("Han is old (p3)\nSu is young") == ["Han is old (p3)", "Su is young"]


def test_empty_text_has_no_claims() -> None:
    """Empty and whitespace-only answers hold no claims."""
    assert split_claims("") == []
    assert split_claims(" \n\t\n") == []


# --- validate ------------------------------------------------------------------------------------


def test_a_clean_answer_is_ok() -> None:
    """All claims cited inside the window: ok, no restate, and each claim's pages expanded."""
    result = validate("Han is a fisherman (pp3–5). Su Wan distrusts him (p7, p9).", 1, 12)
    assert result.ok
    assert result.restate is None
    assert [(c.text, c.pages) for c in result.claims] == [
        ("Han is a fisherman (pp3–5).", [3, 4, 5]), ("Su Wan distrusts him (p7, p9).", [7, 9])]
    assert (result.outside, result.uncited, result.malformed) == ([], [], [])


@pytest.mark.parametrize(
    "answer",
    ["Han dies (p13).", "韩死了（第13页）。", "Han dies (pp11–13).", "Han (p0) dies (p5).",
     "Han dies (see p13)."],
)
def test_an_out_of_window_citation_is_caught_in_both_styles(answer: str) -> None:
    """A citation reaching past end (or below start) is outside, in Latin and Chinese styles alike."""
    result = validate(answer, 1, 12)
    assert len(result.outside) == 1
    assert not result.ok


def test_a_window_not_starting_at_one() -> None:
    """Pages before start are outside too."""
    result = validate("Han arrived (p4). He stayed (p5).", 5, 9)
    assert [c.pages for c in result.outside] == [(4, 4)]


def test_uncited_claims_are_listed() -> None:
    """A sentence with no citation is uncited, and so is one whose only citation is malformed."""
    result = validate("Han is old (p3). Su is young. Han lied (pp9–8).", 1, 12)
    assert result.uncited == ["Su is young.", "Han lied (pp9–8)."]
    assert result.malformed == ["pp9–8"]
    assert result.claims[2].pages == []


@pytest.mark.parametrize(
    "sentence",
    [
        "That is beyond page 12.",
        "This lies outside the current reading window.",
        "I don't have enough evidence within pages 1–12.",
        "There is not enough information to say.",
        "I can't answer that yet.",
        "Who do you mean?",
        "Here is what we know:",
        "这超出了当前阅读范围。",
        "你还没有读到这里。",
        "目前证据不足。",
        "没有足够的信息。",
        "你是指哪个人？",
    ],
)
def test_window_statements_questions_and_lead_ins_are_not_uncited(sentence: str) -> None:
    """Saying the answer lies beyond the window (or lacks evidence), asking, or leading in is no claim."""
    result = validate(f"Han is old (p3). {sentence}", 1, 12)
    assert result.ok, result
    assert result.non_claims == [sentence]


def test_a_window_statement_with_a_citation_is_a_claim() -> None:
    """A sentence citing a page is checked, whatever it says."""
    result = validate("That is beyond page 12 (p13).", 1, 12)
    assert [c.pages for c in result.outside] == [(13, 13)]
    assert result.non_claims == []


def test_an_english_restate_names_the_range_and_the_problems() -> None:
    """The restate keeps to pages start–end, names outside pages, uncited and malformed, quotes the answer."""
    answer = "Han is old (p3). Han dies (pp13–14). Su is young. Su lies (p0)."
    restate = validate(answer, 1, 12).restate
    assert restate is not None
    assert "pages 1–12" in restate
    assert "beyond page 12" in restate
    assert "Citations outside pages 1–12: pp13–14, p0." in restate
    assert "· Su is young." in restate
    assert "malformed: p0." in restate
    assert restate.endswith(f'"""{answer}"""')


def test_a_chinese_answer_gets_a_chinese_restate() -> None:
    """Mostly-CJK answers are asked to restate in Chinese, with Chinese page labels."""
    answer = "苏晚不信韩（p7）。韩后来死了（第13页）。"
    restate = validate(answer, 1, 12).restate
    assert restate is not None
    assert "第1–12页" in restate
    assert "第1–12页以外的引用：第13页。" in restate
    assert "第12页之后" in restate
    assert restate.endswith(f'"""{answer}"""')


def test_a_one_page_window_is_named_as_one_page() -> None:
    """A window of one page reads "page 5" / "第5页", and its example cites only that page."""
    restate = validate("Han dies (p6).", 5, 5).restate
    assert restate is not None
    assert "page 5 only" in restate
    assert "(p5)" in restate
    assert "pp5" not in restate


def test_the_language_is_the_cjk_share_without_citations() -> None:
    """CJK characters outnumbering Latin letters (citations not counted) make an answer Chinese."""
    assert answer_language("苏晚不信Han。") == "zh"
    assert answer_language("Su Wan distrusts 韩.") == "en"
    text = "他走（pp12–13）"
    assert answer_language(text, parse_citations(text)) == "zh"


def test_format_pages() -> None:
    """Pages print the way the prompt cites them."""
    assert [format_pages(p, "en") for p in [(3, 3), (3, 4)]] == ["p3", "pp3–4"]
    assert [format_pages(p, "zh") for p in [(3, 3), (3, 4)]] == ["第3页", "第3–4页"]


@pytest.mark.parametrize(("start", "end"), [(0, 3), (5, 4)])
def test_an_invalid_window_is_refused(start: int, end: int) -> None:
    """A window must start at page 1 or later and not end before it starts."""
    with pytest.raises(ValueError, match="invalid reading window"):
        validate("Han (p3).", start, end)


def test_an_empty_answer_has_nothing_wrong() -> None:
    """No claims, no citations: ok (deciding whether an empty answer is acceptable is the caller's call)."""
    result = validate("", 1, 12)
    assert (result.ok, result.claims, result.restate) == (True, [], None)


# --- properties ----------------------------------------------------------------------------------

_DASH = st.sampled_from(["-", "–", "—", "~", "至", "－", "～"])
_FULL_DIGITS = str.maketrans("0123456789", "０１２３４５６７８９")
Render = Callable[[int, int, str], str]
_STYLES: list[Render] = [
    lambda a, b, d: f"(p{a})" if a == b else f"(pp{a}{d}{b})",
    lambda a, b, d: f"(p. {a})" if a == b else f"(pp. {a}{d}{b})",
    lambda a, b, d: f"(pp {a} {d} {b})",
    lambda a, b, d: f"(p{a}{d}{b})",
    lambda a, b, d: f"（p{a}）" if a == b else f"（pp{a}{d}{b}）",
    lambda a, b, d: f"（第{a}页）" if a == b else f"（第{a}{d}{b}页）",
    lambda a, b, d: f"(第{a}页)" if a == b else f"(第{a}页{d}第{b}页)",
    lambda a, b, d: f"(Pages {a}{d}{b})",
]
_PAGES = st.integers(min_value=1, max_value=MAX_PAGE).flatmap(
    lambda a: st.tuples(st.just(a), st.integers(min_value=a, max_value=min(MAX_PAGE, a + 50))))
_DIGITS = "0123456789０１２３４５６７８９"
_PROSE = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="()（）" + _DIGITS), max_size=30)


@st.composite
def rendered(draw: st.DrawFn) -> tuple[str, tuple[int, int]]:
    pages = draw(_PAGES)
    style = draw(st.sampled_from(_STYLES))
    text = style(*pages, draw(_DASH))
    if draw(st.booleans()):
        text = text.translate(_FULL_DIGITS)
    return text, pages


@settings(max_examples=500, deadline=None)
@given(rendered(), _PROSE, _PROSE)
def test_any_rendered_citation_parses_back(citation: tuple[str, tuple[int, int]], before: str,
                                           after: str) -> None:
    """A citation in any supported style, digits full-width or not, amid any prose, reads back its pages."""
    text, pages = citation
    assert pages_of(before + text + after) == [pages]


@st.composite
def answers(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]], int, int]:
    start = draw(st.integers(min_value=1, max_value=200))
    end = draw(st.integers(min_value=start, max_value=start + 200))
    cited = draw(st.lists(st.integers(min_value=1, max_value=450).flatmap(
        lambda a: st.tuples(st.just(a), st.integers(min_value=a, max_value=a + 5))), min_size=1, max_size=6))
    sentences = []
    for first, last in cited:
        style = draw(st.sampled_from(_STYLES))
        ending = draw(st.sampled_from([". ", "。", "\n", "! "]))
        sentences.append(f"{draw(st.sampled_from(['Han left', '他走了', 'Su Wan said so']))}"
                         f"{style(first, last, draw(_DASH))}{ending}")
    return "".join(sentences), cited, start, end


@settings(max_examples=300, deadline=None)
@given(answers())
def test_pages_outside_the_window_always_appear_in_outside(
    answer: tuple[str, list[tuple[int, int]], int, int],
) -> None:
    """Exactly the citations reaching below start or above end are outside, and then the answer is not ok."""
    text, cited, start, end = answer
    result = validate(text, start, end)
    expected = [pages for pages in cited if pages[0] < start or pages[1] > end]
    assert [c.pages for c in result.outside] == expected
    assert result.ok == (not expected)
    assert (result.restate is None) == result.ok
    assert [p for claim in result.claims for p in claim.pages] == [
        p for first, last in cited for p in range(first, last + 1)]


def pieces(*fixed: str, characters: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Text joined from single characters and the given tricky pieces."""
    return st.lists(st.one_of(characters, st.sampled_from(fixed)), max_size=40).map("".join)


_NO_DIGITS = pieces(
    "(", ")", "（", "）", "p", "pp", "pp.", "Pages ", "第", "页", "–", "-", "、", ",", ";", " ",
    characters=st.characters(codec="utf-8", exclude_characters=_DIGITS),
)


@settings(max_examples=500, deadline=None)
@given(_NO_DIGITS)
def test_text_without_digits_never_yields_citations(text: str) -> None:
    """Labels, brackets and dashes without a digit are never a citation."""
    assert parse_citations(text) == []


@settings(max_examples=500, deadline=None)
@given(pieces(". ", "。", "? ", "\n", "(p3)", "（第4页）", "e.g. ", "“", "”", "- ", "# ", "1. ", "Han",
              characters=st.characters(codec="utf-8")))
def test_claims_are_ordered_disjoint_slices(text: str) -> None:
    """Claims come in order, never overlap, are stripped slices of the text and never empty."""
    previous_end = 0
    for claim in split_claims(text):
        assert previous_end <= claim.start < claim.end <= len(text)
        assert text[claim.start:claim.end] == claim.text == claim.text.strip()
        previous_end = claim.end


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=1, max_value=50), st.integers(min_value=0, max_value=50))
def test_validation_is_consistent(text: str, start: int, width: int) -> None:
    """ok iff nothing is outside, uncited or malformed, and restate is present iff not ok."""
    result = validate(text, start, start + width)
    assert result.ok == (not (result.outside or result.uncited or result.malformed))
    assert (result.restate is None) == result.ok
    assert all(isinstance(c, Citation) for claim in result.claims for c in claim.citations)
