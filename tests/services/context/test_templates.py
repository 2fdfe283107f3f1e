"""Text parts: a profile's own lines with ``${var}`` expanded once, request values, the instruction."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.plan import Line, PartPlan
from services.context.templates import expand, literal_body, resolve_texts
from tests.services.context.builders import part, plan, run, section

NOTHING: frozenset[str] = frozenset()


def _literal(*lines: Line | str, list_style: str = "plain") -> PartPlan:
    content = tuple(Line(line) if isinstance(line, str) else line for line in lines)
    return part("lines", "text", content=content, list_style=list_style)


def test_expand_replaces_each_placeholder_once() -> None:
    """Each ``${name}`` becomes its value; a name without a value becomes ''; text around stays."""
    values = {"project.name": "Lighthouse", "who": "Mira"}
    assert expand("${who} keeps ${project.name}.", values) == "Mira keeps Lighthouse."
    assert expand("Hello ${nobody}!", values) == "Hello !"
    assert expand("no placeholders, $who, {who}, $ {who}", values) == "no placeholders, $who, {who}, $ {who}"


def test_a_placeholder_inside_a_value_stays_literal() -> None:
    """A value holding ``${...}`` is inserted as it is: never expanded a second time, even when the
    name it holds has a value of its own, and whatever it is nested in."""
    values = {"secret": "${narrator}", "narrator": "Mira", "loop": "${loop}", "half": "${"}
    assert expand("${secret}", values) == "${narrator}"
    assert expand("${loop}${loop}", values) == "${loop}${loop}"
    assert expand("${half}narrator}", values) == "${narrator}"


names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.]{0,10}", fullmatch=True)
tricky = st.text(alphabet=st.sampled_from(list("${}ab.1 \n林")), max_size=12)


@settings(max_examples=200, deadline=None)
@given(values=st.dictionaries(names, tricky, max_size=4), name=names, prefix=tricky, suffix=tricky)
def test_expansion_is_a_single_pass(values: dict[str, str], name: str, prefix: str, suffix: str) -> None:
    """For any values (placeholders in them included), expanding ``${name}`` between two literal
    texts yields exactly the value between those texts, expanded themselves once."""
    line = prefix.replace("$", "") + "${" + name + "}" + suffix.replace("$", "")
    assert expand(line, values) == (prefix.replace("$", "") + values.get(name, "")
                                    + suffix.replace("$", ""))


def test_a_line_blanked_by_expansion_disappears() -> None:
    """A line that is empty or only whitespace once expanded is left out, with no blank line; a line
    with other text stays."""
    body = literal_body(_literal("Scene: ${scene}", "${mood}", "  ${mood}  ", "End."),
                        {"scene": "storm"}, NOTHING)
    assert body == "Scene: storm\nEnd."


def test_numbered_lines_are_numbered_after_conditions_and_blanks() -> None:
    """A numbered literal list counts only the lines that survive their conditions and expansion,
    so the numbers have no gaps; a bulleted one bullets them."""
    lines = (Line("Stay in character."), Line("Roll for ${npc}.", "gm"), Line("${empty}"),
             Line("Never reveal the ending.", ("not", "spoilers")), Line("Cite the page."))
    numbered = _literal(*lines, list_style="numbered")
    assert literal_body(numbered, {"npc": "the keeper"}, NOTHING) == (
        "1. Stay in character.\n2. Never reveal the ending.\n3. Cite the page.")
    assert literal_body(numbered, {"npc": "the keeper"}, frozenset({"gm", "spoilers"})) == (
        "1. Stay in character.\n2. Roll for the keeper.\n3. Cite the page.")
    bulleted = _literal(*lines, list_style="bulleted")
    assert literal_body(bulleted, {}, frozenset({"spoilers"})) == "- Stay in character.\n- Cite the page."


def test_request_values_instruction_and_defaults() -> None:
    """``request.<name>`` parts hold the caller's value as it is (whitespace-only is nothing), the
    instruction part holds the instruction, literal lines see the plan's defaults overridden by the
    caller's variables, and only text parts get a body."""
    the_plan = plan(
        section("intro", part("lines", "text", content=(Line("${tone} tale of ${place}."),)),
                part("facts")),
        section("ask", part("scene", "text", source="request.scene"),
                part("blank", "text", source="request.blank"),
                part("missing", "text", source="request.missing"),
                part("go", "text", source="instruction")),
        variables={"tone": "A quiet", "place": "nowhere"},
    )
    texts = resolve_texts(the_plan, "en", {"place": "the lighthouse", "scene": "Rain. ${tone}",
                                           "blank": " \n "}, NOTHING, "Continue.")
    assert texts == {
        ("intro", "lines"): "A quiet tale of the lighthouse.",
        ("ask", "scene"): "Rain. ${tone}",
        ("ask", "blank"): "",
        ("ask", "missing"): "",
        ("ask", "go"): "Continue.",
    }
    assert resolve_texts(the_plan, "en", {}, NOTHING, None)[("ask", "go")] == ""


def test_text_parts_render_through_the_engine() -> None:
    """End to end: a section's literal lines, request value and instruction render in part order
    under their headers, a caller's ``${...}`` stays literal, and an empty part leaves no header."""
    header = {"en": "[Scene]", "zh": "[场景]"}
    the_plan = plan(
        section("frame", part("rules", "text", content=(Line("1 ${who}"), Line("gm only", "gm")),
                              list_style="numbered")),
        section("ask", part("scene", "text", source="request.scene", header=header),
                part("note", "text", source="request.note", header={"en": "[Note]"}),
                part("go", "text", source="instruction", header={"en": "[Instruction]"})),
        variables={"who": "Mira"},
    )
    result = run(the_plan, instruction="Go on.", variables={"scene": "Storm. ${who}"}, language="zh")
    assert result.prompt == "1. 1 Mira\n\n[场景]\nStorm. ${who}\n\n[Instruction]\nGo on."
    assert result.layers["frame"].text == "1. 1 Mira"
