"""Profile content lines per language, escaped ``$${...}`` tokens, the closed set of published
``${...}`` names, and the two built-in character templates, Base Roleplay and SMS Chat (seed 003,
sections 2.1 and 3.1-3.4)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.context.counting import CountCache
from services.context.engine import Request, assemble
from services.context.models import Assembly, BudgetProfile
from services.context.plan import Plan
from services.profiles.catalog import PUBLISHED
from services.profiles.plans import BuiltInPlans, built_in_documents
from services.profiles.resolve import Invalid, Problem, resolve
from services.tokenizer import resolve_tokenizer

COUNTER = CountCache(resolve_tokenizer())
DOCUMENTS = built_in_documents()


def profile(content: list[Any], variables: Mapping[str, Any] | None = None, **section: Any) -> dict[str, Any]:
    """A one-section profile with ``content``; variables ``who`` and ``flag`` declared."""
    declared = {"who": {"description": "a name", "default": "Ada"}, "flag": {"description": "a condition"}}
    return {"schema": "strata.profile/1", "name": "t", "variables": dict(variables or declared),
            "sections": {"main": {"order": 10, "content": content, **section}}}


def plan_of(document: Mapping[str, Any]) -> Plan:
    return resolve(document, DOCUMENTS.get).plan


def problems(document: Mapping[str, Any]) -> list[Problem]:
    with pytest.raises(Invalid) as refused:
        resolve(document, DOCUMENTS.get)
    return refused.value.problems


def render(plan: Plan, language: str, variables: Mapping[str, str] | None = None) -> Assembly:
    """The plan assembled by the engine, with the facts a caller gives: each non-empty variable."""
    values = dict(variables or {})
    bound = plan.bind(values)
    window = bound.context_window if isinstance(bound.context_window, int) else 8192
    facts = frozenset({"always", *(k for k, v in {**bound.variables, **values}.items() if v.strip())})
    request = Request(project_id="p1", language=language, plan=bound,
                      profile=BudgetProfile(context_window=window, output_reserve=int(bound.output_reserve)),
                      system_prompt_tokens=0, items=(), window=None, variables=values, facts=facts)
    return assemble(request, COUNTER)


def text(plan: Plan, language: str, variables: Mapping[str, str] | None = None) -> str:
    return render(plan, language, variables).prompt


# --- localized lines ---------------------------------------------------------------------------

LINES: list[Any] = [
    {"en": "Hello ${who}.", "zh": "你好，${who}。"},
    {"text": {"en": "The flag is up.", "zh": "旗子升起来了。"}, "condition": "flag"},
    "Plain ${who}.",
]


def test_a_line_may_be_a_string_per_language() -> None:
    """A content line may be {"en": ..., "zh": ...}: the plan keeps every language and English as its text."""
    line = plan_of(profile(LINES)).sections[0].parts[0].content[0]
    assert line.text == "Hello ${who}."
    assert line.local == {"en": "Hello ${who}.", "zh": "你好，${who}。"}
    assert line.condition is None


def test_a_conditional_line_may_be_localized() -> None:
    """A content line may be {"text": {"en": ..., "zh": ...}, "condition": ...}."""
    line = plan_of(profile(LINES)).sections[0].parts[0].content[1]
    assert (line.text, line.condition) == ("The flag is up.", "flag")
    assert line.local == {"en": "The flag is up.", "zh": "旗子升起来了。"}


@pytest.mark.parametrize(("language", "expected"), [
    ("zh", "你好，Ada。\n旗子升起来了。\nPlain Ada."),
    ("en", "Hello Ada.\nThe flag is up.\nPlain Ada."),
    ("fr", "Hello Ada.\nThe flag is up.\nPlain Ada."),
])
def test_the_projects_language_picks_the_text(language: str, expected: str) -> None:
    """A zh project gets the zh text, an en project the en text, and a language the line does not
    have (fr) falls back to en; plain strings are the same in every language."""
    assert text(plan_of(profile(LINES, separator="\n")), language, {"who": "Ada", "flag": "true"}) == expected


def test_a_localized_condition_still_decides() -> None:
    """A localized line whose condition does not hold is left out in every language."""
    plan = plan_of(profile(LINES))
    assert "旗子" not in text(plan, "zh", {"who": "Ada"})
    assert "flag" not in text(plan, "en", {"who": "Ada"})


def test_a_line_without_english_falls_back_to_its_first_language() -> None:
    """A line given only in zh is shown in zh whatever the project's language."""
    plan = plan_of(profile([{"zh": "只有中文。"}]))
    assert text(plan, "en") == text(plan, "fr") == "只有中文。"


@pytest.mark.parametrize("line", [
    {"en": "Hello.", "zh": "你好，${nobody}。"},
    {"en": "Hello ${nobody}.", "zh": "你好。"},
    {"text": {"en": "Hello.", "zh": "你好，${nobody}。"}, "condition": "flag"},
])
def test_placeholders_are_checked_in_every_language(line: Any) -> None:
    """An undeclared ${...} in any one language is a problem at the line's JSON pointer."""
    assert problems(profile(["Fine.", line])) == [
        {"path": "/sections/main/content/1",
         "message": "a ${...} placeholder names an unknown variable: declare it under variables"}]


def test_a_language_tag_must_be_one() -> None:
    """The keys of a localized line are language tags ("en", "zh", "zh-Hant"), not anything."""
    assert plan_of(profile([{"zh-Hant": "繁體。", "en": "Traditional."}]))
    found = problems(profile([{"EN": "Shouting."}]))
    assert found
    assert all(p["path"].startswith("/sections/main/content/0") for p in found)


# --- $${...} escapes ----------------------------------------------------------------------------


def test_an_escaped_placeholder_renders_literally() -> None:
    """$${image.TAG} is the text ${image.TAG} for the client to expand, in every language, and is
    not a validation problem though nothing publishes image.*."""
    plan = plan_of(profile([{"en": "Send $${image.TAG} or $${image.TAG,TAG}; say $${audio.TEXT}.",
                             "zh": "发图：$${image.TAG}"}]))
    assert text(plan, "en") == "Send ${image.TAG} or ${image.TAG,TAG}; say ${audio.TEXT}."
    assert text(plan, "zh") == "发图：${image.TAG}"


def test_an_unescaped_image_token_is_a_problem() -> None:
    """${image.TAG} without the escape is an undeclared variable, reported at its path."""
    assert [p["path"] for p in problems(profile(["ok", "Send ${image.TAG}"]))] == ["/sections/main/content/1"]


@given(st.from_regex(r"[A-Za-z][A-Za-z0-9_.]{0,20}", fullmatch=True))
def test_any_escaped_name_renders_as_written(name: str) -> None:
    """For any placeholder name, $${name} resolves without a problem and renders as ${name}."""
    assert text(plan_of(profile([f"x $${{{name}}} y"])), "en") == f"x ${{{name}}} y"


# --- the published names -------------------------------------------------------------------------


@pytest.mark.parametrize(("placeholder", "namespace"), [
    ("system.fristName", "system"), ("memory.foo", "memory"), ("perspective.bogus", "perspective"),
    ("user.nickname", "user"), ("project.title", "project"),
])
def test_an_unpublished_name_in_a_published_namespace_is_a_problem(placeholder: str, namespace: str) -> None:
    """A ${...} under system, user, memory, perspective or project that nothing publishes is a
    problem at its JSON pointer, naming it, in any language of a line."""
    found = problems(profile(["Fine.", {"en": "x", "zh": f"${{{placeholder}}}"}]))
    message = (f"a ${{...}} placeholder names an unknown variable: nothing publishes {placeholder} "
               f"(see the published {namespace}.* names)")
    assert found == [{"path": "/sections/main/content/1", "message": message}]


def test_every_problem_is_reported_at_its_own_path() -> None:
    """Several unknown names are reported together, each at its line."""
    found = problems(profile(["${system.fristName}", "ok", "${memory.foo}", "${perspective.bogus}"]))
    assert [p["path"] for p in found] == ["/sections/main/content/0", "/sections/main/content/2",
                                          "/sections/main/content/3"]


@pytest.mark.parametrize("placeholder", ["system.firstName", "memory.context", "perspective.dynamic",
                                         "perspective.casual", "user.characterDescPublic",
                                         "system.personality.summary", "memory.lastSession",
                                         "project.language"])
def test_published_names_are_accepted(placeholder: str) -> None:
    """${system.firstName}, ${memory.context}, ${perspective.dynamic} and the other published names
    resolve without being declared."""
    assert plan_of(profile([f"x ${{{placeholder}}}", {"en": "y", "zh": f"${{{placeholder}}}"}]))


def test_every_published_name_is_accepted() -> None:
    """Each name of the published set resolves in a content line."""
    assert plan_of(profile([f"${{{name}}}" for name in sorted(PUBLISHED)]))


# --- the built-in templates ----------------------------------------------------------------------

ROLEPLAY = {"system.fullName": "Ada Lovelace", "system.firstName": "Ada",
            "system.characterDesc": "A mathematician.", "user.firstName": "Bo", "user.fullName": "Bo Chen",
            "perspective": "Writing style for Ada:\n- shy",
            "perspective.casual": "TEXT STYLE: terse", "episode": "EPISODE GUIDANCE: The Heist",
            "episodeRule": "Play the stages in order.", "scene": "A rainy café"}


def rules(prompt: str, header: str = "Rules:") -> list[str]:
    """The rules list of a prompt: the lines after its header up to the blank line."""
    block = prompt.split(header + "\n", 1)[1].split("\n\n", 1)[0]
    return block.splitlines()


def numbers(lines: list[str]) -> list[int]:
    found = [re.match(r"(\d+)\. ", line) for line in lines]
    assert all(found), lines
    return [int(m.group(1)) for m in found if m]


async def built_in(name: str) -> Plan:
    return await BuiltInPlans().plan("p1", name)


@pytest.mark.parametrize("name", ["base-roleplay", "sms-chat"])
def test_the_templates_resolve(name: str) -> None:
    """Base Roleplay and SMS Chat resolve without problems; SMS Chat extends Base Roleplay."""
    resolved = resolve(DOCUMENTS[name], DOCUMENTS.get)
    assert resolved.plan.name == name
    assert resolved.plan.lineage == ((name,) if name == "base-roleplay" else ("sms-chat", "base-roleplay"))


async def test_base_roleplay_sections_and_roles() -> None:
    """Base Roleplay has the seed's sections in order, system ones first, then the two intros and the
    history, which comes from chat.history."""
    plan = await built_in("base-roleplay")
    assert [(s.id, s.role) for s in plan.sections] == [
        ("identity", "system"), ("rules", "system"), ("episode", "system"), ("scene", "system"),
        ("rating", "system"), ("perspective", "system"), ("memory", "system"), ("media", "system"),
        ("userIntro", "user"), ("assistantIntro", "assistant"), ("history", "user")]
    assert plan.placed["chat.history"] == ("history", "history")


async def test_sms_chat_has_no_episode_or_scene() -> None:
    """SMS Chat excludes the episode and scene sections, even when the conversation has both."""
    plan = await built_in("sms-chat")
    assert "episode" not in [s.id for s in plan.sections]
    assert "scene" not in [s.id for s in plan.sections]
    prompt = text(plan, "en", {**ROLEPLAY, "hasEpisodes": "true", "includeScene": "true"})
    assert "EPISODE" not in prompt
    assert "café" not in prompt


@pytest.mark.parametrize("has_episodes", ["", "true"])
async def test_sms_chat_rules_are_numbered_one_to_three(has_episodes: str) -> None:
    """SMS Chat's own three rules replace the base rules and are numbered 1-3, episodes or not;
    its identity and perspective are the texting ones."""
    prompt = text(await built_in("sms-chat"), "en", {**ROLEPLAY, "hasEpisodes": has_episodes})
    assert rules(prompt) == ["1. FORMAT: Short SMS/DM messages. 1-3 sentences MAX.",
                             "2. Use text slang, abbreviations, emojis, lowercase.",
                             "3. Stay in character. Match personality and speech patterns."]
    assert prompt.startswith("YOU are Ada texting Bo.")
    assert "TEXT STYLE: terse" in prompt
    assert "Writing style for Ada" not in prompt


async def test_sms_chat_in_chinese() -> None:
    """SMS Chat in a zh project: the Chinese identity and rules, numbered 1-3 under the Chinese header."""
    prompt = text(await built_in("sms-chat"), "zh", ROLEPLAY)
    assert prompt.startswith("你是Ada，正在给Bo发消息。")
    assert numbers(rules(prompt, "规则：")) == [1, 2, 3]


async def test_base_roleplay_rules_have_no_gap_without_episodes() -> None:
    """Without episodes Base Roleplay's rules are numbered 1-4, no episode rule and no gap, and the
    episode section is absent."""
    prompt = text(await built_in("base-roleplay"), "en", ROLEPLAY)
    assert rules(prompt) == [
        "1. Respond ONLY for Ada, in the first person.",
        "2. Use <think>tags</think> for internal monologue.",
        "3. Limit each reply to 1-4 sentences, then wait for Bo.",
        "4. Stay in character: Ada's own personality and way of speaking come first."]
    assert "EPISODE" not in prompt


async def test_base_roleplay_rules_start_with_the_episode_rules() -> None:
    """With episodes the two episode rules come first, and all six are numbered 1-6; the episode
    section shows the guidance and its rule."""
    prompt = text(await built_in("base-roleplay"), "en", {**ROLEPLAY, "hasEpisodes": "true"})
    found = rules(prompt)
    assert found[:2] == ["1. Follow the EPISODE GUIDANCE for plot points.",
                         "2. After completing the last stage, respond with: #NEXT EPISODE#"]
    assert numbers(found) == [1, 2, 3, 4, 5, 6]
    assert found[2] == "3. Respond ONLY for Ada, in the first person."
    assert "EPISODE GUIDANCE: The Heist\nPlay the stages in order." in prompt


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("has_episodes", ["", "true"])
async def test_base_roleplay_rules_numbering_has_no_gaps(language: str, has_episodes: str) -> None:
    """In either language, with or without episodes, the rules are numbered 1..n without a gap."""
    prompt = text(await built_in("base-roleplay"), language, {**ROLEPLAY, "hasEpisodes": has_episodes})
    found = numbers(rules(prompt, "规则：" if language == "zh" else "Rules:"))
    assert found == list(range(1, 7 if has_episodes else 5))


async def test_base_roleplay_conditional_sections() -> None:
    """The scene shows only with includeScene, the media lines only with supportsMedia, and they
    render the client's tokens literally; the rating is always there."""
    plan = await built_in("base-roleplay")
    bare = text(plan, "en", ROLEPLAY)
    assert "Scene:" not in bare
    assert "Send pictures" not in bare
    assert "Content rated T/PG-13." in bare
    full = text(plan, "en", {**ROLEPLAY, "includeScene": "true", "supportsMedia": "true", "rating": "M",
                             "ratingMpa": "R"})
    assert "Scene: A rainy café" in full
    assert "Content rated M/R." in full
    assert "Send pictures: ${image.TAG} or ${image.TAG,TAG}\nSend voice: ${audio.TEXT}" in full
    zh = text(plan, "zh", {**ROLEPLAY, "supportsMedia": "true"})
    assert "发图片：${image.TAG} 或 ${image.TAG,TAG}" in zh
    assert "内容分级：T/PG-13。" in zh
