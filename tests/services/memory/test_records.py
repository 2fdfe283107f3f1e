"""Memory records and their shared bounds."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from services.memory.records import Confidence, EpisodeLimit, RuleText


def test_confidence_is_a_finite_fraction() -> None:
    """Confidence accepts 0..1 and refuses anything outside, NaN and infinity."""
    adapter = TypeAdapter(Confidence)
    assert [adapter.validate_python(v) for v in (0, 0.5, 1)] == [0, 0.5, 1]
    for bad in (-0.01, 1.01, float("nan"), float("inf")):
        with pytest.raises(ValidationError):
            adapter.validate_python(bad)


def test_rule_text_is_stripped_and_non_blank() -> None:
    """Rule text loses surrounding space and must keep at least one character."""
    assert TypeAdapter(RuleText).validate_python("  短句  ") == "短句"
    with pytest.raises(ValidationError):
        TypeAdapter(RuleText).validate_python("   ")


def test_episode_limit_bounds() -> None:
    """A listing takes 1 to 200 episodes."""
    assert TypeAdapter(EpisodeLimit).validate_python(200) == 200
    with pytest.raises(ValidationError):
        TypeAdapter(EpisodeLimit).validate_python(0)
