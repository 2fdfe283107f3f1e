"""Budget arithmetic and profile validation (docs/budget.md)."""

from __future__ import annotations

import math

from services.context.models import Budget, BudgetProfile
from services.context.plan import Plan, SectionPlan
from services.errors import InputTooLarge, InvalidInput

# The spec's capacity limit for everything gathered for one request.
MAX_INPUT_TOKENS = 64 * 1024


def validate_profile(profile: BudgetProfile) -> BudgetProfile:
    """Refuse profiles that cannot describe a budget; return the profile otherwise."""
    problems = []
    if profile.context_window <= 0:
        problems.append("contextWindow must be positive")
    if profile.output_reserve < 0 or profile.output_reserve >= profile.context_window:
        problems.append("outputReserve must be at least 0 and below contextWindow")
    if any(r < 0 or r > 1 or not math.isfinite(r) for r in profile.ratios):
        problems.append("each ratio must be between 0 and 1")
    elif not math.isclose(sum(profile.ratios), 1.0, abs_tol=1e-6):
        problems.append("ratios must sum to 1")
    if any(m < 0 for m in profile.minimums):
        problems.append("minimums must not be negative")
    elif any(m > profile.context_window for m in profile.minimums):
        problems.append("no minimum may exceed contextWindow")
    if problems:
        raise InvalidInput("Invalid budget profile: " + "; ".join(problems), problems=problems)
    return profile


def make_budget(profile: BudgetProfile, plan: Plan, system_prompt_tokens: int) -> Budget:
    """Total = context window - output reserve - system prompt; each section's share by its ratio."""
    total = profile.context_window - profile.output_reserve - system_prompt_tokens
    if total <= 0:
        raise InputTooLarge("The system prompt and output reserve leave no room for context",
                            total=total, systemPromptTokens=system_prompt_tokens)
    return Budget(
        context_window=profile.context_window,
        output_reserve=profile.output_reserve,
        system_prompt_tokens=system_prompt_tokens,
        total=total,
        # The epsilon keeps a decimal ratio's share whole: 0.29 * 100 is 28.999999999999996 in floats.
        shares={s.id: math.floor(s.ratio * total + 1e-9) for s in plan.sections},
        minimums={s.id: s.minimum for s in plan.sections},
    )


def cap(budget: Budget, section: SectionPlan) -> int:
    """How large a section may grow before its ``cap`` steps run: ``budget.max`` if the profile
    sets one, else the larger of its share and its minimum (never more than the total)."""
    if isinstance(section.max, int):  # a plan bound to its request has numbers only
        return min(section.max, budget.total)
    return max(budget.shares[section.id], min(budget.minimums[section.id], budget.total))


def warning_line(budget: Budget, section: SectionPlan) -> int:
    """Past how many tokens a section's ``cap`` step warns it is over budget: its share when it has
    one and no ``max`` (spec 004: Rules over 15% of the total warn, even within their minimum,
    which still keeps them from being shed), else its cap."""
    share = budget.shares[section.id]
    return share if share > 0 and not isinstance(section.max, int) else cap(budget, section)


def window_allowance(budget: Budget, section: SectionPlan) -> int:
    """Tokens the document window may take before budgeting: its section's share or minimum."""
    return min(budget.total, max(budget.shares[section.id], budget.minimums[section.id]))
