"""Rendering layers into prompt text: fixed section order, numbered constraints, exact bytes."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.engine import assemble
from services.context.models import Item, Window
from services.context.plan import localize
from services.context.render import SEPARATOR, join_sections, render_section
from tests.services.context.factory import counter, item, novel, novel_request, window


def render_sections(section_id: str, items: Iterable[Item], language: str) -> str:
    """One section of the novel plan rendered from its items alone."""
    return render_section(novel().section(section_id), items, {}, language)


def render_window(win: Window | None, instruction: str | None, language: str) -> str:
    """The novel plan's Immediate section as an assembly within budget renders it."""
    request = novel_request(window_=win, instruction=instruction, language=language)
    return assemble(request, counter()).layers["immediate"].text


def test_constraints_are_numbered_and_sections_follow_the_fixed_order() -> None:
    """Rules renders constraints, narrative, entities in that order whatever the input order."""
    items = [
        item("e1", "entities", "林远（角色）：灯塔看守人"),
        item("n1", "narrative", "叙述人称：第一人称"),
        item("c1", "constraints", "严格第一人称叙述"),
        item("c2", "constraints", "林远不会游泳"),
    ]
    text = render_sections("rules", items, "zh")
    assert text == (
        "[创作约束 - 不可违反]\n1. 严格第一人称叙述\n2. 林远不会游泳"
        "\n\n[叙述设定]\n叙述人称：第一人称"
        "\n\n[角色与世界设定]\n- 林远（角色）：灯塔看守人"
    )


def test_bullets_for_preferences_and_blank_lines_between_passages() -> None:
    """Preferences are a bulleted list; passages and history are separated by blank lines."""
    settings_text = render_sections(
        "settings", [item("s1", "preferences", "短句"), item("s2", "style", "冷峻"),
                     item("s3", "preferences", "少用副词")], "en")
    assert settings_text == "[Writing preferences]\n- 短句\n- 少用副词\n\n[Style notes]\n冷峻"
    retrieved = render_sections(
        "retrieved", [item("h1", "history", "H"), item("p1", "passages", "A"),
                      item("p2", "passages", "B")], "en")
    assert retrieved == "[Relevant earlier passages]\nA\n\nB\n\n[Past interactions]\nH"


def test_unknown_language_uses_english_headers_and_empty_layer_is_empty() -> None:
    """A language without headers falls back to English; a layer with no items renders as ''."""
    assert render_sections("settings", [item("s1", "style", "x")], "fr") == "[Style notes]\nx"
    assert render_sections("rules", [], "zh") == ""


def test_every_language_has_a_header_for_every_section() -> None:
    """Every part of the novel plan has a zh and an en header (other languages read the en one), and
    its window part a cursor mark in both."""
    parts = [p for s in novel().sections for p in s.parts]
    assert [p.id for p in parts] == ["constraints", "narrative", "entities", "preferences", "style",
                                     "passages", "history", "window", "instruction"]
    for part in parts:
        assert part.header is not None
        assert set(part.header) == {"zh", "en"}
        assert localize(part.header, "fr") == part.header["en"]
    cursor = novel().section("immediate").window_part
    assert cursor is not None
    assert cursor.cursor is not None
    assert dict(cursor.cursor) == {"zh": "【光标】", "en": "[[cursor]]"}


def test_window_marks_the_cursor_only_when_text_follows_it() -> None:
    """Text before the cursor alone has no mark; with text after, the mark sits between them."""
    assert render_window(window("前文。"), None, "zh") == "[当前正文]\n前文。"
    assert render_window(window("前文。", "后文。"), None, "zh") == "[当前正文]\n前文。【光标】后文。"
    assert render_window(window("", "after."), None, "en") == "[Current text]\n[[cursor]]after."
    assert render_window(window("a", "b"), None, "de") == "[Current text]\na[[cursor]]b"


def test_window_and_instruction_parts() -> None:
    """The instruction follows the window after a blank line; empty parts are left out."""
    assert render_window(window("Before."), "Go on.", "en") == \
        "[Current text]\nBefore.\n\n[Instruction]\nGo on."
    assert render_window(None, "Go on.", "en") == "[Instruction]\nGo on."
    assert render_window(window(""), "", "en") == ""
    assert render_window(None, None, "zh") == ""


def test_join_sections_skips_empty_layers_and_reports_where_each_ends() -> None:
    """Layers join with one blank line in fixed order; an empty layer ends where the previous one did."""
    texts = {"immediate": "I", "rules": "RR", "retrieved": ""}
    prompt, ends = join_sections(novel(), texts)
    assert prompt == "RR" + SEPARATOR + "I"
    assert ends == {"rules": 2, "settings": 2, "retrieved": 2, "immediate": 5}
    assert join_sections(novel(), {}) == ("", dict.fromkeys(ends, 0))


CONSTRAINT_TEXTS = [f"约束{n}：不可违反的规则{n}" for n in range(12)]


@settings(max_examples=80, deadline=None)
@given(chosen=st.lists(st.sampled_from(range(12)), unique=True),
       extras=st.lists(st.sampled_from(["narrative", "entities"]), max_size=3))
def test_constraints_numbered_without_gaps_for_any_subset(chosen: list[int], extras: list[str]) -> None:
    """Whatever subset of constraints survives, they are numbered 1..n in order, and rendering twice
    gives the same string."""
    items = [item(f"c{n}", "constraints", CONSTRAINT_TEXTS[n]) for n in chosen]
    items += [item(f"x{n}", section, f"其他{n}") for n, section in enumerate(extras)]
    first = render_sections("rules", items, "zh")
    again = render_sections("rules", list(items), "zh")
    assert first == again
    numbered = [line for line in first.splitlines() if line[:1].isdigit()]
    assert numbered == [f"{k}. {CONSTRAINT_TEXTS[n]}" for k, n in enumerate(chosen, start=1)]


def test_a_marker_shapes_numbered_and_bulleted_lists() -> None:
    """A part's marker replaces "{n}. " (with {n} numbered from 1 after cuts) or the "- " bullet."""
    from dataclasses import replace

    from services.context.render import list_body

    part = novel().section("rules").part("constraints")
    assert part is not None
    numbered = replace(part, list_style="numbered", marker="  {n}) ")
    assert list_body(numbered, ["a", "b"]) == "  1) a\n  2) b"
    bulleted = replace(part, list_style="bulleted", marker="* ")
    assert list_body(bulleted, ["a", "b"]) == "* a\n* b"
    assert list_body(replace(part, list_style="numbered"), ["a"]) == "1. a"


def test_a_section_separator_joins_its_parts() -> None:
    """A section's separator stands between its parts instead of a blank line."""
    from dataclasses import replace

    section = replace(novel().section("settings"), separator="\n")
    text = render_section(section, [item("s1", "preferences", "短句"), item("s2", "style", "冷峻")], {}, "en")
    assert text == "[Writing preferences]\n- 短句\n[Style notes]\n冷峻"
