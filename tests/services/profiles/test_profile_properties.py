"""Properties of any valid profile: the count is exact and within the total, and every cut is reported."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.context.engine import Request, assemble
from services.context.models import BudgetProfile, Item
from services.errors import InputTooLarge
from services.profiles.resolve import resolve
from tests.services.context.factory import counter

PROJECT = "p-prop"
WORDS = [
    "雨",
    "灯塔",
    "钥匙。",
    "The keeper",
    "lies.",
    "Waves climb",
    "the rocks!",
    "门被锁上了？",
    "\n",
    "night",
]
text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)
ITEM_SOURCES = ("constraints", "memory.semantic", "memory.episodic", "kg.entities")
STEPS: dict[str, list[dict[str, Any]]] = {
    "items": [
        {"step": "drop_lowest"},
        {"step": "drop_lowest", "floor": "none", "id": "all"},
        {"step": "drop_lowest", "order": "reverse", "floor": "none", "id": "rev"},
        {"step": "trim_chars", "chars": 20},
        {"step": "summary_cue", "chars": 10},
        {"step": "drop_section"},
    ],
    "text": [
        {"step": "trim_chars", "chars": 30},
        {"step": "cut_far_end", "floor": "none"},
        {"step": "summary_cue", "cue": "(cut)"},
        {"step": "drop_section"},
    ],
}


@st.composite
def profiles(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, str]]:
    """A valid profile document, the item texts of each item section and the request variables."""
    count = draw(st.integers(1, 6))
    sources = draw(st.permutations(ITEM_SOURCES))
    sections: dict[str, Any] = {}
    texts: dict[str, list[str]] = {}
    variables: dict[str, str] = {}
    ratios = draw(st.lists(st.floats(0, 1 / count), min_size=count, max_size=count))
    trim: list[str] = []
    for n in range(count):
        sid = f"s{n}"
        kind = draw(st.sampled_from(["items", "text", "literal"]))
        section: dict[str, Any] = {
            "order": n * 10,
            "budget": {"ratio": ratios[n], "minimum": draw(st.integers(0, 40))},
            "role": draw(st.sampled_from(["system", "user", "assistant"])),
            "format": {
                "header": f"[{sid}]",
                "list": draw(st.sampled_from(["plain", "numbered", "bulleted"])),
            },
        }
        if kind == "items" and n < len(sources):
            section["source"] = sources[n]
            texts[sid] = draw(st.lists(text, min_size=0, max_size=8))
        elif kind == "text":
            section["source"] = f"request.v{n}"
            variables[f"v{n}"] = draw(text)
        else:
            section["content"] = draw(st.lists(text, min_size=1, max_size=4))
            kind = "text"
        never = draw(st.booleans()) and kind == "text" and "source" not in section
        if never:
            section["never"] = True
        else:
            ladder = draw(
                st.lists(
                    st.sampled_from(STEPS["items" if sid in texts else "text"]),
                    max_size=3,
                    unique_by=lambda s: s.get("id", s["step"]),
                )
            )
            section["reduce"] = ladder
            trim += [f"{sid}:{s.get('id', s['step'])}" for s in ladder]
        sections[sid] = section
    document = {
        "schema": "strata.profile/1",
        "name": "random",
        "sections": sections,
        "variables": {name: {} for name in variables},
        "trim": draw(st.permutations(trim)),
    }
    return document, texts, variables


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles(), st.integers(20, 700), st.data())
def test_any_profile_count_is_exact_within_total_and_every_cut_is_reported(
    case: tuple[dict[str, Any], dict[str, list[str]], dict[str, str]], total: int, data: st.DataObject
) -> None:
    """For random valid profiles, items and budgets: tokenCount equals the tokenizer's count of the
    prompt and never exceeds the total; a section that lost anything has a reported step, and
    every item dropped for the budget belongs to such a section."""
    document, texts, variables = case
    plan = resolve(document, lambda name: None).plan
    items = tuple(
        Item(
            id=f"{sid}:{k}",
            layer=sid,
            section=sid,
            source="test",
            text=t,
            tokens=counter().count(t),
            key=data.draw(st.floats(0, 1)),
            key_name="score",
            project_id=PROJECT,
            origin=data.draw(st.sampled_from(["user", "kg"])),
        )
        for sid, found in texts.items()
        for k, t in enumerate(found)
    )
    request = Request(
        project_id=PROJECT,
        language="en",
        plan=plan,
        profile=BudgetProfile(context_window=total, output_reserve=0),
        system_prompt_tokens=0,
        items=items,
        window=None,
        variables=variables,
        facts=frozenset({"always"}),
    )
    try:
        result = assemble(request, counter())
    except InputTooLarge:
        return  # what cannot be reduced (never sections, literal lines) is over the total: refused
    assert result.token_count == counter().count(result.prompt) <= result.budget.total
    reduced = {r.section for r in result.reductions}
    for section_id, layer in result.layers.items():
        if layer.truncated:
            assert section_id in reduced, section_id
    for report in result.reports:
        if report.fate == "dropped" and report.reason not in ("duplicate", "invalid", "candidate_limit"):
            assert report.layer in reduced, report
    for step in result.reductions:
        assert step.tokens_after <= step.tokens_before or step.step == "summary_cue"
