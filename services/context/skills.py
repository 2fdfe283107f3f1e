"""The AI skills: each a system prompt and the shape of its window around the cursor."""

from __future__ import annotations

from dataclasses import dataclass

from services.errors import SkillNotFound


@dataclass(frozen=True, slots=True)
class Skill:
    id: str
    system_prompt: dict[str, str]  # language -> prompt
    after_share: float  # share of the window given to text after the cursor
    exclude_after: bool = True  # retrieval skips text after the cursor in this document

    def prompt_for(self, language: str) -> str:
        return self.system_prompt.get(language, self.system_prompt["en"])


SKILLS: dict[str, Skill] = {
    skill.id: skill
    for skill in (
        Skill("continue", {
            "zh": "你是小说作者的写作助手。紧接光标处续写正文，"
                  "保持人称、语气和设定一致，遵守所有创作约束。只输出续写的正文。",
            "en": "You are a novelist's writing assistant. Continue the text from the cursor, keeping "
                  "person, voice and setting consistent and obeying every writing constraint. Output "
                  "only the continuation.",
        }, after_share=0.0),
        Skill("polish", {
            "zh": "你是小说作者的文字编辑。润色光标附近的段落：改进措辞与节奏，"
                  "不改变情节和事实，遵守所有创作约束。只输出润色后的段落。",
            "en": "You are a novelist's line editor. Polish the passage at the cursor: improve wording "
                  "and rhythm without changing plot or facts, obeying every writing constraint. Output "
                  "only the polished passage.",
        }, after_share=0.3, exclude_after=False),
        Skill("expand", {
            "zh": "你是小说作者的写作助手。扩写光标处的段落，"
                  "补充细节、动作与感官描写，不改变情节，遵守所有创作约束。只输出扩写后的段落。",
            "en": "You are a novelist's writing assistant. Expand the passage at the cursor with "
                  "detail, action and sensory description without changing the plot, obeying every "
                  "writing constraint. Output only the expanded passage.",
        }, after_share=0.2),
        Skill("rewrite", {
            "zh": "你是小说作者的写作助手。按用户指令改写光标处的段落，"
                  "保持设定与人物一致，遵守所有创作约束。只输出改写后的段落。",
            "en": "You are a novelist's writing assistant. Rewrite the passage at the cursor as the "
                  "writer asks, keeping setting and characters consistent and obeying every writing "
                  "constraint. Output only the rewritten passage.",
        }, after_share=0.4, exclude_after=False),
    )
}


def get_skill(skill_id: str) -> Skill:
    skill = SKILLS.get(skill_id)
    if skill is None:
        raise SkillNotFound(known=sorted(SKILLS))
    return skill
