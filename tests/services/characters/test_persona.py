"""A character's entity record as the values templates publish: labelled traits, names, secrets, and
writing-style hints drawn from the character's own traits only (seed 003, section 3.3)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.characters.persona import casual, dynamic, persona, values
from services.profiles.catalog import PUBLISHED

ADA = """A quiet mathematician. She loves numbers.
Personality: curious, stubborn
Speech: precise, dry wit
Temperament: restless
Texting: terse, no emoji
Age: 36
Gender: female
Race: human
Secret: She forged the letter."""

DAIYU = """体弱多病，寄居在外祖母家。
性格：敏感多疑
说话方式：尖刻又机敏
情绪倾向：多愁善感
年龄：十七岁
性别：女
秘密：她烧了诗稿。"""

STEREOTYPES = ("confident", "ambitious", "competitive", "assertive", "dominate", "logic dictates")


def test_english_labels_are_read_as_traits() -> None:
    """English labels (Personality, Speech, Temperament, Texting, Age, Gender, Race) become the
    personality, speech, emotion, casual, age, gender and race traits."""
    p = persona("Ada Lovelace", ADA)
    assert p.traits == {
        "personality": "curious, stubborn", "speech": "precise, dry wit", "emotion": "restless",
        "casual": "terse, no emoji", "age": "36", "gender": "female", "race": "human",
        "secret": "She forged the letter.",
    }


@pytest.mark.parametrize(("label", "key"), [
    ("Personality", "personality"), ("traits", "personality"), ("SPEECH PATTERN", "speech"),
    ("Voice", "speech"), ("Emotional tendency", "emotion"), ("Emotion", "emotion"),
    ("Text style", "casual"), ("Casual", "casual"), ("Private", "secret"),
    ("性格", "personality"), ("个性", "personality"), ("说话方式", "speech"), ("语言风格", "speech"),
    ("口吻", "speech"), ("情绪", "emotion"), ("脾气", "emotion"), ("短信风格", "casual"),
    ("年龄", "age"), ("性别", "gender"), ("种族", "race"), ("秘密", "secret"),
])
@pytest.mark.parametrize("colon", [":", "：", " : "])
def test_each_label_in_any_case_and_either_colon(label: str, key: str, colon: str) -> None:
    """Every label is read in any case, with an ASCII or a full-width colon, spaces around it allowed."""
    assert persona("Bo", f"{label}{colon}value here").traits == {key: "value here"}


def test_chinese_labels_are_read_as_traits() -> None:
    """Chinese labels (性格：, 说话方式：, 情绪倾向：, 年龄：, 性别：, 秘密：) become the same traits."""
    p = persona("林黛玉", DAIYU)
    assert p.traits == {"personality": "敏感多疑", "speech": "尖刻又机敏", "emotion": "多愁善感",
                        "age": "十七岁", "gender": "女", "secret": "她烧了诗稿。"}


def test_unknown_labels_and_prose_stay_description_only() -> None:
    """A line whose label is not a known one ("Note:", "He said:") is prose: no trait, kept public."""
    p = persona("Bo", "Note: likes rain\nHe said: hello")
    assert p.traits == {}
    assert p.public == "Note: likes rain\nHe said: hello"


def test_the_first_labelled_value_wins() -> None:
    """When a label is given twice, the first value is the trait."""
    assert persona("Bo", "Personality: calm\nPersonality: loud").traits == {"personality": "calm"}


def test_latin_names_split_into_first_and_last() -> None:
    """A Latin name's first word is the first name and its last word the last name."""
    p = persona("Mary Jane Watson", "")
    assert (p.full_name, p.first_name, p.last_name) == ("Mary Jane Watson", "Mary", "Watson")
    single = persona("Cher", "")
    assert (single.first_name, single.last_name) == ("Cher", "")


@pytest.mark.parametrize("name", ["林黛玉", "诸葛亮", "林 黛玉"])
def test_chinese_names_are_their_own_first_name(name: str) -> None:
    """A Chinese name is not split: the whole name is the first name and there is no last name."""
    p = persona(name, "")
    assert (p.first_name, p.last_name) == (name, "")


def test_first_name_label_overrides_the_split() -> None:
    """A "First name:" line names the first name; the last name is still the name's last word."""
    p = persona("Jean Luc Picard", "First name: Jean-Luc\nPersonality: calm")
    assert (p.first_name, p.last_name) == ("Jean-Luc", "Picard")
    assert "first" not in p.traits
    assert p.traits == {"personality": "calm"}


def test_name_labels_in_chinese_and_last_name_label() -> None:
    """名： and 姓： name the first and last name of a Chinese name; "Surname:" a Latin last name."""
    p = persona("林黛玉", "名：黛玉\n姓：林")
    assert (p.first_name, p.last_name) == ("黛玉", "林")
    assert persona("Bo Chen", "Surname: Chen-Wu").last_name == "Chen-Wu"


def test_secret_lines_are_kept_in_the_description_but_not_public() -> None:
    """Secret lines stay in characterDesc (the character knows them) and leave characterDescPublic."""
    for name, text, secret in (("Ada Lovelace", ADA, "She forged the letter."),
                               ("林黛玉", DAIYU, "她烧了诗稿。")):
        shown = values(persona(name, text), "system", "en")
        assert secret in shown["system.characterDesc"]
        assert secret not in shown["system.characterDescPublic"]
        assert shown["system.characterDescPublic"].splitlines()[0] == text.splitlines()[0]


def test_values_are_published_under_the_role() -> None:
    """values() gives the seed's ${system.*} / ${user.*} names: names, descriptions, asg and traits."""
    shown = values(persona("Ada Lovelace", ADA), "user", "en")
    assert shown == {
        "user.firstName": "Ada", "user.lastName": "Lovelace", "user.fullName": "Ada Lovelace",
        "user.characterDesc": ADA, "user.characterDescLight": "A quiet mathematician.",
        "user.characterDescPublic": ADA.rsplit("\n", 1)[0], "user.asg": "36, female", "user.age": "36",
        "user.gender": "female", "user.race": "human", "user.personality.summary": "curious, stubborn",
        "user.personality.casual": "terse, no emoji", "user.speechPattern": "precise, dry wit",
        "user.emotionalTendency": "restless",
    }


def test_light_is_the_first_sentence_in_either_language() -> None:
    """characterDescLight is the public description's first sentence (。 or . followed by a space)."""
    assert persona("林黛玉", DAIYU).light == "体弱多病，寄居在外祖母家。"
    assert persona("Bo", "Age 3.5 years. Then more.").light == "Age 3.5 years."


def test_dynamic_lists_the_characters_own_traits() -> None:
    """${perspective.dynamic} is a header naming the character and one row per trait it has."""
    assert dynamic(persona("Ada Lovelace", ADA), "en") == (
        "Writing style for Ada:\n- Personality: curious, stubborn\n- Speech pattern: precise, dry wit\n"
        "- Emotional tendency: restless")
    assert dynamic(persona("林黛玉", DAIYU), "zh") == (
        "林黛玉的说话风格：\n- 性格：敏感多疑\n- 说话方式：尖刻又机敏\n- 情绪倾向：多愁善感")


def test_dynamic_and_casual_are_empty_without_style_traits() -> None:
    """Without personality, speech or emotion labels there is no style guidance at all: the prose is
    not turned into a "personality" (it may say the character's gender or age)."""
    p = persona("Bo Chen", "A tall man of forty. Gender: male\nAge: 40")
    assert dynamic(p, "en") == ""
    assert casual(p, "en") == ""
    assert values(p, "system", "en")["system.personality.summary"] == ""


def test_casual_prefers_texting_then_speech_then_personality() -> None:
    """${perspective.casual} is the texting style, else the speech pattern, else the personality."""
    everything = persona("A", "Texting: all caps\nSpeech: slow\nPersonality: shy")
    assert casual(everything, "en") == "TEXT STYLE: all caps"
    assert casual(persona("A", "Speech: slow\nPersonality: shy"), "en") == "TEXT STYLE: slow"
    assert casual(persona("A", "Personality: shy"), "zh") == "短信风格：shy"


def test_a_shy_male_character_gets_no_stereotypes() -> None:
    """A shy male character's style hints and values hold none of the old male-perspective words
    (confident, ambitious, competitive, assertive, dominate, logic dictates)."""
    p = persona("Tom Reed", "Gender: male\nPersonality: shy, hesitant")
    texts = [dynamic(p, "en"), casual(p, "en"), *values(p, "system", "en").values()]
    assert "shy, hesitant" in dynamic(p, "en")
    for text in texts:
        for word in STEREOTYPES:
            assert word not in text.lower()


# --- gender and age never shape the style hints ------------------------------------------------

NAMES = ("Ada Lovelace", "Bo", "林黛玉", "Jean Luc Picard")
GENDERS = ("male", "female", "nonbinary", "男", "女", "Mann", "woman")
AGES = ("seventeen", "elderly", "十七岁", "八十", *(str(n) for n in (7, 16, 34, 58, 91, 120)))
# Prose and trait values: letters, CJK, digits, spaces, punctuation; no colon (so prose is never a
# labelled line) and no line break.
TEXT = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz ABCMF0123456789.,!?'男女十七岁温柔害羞。，"),
               min_size=1, max_size=30).filter(str.strip)


@st.composite
def descriptions(draw: st.DrawFn) -> tuple[str, str, str, dict[str, str]]:
    """A description with gender and age labels, some style traits and prose, in any order."""
    gender, age = draw(st.sampled_from(GENDERS)), draw(st.sampled_from(AGES))
    colon = st.sampled_from([":", "：", " : "])
    lines = [f"{draw(st.sampled_from(['Gender', 'gender', '性别']))}{draw(colon)} {gender}",
             f"{draw(st.sampled_from(['Age', 'AGE', '年龄']))}{draw(colon)} {age}"]
    traits: dict[str, str] = {}
    for key, labels in (("personality", ["Personality", "性格"]), ("speech", ["Speech", "说话方式"]),
                        ("emotion", ["Temperament", "情绪倾向"]), ("casual", ["Texting", "短信风格"])):
        if draw(st.booleans()):
            traits[key] = draw(TEXT).strip()
            lines.append(f"{draw(st.sampled_from(labels))}: {traits[key]}")
    lines += draw(st.lists(TEXT, max_size=3))
    description = "\n".join(draw(st.permutations(lines)))
    return draw(st.sampled_from(NAMES)), gender, age, {"lines": description, **traits}


@given(descriptions(), st.sampled_from(["en", "zh"]))
def test_gender_and_age_never_reach_the_style_hints(drawn: tuple[str, str, str, dict[str, str]],
                                                    language: str) -> None:
    """For any description with a gender and an age label, neither value appears in dynamic() or
    casual() unless the character's own personality, speech, emotion or texting trait says it."""
    name, gender, age, parts = drawn
    description = parts.pop("lines")
    p = persona(name, description)
    assert (p.traits["gender"], p.traits["age"]) == (gender, age)
    hints = dynamic(p, language) + "\n" + casual(p, language)
    for value in (gender, age):
        if any(value in trait for trait in parts.values()):
            continue
        assert not re.search(re.escape(value), hints), (value, hints)


def test_every_value_is_a_published_name() -> None:
    """Each name values() gives is one the profile catalog publishes, for either role, so a
    template may use it without declaring it."""
    for role in ("system", "user"):
        assert set(values(persona("Ada Lovelace", ADA), role, "en")) <= PUBLISHED
