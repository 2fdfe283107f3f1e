"""The resolved plan the engine runs: conditions, localized texts, source placement, budgets."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.plan import Condition, Plan, holds, localize
from tests.services.context.builders import part, plan, section, step
from tests.services.context.factory import novel

FACTS = ("hasMemories", "hasEpisodes", "hasDocument", "gm")


def test_no_condition_and_always_hold() -> None:
    """A part without a condition, or with ``always``, is active whatever the facts."""
    assert holds(None, frozenset())
    assert holds("always", frozenset())
    assert holds("always", frozenset({"gm"}))


def test_a_fact_holds_only_when_present() -> None:
    """A fact's name holds exactly when the request publishes that fact."""
    assert holds("hasMemories", frozenset({"hasMemories"}))
    assert not holds("hasMemories", frozenset({"hasEpisodes"}))
    assert not holds("hasMemories", frozenset())


def test_not_all_any_combine() -> None:
    """``not`` negates, ``all`` needs every condition, ``any`` one of them; they nest, and an empty
    ``all`` holds while an empty ``any`` does not."""
    facts = frozenset({"a", "b"})
    assert holds(("not", "c"), facts)
    assert not holds(("not", "a"), facts)
    assert holds(("all", ("a", "b")), facts)
    assert not holds(("all", ("a", "c")), facts)
    assert holds(("any", ("c", "b")), facts)
    assert not holds(("any", ("c", "d")), facts)
    assert holds(("all", ()), facts)
    assert not holds(("any", ()), facts)
    assert holds(("all", ("a", ("not", ("any", ("c", "d"))))), facts)
    assert not holds(("not", "always"), frozenset())


conditions: st.SearchStrategy[Condition] = st.recursive(
    st.sampled_from(FACTS),
    lambda inner: st.one_of(
        st.tuples(st.just("not"), inner),
        st.tuples(st.sampled_from(["all", "any"]), st.lists(inner, max_size=3).map(tuple)),
    ),
    max_leaves=8,
)


def _truth(condition: Condition, facts: frozenset[str]) -> bool:
    """The meaning of a condition, written out independently of :func:`holds`."""
    if isinstance(condition, str):
        return condition in facts
    op, arg = condition
    if op == "not":
        return not _truth(arg, facts)  # type: ignore[arg-type]
    values = [_truth(c, facts) for c in arg]  # type: ignore[attr-defined]
    return all(values) if op == "all" else any(values)


@settings(max_examples=200, deadline=None)
@given(condition=conditions, facts=st.frozensets(st.sampled_from(FACTS)))
def test_holds_is_boolean_logic_over_the_facts(condition: Condition, facts: frozenset[str]) -> None:
    """For any nested condition, ``holds`` is its boolean value over the facts, and ``not`` flips it."""
    assert holds(condition, facts) == _truth(condition, facts)
    assert holds(("not", condition), facts) != holds(condition, facts)


def test_localize_picks_the_language_then_english_then_any() -> None:
    """The request's language if the text has it, else English, else its first text; none is ''."""
    text = {"zh": "[写作偏好]", "en": "[Writing preferences]"}
    assert localize(text, "zh") == "[写作偏好]"
    assert localize(text, "fr") == "[Writing preferences]"
    assert localize({"de": "Notizen", "ja": "メモ"}, "fr") == "Notizen"
    assert localize(None, "zh") == ""
    assert localize({}, "zh") == ""
    assert localize({"zh": "", "en": "fallback"}, "zh") == "fallback"


def test_novel_places_every_source_in_its_section_and_part() -> None:
    """The novel plan sends each source to the section (old layer) and part it always went to."""
    assert novel().placement() == {
        "constraints": ("rules", "constraints"),
        "project.narrative": ("rules", "narrative"),
        "kg.entities": ("rules", "entities"),
        "memory.semantic": ("settings", "preferences"),
        "project.style": ("settings", "style"),
        "retrieval.passages": ("retrieved", "passages"),
        "memory.episodic": ("retrieved", "history"),
        "document.window": ("immediate", "window"),
        "instruction": ("immediate", "instruction"),
    }
    assert [s.id for s in novel().sections] == ["rules", "settings", "retrieved", "immediate"]
    assert [s.id for s in novel().sections if s.stable] == ["rules", "settings"]
    holder = novel().window_section
    assert holder is not None
    assert holder.id == "immediate"


def test_novel_trim_order_and_last_resort() -> None:
    """Novel's ladders run in the documented order: kg content out of Rules (caps), then Retrieved,
    Settings, Immediate down to their minimums, then again below them; the last resort cuts
    Retrieved, Settings, Immediate and only then Rules."""
    assert [(s.name, s.target, s.floor) for s in novel().trim] == [
        ("rules:shed_kg", "cap", "none"),
        ("retrieved:to_minimum", "fit", "minimum"),
        ("settings:to_minimum", "fit", "minimum"),
        ("immediate:to_minimum", "fit", "minimum"),
        ("retrieved:below_minimum", "fit", "none"),
        ("settings:below_minimum", "fit", "none"),
        ("immediate:below_minimum", "fit", "none"),
    ]
    assert novel().last_resort == ("retrieved", "settings", "immediate", "rules")


def test_placement_of_a_hand_made_plan_and_its_lookups() -> None:
    """``placement`` maps each part's source to (section, part); ``section``/``part``/``window_part``
    find by id; ``sources`` adds the sources that publish the plan's condition facts."""
    the_plan = replace(
        plan(
            section("head", part("rules"), part("intro", "text", source="literal")),
            section("body", part("window", "window"), part("ask", "text", source="instruction")),
        ),
        facts={"hasMemories": "memory.semantic"},
    )
    assert the_plan.placement() == {
        "rules": ("head", "rules"),
        "literal": ("head", "intro"),
        "document.window": ("body", "window"),
        "instruction": ("body", "ask"),
    }
    assert the_plan.sources == {"rules", "literal", "document.window", "instruction", "memory.semantic"}
    body = the_plan.section("body")
    assert body.part("ask") is body.parts[1]
    assert body.part("missing") is None
    assert body.window_part is body.parts[0]
    assert the_plan.section("head").window_part is None
    assert the_plan.window_section is body
    with pytest.raises(KeyError):
        the_plan.section("missing")


def test_step_name_is_section_and_id() -> None:
    """A step is named ``section:id`` in a plan's ``trim`` list."""
    assert step("rules", "drop_lowest", "shed").name == "rules:shed"


def test_with_budgets_replaces_only_the_named_sections() -> None:
    """``with_budgets`` returns a new plan whose named sections take the given ratio and minimum;
    other sections, and everything else about the plan, are unchanged, and so is the original."""
    original = novel()
    changed = original.with_budgets({"rules": 0.3, "immediate": 0.35}, {"settings": 7, "unknown": 9})
    assert changed is not original
    assert [(s.id, s.ratio, s.minimum) for s in changed.sections] == [
        ("rules", 0.3, 500), ("settings", 0.10, 7), ("retrieved", 0.25, 0), ("immediate", 0.35, 2000)]
    assert [(s.ratio, s.minimum) for s in original.sections] == [
        (0.15, 500), (0.10, 200), (0.25, 0), (0.50, 2000)]
    for old, new in zip(original.sections, changed.sections, strict=True):
        assert replace(new, ratio=old.ratio, minimum=old.minimum) == old
    assert (changed.trim, changed.last_resort, changed.name) == (original.trim, original.last_resort, "novel")


def test_with_no_budgets_is_an_equal_plan() -> None:
    """Empty tables leave every section as it was."""
    the_plan: Plan = novel()
    assert the_plan.with_budgets({}, {}) == the_plan
