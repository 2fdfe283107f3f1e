"""The AI skills: system prompts per language and the window's shape around the cursor."""

from __future__ import annotations

import pytest

from services.context.skills import SKILLS, Skill, get_skill
from services.errors import SkillNotFound


def test_window_shapes_match_the_spec() -> None:
    """continue takes only text before the cursor; polish 70/30, expand 80/20, rewrite 60/40."""
    assert {skill_id: skill.after_share for skill_id, skill in SKILLS.items()} == {
        "continue": 0.0, "polish": 0.3, "expand": 0.2, "rewrite": 0.4}


def test_every_skill_has_a_chinese_and_an_english_prompt() -> None:
    """Each built-in skill carries a non-empty system prompt in zh and en, keyed by its own id."""
    for skill_id, skill in SKILLS.items():
        assert skill.id == skill_id
        assert set(skill.system_prompt) == {"zh", "en"}
        assert all(prompt.strip() for prompt in skill.system_prompt.values())


def test_prompt_for_falls_back_to_english() -> None:
    """An unknown language gets the English prompt; a known one its own."""
    skill = get_skill("polish")
    assert skill.prompt_for("fr") == skill.system_prompt["en"]
    assert skill.prompt_for("zh") == skill.system_prompt["zh"]
    assert Skill("x", {"en": "E", "zh": "Z"}, 0.0).prompt_for("ja") == "E"


def test_get_skill_returns_the_registered_skill() -> None:
    """get_skill hands back the same object SKILLS holds."""
    assert get_skill("continue") is SKILLS["continue"]


def test_unknown_skill_lists_the_known_ones() -> None:
    """An unknown id raises SKILL_NOT_FOUND with the sorted known ids."""
    with pytest.raises(SkillNotFound) as raised:
        get_skill("sing")
    assert raised.value.data_code == "SKILL_NOT_FOUND"
    assert raised.value.fields == {"known": ["continue", "expand", "polish", "rewrite"]}
