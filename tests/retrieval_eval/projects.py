# ruff: noqa: E501  (data: long sentences of prose read better unbroken)
"""The three projects of the evaluation corpus: lexicons for the filler, and the planted facts.

- ``wugang`` 《雾港》 (Chinese, 40 chapters in four volumes ``卷一``..``卷四``):
  a harbour town in the fog, a missing father, a lighthouse, a sunken freighter.
- ``qingshi`` 《青石镇》 (Chinese, 30 chapters in ``上部``/``下部``): a wuxia
  story around an inn, an escort agency and a river crossing.
- ``salt-road`` *The Salt Road* (English, 40 chapters in ``part-1``..``part-4``):
  a surveyor in a salt-mining town on a marsh after her mentor's death.

Every fact is written to be read in its chapter: it names the cast and the
places the filler keeps naming, and adds one detail the filler never says.
The filler never says where something was hidden, so the facts are the only
answers to the queries in ``queries.py``.
"""

from __future__ import annotations

from collections.abc import Mapping

from tests.retrieval_eval.corpus import Character, FactSpec, Lexicon, ProjectSpec, chinese_number


def _merge(*parts: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    merged: dict[str, tuple[str, ...]] = {}
    for part in parts:
        for key, values in part.items():
            merged[key] = merged.get(key, ()) + values
    return merged


# =========================================================================== Chinese, shared

ZH_WORDS: dict[str, tuple[str, ...]] = {
    "T": (
        "傍晚", "天刚亮的时候", "午后", "半夜里", "第二天一早", "黄昏时分", "吃过晚饭以后", "天黑之前",
        "快到正午的时候", "那天夜里", "雨停以后", "早饭还没吃完", "隔了好几天", "月亮升起来的时候",
        "太阳偏西的时候", "鸡叫头遍的时候", "日头正毒的时候", "又过了一阵", "天蒙蒙亮的时候",
        "过了两三天", "入夜以后", "歇晌的时候",
    ),
    "W": (
        "雨一直下", "天色暗得很快", "远处有雷声", "月光落在积水里", "风把窗纸吹得哗哗响", "天阴沉沉的",
        "空气里有一股潮湿的土腥味", "太阳晒得人发昏", "细雨斜斜地落下来", "夜里起了风", "云压得很低",
        "天边烧着一片晚霞", "露水打湿了衣角", "冷得人直跺脚", "四下里静得出奇", "屋檐下挂着一排冰凌",
        "闷热得一丝风也没有", "雨点砸在瓦上噼啪作响", "天上一颗星星也看不见", "风里夹着细碎的雪粒",
    ),
    "F": (
        "心里有些发慌", "说不出的疲惫", "胸口像压了块石头", "隐隐觉得不对劲", "一时间竟不知道该说什么",
        "心里乱成一团", "反倒平静了下来", "有些后悔刚才说的话", "眼眶有点发热", "觉得这一切都太巧了",
        "暗暗松了一口气", "越想越觉得可疑", "手心里全是汗", "没来由地想笑", "忽然觉得很累",
        "心底泛起一阵寒意", "像是被人看穿了心思", "打定主意不再多问", "想起了小时候的事", "心里空落落的",
        "脸上火辣辣的", "说不清是高兴还是难过",
    ),
    "ACT": (
        "在窗边站了很久", "数着自己的脚步", "把茶碗端起来又放下", "绕着屋子走了一圈", "蹲下来系紧了鞋带",
        "靠在墙上闭了一会儿眼", "把门闩插好", "往炉子里添了几块柴", "低头看着自己的影子", "慢慢地往回走",
        "把衣领竖了起来", "坐在门槛上发呆", "擦了擦额头上的汗", "顺着墙根往前摸", "在桌边坐了下来",
        "打了个哈欠", "揉了揉发酸的肩膀", "站起来又坐下", "把灯芯拨亮了一些", "回头看了一眼",
        "把袖子挽了起来", "在院子里来回踱步", "拿起扫帚扫了扫门前的落叶", "把湿透的外衣搭在椅背上",
    ),
    "S": (
        "远处传来几声狗叫", "楼下有人在吵架", "隔壁的孩子哭了起来", "屋檐上的水一滴一滴地落下来",
        "有人在巷子里吹口哨", "木门吱呀一声开了", "更夫的梆子声从街那头传来", "风把什么东西吹倒了",
        "脚步声在门外停了一下", "远处隐约有人在唱戏", "房梁上的老鼠窸窸窣窣地跑过",
        "灶间里锅碗碰得叮当响",
    ),
    "LOOK": (
        "有些憔悴", "比上回瘦了一圈", "神色慌张", "心事重重", "像是刚哭过", "精神倒还不错", "一脸倦容",
        "满身酒气", "比平时沉默", "眼睛里布满了血丝", "心不在焉",
    ),
    "N": ("三", "五", "七", "九", "十一", "十二", "两", "四", "六", "八", "十"),
    "D": (
        "你怎么还没睡？", "这雨怕是要下到明天了。", "我说过了，我什么都不知道。", "你先回去吧，这里有我。",
        "明天再说。", "你听见了吗？", "别跟着我。", "这事没那么简单。", "你到底想知道什么？",
        "天快黑了，路上小心。", "我只是随便问问。", "他走的时候说了什么？", "别把话说得太早。",
        "你饿不饿？锅里还有粥。", "我等你很久了。", "这件事你最好别管。", "有人看见你了吗？", "你信我一次。",
        "那你说，该怎么办？", "都过去这么多年了。", "我记不清了。", "先别声张。", "你脸色不太好。",
        "我去{P2}看过了，什么也没有。", "{C}今天来过吗？", "你见过{C}吗？", "那{O}还在你那儿吗？",
        "听说{P2}那边出事了。", "你别听{C}胡说。", "等这阵风过去再说。", "你一个人去{P2}做什么？",
        "我不是那个意思。", "谁让你来的？", "坐吧，别站着。", "你还记得{P2}吗？", "再等等，不急。",
        "这么晚了，你还出去？", "你怎么知道的？", "算了，不说这个了。", "我替你问过{C}了。",
    ),
}

ZH_NARRATION: tuple[str, ...] = (
    "{T}，{A}{ACT}。",
    "{W}。{A}站在{P}门口，{F}。",
    "{A}和{B}在{P}碰了面，两人都没有提起{O}的事。",
    "{A}把{O}放在桌上，盯着看了很久。",
    "{S}，{A}抬起头，{P}那边什么也看不清。",
    "{B}说起{P}的旧事，{A}只是听着，没有插话。",
    "{A}{ACT}，{F}。",
    "{W}，{A}一个人去了{P}。",
    "到了{P}，{A}才发现{B}早就在那儿等着了。",
    "{A}想起{B}昨天说的话，{F}。",
    "{Ah}{ACT}，又{ACT}。",
    "{B}没有回答，只是{ACT}。",
    "从{P}回来的路上，{A}一句话也没说。",
    "{A}摸了摸{O}，{F}。",
    "{P}比{A}记忆中要小一些。",
    "那天{A}没有去{P2}，而是{ACT}。",
    "{A}把{B}送到{P}，自己{ACT}。",
    "{A}总觉得{B}有事瞒着{Ah}。",
    "{T}，{P}里只剩下{A}一个人。",
    "{A}隔着窗户看见{B}从{P2}的方向走过来。",
    "{A}不太习惯{P}的气味，{F}。",
    "{B}递给{A}一碗热茶，{A}捧在手里，{F}。",
    "这些天{A}一直睡不好，{F}。",
    "{A}走过{P}的时候，{S}。",
    "{A}把{O}翻过来看了看，没看出什么名堂。",
    "{B}笑了一下，那笑容让{A}{F}。",
    "人们都说{P}不太平，{A}却不以为然。",
    "{A}向{B}打听{P2}的事，{B}支支吾吾地说不清楚。",
    "{A}一路走到{P}，{W}。",
    "{T}，{B}来找{A}，说{P2}那边有人打听{Ah}。",
    "{A}记得{P}从前不是这个样子的。",
    "{B}看上去{LOOK}，{A}没有多问。",
    "{A}沿着{P}外面的小路走了一段，{S}。",
    "{A}靠在{P}的墙边，{F}。",
    "过了很久，{A}才{ACT}。",
    "{A}在{P}等了{N}个时辰，{B}始终没有露面。",
    "{B}说的话，{A}只信了一半。",
    "{A}把今天的事从头到尾想了一遍，{F}。",
    "{A}看着{B}的背影消失在{P2}的拐角，{F}。",
    "{B}问{A}{O}是从哪里来的，{A}随口搪塞了过去。",
    "{A}本想去{P2}看看，走到半路又改了主意。",
    "{T}，{A}和{B}坐在{P}里，谁也没有先开口。",
    "{A}觉得{B}今天{LOOK}。",
    "{A}在心里默默数到{N}，然后推开了门。",
    "{B}的话还没说完，{A}就{ACT}。",
)

ZH_DESCRIPTION: tuple[str, ...] = (
    "{W}。",
    "{P}里静悄悄的，{S}。",
    "{T}，{W}。",
    "{P}门前的石阶上长满了青苔。",
    "{S}。",
    "{P}的窗户里透出一点昏黄的光。",
    "街上没什么人，{W}。",
    "{P}四周的墙皮一块一块地往下掉。",
    "远远望去，{P}像是蹲在那里的一头老兽。",
    "{W}，{S}。",
)

ZH_DIALOGUE: tuple[str, ...] = (
    "“{D}”{A}说。",
    "{A}低声说：“{D}”",
    "“{D}”{A}看了{B}一眼。",
    "{A}沉默了一会儿才开口：“{D}”",
    "“{D}”{A}压低了声音。",
    "{A}头也不回地说：“{D}”",
    "{A}叹了口气：“{D}”",
    "“{D}”",
    "“{D}”{A}一边{ACT}一边说。",
    "{A}把声音放得很轻：“{D}”",
)

# =========================================================================== 《雾港》

WUGANG_FACTS: tuple[FactSpec, ...] = (
    FactSpec("wg-letter", 1, "父亲林怀山留下的最后一封信只有一句话：“无论谁来问，都别让人打开北港的七号仓库。”"),
    FactSpec("wg-key", 2, "林远把那把铜钥匙藏在灯塔第三级台阶下的砖缝里，又捡了一块碎瓦片把缝口盖住。"),
    FactSpec("wg-mother", 2, "林远的母亲在他七岁那年死于肺病，就葬在钟楼后面的小山坡上，坟前种着一棵矮松。"),
    FactSpec("wg-scar", 3, "陈默的左手少了两根手指，他说那是三十年前一场大雾里，被绞盘上的缆绳生生绞断的。"),
    FactSpec("wg-promise", 3, "周岚答应林远，月底大潮之前一定想办法替他弄到海关的出入港登记簿。"),
    FactSpec("wg-ship", 4, "十二年前在礁石外沉没的那艘货船叫“白鹭号”，报关单上写的货物是四百箱福建茶叶。"),
    FactSpec("wg-rowboat", 4, "林远花两块银元向老许借了一条漆成绿色的小舢板，船头用白漆写着“阿岩”两个字。"),
    FactSpec("wg-orphan", 5, "苏晴是在盐沼边上的育婴堂长大的，她那张记者证上的名字，其实属于一个已经过世的表姐。"),
    FactSpec("wg-foghorn", 6, "雾笛连响三长一短，是守塔人之间约好的暗号，意思是礁石外面有船在等着接货。"),
    FactSpec("wg-photo", 6, "苏晴的相机里有一张照片，拍到韩舟在旧码头上和一个戴斗笠的男人握手，那人的脸被帽檐遮住了一半。"),
    FactSpec("wg-allergy", 7, "周岚对桂花过敏，哪怕只闻到一点花香，也会咳得喘不过气来。"),
    FactSpec("wg-clock", 8, "钟楼的大钟永远慢十七分钟，镇上的老人说，那是前任镇长故意让人调慢的。"),
    FactSpec("wg-debt", 9, "韩舟欠了省城聚丰钱庄一大笔债，抵押出去的正是北港那一排旧仓库。"),
    FactSpec("wg-foundling", 10, "阿岩的本名叫许小岩，是老许十年前在礁石滩上捡回来的弃婴。"),
    FactSpec("wg-poison", 11, "沈砚在陈默常吃的那瓶止咳药里验出了少量乌头碱，剂量不足以致命，却足够让人日渐虚弱。"),
    FactSpec("wg-logbook", 12, "航海日志的最后一页被人撕掉了，装订线上只残留着半个“潮”字。"),
    FactSpec("wg-watch", 13, "林远那只怀表的后盖内侧刻着一行小字：“赠怀山，民国二十六年冬”。"),
    FactSpec("wg-tunnel", 14, "废弃船坞的底下有一条排水暗道，顺着它一直走，能通到海关楼的地窖。"),
    FactSpec("wg-teahouse", 15, "茶馆二楼最里面那张桌子的桌腿上刻着一只歪歪扭扭的海鸥，那是联络人留下的记号。"),
    FactSpec("wg-alibi", 16, "老许终于承认，出事那天夜里他根本没有出海，而是在渔村后山替人看守一批钉死的木箱。"),
    FactSpec("wg-lens", 17, "灯室里的透镜被人偷偷换成了普通玻璃，所以那几个雾夜里，灯光连半里外的礁石都照不到。"),
    FactSpec("wg-mayor", 19, "镇长每个月都从韩舟那里收一笔“修堤款”，账目记在一本蓝皮小册子上，塞在镇公所的神龛后面。"),
    FactSpec("wg-ticket", 20, "那张船票是去新加坡的，开船的日子写着农历九月初九，乘客一栏填的是陈默的名字。"),
    FactSpec("wg-handwriting", 23, "林远在海关楼地窖的墙上认出了父亲的笔迹，落款的日期竟然是上个月。"),
    FactSpec("wg-rifles", 27, "盐沼里埋着的根本不是私盐，而是一箱箱用油布裹好的步枪。"),
    FactSpec("wg-renamed", 31, "陈默临死前才说出实情：白鹭号根本没有沉，它在南边换了船名，至今还在跑航线。"),
    FactSpec("wg-signature", 34, "周岚的父亲，港务长周伯年，就是当年在白鹭号报关单上签字放行的人。"),
)

_WUGANG_VOLUMES = "一二三四"

WUGANG = ProjectSpec(
    id="wugang",
    language="zh",
    title="雾港",
    chapters=40,
    chapter_chars=5200,
    path=lambda n: f"卷{_WUGANG_VOLUMES[(n - 1) // 10]}/第{n:02d}章.md",
    heading=lambda n: f"# 第{chinese_number(n)}章 {_WUGANG_TITLES[(n - 1) % len(_WUGANG_TITLES)]}",
    lexicon=Lexicon(
        cast=(
            Character(("林远",), "m"), Character(("苏晴",), "f"), Character(("陈默", "陈伯", "老陈"), "m"),
            Character(("周岚",), "f"), Character(("老许", "许老汉"), "m"), Character(("韩舟", "韩老板"), "m"),
            Character(("沈砚", "沈医生"), "m"), Character(("阿岩",), "m"),
        ),
        extras=(
            Character(("王婶",), "f"), Character(("邮差小赵", "小赵"), "m"), Character(("镇长",), "m"),
            Character(("码头工头老刘", "老刘"), "m"), Character(("卖鱼的阿珍", "阿珍"), "f"),
        ),
        places=(
            "灯塔", "北港", "旧码头", "盐沼", "钟楼", "渔村", "礁石滩", "废弃船坞", "海关楼", "茶馆",
            "诊所", "镇公所", "后山", "灯室", "报馆", "防波堤", "鱼市",
        ),
        objects=(
            "铜钥匙", "马灯", "航海日志", "怀表", "望远镜", "船票", "那封信", "相机", "旧海图", "油布包",
            "药瓶", "烟斗", "登记簿", "旧报纸",
        ),
        words=_merge(ZH_WORDS, {
            "W": ("雾从海面上漫过来", "浪一层一层地拍在礁石上", "潮水退得很远", "海鸥在头顶上叫个不停",
                  "咸湿的海风吹得人睁不开眼", "雾浓得化不开", "海面上泛着灰白的光"),
            "S": ("雾笛一声一声地响", "码头上的汽笛长鸣了一声", "钟楼的钟敲了{N}下", "浪头撞在防波堤上",
                  "渔船的马达突突地响着"),
            "ACT": ("把马灯举高了一点", "推开那扇生锈的铁门", "翻开那本航海日志", "把怀表贴在耳边听了听",
                    "拿起望远镜朝海面上看", "把船缆在木桩上绕了两圈", "把那封信折好放回口袋"),
            "FOOD": ("一碗鱼汤面", "两个海蛎煎", "一碗白粥", "一碟咸鱼", "几个粗面馒头"),
            "D": ("今晚的雾太大了，灯塔那边得有人守着。", "白天别去北港，那里人多眼杂。", "韩老板的人又来过了。",
                  "这几天海上不太平。", "陈伯又咳了一夜。", "你父亲的事，我也只知道这么多。", "潮水什么时候涨？",
                  "码头上的人都在传，说灯塔闹鬼。", "报馆那边催稿子催得紧。", "海关楼的人不好打交道。",
                  "雾散了再出海吧。", "沈医生说要静养，可他哪里闲得住。"),
        }),
        narration=(*ZH_NARRATION,
                   "{A}登上灯塔，从灯室里望出去，海面上白茫茫一片。",
                   "灯塔的台阶又湿又滑，{A}扶着墙一级一级地往上爬。",
                   "{A}从口袋里掏出那把铜钥匙，在手心里掂了掂。",
                   "{A}在旧码头上数着来往的渔船，一共{N}条。",
                   "老许的渔船靠了岸，{A}帮着往下搬鱼筐。",
                   "北港的仓库门口停着几辆板车，{A}远远地看了一会儿。",
                   "{A}翻开航海日志，一页页都是潮汐和风向的记录。",
                   "钟楼的钟敲了{N}下，{A}才发觉天已经晚了。",
                   "韩舟的汽车从海关楼前开过去，溅了{A}一身泥水。",
                   "苏晴举起相机，对着{P}拍了几张。",
                   "雾笛响了一声，隔了很久又响了一声。",
                   "沈砚的诊所里总是有一股药水味。",
                   "周岚在茶馆二楼的窗边等{A}。",
                   "{A}划着小舢板绕过礁石滩，船底擦着了暗礁。",
                   "{A}在鱼市上吃了{FOOD}，{F}。",
                   "{A}把马灯挂在门口的钉子上，灯罩上全是水汽。",
                   "陈默坐在灯室里擦着透镜，一遍又一遍。",
                   "{A}又想起了父亲，想起他出海前的那个早晨。",
                   "海关楼的大门紧闭着，门口站着两个穿制服的人。",
                   "盐沼上的芦苇在风里起伏，看不见一个人影。",
                   "{A}在报馆门口等苏晴，等了{N}支烟的工夫。",
                   "阿岩光着脚在礁石滩上跑来跑去，捡海螺。",
                   "韩舟请{A}去茶馆喝茶，{A}推说没空。",
                   "{A}拿望远镜朝礁石外面看，什么船也没有。"),
        description=(*ZH_DESCRIPTION,
                     "灯塔的光一圈一圈地扫过海面。",
                     "北港的吊车停在半空，像一只生了锈的鹤。",
                     "旧码头的木板被海水泡得发黑，踩上去吱吱作响。",
                     "渔村的屋顶上晒着一串串鱼干。",
                     "{W}，灯塔只剩下一个模糊的影子。",
                     "钟楼的影子斜斜地压在镇公所的屋顶上。"),
        dialogue=ZH_DIALOGUE,
    ),
    facts=WUGANG_FACTS,
)

_WUGANG_TITLES: tuple[str, ...] = (
    "归港", "雾夜", "灯塔", "旧信", "潮汐", "茶馆", "盐沼", "钟声", "暗礁", "北港",
    "码头", "旧事", "怀表", "船坞", "海鸥", "木箱", "灯室", "大潮", "账册", "船票",
    "风起", "地窖", "笔迹", "夜航", "雾笛", "故人", "盐下", "对峙", "旧伤", "回声",
    "真相", "南行", "孤灯", "父辈", "退潮", "归途", "长夜", "破雾", "离港", "余光",
)

# =========================================================================== 《青石镇》

QINGSHI_FACTS: tuple[FactSpec, ...] = (
    FactSpec("qs-jade", 1, "沈青禾贴身戴着的那块玉佩上只刻了半个“沈”字，另外半块据说在她失散多年的哥哥手里。"),
    FactSpec("qs-drug", 2, "柳三娘在那坛女儿红里下的不是毒药，而是能让人昏睡一整夜的曼陀罗花粉。"),
    FactSpec("qs-sword", 3, "那柄短剑名叫“照夜”，剑身比寻常短剑窄两分，剑柄缠着褪了色的红绳，是沈家祖传的兵器。"),
    FactSpec("qs-vow", 3, "顾长风当着镖局上下几十号人立了誓：这趟镖不送到京城，他绝不踏进青石镇半步。"),
    FactSpec("qs-cargo", 4, "长风镖局这趟押的镖，面上是二十车苏州丝绸，底下却压着官府的三万两饷银。"),
    FactSpec("qs-deaf", 5, "唐七的右耳早就聋了，所以他出手之前总会把头微微偏向左边。"),
    FactSpec("qs-monk", 6, "慧明和尚出家之前是京城禁军的枪棒教头，那一身横练功夫从来没有荒废过。"),
    FactSpec("qs-recipe", 7, "回春堂的何大夫开给柳老爹的药方里多了一味断肠草，分量刚好能让一个老人在三天之后心脉衰竭。"),
    FactSpec("qs-spy", 8, "小满是裴县令安插在悦来客栈里的眼线，每隔三天就借着买菜的名义往县衙送一次消息。"),
    FactSpec("qs-boat", 9, "石桥下面第三个桥洞里拴着一条小船，船底刷过桐油，是专门留着夜里偷偷渡河用的。"),
    FactSpec("qs-ledger", 10, "账本上写得明明白白：每月初一，县衙都要从悦来客栈支走五十两银子，名目记的是“柴火钱”。"),
    FactSpec("qs-umbrella", 11, "顾长风那把油纸伞的伞骨是精钢打成的，收拢起来就是一根趁手的短棍。"),
    FactSpec("qs-mirror", 12, "铜镜背面用米汤画着一张地图，平时什么也看不见，只有凑到火上烤一烤，线条才会慢慢显出来。"),
    FactSpec("qs-gourd", 13, "周瞎子的酒葫芦里装的从来不是酒，而是一葫芦清水，他装醉装了整整十年。"),
    FactSpec("qs-fire", 14, "镖局那场大火是从后院马厩烧起来的，起火之前，有人看见一个提着白灯笼的女人从墙头翻了出去。"),
    FactSpec("qs-exchange", 15, "双方约定，中秋夜子时在寒山寺后面的竹林里交换人质，各自只许带两个人。"),
    FactSpec("qs-brother", 18, "唐七就是沈青禾失散多年的亲哥哥，他怀里一直揣着那块玉佩的另一半。"),
    FactSpec("qs-retainer", 21, "裴县令年轻时曾在沈家做过门客，沈家满门被杀的那一夜，他就站在院子里。"),
    FactSpec("qs-ferryman", 26, "船夫老黄原来是朝廷的暗探，这些年他在渡口记下了每一个过河的生面孔。"),
)

QINGSHI = ProjectSpec(
    id="qingshi",
    language="zh",
    title="青石镇",
    chapters=30,
    chapter_chars=5000,
    path=lambda n: f"{'上部' if n <= 15 else '下部'}/第{n:02d}回.md",
    heading=lambda n: f"# 第{chinese_number(n)}回 {_QINGSHI_TITLES[(n - 1) % len(_QINGSHI_TITLES)]}",
    lexicon=Lexicon(
        cast=(
            Character(("沈青禾", "青禾"), "f"), Character(("顾长风", "顾少镖头"), "m"),
            Character(("柳三娘", "三娘"), "f"), Character(("唐七",), "m"), Character(("裴县令", "裴大人"), "m"),
            Character(("何大夫",), "m"), Character(("小满",), "f"), Character(("慧明", "慧明和尚"), "m"),
        ),
        extras=(
            Character(("柳老爹",), "m"), Character(("周瞎子", "说书的周瞎子"), "m"),
            Character(("钱嫂", "卖豆腐的钱嫂"), "f"), Character(("船夫老黄", "老黄"), "m"),
            Character(("镖师赵大", "赵大"), "m"),
        ),
        places=(
            "青石镇", "悦来客栈", "长风镖局", "渡口", "竹林", "寒山寺", "回春堂", "县衙", "石桥", "后山",
            "集市", "城隍庙", "河滩", "马厩", "后院",
        ),
        objects=(
            "玉佩", "短剑", "药方", "密信", "账本", "铜镜", "油纸伞", "酒葫芦", "镖旗", "灯笼", "包袱",
            "银票", "腰牌",
        ),
        words=_merge(ZH_WORDS, {
            "W": ("河面上起了薄雾", "竹林里沙沙作响", "青石板路被雨水洗得发亮", "渡口的灯笼在风里晃",
                  "山风卷着落叶打旋", "檐角的铁马叮叮当当地响"),
            "S": ("马蹄声由远及近", "寒山寺的钟声远远地传过来", "客栈里有人划拳行令", "河上的船夫在唱号子",
                  "镖局的院子里有人在练刀"),
            "ACT": ("按住了腰间的剑柄", "把斗笠往下压了压", "提着灯笼往后院走", "把包袱紧了紧",
                    "翻身上了马", "往茶碗里续了些水", "把银子放在柜台上"),
            "FOOD": ("一碗阳春面", "两个烧饼", "一碟卤牛肉", "半壶黄酒", "一碗豆腐脑"),
            "D": ("客官里边请。", "镖局的事，你少打听。", "江湖上的事，谁说得清。", "今晚别出门。",
                  "县衙的人又来查店了。", "这把剑你从哪儿得来的？", "渡口那边有生人。",
                  "何大夫说，再吃三服药就好了。", "掌柜的，再来一壶酒。", "明天一早镖车就要出城。",
                  "你的刀太慢了。", "寺里的师父不见外客。"),
        }),
        narration=(*ZH_NARRATION,
                   "{A}在悦来客栈的大堂里坐了下来，要了{FOOD}。",
                   "长风镖局门口插着镖旗，几个镖师正在往车上装货。",
                   "{A}抽出短剑，借着灯光看了看剑刃。",
                   "柳三娘在柜台后面拨着算盘，眼睛却一直瞟着门口。",
                   "{A}过了石桥，往渡口那边去了。",
                   "寒山寺的钟声响过{N}下，{A}才从竹林里出来。",
                   "唐七的斗笠压得很低，谁也看不清他的脸。",
                   "回春堂里一股苦涩的药味，何大夫正在称药。",
                   "裴县令的轿子从县衙里抬出来，街上的人纷纷让路。",
                   "小满端着托盘从楼上下来，差点撞上{A}。",
                   "{A}摸了摸怀里的玉佩，{F}。",
                   "慧明和尚在山门前扫地，一下一下，扫得很慢。",
                   "周瞎子在茶馆里说书，说的是前朝的旧事。",
                   "{A}把铜镜揣进怀里，镜面冰凉。",
                   "{A}撑着油纸伞走在青石板路上，{W}。",
                   "镖车在城门口被拦了下来，赵大上前去递了帖子。",
                   "{A}在集市上买了两把新磨的菜刀，说是给客栈用的。",
                   "{A}翻开账本，一行一行地看下去，{F}。",
                   "顾长风在镖局的院子里练刀，刀光在月下闪个不停。",
                   "渡口的船夫老黄蹲在船头抽旱烟。"),
        description=(*ZH_DESCRIPTION,
                     "青石镇的街道不宽，两边都是低矮的铺面。",
                     "悦来客栈的招牌被雨水冲得褪了色。",
                     "竹林深处有一条小路，铺着碎石。",
                     "渡口只有一条船，一根竹篙。",
                     "寒山寺的红墙在暮色里显得发黑。"),
        dialogue=ZH_DIALOGUE,
    ),
    facts=QINGSHI_FACTS,
)

_QINGSHI_TITLES: tuple[str, ...] = (
    "客栈", "夜酒", "短剑", "起镖", "斗笠", "山门", "药方", "眼线", "夜渡", "账本",
    "雨伞", "铜镜", "说书", "大火", "中秋", "竹林", "追踪", "相认", "渡口", "禅杖",
    "旧案", "出城", "拦路", "暗探", "伏击", "老黄", "真相", "京城", "血誓", "归来",
)

# =========================================================================== English, shared

EN_WORDS: dict[str, tuple[str, ...]] = {
    "T": (
        "in the evening", "just before dawn", "after lunch", "late that night", "the next morning", "at dusk",
        "after supper", "before the light went", "towards noon", "that night", "a little later",
        "when the rain stopped", "over breakfast", "a few days later", "when the moon came up",
        "in the grey hour before dawn", "by mid-afternoon", "around four o'clock", "long after midnight",
        "on Sunday morning", "on the way back", "at the end of the week",
    ),
    "W": (
        "the rain kept on", "the light went early", "thunder muttered somewhere to the west",
        "moonlight lay in the puddles", "the wind rattled the shutters", "the sky was the colour of pewter",
        "the air smelled of wet earth", "the sun was hard and white", "a thin drizzle came in sideways",
        "the wind got up in the night", "low cloud sat on the rooftops", "dew soaked the hems of their coats",
        "it was cold enough to numb the fingers", "everything was unnaturally still",
        "frost furred the window glass", "the heat hung in the lanes without a breath of wind",
        "rain drummed on the slates", "there was not a star in the sky",
    ),
    "F": (
        "felt a vague unease", "was suddenly very tired", "could not shake the sense that something was wrong",
        "did not know what to say", "felt oddly calm", "regretted speaking so quickly",
        "thought the whole thing was too neat", "let out a slow breath",
        "grew more suspicious the longer {he} thought about it", "found {his} palms were damp",
        "felt a chill settle at the back of {his} neck", "decided not to ask anything more",
        "thought of being a child again", "felt hollow", "felt {his} face grow hot",
        "could not tell whether {he} was glad or sorry", "wanted, absurdly, to laugh",
    ),
    "ACT": (
        "stood at the window for a long time", "counted {his} own steps", "picked up the cup and put it down again",
        "walked once around the room", "bent to retie a bootlace", "leaned against the wall with {his} eyes closed",
        "bolted the door", "fed the stove another log", "watched {his} own shadow on the wall",
        "walked slowly back", "turned up {his} collar", "sat on the doorstep doing nothing",
        "wiped {his} forehead with a sleeve", "felt {his} way along the wall", "sat down at the table",
        "yawned", "rubbed {his} aching shoulders", "stood up and sat down again", "turned up the lamp wick",
        "glanced back over {his} shoulder", "rolled up {his} sleeves", "paced up and down the yard",
        "swept the dead leaves from the step", "hung {his} wet coat over a chair",
    ),
    "S": (
        "a dog barked somewhere far off", "someone was arguing downstairs", "a child began to cry next door",
        "water dripped from the eaves", "someone whistled in the lane", "a door creaked open",
        "the church clock struck the quarter", "the wind knocked something over in the yard",
        "footsteps paused outside the door", "a fiddle was playing somewhere", "a cart rattled past",
        "pots clattered in the kitchen",
    ),
    "LOOK": (
        "tired", "thinner than last time", "flustered", "preoccupied", "as if {bhe} had been crying",
        "cheerful enough", "worn out", "a little drunk", "quieter than usual", "red-eyed", "distracted",
    ),
    "N": ("three", "five", "seven", "nine", "eleven", "twelve", "two", "four", "six", "eight", "ten"),
    "D": (
        "Why aren't you asleep?", "This rain will go on till morning.", "I've told you, I don't know anything.",
        "Go home. I'll stay here.", "We'll talk tomorrow.", "Did you hear that?", "Stop following me.",
        "It isn't as simple as that.", "What is it you actually want to know?",
        "It's getting dark. Mind the road.", "I was only asking.", "What did he say before he left?",
        "Don't speak too soon.", "Are you hungry? There's soup on the stove.", "I've been waiting an hour.",
        "You'd be better off leaving this alone.", "Did anyone see you?", "Trust me, just this once.",
        "Then you tell me what to do.", "That was years ago.", "I don't remember.", "Keep it quiet for now.",
        "You look pale.", "I went to {P2}. There was nothing there.", "Has {C} been in today?",
        "Have you seen {C}?", "Do you still have {O}?", "They say there's been trouble at {P2}.",
        "Don't listen to {C}.", "Wait till the wind drops.", "What were you doing at {P2} on your own?",
        "That isn't what I meant.", "Who sent you?", "Sit down, for heaven's sake.", "Do you remember {P2}?",
        "There's no hurry.", "You're going out at this hour?", "How did you know?", "Never mind. Forget it.",
        "I asked {C} for you.",
    ),
}

EN_NARRATION: tuple[str, ...] = (
    "{T}, {A} {ACT}.",
    "{W}. {A} stood in the doorway of {P} and {F}.",
    "{A} and {B} met at {P}, and neither of them mentioned {O}.",
    "{A} laid {O} on the table and looked at it for a long time.",
    "{S}, and {A} looked up, but {P} was lost in the dark.",
    "{B} talked about the old days at {P}; {A} listened and did not interrupt.",
    "{A} {ACT} and {F}.",
    "{W}, and {A} went to {P} alone.",
    "When {A} reached {P}, {B} was already there, waiting.",
    "{A} remembered what {B} had said the day before and {F}.",
    "{He} {ACT}, then {ACT}.",
    "{B} did not answer; {bhe} only {ACT}.",
    "On the way back from {P}, {A} said nothing at all.",
    "{A} touched {O} and {F}.",
    "{P} was smaller than {A} remembered.",
    "{A} did not go to {P2} that day; instead {he} {ACT}.",
    "{A} walked {B} as far as {P}, then {ACT}.",
    "{A} had the feeling that {B} was keeping something from {him}.",
    "{T}, {A} was the only one left at {P}.",
    "Through the window {A} saw {B} coming from the direction of {P2}.",
    "{A} had never got used to the smell of {P}, and {F}.",
    "{B} handed {A} a mug of tea; {A} held it in both hands and {F}.",
    "{A} had been sleeping badly for days and {F}.",
    "As {A} passed {P}, {S}.",
    "{A} turned {O} over in {his} hands and could make nothing of it.",
    "{B} smiled, and the smile was such that {A} {F}.",
    "People said {P} was no place to linger, but {A} paid them no mind.",
    "{A} asked {B} about {P2}, and {B} mumbled something vague.",
    "{A} walked all the way to {P}; {W}.",
    "{T}, {B} came to tell {A} that someone at {P2} had been asking after {him}.",
    "{A} remembered {P} as a different place altogether.",
    "{B} looked {LOOK}, and {A} did not press {bhim}.",
    "{A} followed the path that ran outside {P} for a while; {S}.",
    "{A} leaned against the wall of {P} and {F}.",
    "It was a long while before {A} {ACT}.",
    "{A} waited {N} hours at {P}, and {B} never came.",
    "{A} believed about half of what {B} said.",
    "{A} went over the day from beginning to end and {F}.",
    "{A} watched {B} disappear round the corner by {P2} and {F}.",
    "{B} asked where {O} had come from, and {A} gave some offhand answer.",
    "{A} meant to look in at {P2}, but turned back halfway.",
    "{T}, {A} and {B} sat in {P} and neither spoke first.",
    "{A} thought {B} looked {LOOK} today.",
    "{A} counted to {N} under {his} breath and pushed the door open.",
    "Before {B} had finished, {A} {ACT}.",
)

EN_DESCRIPTION: tuple[str, ...] = (
    "{W}.",
    "{P} was quiet; {S}.",
    "{T}, {W}.",
    "Moss grew thick on the steps of {P}.",
    "{S}.",
    "A dim yellow light showed in one window of {P}.",
    "There was hardly anyone in the street; {W}.",
    "The plaster was coming away from the walls of {P} in flakes.",
    "From a distance {P} looked like some old animal crouched there.",
    "{W}, and {S}.",
)

EN_DIALOGUE: tuple[str, ...] = (
    "\u201c{DT}\u201d {A} said.",
    "{A} lowered {his} voice. \u201c{D}\u201d",
    "\u201c{DT}\u201d said {A}, glancing at {B}.",
    "{A} was silent for a moment. \u201c{D}\u201d",
    "\u201c{DT}\u201d {A} said under {his} breath.",
    "{A} did not turn round. \u201c{D}\u201d",
    "{A} sighed. \u201c{D}\u201d",
    "\u201c{D}\u201d",
    "\u201c{DT}\u201d {A} said, and {ACT}.",
    "{A} spoke very softly. \u201c{D}\u201d",
)

# =========================================================================== The Salt Road

SALT_ROAD_FACTS: tuple[FactSpec, ...] = (
    FactSpec("sr-letter", 1, "Elliot Vane's last letter to Mara held a single line in his cramped hand: "
                             "\u201cWhatever they offer you, do not let them flood the lower galleries.\u201d"),
    FactSpec("sr-key", 2, "Mara hid the brass key under the third step of the lighthouse stairs and wedged a flake of "
                          "slate over the gap so that no one would see it."),
    FactSpec("sr-mother", 2, "Mara's mother drowned in the estuary when Mara was seven; the body was never "
                             "recovered, only one of her boots."),
    FactSpec("sr-compass", 3, "Near the iron door in the third gallery the compass needle swung a full twelve "
                              "degrees east and stayed there."),
    FactSpec("sr-rowboat", 3, "Mara paid Jonah Pike three shillings for the loan of a green rowboat with the name "
                              "Little Wren painted on the bow."),
    FactSpec("sr-sister", 4, "Nora Ashdown finally admitted that the woman buried as Agnes Pell in the chapel yard "
                             "was her own older sister."),
    FactSpec("sr-register", 4, "Iris Calder promised to bring the parish register out of the vestry before the "
                               "Michaelmas fair, whatever the Reverend said."),
    FactSpec("sr-causeway", 5, "On Vane's survey the Long Marsh causeway was drawn two hundred yards north of "
                               "where it actually ran, and the error was deliberate."),
    FactSpec("sr-limp", 6, "Felix Orme's limp came from the cave-in of the winter of 1871, when the roof of the "
                           "fourth shaft came down and killed nine men."),
    FactSpec("sr-photo", 6, "The only photograph of Vane taken in Wexmoor showed him outside the Saltmarsh Inn "
                            "beside a man whose face had been scratched out with a pin."),
    FactSpec("sr-ferry", 7, "Once a month Jonah Pike rowed the Reverend across the estuary after midnight "
                            "without a lantern, and never asked him for the fare."),
    FactSpec("sr-rhyme", 8, "The counting rhyme Iris taught the schoolchildren, read backwards, gave the order "
                            "in which the old shafts had been sunk."),
    FactSpec("sr-watch", 9, "Scratched inside the lid of Vane's pocket watch were three numbers: 4, 17 and 9."),
    FactSpec("sr-tons", 10, "The Customs House ledger recorded forty tons of salt shipped out in March, although "
                            "the works had been shut the whole winter."),
    FactSpec("sr-watchman", 11, "Tobias Wren's father was the night watchman at the salt works, and he "
                                "disappeared the same week as Vane."),
    FactSpec("sr-bell", 12, "When the chapel bell rang twice at four in the morning it was a warning to the "
                            "smugglers that the excise men were on the road."),
    FactSpec("sr-dunmore", 13, "Captain Dunmore's wife had run off with a surveyor from Leeds, which was why he "
                               "loathed Mara from the moment he saw her instruments."),
    FactSpec("sr-warrants", 14, "Vera Lisle kept a second copy of every warrant the magistrate signed, sewn into "
                                "the lining of her winter coat."),
    FactSpec("sr-hymn", 15, "The tune the miners whistled in the tunnels was the hymn \u201cLead, Kindly "
                            "Light\u201d, slowed to half its pace so the overseers would not recognise it."),
    FactSpec("sr-debt", 16, "Reverend Hale owed the Orme family more than two hundred pounds, borrowed against "
                            "the lead of the chapel roof."),
    FactSpec("sr-lens", 17, "Someone had turned the great lens at Gull Point a quarter away from the channel, so "
                            "that on foggy nights ships steered straight for the Needles."),
    FactSpec("sr-sluice", 19, "The lower galleries had been flooded on purpose: on the night of the storm someone "
                              "opened the sluice at Hollin's Gate and chained it open."),
    FactSpec("sr-deed", 21, "The oilskin packet held a deed to the salt works, signed over to Elliot Vane just a "
                            "week before he died."),
    FactSpec("sr-train", 23, "The 6:40 to York never stops at Wexmoor on a Sunday, so no one could have left the "
                             "town by rail that morning."),
    FactSpec("sr-coffin", 28, "The body in Vane's coffin was not Vane at all but Samuel Wren, the missing night "
                              "watchman, known by his silver tooth."),
    FactSpec("sr-assay", 32, "It was Felix Orme who set fire to the assay office, to burn the samples that proved "
                             "the lower seams were worth a fortune."),
    FactSpec("sr-hull", 35, "Iris had been writing to Vane all along, care of a post office box in Hull, and he "
                            "had answered every letter."),
)

SALT_ROAD = ProjectSpec(
    id="salt-road",
    language="en",
    title="The Salt Road",
    chapters=40,
    chapter_chars=28000,
    path=lambda n: f"part-{(n - 1) // 10 + 1}/chapter-{n:02d}.md",
    heading=lambda n: f"# Chapter {n}: {_SALT_ROAD_TITLES[(n - 1) % len(_SALT_ROAD_TITLES)]}",
    lexicon=Lexicon(
        cast=(
            Character(("Mara", "Mara Quill", "Miss Quill"), "f"), Character(("Nora", "Nora Ashdown"), "f"),
            Character(("Felix", "Felix Orme", "Orme"), "m"), Character(("Iris", "Iris Calder"), "f"),
            Character(("Jonah", "Jonah Pike"), "m"), Character(("Vera", "Vera Lisle"), "f"),
            Character(("Tobias", "young Tobias"), "m"), Character(("the Reverend", "Reverend Hale"), "m"),
            Character(("Dunmore", "Captain Dunmore"), "m"),
        ),
        extras=(
            Character(("Mrs Tull",), "f"), Character(("old Abel",), "m"), Character(("Dobbs the postman",), "m"),
            Character(("Constable Rudd",), "m"), Character(("Sally Finch",), "f"),
        ),
        places=(
            "the lighthouse at Gull Point", "the Saltmarsh Inn", "the Customs House", "the chapel",
            "the salt works", "the mill", "Harbor Road", "the North Pier", "the railway station",
            "the ferry landing", "the Long Marsh", "the schoolhouse", "the assay office", "the vestry",
            "the market square", "the estuary",
        ),
        objects=(
            "the brass key", "the compass", "Vane's survey map", "the ledger", "the pocket watch",
            "the storm lantern", "Vane's letter", "the oilskin packet", "the telescope", "the theodolite",
            "the notebook", "the tin of tobacco", "the parish register",
        ),
        words=_merge(EN_WORDS, {
            "W": ("mist rolled in off the marsh", "the tide was far out", "gulls wheeled over the salt pans",
                  "salt crusted the windowsills", "the fog lay thick over the estuary"),
            "S": ("the foghorn at Gull Point sounded", "a train whistled out beyond the marsh",
                  "the winding gear at the works groaned", "the chapel bell rang for evensong"),
            "ACT": ("wound the pocket watch", "unfolded Vane's letter and read it again",
                    "checked the compass out of habit", "trimmed the storm lantern",
                    "wrote a line in {his} notebook"),
            "FOOD": ("a bowl of mutton stew", "bread and dripping", "a plate of cockles", "cold pie",
                     "a pint of bitter"),
            "D": ("The fog's coming in off the marsh.", "Stay out of the works after dark.",
                  "Orme's men were asking after you.", "There's been no salt out of the lower galleries in years.",
                  "Vane was a careful man. Too careful.", "The tide turns at six.",
                  "You ask a lot of questions for a mapmaker.", "Nobody in Wexmoor talks to the excise men.",
                  "The Reverend won't like it.", "The train was late again.",
                  "You'll want a lantern down there.", "Mind the ferry steps, they're slick."),
        }),
        narration=(*EN_NARRATION,
                   "{A} climbed the lighthouse stairs, one hand on the cold rail.",
                   "{A} turned the brass key over in {his} fingers.",
                   "The salt works loomed at the edge of the marsh, its chimneys cold.",
                   "{A} unrolled Vane's survey map across the table and weighted the corners with cups.",
                   "A cart loaded with salt sacks creaked along Harbor Road.",
                   "{A} sat in the back parlour of the Saltmarsh Inn, listening to the miners argue.",
                   "The chapel bell rang for evensong, and {A} {F}.",
                   "{A} checked the compass out of habit, and the needle settled north.",
                   "Jonah's ferry bumped against the landing.",
                   "{A} wound the pocket watch and listened to it tick.",
                   "The train from York came in forty minutes late.",
                   "Down in the galleries the air tasted of salt and lamp oil.",
                   "The schoolchildren spilled out of the schoolhouse, shouting.",
                   "{A} copied a row of figures from the ledger into {his} notebook.",
                   "Gulls fought over scraps on the North Pier.",
                   "{A} ate {FOOD} at the Saltmarsh Inn and {F}.",
                   "{A} thought about Vane, and about the last time they had spoken.",
                   "The Reverend preached on patience that Sunday, and {A} did not listen.",
                   "Captain Dunmore rode past without a glance at {A}.",
                   "Felix Orme stood at the gate of the works, counting the men in.",
                   "Nora wiped down the bar of the Saltmarsh Inn for the third time.",
                   "Tobias ran errands along Harbor Road for a penny a time.",
                   "Vera Lisle hurried across the market square with a bundle of papers.",
                   "{A} looked out through the telescope, and the marsh was empty."),
        description=(*EN_DESCRIPTION,
                     "The beam of the lighthouse swept the water, round and round.",
                     "The salt pans lay flat and white under the sky.",
                     "The planks of the North Pier were black with damp and groaned underfoot.",
                     "Wexmoor's roofs huddled together as if against the cold.",
                     "{W}, and the lighthouse was only a smudge.",
                     "The chapel tower threw its shadow across the market square."),
        dialogue=EN_DIALOGUE,
    ),
    facts=SALT_ROAD_FACTS,
)

_SALT_ROAD_TITLES: tuple[str, ...] = (
    "Wexmoor", "The Third Step", "Iron Door", "Agnes", "The Causeway", "Cave-In", "The Crossing", "Rhymes",
    "The Watch", "Forty Tons", "Night Watch", "Four Bells", "Instruments", "Warrants", "Hymns", "Debts",
    "Gull Point", "The Fair", "The Storm", "Depositions", "Oilskin", "The Inquest", "Sunday Trains",
    "Salt Pans", "Counting", "The Vestry", "Lower Galleries", "Exhumation", "Low Tide", "Ledger Lines",
    "The Assessor", "Assay", "High Water", "Hollin's Gate", "Letters", "The Needles", "Old Debts",
    "Faces", "The Last Survey", "Salt Road",
)

PROJECTS: tuple[ProjectSpec, ...] = (WUGANG, QINGSHI, SALT_ROAD)
