"""The seed's summary schema, strictly: refusals with their codes and JSON pointers, the canonical
rendering, token limits and spoilers."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.reading.summary import (
    EVENT_WHAT_TOKENS,
    LIMITS,
    Level,
    SummaryJson,
    SummaryProblem,
    check,
    citations,
    parse,
    pointer,
    render,
)
from tests.services.reading.support import count

PROPERTY = settings(max_examples=200, deadline=None)


def _page_12() -> dict[str, Any]:
    # 115 tokens rendered: within the page limit (120), over the paragraph one (85).
    return {
        "entities": [{"name": "han", "type": "character", "mentions": 2, "page_spans": [12]},
                     {"name": "灯塔", "type": "location", "mentions": 1, "page_spans": [12]}],
        "events": [{"who": ["han"], "what": "climbs the lighthouse", "where": "灯塔", "when": None,
                    "page": 12}],
        "relationships": [{"a": "han", "b": "su wan", "relation": "distrusted by", "evidence_pages": [12]}],
        "facts": ["苏晚不信他。"],
        "open_questions": [],
    }


_EMPTY: dict[str, Any] = {"entities": [], "events": [], "relationships": [], "facts": [],
                          "open_questions": []}


def _problem(raw: Any, level: Level = "page", pages: tuple[int, int] = (12, 12)) -> SummaryProblem:
    with pytest.raises(SummaryProblem) as caught:
        check(raw, level, pages, count)
    return caught.value


def test_a_valid_summary_is_accepted_from_text_bytes_or_object() -> None:
    """A summary fitting the schema, its unit and its limit comes back as the model, whatever form it
    arrived in."""
    raw = _page_12()
    summary = check(raw, "page", (12, 12), count)
    assert summary.model_dump(mode="json") == raw
    assert check(json.dumps(raw), "page", (12, 12), count) == summary
    assert check(json.dumps(raw, ensure_ascii=False).encode(), "page", (12, 12), count) == summary


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda s: s.pop("facts"), "/facts"),
        (lambda s: s.update(summary="x"), "/summary"),
        (lambda s: s["entities"][1].update(name="Han"), "/entities/1/name"),
        (lambda s: s["entities"][0].update(name=" "), "/entities/0/name"),
        (lambda s: s["entities"][0].update(type="person"), "/entities/0/type"),
        (lambda s: s["entities"][0].update(mentions=-1), "/entities/0/mentions"),
        (lambda s: s["entities"][0].update(mentions="2"), "/entities/0/mentions"),
        (lambda s: s["entities"][0].update(mentions=True), "/entities/0/mentions"),
        (lambda s: s["entities"][0].update(page_spans=[]), "/entities/0/page_spans"),
        (lambda s: s["entities"][0].update(page_spans=[12, 0]), "/entities/0/page_spans/1"),
        (lambda s: s["entities"][0].update(page_spans=[12.0]), "/entities/0/page_spans/0"),
        (lambda s: s["entities"][0].pop("mentions"), "/entities/0/mentions"),
        (lambda s: s["events"][0].update(who="han"), "/events/0/who"),
        (lambda s: s["events"][0].update(what=""), "/events/0/what"),
        (lambda s: s["events"][0].pop("when"), "/events/0/when"),
        (lambda s: s["events"][0].update(when=3), "/events/0/when"),
        (lambda s: s["events"][0].update(page="12"), "/events/0/page"),
        (lambda s: s["events"][0].update(extra=None), "/events/0/extra"),
        (lambda s: s["relationships"][0].update(b="Su Wan"), "/relationships/0/b"),
        (lambda s: s["relationships"][0].update(evidence_pages=None), "/relationships/0/evidence_pages"),
        (lambda s: s["facts"].append(7), "/facts/1"),
        (lambda s: s.update(open_questions=[""]), "/open_questions/0"),
        (lambda s: s.update({"a/b~": 1}), "/a~1b~0"),
    ],
)
def test_schema_errors_name_the_first_offending_value(change: Any, path: str) -> None:
    """Missing and extra fields, uppercase names, blank strings, unknown types, negative or coerced
    numbers and empty citations are READING_SUMMARY_INVALID at the JSON pointer of the value."""
    raw = _page_12()
    change(raw)
    problem = _problem(raw)
    assert (problem.code, problem.path) == ("READING_SUMMARY_INVALID", path)
    assert problem.data["reason"]
    assert _problem(json.dumps(raw)).path == path


@pytest.mark.parametrize("raw", ["{", "[]", "null", '"summary"', b"\xff", "{} x"])
def test_what_is_not_a_summary_object_is_invalid_at_the_top(raw: str | bytes) -> None:
    """Text that is not JSON, or JSON that is not an object, is refused at path ""."""
    problem = _problem(raw)
    assert (problem.code, problem.path) == ("READING_SUMMARY_INVALID", "")


def test_null_where_and_when_are_allowed() -> None:
    """where and when may be null (the seed's "optional"), but must be present."""
    raw = _page_12()
    raw["events"][0]["where"] = None
    assert check(raw, "page", (12, 12), count).events[0].where is None


@pytest.mark.parametrize(
    ("change", "path", "page"),
    [
        (lambda s: s["entities"][1].update(page_spans=[12, 13]), "/entities/1/page_spans/1", 13),
        (lambda s: s["events"][0].update(page=13), "/events/0/page", 13),
        (lambda s: s["relationships"][0].update(evidence_pages=[11]), "/relationships/0/evidence_pages/0",
         11),
    ],
)
def test_a_page_12_summary_citing_another_page_is_a_spoiler(change: Any, path: str, page: int) -> None:
    """A page-12 summary citing page 13 (or 11) is READING_SPOILER at the cited value, with the page
    and the allowed range."""
    raw = _page_12()
    change(raw)
    problem = _problem(raw)
    assert (problem.code, problem.path) == ("READING_SPOILER", path)
    assert problem.data == {"page": page, "allowed": [12, 12]}
    assert "13" in problem.message or "11" in problem.message


def test_a_chapter_may_cite_any_of_its_pages() -> None:
    """A chapter summary of pages 10-19 may cite 10..19 and not 20."""
    raw = _page_12()
    raw["events"][0]["page"] = 19
    raw["entities"][0]["page_spans"] = [10, 12]
    assert check(raw, "chapter", (10, 19), count).events[0].page == 19
    raw["events"][0]["page"] = 20
    assert _problem(raw, "chapter", (10, 19)).path == "/events/0/page"


def test_an_event_what_over_25_tokens_is_too_long() -> None:
    """An event's what of 26 tokens is READING_SUMMARY_TOO_LONG at that what, with its count; 25 pass."""
    raw = _page_12()
    what = "han" + " lamp" * 24
    assert count(what) == EVENT_WHAT_TOKENS
    raw["events"].append({**raw["events"][0], "what": what})
    assert check(raw, "chapter", (1, 20), count).events[1].what == what
    raw["events"][1]["what"] = what + " lamp"
    problem = _problem(raw, "chapter", (1, 20))
    assert (problem.code, problem.path) == ("READING_SUMMARY_TOO_LONG", "/events/1/what")
    assert problem.data == {"tokens": 26, "limit": 25}


@pytest.mark.parametrize("level", ["paragraph", "page", "chapter"])
def test_a_summary_over_its_level_limit_is_too_long(level: Level) -> None:
    """The exact count of the canonical rendering is the size: one token over the level's limit is
    refused at "", at the limit accepted."""
    raw = copy.deepcopy(_EMPTY)
    base = count(render(parse(raw)))
    while count(render(parse(raw))) <= LIMITS[level]:
        raw["facts"].append("苏晚不信他")
    size = count(render(parse(raw)))
    assert size > LIMITS[level] > base
    problem = _problem(raw, level)
    assert (problem.code, problem.path) == ("READING_SUMMARY_TOO_LONG", "")
    assert problem.data == {"tokens": size, "limit": LIMITS[level]}
    assert check(raw, level, (12, 12), lambda text: LIMITS[level] if text.startswith("{") else 1)


def test_limits_and_refusal_order() -> None:
    """The limits are the seed's; a spoiler is reported before a size problem."""
    assert dict(LIMITS) == {"paragraph": 85, "page": 120, "chapter": 300}
    assert EVENT_WHAT_TOKENS == 25
    raw = _page_12()
    raw["events"][0]["page"] = 13
    raw["facts"] = ["苏晚不信他"] * 200
    assert _problem(raw).code == "READING_SPOILER"


def test_render_is_compact_ordered_and_keeps_non_ascii() -> None:
    """The canonical rendering: no spaces, keys in the schema's order, Chinese as itself."""
    summary = parse({"open_questions": [], "facts": ["苏晚不信他。"], "relationships": [],
                     "events": [{"page": 3, "when": None, "where": None, "what": "han leaves",
                                 "who": ["han"]}],
                     "entities": []})
    assert render(summary) == ('{"entities":[],"events":[{"who":["han"],"what":"han leaves","where":null,'
                               '"when":null,"page":3}],"relationships":[],"facts":["苏晚不信他。"],'
                               '"open_questions":[]}')


def test_problem_fields_and_programming_errors() -> None:
    """SummaryProblem carries code, path, message and data; a bad level or range is a ValueError."""
    problem = SummaryProblem("READING_SPOILER", "/events/0/page", "outside", page=13, allowed=[12, 12])
    assert (problem.code, problem.path, problem.message, str(problem)) == (
        "READING_SPOILER", "/events/0/page", "outside", "outside")
    assert problem.data == {"page": 13, "allowed": [12, 12]}
    with pytest.raises(ValueError, match="level"):
        check(_page_12(), "book", (12, 12), count)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="page range"):
        check(_page_12(), "page", (12, 11), count)
    assert pointer(()) == ""
    assert pointer(("events", 0, "page")) == "/events/0/page"


# --- properties ----------------------------------------------------------------------------------

_text = st.text(min_size=1, max_size=12).filter(str.strip)
_name = _text.map(str.lower).filter(lambda s: s == s.lower() and s.strip() != "")
_pages = st.lists(st.integers(1, 40), min_size=1, max_size=3)
_summaries = st.builds(
    SummaryJson,
    entities=st.lists(st.fixed_dictionaries({
        "name": _name, "type": st.sampled_from(["character", "location", "object", "group", "concept"]),
        "mentions": st.integers(0, 9), "page_spans": _pages}), max_size=3),
    events=st.lists(st.fixed_dictionaries({
        "who": st.lists(_text, max_size=2), "what": _text, "where": st.none() | _text,
        "when": st.none() | _text, "page": st.integers(1, 40)}), max_size=3),
    relationships=st.lists(st.fixed_dictionaries({
        "a": _name, "b": _name, "relation": _text, "evidence_pages": _pages}), max_size=2),
    facts=st.lists(_text, max_size=3),
    open_questions=st.lists(_text, max_size=2),
)


@PROPERTY
@given(_summaries)
def test_any_valid_summary_renders_and_parses_back_to_itself(summary: SummaryJson) -> None:
    """render then parse is the identity, for text and for the decoded object; rendering is stable."""
    text = render(summary)
    assert parse(text) == summary
    assert parse(json.loads(text)) == summary
    assert render(parse(text)) == text


@PROPERTY
@given(_summaries, st.integers(1, 40), st.integers(0, 5))
def test_a_summary_is_a_spoiler_exactly_when_it_cites_outside_its_unit(summary: SummaryJson, start: int,
                                                                       width: int) -> None:
    """With sizes out of the way, check refuses a summary iff a cited page is outside the unit, at the
    first such citation; otherwise it returns the summary unchanged."""
    end = start + width
    outside = [(path, page) for path, page in citations(summary) if not start <= page <= end]
    if not outside:
        assert check(render(summary), "paragraph", (start, end), lambda _: 0) == summary
        return
    problem = _problem(copy.deepcopy(summary.model_dump(mode="json")), "paragraph", (start, end))
    assert (problem.code, problem.path, problem.data["page"]) == ("READING_SPOILER", *outside[0])
