"""Budget arithmetic and profile validation, as docs/budget.md states them."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from services.context.budget import cap, make_budget, validate_profile, window_allowance
from services.context.models import DEFAULT_PROFILE, Budget, BudgetProfile
from services.context.plan import SectionPlan
from services.errors import InputTooLarge, InvalidInput
from tests.services.context.factory import novel_plan


def _budget(profile: BudgetProfile, system_prompt_tokens: int) -> Budget:
    """The budget of the novel plan with ``profile``'s budget table."""
    return make_budget(profile, novel_plan(profile), system_prompt_tokens)


def _section(section_id: str, profile: BudgetProfile = DEFAULT_PROFILE) -> SectionPlan:
    return novel_plan(profile).section(section_id)


def test_default_profile_matches_the_documented_defaults() -> None:
    """8192 window, 1024 reserve, 15/10/25/50 ratios, 500/200/0/2000 minimums, version 1."""
    assert BudgetProfile(8192, 1024, (0.15, 0.10, 0.25, 0.50), (500, 200, 0, 2000), 1) == DEFAULT_PROFILE
    assert validate_profile(DEFAULT_PROFILE) is DEFAULT_PROFILE


def test_default_budget_arithmetic() -> None:
    """total = window - reserve - system prompt; each share is floor(ratio x total)."""
    budget = _budget(DEFAULT_PROFILE, 40)
    assert budget.total == 8192 - 1024 - 40 == 7128
    assert budget.shares == {"rules": 1069, "settings": 712, "retrieved": 1782, "immediate": 3564}
    assert budget.minimums == {"rules": 500, "settings": 200, "retrieved": 0, "immediate": 2000}
    assert (budget.context_window, budget.output_reserve, budget.system_prompt_tokens) == (8192, 1024, 40)


def test_share_of_a_decimal_ratio_is_not_lost_to_float_rounding() -> None:
    """0.29 of 100 tokens is 29, although 0.29 * 100 is 28.999999999999996 in floating point."""
    profile = BudgetProfile(context_window=200, output_reserve=100, ratios=(0.29, 0.21, 0.07, 0.43),
                            minimums=(0, 0, 0, 0))
    budget = _budget(validate_profile(profile), 0)
    assert budget.shares == {"rules": 29, "settings": 21, "retrieved": 7, "immediate": 43}


def test_shares_never_sum_above_total() -> None:
    """Flooring keeps the sum of shares within the total for awkward totals."""
    for system in range(0, 300, 7):
        budget = _budget(DEFAULT_PROFILE, system)
        assert sum(budget.shares.values()) <= budget.total


@pytest.mark.parametrize("system", [7168, 9000])
def test_no_room_left_is_input_too_large(system: int) -> None:
    """A system prompt that leaves zero or fewer tokens refuses with CONTEXT_INPUT_TOO_LARGE."""
    with pytest.raises(InputTooLarge) as raised:
        _budget(DEFAULT_PROFILE, system)
    assert raised.value.data_code == "CONTEXT_INPUT_TOO_LARGE"
    assert raised.value.fields == {"total": 7168 - system, "systemPromptTokens": system}


def test_one_token_left_is_a_budget() -> None:
    """A total of exactly one token is still a valid budget."""
    assert _budget(DEFAULT_PROFILE, 7167).total == 1


@pytest.mark.parametrize(("profile", "problem"), [
    (BudgetProfile(context_window=-1, output_reserve=-2, minimums=(0, 0, 0, 0)),
     "contextWindow must be positive; outputReserve must be at least 0 and below contextWindow; "
     "no minimum may exceed contextWindow"),
    (BudgetProfile(output_reserve=-1), "outputReserve must be at least 0 and below contextWindow"),
    (BudgetProfile(output_reserve=8192), "outputReserve must be at least 0 and below contextWindow"),
    (BudgetProfile(ratios=(0.2, 0.1, 0.25, 0.5)), "ratios must sum to 1"),
    (BudgetProfile(ratios=(-0.1, 0.35, 0.25, 0.5)), "each ratio must be between 0 and 1"),
    (BudgetProfile(ratios=(1.5, -0.5, 0.0, 0.0)), "each ratio must be between 0 and 1"),
    (BudgetProfile(ratios=(math.nan, 0.1, 0.25, 0.5)), "each ratio must be between 0 and 1"),
    (BudgetProfile(minimums=(500, -1, 0, 2000)), "minimums must not be negative"),
    (BudgetProfile(minimums=(500, 200, 0, 8193)), "no minimum may exceed contextWindow"),
])
def test_invalid_profiles_are_refused_with_the_reason(profile: BudgetProfile, problem: str) -> None:
    """Each documented invalid profile raises INVALID_PARAMS naming exactly its problems."""
    with pytest.raises(InvalidInput) as raised:
        validate_profile(profile)
    assert raised.value.data_code == "INVALID_PARAMS"
    assert raised.value.fields == {"problems": problem.split("; ")}
    assert raised.value.text == "Invalid budget profile: " + problem


def test_every_problem_is_listed() -> None:
    """A profile with several problems lists them all at once."""
    profile = BudgetProfile(output_reserve=-5, ratios=(0.5, 0.5, 0.5, 0.5), minimums=(-1, 0, 0, 0))
    with pytest.raises(InvalidInput) as raised:
        validate_profile(profile)
    assert raised.value.fields["problems"] == [
        "outputReserve must be at least 0 and below contextWindow",
        "ratios must sum to 1",
        "minimums must not be negative",
    ]


def test_edge_profiles_are_accepted() -> None:
    """Ratios summing to 1 within 1e-6, a minimum equal to the window and a zero reserve are valid."""
    profile = BudgetProfile(context_window=4096, output_reserve=0,
                            ratios=(0.25, 0.25, 0.25, 0.2500005), minimums=(4096, 0, 0, 0))
    assert validate_profile(profile) is profile


def test_budget_is_keyed_by_the_plans_sections_in_order() -> None:
    """Shares and minimums come from the plan's sections (their ratios and minimums), in plan order;
    the project's budget table reaches the engine through ``Plan.with_budgets``."""
    profile = BudgetProfile(ratios=(0.4, 0.1, 0.1, 0.4), minimums=(10, 20, 30, 40))
    budget = _budget(profile, 0)
    assert list(budget.shares) == list(budget.minimums) == ["rules", "settings", "retrieved", "immediate"]
    assert budget.shares == {"rules": 2867, "settings": 716, "retrieved": 716, "immediate": 2867}
    assert budget.minimums == {"rules": 10, "settings": 20, "retrieved": 30, "immediate": 40}
    # The budget table alone does not change a plan: the plan's own ratios are what count.
    assert make_budget(profile, novel_plan(), 0).shares == _budget(DEFAULT_PROFILE, 0).shares


def test_rules_cap_is_the_larger_of_share_and_minimum_within_total() -> None:
    """Rules may grow to max(share, minimum), but never past the total (the cap its ``cap`` steps
    shed knowledge-graph content down to)."""
    assert cap(_budget(DEFAULT_PROFILE, 40), _section("rules")) == 1069
    small = BudgetProfile(context_window=2000, output_reserve=1000, minimums=(600, 0, 0, 0))
    assert cap(_budget(small, 0), _section("rules", small)) == 600
    tiny = BudgetProfile(context_window=2000, output_reserve=1000, minimums=(2000, 0, 0, 0))
    assert cap(_budget(tiny, 600), _section("rules", tiny)) == 400


def test_a_section_max_caps_it_within_the_total() -> None:
    """A section with a ``max`` is capped at it (never past the total), whatever its share."""
    rules = replace(_section("rules"), max=300)
    assert cap(_budget(DEFAULT_PROFILE, 40), rules) == 300
    assert cap(_budget(DEFAULT_PROFILE, 7000), replace(rules, max=5000)) == 168


def test_window_allowance_is_share_or_minimum_within_total() -> None:
    """The document window holds max(share(immediate), minimum(immediate)) tokens, at most the total."""
    assert window_allowance(_budget(DEFAULT_PROFILE, 40), _section("immediate")) == 3564
    small = BudgetProfile(context_window=4000, output_reserve=1000)
    assert window_allowance(_budget(small, 0), _section("immediate", small)) == 2000
    tiny = BudgetProfile(context_window=2000, output_reserve=1000)
    assert window_allowance(_budget(tiny, 500), _section("immediate", tiny)) == 500
