"""Rendering layers into prompt text: fixed section order, numbered constraints, exact bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.models import Layer
from services.context.render import (
    CURSOR_MARK,
    HEADERS,
    LAYER_SEPARATOR,
    SECTIONS,
    join_layers,
    render_sections,
    render_window,
)
from tests.services.context.factory import item, window


def test_constraints_are_numbered_and_sections_follow_the_fixed_order() -> None:
    """Rules renders constraints, narrative, entities in that order whatever the input order."""
    items = [
        item("e1", "entities", "林远（角色）：灯塔看守人"),
        item("n1", "narrative", "叙述人称：第一人称"),
        item("c1", "constraints", "严格第一人称叙述"),
        item("c2", "constraints", "林远不会游泳"),
    ]
    text = render_sections(Layer.RULES, items, "zh")
    assert text == (
        "[创作约束 - 不可违反]\n1. 严格第一人称叙述\n2. 林远不会游泳"
        "\n\n[叙述设定]\n叙述人称：第一人称"
        "\n\n[角色与世界设定]\n- 林远（角色）：灯塔看守人"
    )


def test_bullets_for_preferences_and_blank_lines_between_passages() -> None:
    """Preferences are a bulleted list; passages and history are separated by blank lines."""
    settings_text = render_sections(
        Layer.SETTINGS, [item("s1", "preferences", "短句"), item("s2", "style", "冷峻"),
                         item("s3", "preferences", "少用副词")], "en")
    assert settings_text == "[Writing preferences]\n- 短句\n- 少用副词\n\n[Style notes]\n冷峻"
    retrieved = render_sections(
        Layer.RETRIEVED, [item("h1", "history", "H"), item("p1", "passages", "A"),
                          item("p2", "passages", "B")], "en")
    assert retrieved == "[Relevant earlier passages]\nA\n\nB\n\n[Past interactions]\nH"


def test_unknown_language_uses_english_headers_and_empty_layer_is_empty() -> None:
    """A language without headers falls back to English; a layer with no items renders as ''."""
    assert render_sections(Layer.SETTINGS, [item("s1", "style", "x")], "fr") == "[Style notes]\nx"
    assert render_sections(Layer.RULES, [], "zh") == ""


def test_every_language_has_a_header_for_every_section() -> None:
    """Each header table covers every section of every layer, and the cursor mark exists per language."""
    sections = {s for layer_sections in SECTIONS.values() for s in layer_sections}
    assert {lang: set(table) for lang, table in HEADERS.items()} == dict.fromkeys(HEADERS, sections)
    assert set(CURSOR_MARK) == set(HEADERS)


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


def test_join_layers_skips_empty_layers_and_reports_where_each_ends() -> None:
    """Layers join with one blank line in fixed order; an empty layer ends where the previous one did."""
    texts = {Layer.IMMEDIATE: "I", Layer.RULES: "RR", Layer.RETRIEVED: ""}
    prompt, ends = join_layers(texts)
    assert prompt == "RR" + LAYER_SEPARATOR + "I"
    assert ends == {Layer.RULES: 2, Layer.SETTINGS: 2, Layer.RETRIEVED: 2, Layer.IMMEDIATE: 5}
    assert join_layers({}) == ("", dict.fromkeys(Layer, 0))


CONSTRAINT_TEXTS = [f"约束{n}：不可违反的规则{n}" for n in range(12)]


@settings(max_examples=80, deadline=None)
@given(chosen=st.lists(st.sampled_from(range(12)), unique=True),
       extras=st.lists(st.sampled_from(["narrative", "entities"]), max_size=3))
def test_constraints_numbered_without_gaps_for_any_subset(chosen: list[int], extras: list[str]) -> None:
    """Whatever subset of constraints survives, they are numbered 1..n in order, and rendering twice
    gives the same string."""
    items = [item(f"c{n}", "constraints", CONSTRAINT_TEXTS[n]) for n in chosen]
    items += [item(f"x{n}", section, f"其他{n}") for n, section in enumerate(extras)]
    first = render_sections(Layer.RULES, items, "zh")
    again = render_sections(Layer.RULES, list(items), "zh")
    assert first == again
    numbered = [line for line in first.splitlines() if line[:1].isdigit()]
    assert numbered == [f"{k}. {CONSTRAINT_TEXTS[n]}" for k, n in enumerate(chosen, start=1)]
