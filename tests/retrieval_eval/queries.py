# ruff: noqa: E501  (data: long sentences of prose read better unbroken)
"""The labelled queries of the retrieval evaluation, over the facts planted by ``projects.py``.

Five kinds:

- ``paraphrase``: the question a writer would ask, in other words than the
  fact's (``主角把那把钥匙藏到哪里去了`` for the fact that 林远 hid the brass key
  under the third step of the lighthouse).
- ``keyword``: a distinctive name or term from the fact, as typed into a search
  box (``七号仓库``, ``Agnes Pell``).
- ``cross_chapter``: the text just before the cursor in a late chapter
  (``chapter``), which must bring back a fact planted in an early one: what
  the Retrieved layer is for.
- ``paraphrase_heavy``: a question or note in other words than the fact's,
  written to share at most one search term with it (Strata's own terms:
  jieba words, stemmed English words; ``tests/retrieval_eval/test_corpus.py``
  checks it): ``船上那本记录簿缺了结尾的一张纸`` for the torn-out last page
  of the logbook. Only meaning can find these.
- ``cross_language``: a Chinese question about the English novel, or an
  English question about a Chinese one (``玛拉把那把钥匙藏在灯塔的哪里`` for
  Mara's key; ``How did the old lighthouse keeper lose two fingers?`` for
  陈默's hand). ``language`` is the query's language, not the project's.

A query is relevant to each fact in ``facts``; most have one, a few two.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from tests.retrieval_eval.corpus import Language

Kind = Literal["paraphrase", "keyword", "cross_chapter", "paraphrase_heavy", "cross_language"]
KINDS: tuple[Kind, ...] = ("paraphrase", "keyword", "cross_chapter", "paraphrase_heavy", "cross_language")


@dataclass(frozen=True)
class Query:
    id: str
    project_id: str
    language: Language
    kind: Kind
    text: str
    facts: tuple[str, ...]
    chapter: int | None = None  # cross_chapter: the chapter being written


Part = Literal["tuning", "held-out"]
PARTS: tuple[Part, ...] = ("tuning", "held-out")
SPLIT_SEED = 17
HELD_OUT_SHARE = 0.5


def split(queries: Iterable[Query], seed: int = SPLIT_SEED, held_out: float = HELD_OUT_SHARE) -> dict[str, Part]:
    """Each query's part: ``tuning`` (fusion may be tuned on it) or ``held-out`` (only scored).

    Stratified by language and kind, so that every slice has queries in both
    parts: within each (language, kind) the ids are sorted, shuffled by a
    ``random.Random`` seeded with ``seed`` and the stratum, and the first
    ``ceil(held_out * n)`` are held out. The same seed and queries always give
    the same split (the evaluation splits the whole of :data:`QUERIES`, also
    when it runs only some of them).
    """
    if not 0.0 < held_out < 1.0:
        raise ValueError("held_out must be between 0 and 1")
    strata: dict[tuple[str, str], list[str]] = {}
    for query in queries:
        strata.setdefault((query.language, query.kind), []).append(query.id)
    parts: dict[str, Part] = {}
    for (language, kind), ids in sorted(strata.items()):
        order = sorted(ids)
        random.Random(f"{seed}:{language}:{kind}").shuffle(order)
        cut = math.ceil(held_out * len(order))
        for position, query_id in enumerate(order):
            parts[query_id] = "held-out" if position < cut else "tuning"
    return parts


def _zh(project: str, id: str, kind: Kind, text: str, *facts: str, chapter: int | None = None) -> Query:
    return Query(id, project, "zh", kind, text, facts, chapter)


def _en(id: str, kind: Kind, text: str, *facts: str, chapter: int | None = None) -> Query:
    return Query(id, "salt-road", "en", kind, text, facts, chapter)


def _zh_about_en(id: str, text: str, *facts: str) -> Query:
    """A Chinese question about The Salt Road (an English project)."""
    return Query(id, "salt-road", "zh", "cross_language", text, facts)


def _en_about_zh(project: str, id: str, text: str, *facts: str) -> Query:
    """An English question about a Chinese project."""
    return Query(id, project, "en", "cross_language", text, facts)


P: Kind = "paraphrase"
K: Kind = "keyword"
X: Kind = "cross_chapter"
H: Kind = "paraphrase_heavy"

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
    # ------------------------------------------------------------------ paraphrase-heavy, Chinese
    _zh("wugang", "wg-h1", H, "他随身带的那块旧表是谁送的，上面写了什么", "wg-watch"),
    _zh("wugang", "wg-h2", H, "船上那本记录簿缺了结尾的一张纸", "wg-logbook"),
    _zh("wugang", "wg-h3", H, "接头的人在家具上画了一只鸟当暗号", "wg-teahouse"),
    _zh("wugang", "wg-h4", H, "爸爸可能还活着，儿子发现了他最近留下的字迹", "wg-handwriting"),
    _zh("wugang", "wg-h5", H, "沼泽地下藏的其实是军火", "wg-rifles"),
    _zh("wugang", "wg-h6", H, "据说早已葬身海底的货轮改头换面后依旧在海上航行", "wg-renamed"),
    _zh("wugang", "wg-h7", H, "主人公的妈妈得病去世，埋在了哪儿", "wg-mother"),
    _zh("wugang", "wg-h8", H, "有一条秘密通道从没人用的修船厂通往税务机关的地下室", "wg-tunnel"),
    _zh("qingshi", "qs-h1", H, "他那件挡雨的东西其实能当兵器用", "qs-umbrella"),
    _zh("qingshi", "qs-h2", H, "绑来的人准备在八月十五半夜换回来，地点定在庙后", "qs-exchange"),
    _zh("qingshi", "qs-h3", H, "当地的父母官当年亲眼看着那一家人遇害", "qs-retainer"),
    _zh("qingshi", "qs-h4", H, "撑船的那个老头其实是官府派来的密探", "qs-ferryman"),
    _zh("qingshi", "qs-h5", H, "走水前，有个姑娘拎着灯越墙跑了，火头在养马的棚子里", "qs-fire"),
    _zh("qingshi", "qs-h6", H, "郎中故意在方子里加了一样药，叫长辈过几天就送命", "qs-recipe"),
    # ------------------------------------------------------------------ paraphrase-heavy, English
    _en("sr-h1", H, "what did her mentor's final note warn her against", "sr-letter"),
    _en("sr-h2", H, "how did the surveyor lose her parent as a small girl", "sr-mother"),
    _en("sr-h3", H, "she hired a small boat from the ferryman for a few coins", "sr-rowboat"),
    _en("sr-h4", H, "a picture of her mentor in which the other person's features were defaced", "sr-photo"),
    _en("sr-h5", H, "the clergyman's secret crossings by boat in the dark, free of charge", "sr-ferry"),
    _en("sr-h6", H, "a children's verse that secretly encodes when each pit was dug, if you reverse it", "sr-rhyme"),
    _en("sr-h7", H, "the boy's dad, who guarded the factory after dark, vanished around the time her mentor died",
        "sr-watchman"),
    _en("sr-h8", H, "exports appear on the books for months when the plant was closed", "sr-tons"),
    _en("sr-h9", H, "the vicar borrowed heavily from the mine owners, pledging metal off his church", "sr-debt"),
    _en("sr-h10", H, "ownership of the factory was transferred to her mentor days before his death", "sr-deed"),
    _en("sr-h11", H, "nobody could have escaped by train on the Sabbath", "sr-train"),
    _en("sr-h12", H, "the schoolmistress secretly corresponded with the dead man through an address in another town",
        "sr-hull"),
    _en("sr-h13", H, "which sacred melody did the workers hum below ground, disguised by playing it very slowly",
        "sr-hymn"),
    _en("sr-h14", H, "the teacher swore she would smuggle the church records from the sacristy ahead of the autumn festival",
        "sr-register"),
    # ------------------------------------------------------------------ cross-language: Chinese about The Salt Road
    _zh_about_en("zx-1", "玛拉把那把铜钥匙藏在灯塔的哪里", "sr-key"),
    _zh_about_en("zx-2", "玛拉的母亲是怎么死的", "sr-mother"),
    _zh_about_en("zx-3", "矿井第三条巷道的铁门旁边，指南针出了什么怪事", "sr-compass"),
    _zh_about_en("zx-4", "费利克斯的腿是怎么瘸的", "sr-limp"),
    _zh_about_en("zx-5", "教堂墓地里以假名下葬的那个女人到底是谁", "sr-sister"),
    _zh_about_en("zx-6", "邓莫尔上尉为什么一见到测量员就讨厌她", "sr-dunmore"),
    _zh_about_en("zx-7", "凌晨四点教堂的钟敲两下是什么意思", "sr-bell"),
    _zh_about_en("zx-8", "暴风雨那晚是谁打开了水闸，把矿道淹了", "sr-sluice"),
    _zh_about_en("zx-9", "万恩的棺材里躺着的其实是谁", "sr-coffin"),
    _zh_about_en("zx-10", "怀表盖子的内侧刻着哪几个数字", "sr-watch"),
    _zh_about_en("zx-11", "谁偷偷保留着治安法官签发的每一张逮捕令的副本", "sr-warrants"),
    _zh_about_en("zx-12", "地图上那条穿过沼泽的堤道为什么画错了位置", "sr-causeway"),
    # ------------------------------------------------------------------ cross-language: English about the Chinese novels
    _en_about_zh("wugang", "ex-1", "Where did Lin Yuan hide the brass key?", "wg-key"),
    _en_about_zh("wugang", "ex-2", "How did the old lighthouse keeper lose two fingers?", "wg-scar"),
    _en_about_zh("wugang", "ex-3", "Which flower makes Zhou Lan cough?", "wg-allergy"),
    _en_about_zh("wugang", "ex-4", "Why is the clock on the bell tower always slow?", "wg-clock"),
    _en_about_zh("wugang", "ex-5", "What cargo was the ship that sank on the reef said to be carrying?", "wg-ship"),
    _en_about_zh("wugang", "ex-6", "Someone put poison in the old man's cough medicine", "wg-poison"),
    _en_about_zh("wugang", "ex-7", "What does the foghorn mean when it sounds three long blasts and one short?",
                 "wg-foghorn"),
    _en_about_zh("wugang", "ex-8", "Where was the boat ticket to, and whose name was on it?", "wg-ticket"),
    _en_about_zh("qingshi", "ex-9", "What is carved on the heroine's jade pendant?", "qs-jade"),
    _en_about_zh("qingshi", "ex-10", "What were the escorts really carrying under the silk?", "qs-cargo"),
    _en_about_zh("qingshi", "ex-11", "Why does the assassin tilt his head before he strikes?", "qs-deaf"),
    _en_about_zh("qingshi", "ex-12", "What did the monk do before he became a monk?", "qs-monk"),
)
