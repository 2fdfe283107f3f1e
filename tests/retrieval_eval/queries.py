# ruff: noqa: E501  (data: long sentences of prose read better unbroken)
"""The labelled queries of the retrieval evaluation, over the facts planted by ``projects.py``.

Three kinds:

- ``paraphrase``: the question a writer would ask, in other words than the
  fact's (``主角把那把钥匙藏到哪里去了`` for the fact that 林远 hid the brass key
  under the third step of the lighthouse).
- ``keyword``: a distinctive name or term from the fact, as typed into a search
  box (``七号仓库``, ``Agnes Pell``).
- ``cross_chapter``: the text just before the cursor in a late chapter
  (``chapter``), which must bring back a fact planted in an early one: what
  the Retrieved layer is for.

A query is relevant to each fact in ``facts``; most have one, a few two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tests.retrieval_eval.corpus import Language

Kind = Literal["paraphrase", "keyword", "cross_chapter"]
KINDS: tuple[Kind, ...] = ("paraphrase", "keyword", "cross_chapter")


@dataclass(frozen=True)
class Query:
    id: str
    project_id: str
    language: Language
    kind: Kind
    text: str
    facts: tuple[str, ...]
    chapter: int | None = None  # cross_chapter: the chapter being written


def _zh(project: str, id: str, kind: Kind, text: str, *facts: str, chapter: int | None = None) -> Query:
    return Query(id, project, "zh", kind, text, facts, chapter)


def _en(id: str, kind: Kind, text: str, *facts: str, chapter: int | None = None) -> Query:
    return Query(id, "salt-road", "en", kind, text, facts, chapter)


P: Kind = "paraphrase"
K: Kind = "keyword"
X: Kind = "cross_chapter"

QUERIES: tuple[Query, ...] = (
    # ------------------------------------------------------------------ 《雾港》
    _zh("wugang", "wg-p1", P, "主角把那把钥匙藏到哪里去了", "wg-key"),
    _zh("wugang", "wg-p2", P, "守塔的老人为什么缺了手指", "wg-scar"),
    _zh("wugang", "wg-p3", P, "周岚闻到什么会咳嗽", "wg-allergy"),
    _zh("wugang", "wg-p4", P, "镇上那口大钟为什么总是不准", "wg-clock"),
    _zh("wugang", "wg-p5", P, "韩舟拿什么作抵押借的钱", "wg-debt"),
    _zh("wugang", "wg-p6", P, "有人在老陈的药里下毒", "wg-poison"),
    _zh("wugang", "wg-p7", P, "阿岩是不是老许亲生的孩子", "wg-foundling"),
    _zh("wugang", "wg-p8", P, "出事那晚老许其实在做什么", "wg-alibi"),
    _zh("wugang", "wg-p9", P, "为什么雾夜里灯塔的光照不远", "wg-lens"),
    _zh("wugang", "wg-k1", K, "白鹭号 报关单", "wg-ship", "wg-signature"),
    _zh("wugang", "wg-k2", K, "七号仓库", "wg-letter"),
    _zh("wugang", "wg-k3", K, "育婴堂 记者证", "wg-orphan"),
    _zh("wugang", "wg-k4", K, "修堤款 蓝皮小册子", "wg-mayor"),
    _zh("wugang", "wg-k5", K, "去新加坡的船票", "wg-ticket"),
    _zh("wugang", "wg-k6", K, "排水暗道 地窖", "wg-tunnel"),
    _zh("wugang", "wg-c1", X, "天还没亮，林远又一次爬上了灯塔。走到第三级台阶的时候，他停了下来，想起了那把钥匙，",
        "wg-key", chapter=36),
    _zh("wugang", "wg-c2", X, "苏晴把洗好的照片一张张摊在桌上，翻到旧码头的那一张时，她的手停住了。韩舟身边的那个人，",
        "wg-photo", chapter=30),
    _zh("wugang", "wg-c3", X, "清明那天，林远一个人去给母亲上坟。山坡上的草长得很高，", "wg-mother", chapter=33),
    _zh("wugang", "wg-c4", X, "半夜里雾笛又响了，三长一短。林远一下子从床上坐了起来，他知道这意味着什么，",
        "wg-foghorn", chapter=25),
    _zh("wugang", "wg-c5", X, "周岚终于把那本登记簿放到了他面前，比她当初答应的日子晚了整整一个月。",
        "wg-promise", chapter=38),
    _zh("wugang", "wg-c6", X, "林远解开缆绳，跳上那条绿色的小船。船头那两个白字已经被海水泡得模糊了，",
        "wg-rowboat", chapter=29),
    _zh("wugang", "wg-c7", X, "他又把父亲那封信拿出来读了一遍。那句话他早就背得出来，可他还是不明白，父亲为什么那么怕那间仓库被人打开。",
        "wg-letter", chapter=37),
    # ------------------------------------------------------------------ 《青石镇》
    _zh("qingshi", "qs-p1", P, "女主角的玉佩上刻着什么字", "qs-jade"),
    _zh("qingshi", "qs-p2", P, "老板娘往酒里掺了什么", "qs-drug"),
    _zh("qingshi", "qs-p3", P, "那个杀手出手前为什么要歪着脑袋", "qs-deaf"),
    _zh("qingshi", "qs-p4", P, "镖车里真正运的是什么东西", "qs-cargo"),
    _zh("qingshi", "qs-p5", P, "那个说书的一直在装醉", "qs-gourd"),
    _zh("qingshi", "qs-p6", P, "和尚出家以前是做什么的", "qs-monk"),
    _zh("qingshi", "qs-k1", K, "照夜", "qs-sword"),
    _zh("qingshi", "qs-k2", K, "断肠草", "qs-recipe"),
    _zh("qingshi", "qs-k3", K, "柴火钱", "qs-ledger"),
    _zh("qingshi", "qs-k4", K, "铜镜 米汤", "qs-mirror"),
    _zh("qingshi", "qs-k5", K, "白灯笼 马厩", "qs-fire"),
    _zh("qingshi", "qs-c1", X, "顾长风在城外勒住了马。他想起自己在镖局里当着众人说过的那句话，镖还没有送到，他怎么能回去，",
        "qs-vow", chapter=28),
    _zh("qingshi", "qs-c2", X, "夜深了，沈青禾摸到石桥边，弯下腰一个一个地数着桥洞，", "qs-boat", chapter=25),
    _zh("qingshi", "qs-c3", X, "青禾把两块玉佩合在一起，断口严丝合缝。她抬头看着唐七，嘴唇抖了半天，",
        "qs-jade", "qs-brother", chapter=29),
    _zh("qingshi", "qs-c4", X, "小满又挎着菜篮子出了门。柳三娘站在楼上看着她的背影，心里冷笑了一声，",
        "qs-spy", chapter=22),
    _zh("qingshi", "qs-c5", X, "慧明把禅杖往地上一顿，那几个泼皮竟被震得连退了三步。谁也想不到，一个扫地的和尚，",
        "qs-monk", chapter=20),
    # ------------------------------------------------------------------ The Salt Road
    _en("sr-p1", P, "where did she put the key she found", "sr-key"),
    _en("sr-p2", P, "how did the mine foreman hurt his leg", "sr-limp"),
    _en("sr-p3", P, "who is really buried under a false name in the churchyard", "sr-sister"),
    _en("sr-p4", P, "why does the captain hate the mapmaker", "sr-dunmore"),
    _en("sr-p5", P, "the clerk secretly keeps duplicates of the court papers", "sr-warrants"),
    _en("sr-p6", P, "what was wrong with the old map of the marsh road", "sr-causeway"),
    _en("sr-p7", P, "why did ships run onto the rocks near the lighthouse", "sr-lens"),
    _en("sr-p8", P, "who let the water into the mine on purpose", "sr-sluice"),
    _en("sr-p9", P, "what signal told the smugglers that the officers were coming", "sr-bell"),
    _en("sr-p10", P, "whose body was really in Vane's grave", "sr-coffin"),
    _en("sr-p11", P, "who burned down the building where the rock samples were tested", "sr-assay"),
    _en("sr-p12", P, "what odd thing happened to the needle down in the mine", "sr-compass"),
    _en("sr-k1", K, "Lead, Kindly Light", "sr-hymn"),
    _en("sr-k2", K, "pocket watch 4 17 9", "sr-watch"),
    _en("sr-k3", K, "forty tons of salt in March", "sr-tons"),
    _en("sr-k4", K, "6:40 to York", "sr-train"),
    _en("sr-k5", K, "Little Wren rowboat", "sr-rowboat"),
    _en("sr-k6", K, "Agnes Pell", "sr-sister"),
    _en("sr-k7", K, "Hale Orme two hundred pounds chapel roof", "sr-debt"),
    _en("sr-k8", K, "post office box in Hull", "sr-hull"),
    _en("sr-k9", K, "oilskin packet deed", "sr-deed"),
    _en("sr-k10", K, "Hollin's Gate sluice", "sr-sluice"),
    _en("sr-k11", K, "Samuel Wren silver tooth", "sr-coffin"),
    _en("sr-c1", X, "Mara climbed the lighthouse stairs again, counting them under her breath, and at the third "
                    "she stopped, thinking of the key,", "sr-key", chapter=30),
    _en("sr-c2", X, "She read Vane's last letter one more time. She knew the line by heart, and still she could "
                    "not see why he had been so afraid of the water", "sr-letter", chapter=36),
    _en("sr-c3", X, "Mara stood on the shore of the estuary where her mother had gone into the water all those "
                    "years ago,", "sr-mother", chapter=33),
    _en("sr-c4", X, "The needle began to swing again as they came down into the third gallery, and Mara "
                    "remembered the iron door,", "sr-compass", chapter=27),
    _en("sr-c5", X, "Felix came across the yard with that uneven gait of his, and Mara found herself wondering "
                    "again about the winter the shaft came down,", "sr-limp", chapter=31),
    _en("sr-c6", X, "Iris set the heavy parish book on the table at last, weeks after she had sworn she would "
                    "bring it,", "sr-register", chapter=29),
    _en("sr-c7", X, "Jonah pushed off from the landing without a light, the way he did once a month for the "
                    "Reverend,", "sr-ferry", chapter=34),
    _en("sr-c8", X, "Mara took out the photograph from the Saltmarsh Inn again and looked at the ruined face "
                    "beside Vane's,", "sr-photo", chapter=38),
    _en("sr-c9", X, "The children were chanting their counting rhyme in the schoolyard, and this time Mara "
                    "listened to the order of the words,", "sr-rhyme", chapter=25),
    _en("sr-c10", X, "Tobias asked her about his father again, and Mara could not meet his eyes,", "sr-watchman",
        chapter=37),
    _en("sr-c11", X, "Dunmore glared at her instruments as if they had done him some private injury, and Mara "
                     "thought she finally understood why,", "sr-dunmore", chapter=39),
)
