"""What a character's entity record says about them, as the values templates publish.

A character is a knowledge-graph entity: a name, aliases and a free description. Writers often
label parts of a description (``Personality: quiet, watchful`` or ``性格：沉静``); those labels are
read here, and everything else stays the character's description. ``${perspective.dynamic}`` and
``${perspective.casual}`` are written from the character's own personality, speech and emotional
traits only: never from gender or age, and never with stock phrases a trait did not ask for
(seed 003, section 3.3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

Role = str  # "system" (the character who answers) or "user" (the one the writer plays)

# label (any case, en or zh) -> trait key
_LABELS: dict[str, str] = {
    "personality": "personality", "traits": "personality", "性格": "personality", "个性": "personality",
    "speech": "speech", "speech pattern": "speech", "voice": "speech", "说话方式": "speech",
    "语言风格": "speech", "说话": "speech", "口吻": "speech",
    "emotional tendency": "emotion", "emotion": "emotion", "temperament": "emotion", "情绪": "emotion",
    "情绪倾向": "emotion", "脾气": "emotion",
    "texting": "casual", "casual": "casual", "text style": "casual", "短信风格": "casual",
    "age": "age", "年龄": "age", "gender": "gender", "性别": "gender", "race": "race", "种族": "race",
    "secret": "secret", "private": "secret", "秘密": "secret",
    "first name": "first", "名": "first", "last name": "last", "surname": "last", "姓": "last",
}
_LABELLED = re.compile(
    r"^\s*(?P<label>[A-Za-z][A-Za-z ]{1,24}|[\u4e00-\u9fff]{1,6})\s*[:：]\s*(?P<value>.+?)\s*$")
_SENTENCE = re.compile(r"^.+?(?:[。！？!?]|\.(?=\s|$))", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Persona:
    """One character as the prompt sees them."""

    full_name: str
    first_name: str
    last_name: str
    description: str  # as written: the character the model plays knows their own secrets
    public: str  # without the lines the writer marked secret, for the other character's eyes
    traits: dict[str, str] = field(default_factory=dict)
    prose: str = ""  # the unlabelled lines

    @property
    def light(self) -> str:
        """The first sentence of the description's prose (its labelled lines aside)."""
        found = _SENTENCE.match(self.prose.strip())
        return (found.group(0) if found else self.prose).strip()


def persona(name: str, description: str) -> Persona:
    """The persona of an entity named ``name`` with ``description``."""
    traits: dict[str, str] = {}
    public: list[str] = []
    prose: list[str] = []
    for line in description.splitlines():
        found = _LABELLED.match(line)
        key = _LABELS.get(found.group("label").strip().lower()) if found else None
        if found and key:
            traits.setdefault(key, found.group("value"))
        elif line.strip():
            prose.append(line.strip())
        if line.strip() and key != "secret":
            public.append(line.strip())
    parts = name.split()
    latin = len(parts) > 1 and not any("\u4e00" <= ch <= "\u9fff" for ch in name)
    first = traits.pop("first", "") or (parts[0] if latin else name)
    others = [part for part in parts if part != first] if latin else []
    last = traits.pop("last", "") or (others[-1] if others else "")
    return Persona(full_name=name, first_name=first, last_name=last, description=description.strip(),
                   public="\n".join(public), traits=traits, prose="\n".join(prose))


def dynamic(p: Persona, language: str) -> str:
    """Style guidance from the character's own traits (``${perspective.dynamic}``)."""
    zh = language == "zh"
    # Only labelled traits: the description's prose may say the character's gender or age.
    rows = [("性格" if zh else "Personality", p.traits.get("personality", "")),
            ("说话方式" if zh else "Speech pattern", p.traits.get("speech", "")),
            ("情绪倾向" if zh else "Emotional tendency", p.traits.get("emotion", ""))]
    lines = [f"- {label}{'：' if zh else ': '}{value}" for label, value in rows if value]
    if not lines:
        return ""
    head = f"{p.first_name}的说话风格：" if zh else f"Writing style for {p.first_name}:"
    return "\n".join([head, *lines])


def casual(p: Persona, language: str) -> str:
    """Short texting guidance (``${perspective.casual}``): the character's texting style, else their
    speech, else their personality."""
    style = p.traits.get("casual") or p.traits.get("speech") or p.traits.get("personality", "")
    if not style:
        return ""
    return f"短信风格：{style}" if language == "zh" else f"TEXT STYLE: {style}"


def values(p: Persona, role: Role, language: str) -> dict[str, str]:
    """The ``${system.*}`` or ``${user.*}`` values of one character."""
    asg = ", ".join(v for v in (p.traits.get("age", ""), p.traits.get("gender", "")) if v)
    out = {
        "firstName": p.first_name, "lastName": p.last_name, "fullName": p.full_name,
        "characterDesc": p.description, "characterDescLight": p.light, "characterDescPublic": p.public,
        "asg": asg, "age": p.traits.get("age", ""), "gender": p.traits.get("gender", ""),
        "race": p.traits.get("race", ""), "personality.summary": p.traits.get("personality", ""),
        "personality.casual": p.traits.get("casual") or p.traits.get("speech", ""),
        "speechPattern": p.traits.get("speech", ""), "emotionalTendency": p.traits.get("emotion", ""),
    }
    return {f"{role}.{key}": value for key, value in out.items()}
