"""Small bilingual sample projects: chapters on disk plus rules, entities and memories (the novel
profile), and a game master's stored segments (the game-master profile).

Used by the demo, the inspector's browser tests and the benchmarks. ``seed`` and ``seed_game`` speak only
JSON-RPC method names and params, so they run the same in-process and over a
websocket.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
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


def write_chapters(folder: Path, language: str, chapters: Mapping[str, str] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if chapters is None:
        chapters = ZH_CHAPTERS if language == "zh" else EN_CHAPTERS
    for name, text in chapters.items():
        (folder / name).write_text(text, encoding="utf-8")


async def seed(call: Call, folder: Path, language: str, *, chapters: Mapping[str, str] | None = None,
               records: Mapping[str, list[dict[str, Any]]] | None = None) -> str:
    """Create the project through the protocol; return its projectId.

    By default the small fixture above (:data:`ZH_CHAPTERS` or :data:`EN_CHAPTERS` and their records,
    which the inspector's browser tests use); ``chapters`` and ``records`` give others (:func:`seed_novel`).
    """
    write_chapters(folder, language, chapters)
    if records is None:
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


# --- the demo's novel: four short chapters in each language -----------------------------------------
#
# Written for scripts/demo.py: the writer is at the end of the last chapter, where the narrator is
# locked out of the lamp room and remembers something; chapter 2 is where the keeper hid a brass key
# under the third step. The text before the cursor and the instruction share no search term with that
# passage (tests/scripts/test_demo.py checks it), so only the encoder can bring it back: retrieval by
# meaning. No record names the key or where it is.

NOVEL_ZH: dict[str, str] = {
    "第一章.md": (
        "# 第一章 灯塔\n\n"
        "我第一次见到那座灯塔，是在十月的一个黄昏。渡船在礁石外面停下，老许把我的行李扔上岸，说他下个"
        "月再来。海风很冷，浪一层一层地拍在石头上，远处的塔身被夕阳照成了铁锈色。\n\n"
        "林远站在塔门口，手里提着一盏旧马灯。他四十岁上下，头发已经白了一半，说话很轻，像是怕惊动了什"
        "么。他没有问我从哪里来，只是接过我的包袱，说：“上去看看吧。”\n\n"
        "螺旋的石阶一直通到灯室，一共一百零八级。林远走在前面，每一级都踩得很稳。灯室里有一股煤油和铜"
        "锈混在一起的味道，巨大的透镜安静地立在中间，像一只闭着的眼睛。\n\n"
        "那天夜里，他教我怎样剪灯芯，怎样给透镜上油，怎样在日志上记下风向和潮水。他写字很慢，一笔一画"
        "，写完了就合上本子，望着窗外的黑暗出神。后来我才知道，他在等一个人。\n"
    ),
    "第二章.md": (
        "# 第二章 台阶\n\n"
        "入冬以后，补给船一个月只来一次。林远话不多，吃饭的时候常常只说一句“多吃点”。我跟着他修窗框、"
        "刷栏杆、清点煤油桶，日子过得很慢，慢得能听见每一次潮水退下去的声音。\n\n"
        "一天半夜，我被风声吵醒，瞧见楼梯上有一点昏黄的光。林远蹲在第三级台阶前，用小刀撬开一块松动的"
        "木板，把一把铜钥匙放了进去，又把木板按回原处，用袖子擦掉上面的灰。钥匙柄上刻着一个“晴”字，在"
        "灯光下闪了一下。我屏住呼吸，没有出声。\n\n"
        "第二天早上，他像什么都没发生过一样，照旧煮粥、看天、记日志。我也没有问。海岛上的人都知道，有"
        "些事情问了，就再也回不去了。\n"
    ),
    "第三章.md": (
        "# 第三章 来信\n\n"
        "老许的船在雾里迟到了三天。他带来了面粉、灯油，还有一封没有署名的信。林远拆开看了很久，然后把"
        "信纸折成小小的方块，放进炉膛里烧掉了。\n\n"
        "那天晚上他第一次喝了酒。他说他有个妹妹，十五年前离开了岛，走的时候连一句话也没留下。“她小时"
        "候最怕打雷，”他说，“一打雷就往灯室里钻，说这里离天最近，雷不敢劈。”\n\n"
        "说完这些，他就不再开口了。我替他把马灯挂好，听见他在楼下来回踱步，一直走到天亮。\n"
    ),
    "第四章.md": (
        "# 第四章 暴风雨\n\n"
        "暴风雨来的那晚，灯室的门被锁上了。门外有个女人在拼命拍打，一声一声喊我的名字，说她叫苏晴。看"
        "守人傍晚划船去了对岸，到现在还没回来。我翻遍了抽屉和工具箱，找不到任何能打开那把锁的东西。雨"
        "水顺着窗缝往里灌。我忽然想起那年冬天，看守人在石阶上撬起一条木条，往底下的缝隙里塞了个小小的"
        "金属物件。\n"
    ),
}

NOVEL_EN: dict[str, str] = {
    "chapter-01.md": (
        "# Chapter 1: The Lighthouse\n\n"
        "I first saw the lighthouse on an October evening. The ferry stopped short of the reef, old "
        "Xu tossed my bag onto the rocks and said he would be back next month. The wind off the sea "
        "was cold, the waves came in one after another against the stones, and the low sun turned "
        "the tower the colour of rust.\n\n"
        "Lin Yuan was waiting in the doorway with an old lantern in his hand. He was about forty, "
        "his hair already half grey, and he spoke so quietly that the gulls were louder. He did not "
        "ask where I had come from. He only took my bundle and said, \"Come up and look.\"\n\n"
        "The spiral stairs climbed a hundred and eight steps to the lamp room. Lin Yuan went first, "
        "placing each foot as if he had counted them all. Up there it smelled of paraffin and old "
        "copper, and the great lens stood in the middle of the room like a closed eye.\n\n"
        "That night he taught me to trim the wick, to oil the lens, to write the wind and the tide "
        "in the log. He wrote slowly, one letter at a time, and when he had finished he closed the "
        "book and stared out at the dark. Only later did I understand that he was waiting for "
        "someone.\n"
    ),
    "chapter-02.md": (
        "# Chapter 2: The Third Step\n\n"
        "After the first frost the supply boat came once a month. Lin Yuan said little; at supper it "
        "was often just \"eat more\". I followed him about, mending frames, painting rails, counting "
        "drums of paraffin and sweeping the gallery, and the days went so slowly that I could hear "
        "each tide ebb. On clear afternoons he sat on the rocks with a pipe he never lit, watching "
        "the channel where the ferries used to run, and if I sat beside him he would sometimes name "
        "the birds for me, one by one, as though I might need them later.\n\n"
        "I woke after midnight to the wind and noticed a glow on the stairs. Lin Yuan was crouched at"
        " the third step, his lantern set beside him. He worked a loose board free with his knife, la"
        "id a brass key in the hollow beneath, pressed the board down and wiped the dust from it with"
        " his sleeve. The bow of the key was engraved with a single character, 晴, and it caught the "
        "light for an instant before the board hid it. I held my breath and kept still on the landing"
        ", my bare feet cold on the iron, until he had gone.\n\n"
        "In the morning he boiled the rice, read the sky and filled in the log as if nothing had "
        "happened. I did not ask. Everyone on the island knew that some questions, once asked, "
        "cannot be taken back.\n"
    ),
    "chapter-03.md": (
        "# Chapter 3: The Letter\n\n"
        "Old Xu's boat was three days late in the fog. He brought flour, lamp oil and a letter with "
        "no name on it. Lin Yuan read it for a long time, then folded the paper into a small square "
        "and burned it in the stove.\n\n"
        "That evening he drank for the first time since I had come. He told me he had a sister who "
        "left the island fifteen years ago without a word. \"She was afraid of thunder when she was "
        "little,\" he said. \"Whenever a storm came she ran up to the lamp room. She said it was the "
        "closest place to the sky, so the lightning would not dare.\"\n\n"
        "After that he said nothing more. I hung up his lantern, and heard him pacing below until "
        "dawn.\n"
    ),
    "chapter-04.md": (
        "# Chapter 4: The Storm\n\n"
        "On the night of the storm the lamp-room door was locked. A woman outside was pounding on "
        "it, calling my name over and over, saying she was Su Qing. The keeper had rowed across to "
        "the mainland at dusk and was not back. I turned out every drawer and toolbox and found "
        "nothing that would open the lock. Rain was driving in round the window. Then I thought of "
        "the keeper on the staircase that winter, prising up a plank with a blade and tucking "
        "something small into the gap below it: the one thing on this rock made to fit that lock.\n"
    ),
}

NOVEL: dict[str, dict[str, str]] = {"zh": NOVEL_ZH, "en": NOVEL_EN}
# The chapter being written (the cursor is at its end) and the writer's instruction.
NOVEL_CURSOR = {"zh": "第四章.md", "en": "chapter-04.md"}
NOVEL_INSTRUCTION = {"zh": "写我找到那件能开锁的东西",
                     "en": "Continue: how I find the thing that opens the lock"}
# The earlier passage the demo brings back by meaning: its document and a phrase of it.
NOVEL_RECALL = {"zh": ("第二章.md", "把一把铜钥匙放了进去"),
                "en": ("chapter-02.md", "laid a brass key in the hollow")}

NOVEL_RECORDS: dict[str, dict[str, list[dict[str, Any]]]] = {
    "zh": {
        "constraints": [
            {"kind": "narrative", "text": "严格第一人称叙述，不出现“我”不在场的场景", "priority": 10},
            {"kind": "character", "text": "林远性格冷静，不会大声喊叫", "priority": 8, "source": "kg"},
            {"kind": "world", "text": "本世界没有魔法，海岛与外界只靠渡船往来", "priority": 9},
            {"kind": "style", "text": "避免使用感叹号", "priority": 5},
        ],
        "entities": [
            {"kind": "character", "name": "林远", "aliases": ["看守人"],
             "description": "灯塔看守人，四十岁上下，话少，习惯提着一盏旧马灯。"},
            {"kind": "character", "name": "苏晴", "aliases": [],
             "description": "林远的妹妹，十五年前离开海岛，小时候怕打雷。"},
            {"kind": "character", "name": "老许", "aliases": [], "description": "渡船的船老大，每月送一次补给。"},
            {"kind": "location", "name": "灯塔", "aliases": ["灯室"],
             "description": "礁石上的旧灯塔，一百零八级螺旋石阶通往灯室。"},
        ],
        "rules": [
            {"text": "动作场景偏好短句", "confidence": 0.92, "confirmed": True},
            {"text": "喜欢用天气映衬人物情绪", "confidence": 0.55, "confirmed": False},
        ],
        "episodes": [{"instruction": "润色暴风雨的开头", "output": "雨来得很急。灯室的玻璃在风里发抖。"}],
    },
    "en": {
        "constraints": [
            {"kind": "narrative", "text": "First person only; never show a scene the narrator is absent from",
             "priority": 10},
            {"kind": "character", "text": "Lin Yuan is calm and never raises his voice", "priority": 8,
             "source": "kg"},
            {"kind": "world", "text": "No magic; the island's only link to the mainland is the ferry",
             "priority": 9},
        ],
        "entities": [
            {"kind": "character", "name": "Lin Yuan", "aliases": ["the keeper"],
             "description": "The lighthouse keeper, about forty, quiet, carries an old lantern."},
            {"kind": "character", "name": "Su Qing", "aliases": [],
             "description": "Lin Yuan's sister; left the island fifteen years ago; afraid of thunder as a child."},
            {"kind": "location", "name": "the lighthouse", "aliases": ["the lamp room"],
             "description": "An old tower on the reef; a hundred and eight spiral steps up to the lamp room."},
        ],
        "rules": [{"text": "Short sentences in action scenes", "confidence": 0.9, "confirmed": True}],
        "episodes": [{"instruction": "Polish the opening of the storm", "output": "The glass shook in its frame."}],
    },
}


async def seed_novel(call: Call, folder: Path, language: str) -> str:
    """The demo's novel (:data:`NOVEL`) and its records, through the protocol; return its projectId."""
    return await seed(call, folder, language, chapters=NOVEL[language], records=NOVEL_RECORDS[language])


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
