"""Small bilingual sample projects: chapters on disk plus rules, entities and memories (the novel
profile), and a game master's stored segments (the game-master profile).

Used by the demo and the benchmarks. ``seed`` and ``seed_game`` speak only
JSON-RPC method names and params, so they run the same in-process and over a
websocket.
"""

from __future__ import annotations

import asyncio
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


# --- the game-master profile: stored segments (seed 001) -------------------------------------------

GM_REFS = {"entryPointId": "ep.whispercross", "worldId": "world.mystika", "rulesetId": "ruleset.classic_v1"}
GM_LOCALES = {"zh": "zh-CN", "en": "en"}


def _pair(scope: str, ref_id: str | None, en: str, zh: str, **metadata: Any) -> list[dict[str, Any]]:
    """One segment in English and in Chinese, each with its locale."""
    base: dict[str, Any] = {"scope": scope, "metadata": metadata}
    if ref_id is not None:
        base["refId"] = ref_id
    return [{**base, "content": en, "locale": GM_LOCALES["en"]},
            {**base, "content": zh, "locale": GM_LOCALES["zh"]}]


# A core, a ruleset, a world, an entry point with its first-turn welcome, and two NPCs with three
# tiers each; every segment in both languages. segments:import takes this list as it is.
GM_SEGMENTS: list[dict[str, Any]] = [
    *_pair("core", None,
           "You are the game master of a text adventure. Describe what the player sees and hears, play "
           "every character but the player, and never decide the player's actions.",
           "你是一场文字冒险的游戏主持人。描述玩家的所见所闻，扮演玩家以外的每一个角色，绝不替玩家做决定。"),
    *_pair("ruleset", "ruleset.classic_v1",
           "Classic rules: a d20 roll plus the skill bonus against 10 (easy), 15 (hard) or 20 (heroic). "
           "Ask for a roll only when failure would be interesting.",
           "经典规则：掷二十面骰加技能加值，对抗难度 10（容易）、15（困难）或 20（英雄）。只有失败有意义时才要求掷骰。"),
    *_pair("world", "world.mystika",
           "Mystika is a land of river towns where magic is rare and distrusted. The roads are unsafe "
           "after dark.",
           "密斯提卡是一片河镇相连的土地，魔法稀少而且受人猜忌。天黑以后道路并不安全。"),
    *_pair("entry", "ep.whispercross",
           "The adventure begins at the Whispercross Inn, where three roads meet at a ford. A storm has "
           "closed the ford for the night.",
           "冒险从低语渡口旅店开始，三条路在这里的浅滩交汇。一场暴风雨让渡口今夜无法通行。"),
    *_pair("entry_start", "ep.whispercross",
           "Open the game: describe the common room on a stormy night in three sentences, then ask the "
           "player who they are.",
           "开场：用三句话描写暴风雨夜里旅店的大堂，然后问玩家是谁。"),
    *_pair("npc", "npc.innkeeper", "Marta, the innkeeper: broad, cheerful, quick to laugh.",
           "玛尔塔，旅店老板娘：身材宽大，性格开朗，爱笑。", tier=0, type="npc_description", priority="high"),
    *_pair("npc", "npc.innkeeper", "She knows the ferryman was paid to keep the ford closed.",
           "她知道摆渡人收了钱，故意让渡口关着。", tier=1, type="npc_secret"),
    *_pair("npc", "npc.innkeeper", "Under the bar she hides a smuggler's map of the old river tunnels.",
           "她在吧台下藏着一张旧河道隧道的走私地图。", tier=2, type="npc_secret"),
    *_pair("npc", "npc.bard", "Fen, a travelling bard: thin, polite, always tuning a lute.",
           "芬，流浪吟游诗人：瘦削，有礼，总在调琴。", tier=0, type="npc_description", priority="low"),
    *_pair("npc", "npc.bard", "Fen carries messages for the river guild and listens to every table.",
           "芬替河运公会送信，偷听每一桌的谈话。", tier=1, type="npc_secret"),
    *_pair("npc", "npc.bard", "Fen's sealed letter names the guild member who bribed the ferryman.",
           "芬带着的密信里写着收买摆渡人的公会成员的名字。", tier=2, type="npc_secret"),
]

# The dynamic texts of two turns, per language: the first turn and a later one.
GM_TURNS: dict[str, dict[str, dict[str, str]]] = {
    "en": {
        "first": {"gameStateText": "Turn 1. Evening; a storm outside. The player has just come in from the rain.",
                  "playerText": "Ada, a level 3 ranger: bow, short sword, 18 hit points.",
                  "inputText": "I shake off the rain and look for a seat near the fire."},
        "later": {"gameStateText": "Turn 6. Ada has eaten and paid for a room. Marta is wiping the bar; "
                                   "Fen plays by the fire. The ford is still closed.",
                  "playerText": "Ada, a level 3 ranger: bow, short sword, 18 hit points.",
                  "rngText": "d20 for this turn: 14",
                  "inputText": "I lean on the bar and ask Marta quietly why the ferryman will not cross "
                               "tonight. If she dodges the question, I put a silver coin on the bar and "
                               "ask again. Then I glance at the bard to see whether he is listening."},
    },
    "zh": {
        "first": {"gameStateText": "第 1 回合。傍晚，外面下着暴风雨。玩家刚从雨里走进来。",
                  "playerText": "艾达，3 级游侠：长弓、短剑、18 点生命值。",
                  "inputText": "我抖掉身上的雨水，找一个靠近炉火的座位。"},
        "later": {"gameStateText": "第 6 回合。艾达吃过晚饭，付了房钱。玛尔塔在擦吧台，芬在炉火边弹琴。渡口仍然关着。",
                  "playerText": "艾达，3 级游侠：长弓、短剑、18 点生命值。",
                  "rngText": "本回合二十面骰：14",
                  "inputText": "我靠在吧台上，低声问玛尔塔为什么摆渡人今晚不肯过河。如果她回避，我就在吧台上放一枚银币再问一次。"
                               "然后我瞥一眼吟游诗人，看他是不是在偷听。"},
    },
}


async def seed_game(call: Call, folder: Path, language: str) -> str:
    """Create an empty project for the game master and import :data:`GM_SEGMENTS`; return its id."""
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    project = await call("project:open", {"path": str(folder), "name": folder.name})
    project_id = str(project["projectId"] if "projectId" in project else project["project"]["projectId"])
    settings = await call("project:settings:get", {"projectId": project_id})
    version = settings["version"] if "version" in settings else settings["settings"]["version"]
    await call("project:settings:update", {"projectId": project_id, "version": version, "language": language})
    await call("segments:import", {"projectId": project_id, "segments": GM_SEGMENTS})
    return project_id
