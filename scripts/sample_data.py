"""A small bilingual sample project: chapters on disk plus rules, entities and memories.

Used by the demo and the benchmarks. ``seed`` speaks only JSON-RPC method
names and params, so it runs the same in-process and over a websocket.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]

ZH_CHAPTERS = {
    "第一章.md": "# 第一章 灯塔\n\n我第一次见到那座灯塔，是在十月的一个黄昏。海风很冷，浪一层一层地拍在礁石上。"
                 "林远站在门口，手里拿着一盏旧马灯。他说话很轻，像是怕惊动了什么。\n\n"
                 "“上去看看吧。”他说。我跟着他走进塔里，螺旋的台阶一直通到灯室。\n",
    "第二章.md": "# 第二章 钥匙\n\n那天夜里，我看见林远蹲在台阶前。他数到第三级，撬开一块松动的木板，"
                 "把一把铜钥匙放了进去。钥匙上刻着一个“晴”字。\n\n"
                 "我没有出声。风从窗缝里钻进来，马灯的火苗晃了一下。我记住了那一级台阶。\n",
    "第五章.md": "# 第五章 暴风雨\n\n暴风雨来的那晚，灯室的门被锁上了。苏晴敲着门，喊我的名字。"
                 "我想起第二章那晚看见的东西。\n\n" + "雨一直下。我沿着台阶往下走，一级，两级。" * 40,
}

EN_CHAPTERS = {
    "chapter-01.md": "# Chapter 1\n\nThe lighthouse stood at the end of the causeway. Lin Yuan kept it alone, "
                     "and he spoke so quietly that the gulls were louder.\n",
    "chapter-02.md": "# Chapter 2\n\nThat night I saw him kneel on the stairs. He counted to the third "
                     "step, lifted a loose board and hid a brass key beneath it.\n",
    "chapter-05.md": "# Chapter 5\n\nThe storm came and the lamp-room door was locked. Su Qing called my "
                     "name through the door. " + "I went down the stairs, one step, then another. " * 40,
}

ZH_RECORDS: dict[str, list[dict[str, Any]]] = {
    "constraints": [
        {"kind": "narrative", "text": "严格第一人称叙述，不出现主角不在场的场景", "priority": 10},
        {"kind": "character", "text": "林远性格冷静，不会大声喊叫", "priority": 8, "source": "kg"},
        {"kind": "world", "text": "本世界没有魔法，所有能力基于科技", "priority": 9},
        {"kind": "style", "text": "避免使用感叹号和省略号", "priority": 5},
        {"kind": "plot", "text": "主角在第五章之前不知道真相", "priority": 7},
    ],
    "entities": [
        {"kind": "character", "name": "林远", "aliases": ["灯塔看守人"],
         "description": "灯塔看守人，四十岁，沉默，习惯提着旧马灯。"},
        {"kind": "character", "name": "苏晴", "aliases": ["晴"], "description": "林远失散多年的妹妹。"},
        {"kind": "location", "name": "灯塔", "aliases": [], "description": "海角尽头的旧灯塔，螺旋台阶通往灯室。"},
        {"kind": "object", "name": "铜钥匙", "aliases": ["钥匙"], "description": "刻着“晴”字，藏在第三级台阶下。"},
    ],
    "rules": [
        {"text": "动作场景偏好短句", "confidence": 0.92, "confirmed": True},
        {"text": "对白前后少用副词修饰", "confidence": 0.81, "confirmed": True},
        {"text": "喜欢用天气映衬人物情绪", "confidence": 0.55, "confirmed": False},
    ],
    "episodes": [
        {"instruction": "续写林远藏钥匙的场景", "output": "他把钥匙放进台阶下，木板合上时没有一点声音。"},
        {"instruction": "润色暴风雨的开头", "output": "雨来得很急。灯室的玻璃在风里发抖。"},
    ],
}

EN_RECORDS: dict[str, list[dict[str, Any]]] = {
    "constraints": [
        {"kind": "narrative", "text": "First person only; never show a scene the narrator is absent from",
         "priority": 10},
        {"kind": "world", "text": "There is no magic in this world", "priority": 9},
    ],
    "entities": [
        {"kind": "character", "name": "Lin Yuan", "aliases": ["the keeper"],
         "description": "The lighthouse keeper, forty, quiet, carries an old lantern."},
        {"kind": "object", "name": "brass key", "aliases": ["key"],
         "description": "Engraved with 'Qing', hidden under the third step."},
    ],
    "rules": [{"text": "Short sentences in action scenes", "confidence": 0.9, "confirmed": True}],
    "episodes": [{"instruction": "Continue the storm scene", "output": "The glass shook in its frame."}],
}


def write_chapters(folder: Path, language: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (ZH_CHAPTERS if language == "zh" else EN_CHAPTERS).items():
        (folder / name).write_text(text, encoding="utf-8")


async def seed(call: Call, folder: Path, language: str) -> str:
    """Create the project through the protocol; return its projectId."""
    write_chapters(folder, language)
    records = ZH_RECORDS if language == "zh" else EN_RECORDS
    project = await call("project:open", {"path": str(folder), "name": folder.name})
    project_id = str(project["projectId"] if "projectId" in project else project["project"]["projectId"])
    settings = await call("project:settings:get", {"projectId": project_id})
    version = settings["version"] if "version" in settings else settings["settings"]["version"]
    person = "第一人称" if language == "zh" else "first person"
    await call("project:settings:update", {"projectId": project_id, "version": version, "language": language,
                                           "narrativePerson": person})
    for constraint in records["constraints"]:
        await call("constraints:create", {"projectId": project_id, **constraint})
    for entity in records["entities"]:
        await call("kg:entity:upsert", {"projectId": project_id, **entity})
    for rule in records["rules"]:
        await call("memory:semantic:upsert", {"projectId": project_id, **rule})
    for episode in records["episodes"]:
        await call("memory:episodic:add", {"projectId": project_id, **episode})
    return project_id
