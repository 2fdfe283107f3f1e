"""The frozen corpus of the `novel` golden regression test (tests/e2e/test_novel_golden.py).

Pure data (projects, their documents and records, and the assembly requests
called *cases*) plus :func:`seed_corpus`, which creates every project through
the real JSON-RPC methods (``project:open``, ``project:settings:update``,
``document:write``, ``constraints:create``, ``kg:entity:upsert``,
``memory:semantic:upsert``, ``memory:episodic:add``, ``context:budget:update``)
and waits for each project's retrieval index to settle (``index:status``).

The data is frozen: the golden files under tests/golden/novel/ were captured
from it (scripts/capture_golden.py) and record :func:`corpus_fingerprint`. Any
edit here, or to the text helpers of tests/support/scenarios.py it uses,
changes the fingerprint and means re-capturing, which is only right when the
engine's output is meant to change too.

Seeding order matters: record ids are global autoincrement numbers that show
in candidate ids (``constraint:7``) and break ties, so projects and their
records are always created one after another in the order written here, in a
fresh data dir.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.client import RpcClient
from tests.support.scenarios import Project, zh_chapter, zh_names, zh_sentence

# ---------------------------------------------------------------------------------------------
# Shapes


@dataclass(frozen=True)
class Constraint:
    text: str
    kind: str = "plot"
    priority: int = 0
    source: str = "user"


@dataclass(frozen=True)
class Entity:
    name: str
    description: str
    kind: str = "character"
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rule:
    text: str
    confidence: float
    confirmed: bool = True


@dataclass(frozen=True)
class Episode:
    instruction: str
    output: str
    skill: str = "continue"


@dataclass(frozen=True)
class ProjectSpec:
    """One project folder and everything seeded into it, in order."""

    key: str  # folder name and the name cases refer to
    settings: Mapping[str, Any]  # project:settings:update fields (wire names)
    documents: Mapping[str, str]  # document id -> text, written in this order
    constraints: tuple[Constraint, ...] = ()
    entities: tuple[Entity, ...] = ()
    rules: tuple[Rule, ...] = ()
    episodes: tuple[Episode, ...] = ()
    budget: Mapping[str, Any] | None = None  # context:budget:update patch


@dataclass(frozen=True)
class Case:
    """One request, sent as context:assemble and as context:inspect.

    ``cursor`` is ``"start"``, ``"end"`` or ``"after:<text>"`` (just after the first occurrence of
    <text> in the document). ``budget_override`` goes to context:inspect only (a what-if), so
    there the two results differ. ``expects`` names the engine paths the captured inspect result
    must show (see :func:`unmet_expectations`): the capture refuses a corpus that no longer
    exercises what a case claims.
    """

    name: str
    summary: str
    project: str
    document: str
    cursor: str
    skill: str = "continue"
    additional_input: str | None = None
    budget_override: Mapping[str, Any] | None = None
    expects: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Text

_EN_TEMPLATES = (
    "I counted step {n} and stopped to listen to the sea.",
    "The clock in the lamp room struck {n} times while the wind pushed at the glass.",
    "Lantern number {n} hung on the wall, and its flame leaned toward the door.",
    "I wrote line {n} in the logbook, and the damp blurred the ink.",
    "Far off, fishing boat {n} showed a light and drifted toward the harbour.",
    "Lin Yuan nailed board {n} back in place without a word.",
)


def en_sentence(n: int) -> str:
    return _EN_TEMPLATES[n % len(_EN_TEMPLATES)].format(n=n)


def en_chapter(title: str, sentences: int, start: int = 1, per_paragraph: int = 5) -> str:
    """The English twin of ``zh_chapter``: distinct numbered sentences in paragraphs."""
    paragraphs = []
    for first in range(start, start + sentences, per_paragraph):
        last = min(first + per_paragraph, start + sentences)
        paragraphs.append(" ".join(en_sentence(n) for n in range(first, last)))
    return f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n"


def zh_paragraph(first: int, count: int) -> str:
    return "".join(zh_sentence(n) for n in range(first, first + count))


def en_paragraph(first: int, count: int) -> str:
    return " ".join(en_sentence(n) for n in range(first, first + count))


# ---------------------------------------------------------------------------------------------
# Projects

ZH_KEY_FACT = "林远把铜钥匙藏在灯塔第三级台阶下的砖缝里，又用青苔盖住了缝隙。"
EN_KEY_FACT = ("Lin Yuan hid the brass key under the third step of the lighthouse stairs "
               "and covered it with moss.")

# An episode whose score ties with the newest one at the end of 第五章 (see ZH_LIGHTHOUSE): it is one
# rank older (recency 0.3 x 0.85 instead of 0.3) and 9 of its 140 features occur in the window,
# so 0.7 x 9/140 + 0.255 = 0.3 = 0.7 x 0 + 0.3.
_ZH_TIE_OUTPUT = ("苏晴收起雨伞，把湿透的信纸摊在桌上晾干。窗外的雾还没有散，远处码头上传来搬运工的吆喝。"
                  "她想起小时候跟着母亲去集市买橘子，街角那家糖铺的老板总会多塞给她一颗桂花糖。"
                  "她停下来听了一会儿。信里说医院的走廊很长，夜班护士总在凌晨三点巡房。"
                  "她写道自己学会了包扎伤口，也学会了在病人面前微笑。"
                  "末尾她画了一只歪歪扭扭的小猫，旁边注明这是宿舍楼下。")

ZH_LIGHTHOUSE = ProjectSpec(
    key="zh-灯塔",
    settings={"language": "zh", "narrativePerson": "第一人称", "styleNotes": "短句为主，少用形容词。"},
    documents={
        "卷一/第01章.md": zh_chapter("第一章 灯塔", 30, start=1),
        "卷一/第02章.md": zh_chapter("第二章 钥匙", 30, start=31) + "\n" + ZH_KEY_FACT + "\n",
        "卷一/第03章.md": zh_chapter("第三章 来信", 40, start=61)
        + "\n苏晴的信是从港口的医院寄来的，信封上只写了一个“晴”字。\n",
        "卷一/第05章.md": zh_chapter("第五章 暴风雨", 60, start=101)
        + "\n林远提着旧马灯走上台阶，我跟在他身后，数着脚下的木板。\n",
        # A copy of a paragraph of 第五章: retrieved from elsewhere, yet already in the window.
        "摘录.md": zh_paragraph(111, 5) + "\n",
    },
    constraints=(
        Constraint("严格第一人称叙述，不出现主角不在场的场景", kind="narrative", priority=10),
        Constraint("本世界没有魔法，所有能力基于科技", kind="world", priority=9),
        Constraint("主角在第五章之前不知道真相", kind="plot", priority=7),
        Constraint("避免使用感叹号和省略号", kind="style", priority=7),  # ties with the one above
        Constraint("林远性格冷静，不会大声喊叫", kind="character", priority=8, source="kg"),
        Constraint("苏晴左手有一道旧伤疤", kind="character", priority=3, source="kg"),
    ),
    entities=(
        Entity("林远", "灯塔看守人，四十岁，沉默，习惯提着旧马灯。", aliases=("灯塔看守人",)),
        Entity("苏晴", "林远失散多年的妹妹，在港口的医院工作。", aliases=("晴",)),
        Entity("灯塔", "海角尽头的旧灯塔，螺旋台阶通往灯室。", kind="location"),
        Entity("铜钥匙", "刻着“晴”字，藏在第三级台阶下。", kind="object", aliases=("钥匙",)),
        # Two sheets nothing in any window relates to: equal relevance 0.
        Entity("税务所", "征收集市摊贩的税款。", kind="group"),
        Entity("潮汐表", "渔民用来推算涨落的表格。", kind="concept"),
    ),
    rules=(
        Rule("动作场景偏好短句", confidence=0.92),
        Rule("对白前后少用副词修饰", confidence=0.8),
        Rule("环境描写点到为止", confidence=0.8),  # ties with the one above
        Rule("喜欢用天气映衬人物情绪", confidence=0.55, confirmed=False),
    ),
    episodes=(
        Episode("润色暴风雨的开头", "雨来得很急。灯室的玻璃在风里发抖。", skill="polish"),
        Episode("续写林远藏钥匙的场景", "他把钥匙放进台阶下，木板合上时没有一点声音。"),
        Episode("续写林远藏钥匙的场景", "他把钥匙放进台阶下，木板合上时没有一点声音。"),  # a duplicate
        Episode("写苏晴读信", _ZH_TIE_OUTPUT),
        Episode("写一段回忆", "小时候的冬天，村口的老槐树下总有卖烤红薯的担子。"),
    ),
)

# Far more entity sheets than the Rules share holds; three are named near the end of the chapter.
_CROWD_NAMES = zh_names(60)
ZH_CROWD = ProjectSpec(
    key="zh-百人",
    settings={"language": "zh", "narrativePerson": "第三人称有限视角"},
    documents={
        "第八章.md": zh_chapter("第八章 码头", 80, start=300) + "\n苏晴站在码头上，周岚举着灯跟在她身后。\n",
    },
    constraints=(Constraint("严格遵守第三人称有限视角", kind="narrative", priority=10),),
    entities=(
        *(Entity(name, "常在灯室和台阶附近出没，熟悉渔船。" if n % 3 == 0 else "住在山那边的镇子上。")
          for n, name in enumerate(_CROWD_NAMES)),
        Entity("林远", "主要人物。灯塔看守人。"),
        Entity("苏晴", "主要人物。", aliases=("阿晴",)),
        Entity("周岚", "主要人物。"),
    ),
    rules=(Rule("动作场景偏好短句", confidence=0.9),),
    episodes=(Episode("续写码头的场景", "码头上的灯一盏一盏亮了。"),),
)

# User constraints near the Rules share, kg constraints and sheets well over it: every sheet and
# the lowest kg constraints go; no user constraint does.
ZH_BLOAT = ProjectSpec(
    key="zh-膨胀",
    settings={"language": "zh", "narrativePerson": "第一人称"},
    documents={"第十二章.md": zh_chapter("第十二章 审判", 60, start=400)},
    constraints=(
        *(Constraint(f"用户约束{n + 1}：{zh_sentence(500 + n)}", kind="plot", priority=n % 4)
          for n in range(24)),
        *(Constraint(f"图谱约束{n + 1}：{zh_sentence(540 + n)}{zh_sentence(560 + n)}", kind="character",
                     priority=50 + n // 2, source="kg") for n in range(14)),
    ),
    entities=tuple(Entity(name, "；".join(zh_sentence(600 + 3 * n + k) for k in range(2)))
                   for n, name in enumerate(zh_names(16))),
)

# A 4K model whose layers do not all fit: Retrieved, then Settings, then the window are cut, by how
# long the instruction is (an instruction is never cut). Many preferences of equal confidence.
_PRESSURE_EPISODES = tuple(
    Episode(f"续写第{n + 1}段", "".join(zh_sentence(1000 + 6 * n + k) for k in range(6))) for n in range(10))
ZH_PRESSURE = ProjectSpec(
    key="zh-潮",
    settings={"language": "zh", "narrativePerson": "第一人称", "model": "qwen-max",
              "styleNotes": "；".join(zh_sentence(800 + n) for n in range(6))},
    documents={
        **{f"卷二/第{n:02d}章.md": zh_chapter(f"第{n}章", 30, start=1200 + 30 * n) for n in range(1, 7)},
        "卷二/第07章.md": zh_chapter("第七章 潮水", 150, start=1500),
    },
    constraints=(Constraint("严格第一人称叙述", kind="narrative", priority=10),
                 Constraint("本世界没有魔法", kind="world", priority=9)),
    entities=(Entity("林远", "灯塔看守人。", aliases=("看守人",)),),
    rules=tuple(Rule(f"偏好{n + 1}：{zh_sentence(700 + n)}", confidence=(0.9, 0.8, 0.8, 0.7)[n % 4])
                for n in range(12)),
    episodes=_PRESSURE_EPISODES,
    budget={"contextWindow": 4096, "outputReserve": 512,
            "minimums": {"rules": 300, "settings": 150, "retrieved": 300, "immediate": 1000}},
)

# A budget smaller than the writer's own constraints: the last resort cuts them.
ZH_TINY = ProjectSpec(
    key="zh-极小",
    settings={"language": "zh", "narrativePerson": "第一人称"},
    documents={"短章.md": zh_chapter("短章", 12, start=2000)},
    constraints=tuple(Constraint(f"约束{n + 1}：{zh_sentence(2100 + n)}", kind="plot", priority=n % 3)
                      for n in range(8)),
    entities=(Entity("林远", "灯塔看守人。"),),
    rules=(Rule("动作场景偏好短句", confidence=0.9),),
    episodes=(Episode("续写", zh_sentence(2200)),),
    budget={"contextWindow": 400, "outputReserve": 100,
            "minimums": {"rules": 0, "settings": 0, "retrieved": 0, "immediate": 0}},
)

EN_LIGHTHOUSE = ProjectSpec(
    key="en-lighthouse",
    settings={"language": "en", "narrativePerson": "first person", "model": "gpt-3.5-turbo",
              "styleNotes": "Plain words; short sentences in action scenes.",
              "skillPrompts": {"polish": "You polish prose for a novelist. Keep every fact. Output only the "
                                         "polished passage."}},
    documents={
        "chapter-01.md": en_chapter("Chapter 1: The Lighthouse", 25, start=1),
        "chapter-02.md": en_chapter("Chapter 2: The Key", 25, start=26) + "\n" + EN_KEY_FACT + "\n",
        "chapter-03.md": en_chapter("Chapter 3: The Letter", 30, start=51)
        + "\nSu Qing's letter came from the harbour hospital, signed with a single word: Qing.\n",
        "chapter-05.md": en_chapter("Chapter 5: The Storm", 45, start=81)
        + "\nLin Yuan climbed the stairs with the old lantern and I followed, counting the boards.\n",
        "notes/excerpt.md": en_paragraph(91, 5) + "\n",
    },
    constraints=(
        Constraint("First person only; never show a scene the narrator is absent from", kind="narrative",
                   priority=10),
        Constraint("There is no magic in this world", kind="world", priority=9),
        Constraint("The narrator does not learn the truth before chapter 5", kind="plot", priority=9),
        Constraint("Lin Yuan never raises his voice", kind="character", priority=8, source="kg"),
    ),
    entities=(
        Entity("Lin Yuan", "The lighthouse keeper, forty, quiet, carries an old lantern.",
               aliases=("the keeper",)),
        Entity("Su Qing", "Lin Yuan's long-lost sister, a nurse at the harbour hospital.", aliases=("Qing",)),
        Entity("brass key", "Engraved with 'Qing', hidden under the third step.", kind="object",
               aliases=("key",)),
        Entity("Customs House", "Collects duties from cargo ships.", kind="group"),
        Entity("Apothecary", "Sells herbs, salves, tinctures.", kind="concept"),
    ),
    rules=(
        Rule("Short sentences in action scenes", confidence=0.9),
        Rule("Few adverbs around dialogue", confidence=0.75),
        Rule("Weather mirrors mood", confidence=0.75),
        Rule("Dialogue tags only 'said'", confidence=0.6, confirmed=False),
    ),
    episodes=(
        Episode("Continue the storm scene", "The glass shook in its frame."),
        Episode("Polish the opening", "The rain came fast. The lamp-room glass trembled.", skill="polish"),
        Episode("Write a memory", "Every winter a man sold roasted chestnuts under the old elm."),
    ),
)

# English, a tight budget: the kg content overflows Rules and the layers do not all fit.
_EN_CROWD = ("Ada Finch", "Bram Hollow", "Cora Vane", "Dell Marsh", "Edda Stone", "Flint Rowe", "Gwen Tarr",
             "Hob Lister", "Ivo Crane", "Jessa Moor", "Kit Farrow", "Lena Birch")
EN_PRESSURE = ProjectSpec(
    key="en-pressure",
    settings={"language": "en", "narrativePerson": "third person", "styleNotes": en_paragraph(900, 4)},
    documents={
        **{f"part-1/chapter-{n:02d}.md": en_chapter(f"Chapter {n}", 20, start=1000 + 20 * n)
           for n in range(1, 5)},
        "part-1/chapter-05.md": en_chapter("Chapter 5", 120, start=1200),
    },
    constraints=(
        Constraint("Third person, past tense", kind="narrative", priority=10),
        Constraint("No magic", kind="world", priority=9),
        *(Constraint(f"Canon {n + 1}: {en_sentence(940 + n)} {en_sentence(960 + n)}", kind="character",
                     priority=20 + n % 3, source="kg") for n in range(14)),
    ),
    entities=(
        *(Entity(name, en_sentence(980 + n)) for n, name in enumerate(_EN_CROWD)),
        Entity("Lin Yuan", "The keeper.", aliases=("keeper",)),
    ),
    rules=tuple(Rule(f"Preference {n + 1}: {en_sentence(1100 + n)}", confidence=(0.9, 0.7, 0.7)[n % 3])
                for n in range(9)),
    episodes=tuple(Episode(f"Continue part {n + 1}", en_paragraph(1400 + 5 * n, 5)) for n in range(8)),
    budget={"contextWindow": 4096, "outputReserve": 512, "ratios": {"rules": 0.1, "settings": 0.1,
                                                                    "retrieved": 0.3, "immediate": 0.5},
            "minimums": {"rules": 200, "settings": 150, "retrieved": 250, "immediate": 900}},
)

PROJECTS: tuple[ProjectSpec, ...] = (ZH_LIGHTHOUSE, ZH_CROWD, ZH_BLOAT, ZH_PRESSURE, ZH_TINY, EN_LIGHTHOUSE,
                                     EN_PRESSURE)
PROJECTS_BY_KEY: dict[str, ProjectSpec] = {p.key: p for p in PROJECTS}


# ---------------------------------------------------------------------------------------------
# Cases

_ZH_LONG_INSTRUCTION = "请按以下要求续写：" + "".join(zh_sentence(3000 + n) for n in range(40))
_ZH_HUGE_INSTRUCTION = "请按以下要求改写：" + "".join(zh_sentence(3100 + n) for n in range(70))
_EN_LONG_INSTRUCTION = "Rewrite it so that: " + en_paragraph(3000, 100)

CASES: tuple[Case, ...] = (
    # zh-灯塔: the default budget holds everything.
    Case("zh-fits-continue-end", "zh; everything fits; passages from other chapters; window duplicates "
         "skipped; tied constraints, preferences, sheets and past interactions",
         "zh-灯塔", "卷一/第05章.md", "end",
         expects=("no-warnings", "included:passages", "duplicate:passages", "duplicate:history",
                  "tie:constraints", "tie:preferences", "tie:entities", "tie:history")),
    Case("zh-continue-instruction",
         "zh; continue with an instruction that retrieves the key hidden in 第二章",
         "zh-灯塔", "卷一/第05章.md", "end", additional_input="写林远想起那把铜钥匙藏在哪里",
         expects=("no-warnings", "included:passages", "instruction")),
    Case("zh-polish-middle", "zh; polish at mid-chapter: text after the cursor, chunks of the chapter "
         "itself skipped as duplicates", "zh-灯塔", "卷一/第05章.md", "after:" + zh_sentence(130),
         skill="polish", expects=("no-warnings", "after-cursor", "duplicate:passages")),
    Case("zh-expand-middle", "zh; expand at mid-chapter with an instruction", "zh-灯塔", "卷一/第05章.md",
         "after:" + zh_sentence(145), skill="expand", additional_input="补充海风和灯光的描写",
         expects=("no-warnings", "after-cursor", "instruction")),
    Case("zh-rewrite-start", "zh; rewrite at the very start of a chapter (only text after the cursor)",
         "zh-灯塔", "卷一/第03章.md", "start", skill="rewrite", additional_input="改成倒叙",
         expects=("no-warnings", "after-cursor", "instruction")),
    Case("zh-continue-start", "zh; continue at offset 0: an empty window, no Immediate text",
         "zh-灯塔", "卷一/第01章.md", "start", expects=("no-warnings", "no-window")),
    Case("zh-whatif-small-window", "zh; inspect what-if with a 2.4K window (budgetOverride): Retrieved and "
         "Settings trimmed, the window cut", "zh-灯塔", "卷一/第05章.md", "end",
         budget_override={"contextWindow": 2400, "outputReserve": 400,
                          "ratios": {"rules": 0.1, "settings": 0.05, "retrieved": 0.05, "immediate": 0.8},
                          "minimums": {"settings": 40, "immediate": 900}},
         expects=("dropped:history:budget", "dropped:passages:budget", "dropped:preferences:budget",
                  "trimmed:window")),
    # zh-百人: entity sheets shed by relevance.
    Case("zh-rules-sheets-by-relevance", "zh; Rules over its share: 63 sheets, the named ones kept, the "
         "rest dropped least relevant first (ties by id)", "zh-百人", "第八章.md", "end",
         expects=("warn:CONTEXT_RULES_OVERBUDGET", "dropped:entities:rules_relevance", "tie:entities")),
    Case("zh-rules-sheets-polish", "zh; the same sheets judged against a polish window mid-chapter",
         "zh-百人", "第八章.md", "after:" + zh_sentence(340), skill="polish",
         expects=("warn:CONTEXT_RULES_OVERBUDGET", "dropped:entities:rules_relevance", "after-cursor")),
    # zh-膨胀: kg constraints shed too.
    Case("zh-rules-kg-constraints-cut", "zh; Rules over its share: every sheet and the lowest kg constraints "
         "dropped, all user constraints kept", "zh-膨胀", "第十二章.md", "end",
         expects=("warn:CONTEXT_RULES_OVERBUDGET", "dropped:entities:rules_relevance",
                  "dropped:constraints:rules_overbudget", "tie:constraints")),
    # zh-潮: a 4K budget, trimmed further by longer instructions.
    Case("zh-retrieved-trimmed", "zh; 4K budget: Retrieved trimmed lowest score first, the rest whole",
         "zh-潮", "卷二/第07章.md", "end",
         expects=("dropped:passages:budget", "tie:preferences")),
    Case("zh-settings-trimmed", "zh; a long instruction: Retrieved down to its minimum, Settings trimmed "
         "(equal confidences, oldest dropped first)", "zh-潮", "卷二/第07章.md", "end",
         additional_input=_ZH_LONG_INSTRUCTION,
         expects=("dropped:preferences:budget", "instruction")),
    Case("zh-window-cut",
         "zh; a longer instruction: Retrieved and Settings at their minimums, the window cut from its far "
         "end",
         "zh-潮", "卷二/第07章.md", "after:" + zh_sentence(1600), skill="rewrite",
         additional_input=_ZH_HUGE_INSTRUCTION, expects=("trimmed:window", "instruction", "after-cursor")),
    Case("zh-below-minimum", "zh; inspect what-if with a 1.4K window: every layer cut below its minimum "
         "(CONTEXT_BELOW_MINIMUM)", "zh-潮", "卷二/第07章.md", "after:" + zh_sentence(1560),
         skill="expand", budget_override={"contextWindow": 1400, "outputReserve": 300},
         expects=("warn:CONTEXT_BELOW_MINIMUM: retrieved", "warn:CONTEXT_BELOW_MINIMUM: settings",
                  "warn:CONTEXT_BELOW_MINIMUM: immediate", "trimmed:window")),
    Case("zh-pressure-polish-start", "zh; polish at the start of the long chapter under the 4K budget",
         "zh-潮", "卷二/第07章.md", "start", skill="polish", expects=("after-cursor",)),
    # zh-极小: the last resort.
    Case("zh-rules-truncated", "zh; total below the user constraints alone: every other layer emptied, user "
         "constraints cut (CONTEXT_RULES_TRUNCATED)", "zh-极小", "短章.md", "end",
         expects=("warn:CONTEXT_RULES_TRUNCATED", "warn:CONTEXT_RULES_OVERBUDGET")),
    # en-lighthouse: the default budget holds everything.
    Case("en-fits-continue-end", "en; everything fits; passages from other chapters; window duplicates "
         "skipped; tied preferences and sheets", "en-lighthouse", "chapter-05.md", "end",
         expects=("no-warnings", "included:passages", "duplicate:passages", "tie:preferences",
                  "tie:entities", "tie:constraints")),
    Case("en-continue-instruction", "en; continue with an instruction that retrieves the key in chapter 2",
         "en-lighthouse", "chapter-05.md", "end",
         additional_input="Lin Yuan remembers where he hid the brass key",
         expects=("no-warnings", "included:passages", "instruction")),
    Case("en-polish-middle", "en; polish mid-chapter with the project's own polish system prompt",
         "en-lighthouse", "chapter-05.md", "after:" + en_sentence(100), skill="polish",
         expects=("no-warnings", "after-cursor")),
    Case("en-expand-middle", "en; expand mid-chapter with an instruction", "en-lighthouse", "chapter-03.md",
         "after:" + en_sentence(65), skill="expand", additional_input="More about the wind",
         expects=("no-warnings", "after-cursor", "instruction")),
    Case("en-rewrite-start", "en; rewrite at the start of a chapter", "en-lighthouse", "chapter-02.md",
         "start", skill="rewrite", additional_input="Make it a flashback",
         expects=("no-warnings", "after-cursor")),
    Case("en-continue-start-instruction", "en; continue at offset 0 with only an instruction",
         "en-lighthouse", "chapter-01.md", "start", additional_input="Open with the keeper's lantern",
         expects=("no-warnings", "no-window", "instruction")),
    Case("en-whatif-ratios", "en; inspect what-if with other ratios and a 2K window: a large Retrieved "
         "minimum keeps passages and the window is cut instead", "en-lighthouse", "chapter-05.md", "end",
         budget_override={"contextWindow": 2048, "outputReserve": 256,
                          "ratios": {"rules": 0.3, "settings": 0.1, "retrieved": 0.2, "immediate": 0.4},
                          "minimums": {"rules": 100, "settings": 50, "retrieved": 1000, "immediate": 300}},
         expects=("trimmed:window", "dropped:passages:budget")),
    # en-pressure: a tight budget.
    Case("en-rules-kg-cut", "en; Rules over its share: sheets and kg constraints shed; Retrieved trimmed",
         "en-pressure", "part-1/chapter-05.md", "end",
         expects=("warn:CONTEXT_RULES_OVERBUDGET", "dropped:entities:rules_relevance",
                  "dropped:constraints:rules_overbudget", "dropped:passages:budget")),
    Case("en-window-cut-instruction", "en; a long instruction: Settings trimmed and the window cut",
         "en-pressure", "part-1/chapter-05.md", "after:" + en_sentence(1280), skill="rewrite",
         additional_input=_EN_LONG_INSTRUCTION,
         expects=("dropped:preferences:budget", "trimmed:window", "instruction")),
    Case("en-rules-truncated-whatif", "en; inspect what-if with a 200-token window: user constraints cut",
         "en-pressure", "part-1/chapter-05.md", "end",
         budget_override={"contextWindow": 200, "outputReserve": 150,
                          "minimums": {"rules": 0, "settings": 0, "retrieved": 0, "immediate": 0}},
         expects=("warn:CONTEXT_RULES_TRUNCATED",)),
)
CASES_BY_NAME: dict[str, Case] = {c.name: c for c in CASES}


# ---------------------------------------------------------------------------------------------
# Resolving and checking


def resolve_cursor(text: str, cursor: str) -> int:
    """The code-point offset a case's ``cursor`` names in ``text``."""
    if cursor == "start":
        return 0
    if cursor == "end":
        return len(text)
    marker = cursor.removeprefix("after:")
    assert marker != cursor, f"unknown cursor spec {cursor!r}"
    return text.index(marker) + len(marker)


def request_params(case: Case, project_id: str) -> dict[str, Any]:
    """The context:assemble params of ``case`` (context:inspect adds ``budgetOverride``)."""
    text = PROJECTS_BY_KEY[case.project].documents[case.document]
    params: dict[str, Any] = {"projectId": project_id, "documentId": case.document,
                              "cursorPosition": resolve_cursor(text, case.cursor), "skillId": case.skill}
    if case.additional_input is not None:
        params["additionalInput"] = case.additional_input
    return params


def inspect_params(case: Case, project_id: str) -> dict[str, Any]:
    params = request_params(case, project_id)
    if case.budget_override is not None:
        params["budgetOverride"] = dict(case.budget_override)
    return params


def corpus_fingerprint() -> str:
    """SHA-256 of every project and case as data: changes whenever the corpus does."""
    data = {"projects": [dataclasses.asdict(p) for p in PROJECTS],
            "cases": [dataclasses.asdict(c) for c in CASES]}
    blob = json.dumps(data, ensure_ascii=False, sort_keys=True, default=_plain)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(type(value).__name__)


def unmet_expectations(case: Case, inspected: Mapping[str, Any]) -> list[str]:
    """The markers of ``case.expects`` that the inspect result does not show.

    ``no-warnings``; ``warn:<prefix>`` (a warning starts so); ``included:<section>`` (an item of
    another document, for passages); ``<fate>:<section>[:<reason>]``; ``duplicate:<section>``;
    ``trimmed:window``; ``tie:<section>`` (two candidates of the section with equal keys);
    ``instruction``; ``after-cursor`` (text after the cursor in the window); ``no-window``.
    """
    candidates: Sequence[Mapping[str, Any]] = inspected["candidates"]
    unmet = []
    for marker in case.expects:
        kind, _, rest = marker.partition(":")
        section, _, reason = rest.partition(":")
        in_section = [c for c in candidates if c["section"] == section]
        if kind == "no-warnings":
            ok = inspected["warnings"] == []
        elif kind == "warn":
            ok = any(w.startswith(rest) for w in inspected["warnings"])
        elif kind == "included":
            ok = any(c["fate"] == "included" and not (section == "passages" and
                                                      c["source"] == f"document:{case.document}")
                     for c in in_section)
        elif kind == "dropped":
            ok = any(c["fate"] == "dropped" and (not reason or c["reason"] == reason) for c in in_section)
        elif kind == "duplicate":
            ok = any(c["reason"] == "duplicate" for c in in_section)
        elif kind == "trimmed":
            ok = any(c["fate"] == "trimmed" for c in in_section)
        elif kind == "tie":
            keys = [c["key"] for c in in_section]
            ok = len(set(keys)) < len(keys)
        elif kind == "instruction":
            ok = case.additional_input is not None and inspected["layerTexts"]["immediate"].endswith(
                case.additional_input.strip())
        elif kind == "after-cursor":
            ok = any(mark in inspected["prompt"] for mark in ("【光标】", "[[cursor]]"))
        elif kind == "no-window":
            ok = not any(c["section"] == "window" for c in candidates)
        else:
            raise AssertionError(f"unknown expectation {marker!r}")
        if not ok:
            unmet.append(marker)
    return unmet


# ---------------------------------------------------------------------------------------------
# Seeding


async def seed_project(rpc: RpcClient, root: Path, spec: ProjectSpec) -> Project:
    """Create ``spec`` under ``root`` through JSON-RPC, in the order written."""
    project = await Project.open(rpc, root / spec.key)
    await project.update_settings(**spec.settings)
    for document_id, text in spec.documents.items():
        await project.write(document_id, text)
    for c in spec.constraints:
        await project.constraint(c.text, kind=c.kind, priority=c.priority, source=c.source)
    for e in spec.entities:
        await project.entity(e.name, e.description, kind=e.kind, aliases=e.aliases)
    for r in spec.rules:
        await project.rule(r.text, confidence=r.confidence, confirmed=r.confirmed)
    for ep in spec.episodes:
        await project.episode(ep.instruction, ep.output, skill_id=ep.skill)
    if spec.budget is not None:
        await project.budget(**spec.budget)
    return project


async def wait_settled(rpc: RpcClient, project_ids: Sequence[str], timeout: float = 120) -> None:
    """Until ``index:status`` reports every project's retrieval index settled."""
    deadline = time.monotonic() + timeout
    for project_id in project_ids:
        while (await rpc.call("index:status", {"projectId": project_id}))["indexing"]:
            if time.monotonic() > deadline:
                raise TimeoutError("the retrieval index did not settle")
            await asyncio.sleep(0.05)


async def seed_corpus(rpc: RpcClient, root: Path) -> dict[str, str]:
    """Seed every project, one after another, and wait for retrieval; return key -> projectId."""
    ids: dict[str, str] = {}
    for spec in PROJECTS:
        ids[spec.key] = (await seed_project(rpc, root, spec)).project_id
    await wait_settled(rpc, list(ids.values()))
    return ids


# Fields compared. Left out: timingsMs (wall-clock), and stablePrefixUnchanged / prefixDivergence,
# which depend on which assemblies of the same (project, document, skill) the server ran before
# (so on which cases run, in which order), not on the request.
ASSEMBLE_FIELDS = ("prompt", "tokenCount", "stablePrefixHash", "prefixHashes", "layers", "warnings", "budget",
                   "systemPrompt", "tokenizer")
INSPECT_FIELDS = (*ASSEMBLE_FIELDS, "candidates", "layerTexts", "arithmetic")


def golden_fields(result: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {name: result[name] for name in names}


async def run_case(rpc: RpcClient, inspector: RpcClient, case: Case,
                   project_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The whole results of context:assemble (client token) and context:inspect (inspector token)."""
    assembled = await rpc.call("context:assemble", request_params(case, project_id))
    inspected = await inspector.call("context:inspect", inspect_params(case, project_id))
    return dict(assembled), dict(inspected)


# The server the golden files are captured from and checked against (tests/support/process.py).
# The encoder is named: the Retrieved layer's passages depend on it (the default, e5, is pinned by
# tests/e2e/test_retrieval.py and tests/main/test_default_embedder.py).
SERVER_ARGS = ("--debug", "--index-debounce", "0.1", "--embedding", "use-multilingual")


def golden_request(case: Case) -> dict[str, Any]:
    """The request of ``case`` as recorded in its golden file (the project by key: ids vary by path)."""
    params = inspect_params(case, "")
    del params["projectId"]
    return {"project": case.project, **params}


def golden_document(case: Case, assembled: Mapping[str, Any], inspected: Mapping[str, Any]) -> dict[str, Any]:
    """The content of ``case``'s golden file."""
    return {"case": case.name, "summary": case.summary, "corpusFingerprint": corpus_fingerprint(),
            "request": golden_request(case), "assemble": golden_fields(assembled, ASSEMBLE_FIELDS),
            "inspect": golden_fields(inspected, INSPECT_FIELDS)}
