"""A conversation's options: their defaults, the template variables they give, the seed fields no
prompt uses, and the values refused when the conversation is made (seed 003, appendix B)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from services.characters.options import MPA, ConversationOptions, Episode, ignored


def options(**raw: Any) -> ConversationOptions:
    return ConversationOptions.model_validate(raw)


def test_defaults() -> None:
    """With nothing given: rating T, no scene or episodes, no media, an 8192-token budget with 1024
    reserved, a 500-token memory budget, keyframes every 20, reminders every 6, extraction every 5."""
    o = options()
    assert (o.rating, o.rating_mpa, o.scene, o.include_scene) == ("T", None, "", None)
    assert (o.episodes, o.perspective) == ([], "")
    assert (o.image_tokens, o.audio_tokens, o.token_budget, o.output_reserve) == (False, False, 8192, 1024)
    assert (o.memory_budget, o.memory_format, o.min_similarity) == (500, "plain", 0.2)
    assert (o.keyframe_every, o.remind_every) == (20, 6)
    assert (o.extract_memories, o.memory_extraction_every) == (True, 5)
    assert o.variables("en") == {
        "rating": "T", "ratingMpa": "PG-13", "scene": "", "includeScene": "", "episode": "",
        "episodeRule": "", "hasEpisodes": "", "supportsMedia": "", "tokenBudget": "8192",
        "outputReserve": "1024",
    }


@pytest.mark.parametrize(("rating", "mpa"), [("E", "G"), ("T", "PG-13"), ("M", "R"), ("AO", "NC-17"),
                                             ("RC", "NC-17")])
def test_rating_maps_to_its_mpa_equivalent(rating: str, mpa: str) -> None:
    """Each ESRB rating gives its MPA equivalent as ratingMpa, unless ratingMpa is given."""
    assert options(rating=rating).variables("en")["ratingMpa"] == mpa == MPA[rating]
    assert options(rating=rating, ratingMpa="PG").variables("en")["ratingMpa"] == "PG"


def test_include_scene_defaults_to_whether_a_scene_is_given() -> None:
    """includeScene is true when a scene is given and not turned off; never without a scene."""
    assert options(scene="A rainy cafe").variables("en")["includeScene"] == "true"
    assert options(scene="A rainy cafe", includeScene=False).variables("en")["includeScene"] == ""
    assert options(scene="   ").variables("en")["includeScene"] == ""
    assert options(includeScene=True).variables("en")["includeScene"] == ""
    assert options(scene="x").variables("en")["scene"] == "x"


def test_an_episode_object_gives_guidance_and_a_rule() -> None:
    """An episode object gives the guidance (name, theme, numbered stages), the stage rule and
    hasEpisodes, in English and in Chinese."""
    o = options(episodes=[{"name": "The Heist", "theme": "trust", "stages": ["Plan", "Break in"]},
                          {"name": "Later"}])
    en = o.variables("en")
    assert en["episode"] == "EPISODE GUIDANCE: The Heist\nTheme: trust\n1. Plan\n2. Break in"
    assert en["episodeRule"] == "Play the stages in order; do not skip ahead."
    assert en["hasEpisodes"] == "true"
    zh = o.variables("zh")
    assert zh["episode"] == "剧集指引：The Heist\n主题：trust\n1. Plan\n2. Break in"
    assert zh["episodeRule"] == "按顺序完成各阶段，不要跳过。"


def test_an_episode_without_stages_has_no_rule() -> None:
    """An episode with no stages (or a plain string episode) has guidance but no stage rule."""
    assert options(episodes=[{"name": "Quiet"}]).variables("en")["episodeRule"] == ""
    text = options(episodes=["Just talk about the war."]).variables("en")
    assert (text["episode"], text["episodeRule"], text["hasEpisodes"]) == (
        "EPISODE GUIDANCE: Just talk about the war.", "", "true")
    assert options(episodes=["谈谈战争。"]).variables("zh")["episode"] == "剧集指引：谈谈战争。"
    assert isinstance(options(episodes=[{"name": "Quiet"}]).episodes[0], Episode)


@pytest.mark.parametrize(("raw", "flag"), [({}, ""), ({"imageTokens": True}, "true"),
                                           ({"audioTokens": True}, "true"),
                                           ({"imageTokens": False, "audioTokens": False}, "")])
def test_media_flag(raw: dict[str, Any], flag: str) -> None:
    """supportsMedia is set when image or audio tokens are enabled."""
    assert options(**raw).variables("en")["supportsMedia"] == flag


def test_perspective_is_a_variable_only_when_given() -> None:
    """A perspective given by the writer is the ${perspective} variable; else the character's own
    traits give it (the variables hold none)."""
    assert "perspective" not in options().variables("en")
    assert options(perspective="Dry and formal.").variables("en")["perspective"] == "Dry and formal."


def test_snake_case_names_are_accepted_too() -> None:
    """Options are read by their camelCase names and by their field names."""
    assert options(token_budget=4096, output_reserve=512).token_budget == 4096
    assert options(tokenBudget=4096, outputReserve=512).variables("en")["outputReserve"] == "512"


def test_ignored_names_the_seed_fields_no_prompt_uses() -> None:
    """Fields of the seed's chat configuration that shape no prompt are accepted, and ignored()
    names them, sorted, with a field named in Python's spelling; fields that do are not named."""
    raw = {"rating": "M", "model": "dolphin-llama3", "stream": True, "serverUrl": "http://x",
           "tokenBudget": 4096, "keyframeEvery": 10, "token_budget": 4096}
    assert options(**raw).rating == "M"
    assert ignored(raw) == ["model", "serverUrl", "stream", "token_budget"]  # wire names only
    assert ignored({}) == []


@pytest.mark.parametrize("raw", [
    {"rating": "X"}, {"rating": None}, {"tokenBudget": 10}, {"tokenBudget": 3_000_000}, {"memoryBudget": -1},
    {"memoryFormat": "xml"}, {"minSimilarity": 2}, {"minSimilarity": float("nan")}, {"includeScene": "maybe"},
    {"episodes": [{"name": "a", "bogus": 1}]}, {"episodes": [{"theme": "no name"}]},
    {"episodes": [{"name": "a", "stages": ["s"] * 17}]}, {"episodes": ["e"] * 33}, {"scene": "x" * 4001},
    {"keyframeEvery": -1},
])
def test_invalid_values_are_refused(raw: dict[str, Any]) -> None:
    """Values out of their range or of the wrong kind are refused when the conversation is made."""
    with pytest.raises(ValidationError):
        options(**raw)


def test_the_reserve_must_leave_room_for_the_prompt() -> None:
    """An output reserve as large as the token budget is refused: no prompt would ever fit."""
    with pytest.raises(ValidationError, match="outputReserve must be below tokenBudget"):
        options(tokenBudget=1000)
    with pytest.raises(ValidationError):
        options(tokenBudget=512, outputReserve=512)
    assert options(tokenBudget=512, outputReserve=511).output_reserve == 511


def test_options_are_frozen() -> None:
    """Options cannot be changed once made."""
    with pytest.raises(ValidationError):
        options().rating = "M"  # type: ignore[misc]


@given(rating=st.sampled_from(["E", "T", "M", "AO", "RC"]), scene=st.text(max_size=40),
       include=st.none() | st.booleans(),
       episodes=st.lists(st.text(min_size=1, max_size=20).filter(str.strip), max_size=3),
       image=st.booleans(), audio=st.booleans(), language=st.sampled_from(["en", "zh", "fr"]))
def test_flags_follow_the_options(rating: str, scene: str, include: bool | None, episodes: list[str],
                                  image: bool, audio: bool, language: str) -> None:
    """For any options, every variable is a string; each flag is "true" or "" exactly as the seed's
    conditions say; and the budget variables echo the numbers."""
    o = options(rating=rating, scene=scene, includeScene=include, episodes=episodes, imageTokens=image,
                audioTokens=audio)
    found = o.variables(language)
    assert all(isinstance(v, str) for v in found.values())
    assert found["hasEpisodes"] == ("true" if episodes else "")
    assert found["includeScene"] == ("true" if scene.strip() and include is not False else "")
    assert found["supportsMedia"] == ("true" if image or audio else "")
    assert (found["episode"] != "") == bool(episodes)
    assert (found["tokenBudget"], found["outputReserve"]) == ("8192", "1024")
