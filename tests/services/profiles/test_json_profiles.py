"""Profiles defined only as JSON (tests/services/profiles/data): a three-deep extends chain with
six and more sections, two roles and more, conditions and a reduction ladder, assembled exactly."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from services.context.engine import Request, assemble
from services.context.models import Assembly, BudgetProfile, Item
from services.context.plan import Plan
from services.profiles.resolve import resolve
from tests.services.context.factory import counter

DATA = Path(__file__).parent / "data"
DOCS: dict[str, dict[str, Any]] = {
    p.stem: json.loads(p.read_text(encoding="utf-8")) for p in DATA.glob("*.json")
}
PROJECT = "p-json"
SCENE = (
    "The storm broke at midnight. Waves climbed the rocks. The lamp room door was locked from "
    "inside, and nobody had the key."
)
INPUT = "I try the handle. ${secret} ${narrator}"  # placeholders in a caller's value stay literal


def plan_of(name: str) -> Plan:
    return resolve(DOCS[name], DOCS.get).plan


def items() -> tuple[Item, ...]:
    def make(id_: str, section: str, text: str, key: float) -> Item:
        return Item(
            id=id_,
            layer=section,
            section=section,
            source="test",
            text=text,
            tokens=counter().count(text),
            key=key,
            key_name="priority",
            project_id=PROJECT,
        )

    return (
        make("constraint:1", "constraints", "The keeper lies about the key.", 9.0),
        make("constraint:2", "constraints", "It rains every night.", 3.0),
        make("semantic:1", "notes", "The keeper limps.", 0.9),
        make("semantic:2", "notes", "Mira hums when she is afraid.", 0.4),
    )


def run(plan: Plan, total: int, variables: Mapping[str, str], facts: set[str]) -> Assembly:
    values = {
        "project.id": "Lighthouse",
        "secret": "${narrator}",
        "scene": SCENE,
        "input": INPUT,
        **variables,
    }
    return assemble(
        Request(
            project_id=PROJECT,
            language="en",
            plan=plan,
            profile=BudgetProfile(context_window=total, output_reserve=0),
            system_prompt_tokens=0,
            items=items(),
            window=None,
            variables=values,
            facts=frozenset({"always", "hasMemories", *facts}),
        ),
        counter(),
    )


FULL = [
    "You are the narrator, telling the story of Lighthouse.",
    "Rules:\n1. Stay in the past tense.\n2. Never reveal ${narrator}.",
    "[Constraints]\n1. The keeper lies about the key.\n2. It rains every night.",
    "[Notes]\n- The keeper limps.\n- Mira hums when she is afraid.",
    "[Scene]\n" + SCENE,
    "(The lamp gutters. Someone knocks.)",
    "[Player]\n" + INPUT,
    "Reply in English.",
]


def test_chain_resolves_to_every_inherited_section_in_order() -> None:
    """scene-final inherits from scene-roles and scene-base: eight sections in order, roles from the
    nearest profile that sets them, the stable prefix first, and its lineage nearest first."""
    plan = plan_of("scene-final")
    assert [(s.id, s.role, s.stable) for s in plan.sections] == [
        ("identity", "system", True),
        ("rules", "system", True),
        ("constraints", "system", True),
        ("notes", "user", False),
        ("scene", "user", False),
        ("example", "assistant", False),
        ("input", "user", False),
        ("epilogue", "user", False),
    ]
    assert plan.lineage == ("scene-final", "scene-roles", "scene-base")


def test_everything_fits_exactly_as_the_profile_says() -> None:
    """With room for all, the prompt is each section as its format says, in order; numbering has no
    gap where a conditional line went; values are inserted once and never expanded; messages
    follow the roles."""
    result = run(plan_of("scene-final"), 4000, {}, set())
    assert result.prompt == "\n\n".join(FULL)
    assert result.token_count == counter().count(result.prompt)
    assert result.reductions == ()
    assert result.stable_prefix == "\n\n".join(FULL[:3])
    assert [(m.role, m.content) for m in result.messages("")] == [
        ("system", "\n\n".join(FULL[:3])),
        ("user", "\n\n".join(FULL[3:5])),
        ("assistant", FULL[5]),
        ("user", "\n\n".join(FULL[6:])),
    ]


def test_conditions_remove_whole_sections_and_lines() -> None:
    """isFirstTurn removes the assistant example entirely; a set episodeGuide adds its numbered rule
    between the others, renumbered without gaps; without memories the notes vanish, header and all."""
    result = run(
        plan_of("scene-final"),
        4000,
        {"isFirstTurn": "true", "episodeGuide": "reach the lamp"},
        {"isFirstTurn", "episodeGuide"},
    )
    assert "(The lamp gutters" not in result.prompt
    assert (
        "Rules:\n1. Stay in the past tense.\n2. Follow the episode guide: reach the lamp\n"
        "3. Never reveal ${narrator}."
    ) in result.prompt
    plain = assemble(
        Request(
            project_id=PROJECT,
            language="en",
            plan=plan_of("scene-final"),
            profile=BudgetProfile(context_window=4000, output_reserve=0),
            system_prompt_tokens=0,
            items=items()[:2],
            window=None,
            variables={"scene": SCENE},
            facts=frozenset({"always"}),
        ),
        counter(),
    )
    assert "[Notes]" not in plain.prompt
    assert "keeper limps" not in plain.prompt


def test_tight_budget_runs_the_ladder_in_trim_order_and_reports_each_step() -> None:
    """Over the total, notes drop their lowest item first; only then is the scene trimmed to 60
    characters on a sentence boundary; every step is reported with tokens before and after."""
    full = run(plan_of("scene-final"), 4000, {}, set())
    one_note = run(plan_of("scene-final"), full.token_count - 2, {}, set())
    assert [(r.section, r.step) for r in one_note.reductions] == [("notes", "drop_lowest")]
    assert one_note.prompt == "\n\n".join([*FULL[:3], "[Notes]\n- The keeper limps.", *FULL[4:]])
    step = one_note.reductions[0]
    assert step.tokens_before > step.tokens_after

    without_notes = counter().count("\n\n".join(FULL[:3] + FULL[4:]))
    tight = run(plan_of("scene-final"), without_notes - 3, {}, set())
    assert [(r.section, r.step) for r in tight.reductions] == [
        ("notes", "drop_lowest"),
        ("scene", "trim_chars"),
    ]
    assert "[Notes]" not in tight.prompt
    assert "[Scene]\nThe storm broke at midnight. Waves climbed the rocks.\n\n" in tight.prompt
    for result in (one_note, tight):
        assert result.token_count == counter().count(result.prompt) <= result.budget.total
        assert result.layers["input"].text == "[Player]\n" + INPUT  # never reduced


def test_child_override_replaces_content_and_keeps_the_rest() -> None:
    """scene-roles overrides identity's content only: its order, role and stability are inherited."""
    base, child = plan_of("scene-base"), plan_of("scene-roles")
    assert base.section("identity").parts[0].content[0].text == "You narrate ${project.id} as ${narrator}."
    identity = child.section("identity")
    assert identity.parts[0].content[0].text == "You are ${narrator}, telling the story of ${project.id}."
    assert (identity.role, identity.stable) == ("system", True)


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_test_profile_is_valid_on_its_own_chain(name: str) -> None:
    """Each JSON file resolves against the others with no problem."""
    assert plan_of(name).name == name


def test_items_of_a_section_whose_condition_fails_are_reported_not_warned() -> None:
    """Items gathered for a section whose condition does not hold are dropped with reason
    ``condition``: the section is absent, and no malformed-item warning is raised."""
    result = assemble(
        Request(project_id=PROJECT, language="en", plan=plan_of("scene-final"),
                profile=BudgetProfile(context_window=4000, output_reserve=0), system_prompt_tokens=0,
                items=items(), window=None, variables={"scene": SCENE}, facts=frozenset({"always"})),
        counter())
    assert "[Notes]" not in result.prompt
    assert {(r.id, r.fate, r.reason) for r in result.reports if r.layer == "notes"} == {
        ("semantic:1", "dropped", "condition"), ("semantic:2", "dropped", "condition")}
    assert result.warnings == ()
