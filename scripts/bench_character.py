"""Character chat benchmark: chat:assemble of a long conversation whose pair has thousands of typed memories.

Run from the repository root::

    .venv/bin/python scripts/bench_character.py                  # readable tables (about 40 s)
    .venv/bin/python scripts/bench_character.py --json           # the same figures as JSON
    .venv/bin/python scripts/bench_character.py --language zh    # a Chinese project and text
    .venv/bin/python scripts/bench_character.py --memories 500 --messages 100 --calls 50   # smaller

The server is ``python -m main serve`` on a fresh data dir with its defaults (the bundled
multilingual encoder embeds the memories). One websocket; every call is sequential.

Setup, all through JSON-RPC and deterministic for a ``--seed``:

* a project (``--language``, English by default) and three characters (``kg:entity:upsert``, kind
  character, with labelled descriptions: "Personality: ...", "Speech: ...", "Secret: ..."): the
  pair that talks (the system character and the user character) and a third character;
* a conversation of the pair (``chat:conversation:create``, template "Base Roleplay", options
  ``{keyframeEvery: 0, memoryExtractionEvery: 0, remindEvery: 6}``): no keyframe and no memory
  extraction is ever started, so no background work muddies the timing. Reminders are still
  injected into every sixth message as it is added (no background work: a text change);
* ``--memories`` (2,000) typed memories of the pair (``memory:typed:add``), one call each: every
  one of the 8 memory types (weighted: facts, events and relationships the most), importance 1 to
  10 (the low and middle values the most common), a one-sentence summary in the style of a novel
  ("During the storm Mara and Tobin sheltered in the boathouse until the lamp failed."), three in
  ten with a sentence of content; one in ten in the conversation's own scope, the rest in pair
  scope; PERSONALITY and PREFERENCE ones about one of the two (``characterId``). Then
  ``--distractors`` (200) memories of another pair (the system character and the third one),
  which must never be recalled;
* ``--messages`` (500) messages (``chat:message:add``), alternately user and assistant, 1 to 3
  different lines of roleplay each, one in fifty marked important.

Measured:

* ``chat:assemble {conversationId}`` of the **continuing** conversation (it has messages, so
  the memory query looks for the pair's memories nearest the recent exchange, plus every memory
  of importance 8 or more): the first call (cold: the memory index's first sync and query in
  the process) apart, then ``--warmup`` (10) calls, then ``--calls`` (200) sequential calls;
  p50/p90/p95/p99/max in ms over the websocket, from just before the frame is sent to its reply;
* the same for a **new** conversation of the same pair (no messages: the pair's memories by
  importance and recency only, no encoder), ``--new-calls`` (50) calls;
* for each: ``tokenCount`` and ``budget.total``, how many memories were recalled and their
  tokens, the history section's tokens and how many messages it kept of the candidates, the
  number of prompt messages, the reply's size; how many recalled memories the two share;
* the latency of ``memory:typed:add`` and ``chat:message:add`` during setup (per call);
* the server's VmRSS (``/proc/PID/status``) when ready, after the first memory (which loads the
  encoder), after setup, and after the runs (VmHWM too), and its CPU per ``chat:assemble`` call.

The run exits 1 if any call fails, any ``tokenCount`` is over ``budget.total``, a memory of the
other pair (or, in the new conversation, of the first conversation's own scope) is recalled, or
the server exits uncleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import benchlib
from scripts.bench_chat import error_code, timed, wait_quiet
from scripts.bench_load import mem_total_kib, memory_kib
from scripts.benchlib import Load, LoadMeter, fmt, pct, percentile, spread, table
from tests.support.client import RpcClient
from tests.support.scenarios import Project

OPTIONS = {"keyframeEvery": 0, "memoryExtractionEvery": 0, "remindEvery": 6}
TEMPLATE = "Base Roleplay"
MEMORY_TYPES = ("NOTE", "FACT", "EVENT", "RELATIONSHIP", "PERSONALITY", "PREFERENCE", "RULE", "OUTCOME")
TYPE_WEIGHTS = (8, 20, 20, 18, 8, 8, 8, 10)
IMPORTANCE_WEIGHTS = (6, 10, 12, 14, 14, 12, 10, 9, 7, 6)  # importance 1..10
CONVERSATION_SCOPE = 0.1  # share of the pair's memories in the conversation's own scope
WITH_CONTENT = 0.3
IMPORTANT_MESSAGE = 0.02

# --------------------------------------------------------------------------- the cast and their words

@dataclass(frozen=True)
class Cast:
    """One language's characters (name, description), places, objects, memories and lines.

    A memory or line is a format string of ``{w}`` (who), ``{o}`` (the other one), ``{p}`` (a place),
    ``{x}`` (an object), ``{t}`` (a time) and ``{n}`` (a number, 2 to 40).
    """

    system: tuple[str, str]
    user: tuple[str, str]
    third: tuple[str, str]
    places: tuple[str, ...]
    objects: tuple[str, ...]
    times: tuple[str, ...]
    memories: dict[str, tuple[str, ...]]
    lines: tuple[str, ...]
    joiner: str


EN = Cast(
    system=("Mara Voss", "The keeper of the North Cape lighthouse, thirty-four, raised in the harbour town.\n"
            "Personality: quiet, watchful, dry humour, slow to trust\n"
            "Speech: short sentences, sailors' words, never raises her voice\n"
            "Emotional tendency: hides fear behind work\n"
            "Secret: she put out the lamp on the night of the wreck"),
    user=("Tobin Hale", "A shipwright's son who came back to the cape after ten years away.\n"
          "Personality: warm, restless, curious, stubborn\n"
          "Speech: asks too many questions, laughs easily"),
    third=("Ilse Brandt", "The harbour master's widow, who keeps the town's accounts.\n"
           "Personality: shrewd, patient"),
    places=("the lamp room", "the north pier", "the boathouse", "the chapel on the cliff",
            "the harbour master's office", "the salt marsh", "the old ferry landing", "the lighthouse stairs",
            "the fish market", "the drowned village", "the net loft", "the customs house", "the seal rocks",
            "the widow's walk", "the rope works"),
    objects=("the brass key", "the logbook", "a cracked compass", "the red lantern", "the wreck's bell",
             "a bundle of letters", "the tide tables", "a silver ring", "the spare oars",
             "the harbour chart", "a tin of matches", "the foghorn's handle", "a child's shoe",
             "the keeper's ledger", "a bottle of rum"),
    times=("the first winter", "the night of the fair", "the spring the ice broke late",
           "the week the ferry stopped", "the day of the funeral", "the longest day of the year",
           "the start of the storm season", "the autumn the herring failed", "the week of the fog",
           "the feast of the drowned", "the morning the bell rang by itself", "the year of the great tide"),
    memories={
        "NOTE": ("{w} keeps {x} in {p} and never explains why.",
                 "Since {t}, {w} hums an old harbour song in {p} whenever {o} is late.",
                 "{w} counts the steps of {p} under the breath, {n} of them before each rest.",
                 "{t}, {w} left a note for {o} under {x}; nobody has read it yet."),
        "FACT": ("{w} learned the tide tables in {p} from an uncle who drowned {t}.",
                 "{x} that {w} carries once belonged to {o}'s mother.",
                 "{w} has not set foot in {p} for {n} years, not since {t}.",
                 "{w} can mend a net faster than anyone in {p}, {n} knots a minute."),
        "EVENT": ("During the storm {w} and {o} sheltered in {p} until the lamp failed.",
                  "{w} found {x} washed up near {p} the morning after the wreck.",
                  "{t}, {w} and {o} rowed out to {p} at dawn and came back without a word.",
                  "{w} showed {o} {x} in {p}, {n} days into the thaw."),
        "RELATIONSHIP": ("{w} trusts {o} with the keys to {p} but not with the truth about {x}.",
                         "{w} and {o} quarrelled at {p} {t} and did not speak for {n} days.",
                         "{w} forgave {o} for losing {x} in {p}, though neither of them says so.",
                         "Since {t}, {w} waits for {o} at {p} every evening and pretends it is chance."),
        "PERSONALITY": ("{w} goes quiet instead of angry, and since {t} {o} has learned to read the silence.",
                        "{w} jokes hardest when frightened, as on the night at {p} with {x}.",
                        "{w} cannot leave {x} alone once something about it is wrong, not even in {p}."),
        "PREFERENCE": ("{w} prefers black tea without sugar and the north window of {p}, {n} steps from {x}.",
                       "{w} hates being thanked in front of others, even by {o}, ever since {t}.",
                       "{w} would rather walk to {p} in the rain than take the ferry with {x}."),
        "RULE": ("{w} never lets anyone but {o} climb to {p} after dark, and never with {x}.",
                 "{t}, {w} promised {o} never to sell {x}.",
                 "Nobody speaks of {x} in {p} while {w} is there."),
        "OUTCOME": ("Because {w} lied about {x}, {o} lost the harbour master's trust {t}.",
                    "{w}'s warning reached {p} in time and {n} fishing boats stayed in.",
                    "After {t} at {p}, {o} stopped asking {w} about {x}."),
    },
    lines=("\"Have you seen {x}?\" {w} asks, glancing toward {p}.",
           "{w} sets {x} on the table. \"It was in {p}, where you said it would be.\"",
           "\"You should not go to {p} alone,\" {w} says quietly.",
           "{w} laughs, but the sound dies quickly in {p}.",
           "\"I kept my promise about {x},\" {w} says. \"Did you keep yours?\"",
           "The wind rattles the shutters of {p}; {w} waits for {o} to answer.",
           "{w} turns {x} over in careful hands and says nothing for a while.",
           "\"Tell me what happened at {p} the night of the wreck, {o}.\"",
           "\"{o}, I am tired of secrets,\" {w} says.",
           "{w} pours two cups of tea and pushes one toward {o}.",
           "\"The tide turns in {n} minutes. We should go.\"",
           "{w} hangs {x} on its nail by the door of {p} and does not look at {o}.",
           "\"Ilse asked about {x} again,\" {w} says. \"I told her nothing.\"",
           "Rain drums on the roof of {p} while {w} stirs the fire.",
           "\"Since {t} you have not once said my name,\" {w} says.",
           "{w} unfolds {x} and traces a line toward {p} with one finger.",
           "\"If the lamp fails tonight, will you come?\" {w} asks."),
    joiner=" ",
)

ZH = Cast(
    system=("苏婉", "北岬灯塔的守塔人，三十四岁，在港镇长大。\n性格：沉静，警觉，冷幽默，不轻易信人\n"
            "说话方式：句子短，满口水手话，从不提高嗓门\n情绪倾向：害怕时就埋头干活\n秘密：沉船那晚是她熄了灯"),
    user=("韩立", "船匠的儿子，离开十年后回到岬角。\n性格：热心，好动，好奇，倔强\n说话方式：问题太多，爱笑"),
    third=("梅玲", "港务长的遗孀，替镇上管账。\n性格：精明，有耐心"),
    places=("灯室", "北码头", "船坞", "悬崖上的小教堂", "港务长办公室", "盐沼", "旧渡口", "灯塔的楼梯",
            "鱼市", "淹没的村子", "晒网楼", "海关大楼", "海豹礁", "望夫台", "制绳坊"),
    objects=("铜钥匙", "航海日志", "裂了的罗盘", "红灯笼", "沉船的钟", "一捆信", "潮汐表", "银戒指",
             "备用的桨", "港口海图", "一盒火柴", "雾笛的手柄", "一只童鞋", "守塔人的账本", "一瓶朗姆酒"),
    times=("头一个冬天", "集市那晚", "冰化得晚的那年春天", "渡船停航的那周", "葬礼那天", "夏至那天",
           "风暴季开始时", "鲱鱼歉收的那个秋天", "起雾的那一周", "祭海节那天", "钟自己响起的那个早上",
           "大潮那年"),
    memories={
        "NOTE": ("{w}把{x}藏在{p}，从来不解释为什么。",
                 "从{t}起，{o}迟到的时候，{w}总会在{p}哼一首老港口的歌。",
                 "{w}低声数着{p}的台阶，每走{n}级歇一次。",
                 "{t}，{w}在{x}下面给{o}留了一张纸条，还没人读过。"),
        "FACT": ("{w}的潮汐知识是在{p}跟一个{t}淹死的叔叔学的。",
                 "{w}随身带的{x}原本是{o}母亲的东西。",
                 "自从{t}，{w}已经{n}年没去过{p}了。",
                 "{w}在{p}补网比谁都快，一分钟能打{n}个结。"),
        "EVENT": ("暴风雨那夜，{w}和{o}躲在{p}，直到灯灭了。",
                  "沉船后的第二天早上，{w}在{p}附近捡到了冲上岸的{x}。",
                  "{t}，{w}和{o}天亮时划船去了{p}，回来时谁也没说话。",
                  "化冻的第{n}天，{w}在{p}把{x}拿给{o}看。"),
        "RELATIONSHIP": ("{w}把{p}的钥匙交给了{o}，却没把{x}的真相告诉{o}。",
                         "{t}，{w}和{o}在{p}吵了一架，{n}天没说话。",
                         "{w}原谅了{o}在{p}弄丢{x}的事，只是两人都不提。",
                         "从{t}起，{w}每天傍晚在{p}等{o}，却装作是碰巧。"),
        "PERSONALITY": ("{w}生气时只会沉默，从{t}起{o}已经学会读懂这种沉默。",
                        "{w}越害怕越爱开玩笑，就像那夜在{p}拿着{x}的时候。",
                        "只要{x}有一点不对劲，{w}就放不下，哪怕在{p}也一样。"),
        "PREFERENCE": ("{w}喜欢不加糖的红茶，还有{p}朝北的那扇窗，离{x}只有{n}步。",
                       "从{t}起，{w}就讨厌被人当众道谢，哪怕是{o}。",
                       "{w}宁可冒雨带着{x}走去{p}，也不坐渡船。"),
        "RULE": ("天黑以后，除了{o}，{w}不让任何人带着{x}上{p}。",
                 "{t}，{w}答应过{o}，永远不卖掉{x}。",
                 "只要{w}在{p}，就没人提起{x}。"),
        "OUTCOME": ("因为{w}在{x}的事上撒了谎，{o}在{t}失去了港务长的信任。",
                    "{w}的警告及时传到了{p}，{n}条渔船都没有出海。",
                    "{t}在{p}之后，{o}再也没问过{w}关于{x}的事。"),
    },
    lines=("“你见过{x}吗？”{w}问，目光飘向{p}。",
           "{w}把{x}放在桌上。“它就在{p}，跟你说的一样。”",
           "“你不该一个人去{p}。”{w}低声说。",
           "{w}笑了笑，笑声很快消失在{p}里。",
           "“关于{x}的约定，我守住了。”{w}说，“你呢？”",
           "风吹得{p}的窗板哐哐作响，{w}等着{o}回答。",
           "{w}小心地翻看着{x}，很久没有说话。",
           "“{o}，告诉我沉船那晚在{p}发生了什么。”",
           "“{o}，我受够了这些秘密。”{w}说。",
           "{w}倒了两杯茶，把一杯推到{o}面前。",
           "“还有{n}分钟就要转潮了，我们该走了。”",
           "{w}把{x}挂回{p}门边的钉子上，没有看{o}。",
           "“梅玲又问起{x}了，”{w}说，“我什么也没告诉她。”",
           "雨点敲打着{p}的屋顶，{w}拨了拨炉火。",
           "“从{t}起，你就再没叫过我的名字。”{w}说。",
           "{w}摊开{x}，用一根手指朝{p}的方向画了一条线。",
           "“要是今晚灯灭了，你会来吗？”{w}问。"),
    joiner="",
)


def first_name(name: str) -> str:
    """What the prompt calls a character: the first word of a Latin name, a Chinese name whole."""
    return name.split()[0] if " " in name else name


def fill(rng: random.Random, cast: Cast, template: str, who: str, other: str) -> str:
    text = template.format(w=who, o=other, p=rng.choice(cast.places), x=rng.choice(cast.objects),
                                        t=rng.choice(cast.times), n=rng.randint(2, 40))
    return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class MemorySpec:
    memory_type: str
    importance: int
    summary: str
    content: str
    about: str | None  # "system" | "user": the character it is about
    conversation_scope: bool


def memory_specs(cast: Cast, count: int, rng: random.Random, *, narrow: float) -> list[MemorySpec]:
    """``count`` memories of the pair; ``narrow``: the share in the conversation's own scope."""
    names = {"system": first_name(cast.system[0]), "user": first_name(cast.user[0])}
    specs = []
    for _ in range(count):
        kind = rng.choices(MEMORY_TYPES, TYPE_WEIGHTS)[0]
        about = rng.choice(("system", "user"))
        who, other = names[about], names["user" if about == "system" else "system"]
        content = ""
        if rng.random() < WITH_CONTENT:
            content = fill(rng, cast, rng.choice(cast.lines), who, other)
        specs.append(MemorySpec(kind, rng.choices(range(1, 11), IMPORTANCE_WEIGHTS)[0],
                                fill(rng, cast, rng.choice(cast.memories[kind]), who, other), content,
                                about if kind in ("PERSONALITY", "PREFERENCE") else None,
                                rng.random() < narrow))
    return specs


@dataclass(frozen=True)
class MessageSpec:
    role: str
    content: str
    important: bool


def message_specs(cast: Cast, count: int, rng: random.Random) -> list[MessageSpec]:
    """``count`` messages, user first, then alternately, each 1 to 3 different lines of its speaker."""
    system, user = first_name(cast.system[0]), first_name(cast.user[0])
    specs = []
    for n in range(count):
        role = "user" if n % 2 == 0 else "assistant"
        who, other = (user, system) if role == "user" else (system, user)
        text = cast.joiner.join(fill(rng, cast, line, who, other)
                                for line in rng.sample(cast.lines, rng.randint(1, 3)))
        specs.append(MessageSpec(role, text, rng.random() < IMPORTANT_MESSAGE))
    return specs


# --------------------------------------------------------------------------- measuring


@dataclass
class Calls:
    """Latencies and failures of one kind of call."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    async def call(self, client: RpcClient, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The call's result, timed; None (and its error counted) when it failed."""
        latency, reply = await timed(client, method, params)
        if "error" in reply:
            self.errors[error_code(reply)] += 1
            return None
        self.latencies_ms.append(latency)
        result: dict[str, Any] = reply["result"]
        return result


@dataclass
class Variant:
    """One conversation's chat:assemble, as measured."""

    label: str
    conversation_id: str
    first_ms: float | None = None  # the very first call, cold
    calls: Calls = field(default_factory=Calls)
    load: Load | None = None
    shape: dict[str, Any] = field(default_factory=dict)  # what the last answer held
    over_budget: int = 0  # answers whose tokenCount passed budget.total
    token_counts: list[int] = field(default_factory=list)
    recalled: set[int] = field(default_factory=set)  # every memory id any answer recalled
    leaks: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        load = None
        if self.load is not None:
            load = asdict(self.load)
            load["noisy"] = self.load.noisy
        return {"label": self.label, "conversation_id": self.conversation_id, "first_ms": self.first_ms,
                "latency": asdict(spread(self.calls.latencies_ms)),
                "p90_ms": percentile(sorted(self.calls.latencies_ms), 90), "errors": dict(self.calls.errors),
                "load": load, "shape": self.shape, "over_budget": self.over_budget,
                "token_count": ({"min": min(self.token_counts), "max": max(self.token_counts)}
                                if self.token_counts else {}),
                "distinct_recalled": len(self.recalled), "leaks": self.leaks}


def shape_of(result: dict[str, Any]) -> dict[str, Any]:
    """The figures of one chat:assemble answer the report shows."""
    sections = {s["id"]: s for s in result["sections"]}
    history = sections.get("history", {})
    return {
        "token_count": result["tokenCount"], "budget_total": result["budget"]["total"],
        "system_prompt_tokens": result["budget"]["systemPromptTokens"],
        "memory_count": result["memory"]["count"], "memory_tokens": result["memory"]["tokens"],
        "memory_ids": result["memory"]["memoryIds"],
        "history_tokens": history.get("tokens", 0), "history_kept": history.get("items", 0),
        "history_steps": [step["step"] for step in history.get("steps", [])],
        "history_candidates": result["historyCandidates"],
        "prompt_messages": len(result["messages"]), "prompt_chars": len(result["prompt"]),
        "reply_kib": len(json.dumps(result, ensure_ascii=False).encode()) / 1024,
        "sections": [{"id": s["id"], "role": s["role"], "tokens": s["tokens"], "items": s["items"],
                      "steps": [step["step"] for step in s["steps"]]} for s in result["sections"]],
        "warnings": result["warnings"],
    }


async def measure(client: RpcClient, variant: Variant, *, warmup: int, calls: int, pid: int,
                  forbidden: dict[int, str]) -> None:
    """The first call, ``warmup`` calls, then ``calls`` timed ones; every answer checked."""
    params = {"conversationId": variant.conversation_id}
    probe = Calls()

    def check(result: dict[str, Any]) -> None:
        variant.token_counts.append(result["tokenCount"])
        if result["tokenCount"] > result["budget"]["total"]:
            variant.over_budget += 1
        ids = result["memory"]["memoryIds"]
        variant.recalled.update(ids)
        for memory_id in ids:
            if memory_id in forbidden and len(variant.leaks) < 20:
                variant.leaks.append(f"memory {memory_id} ({forbidden[memory_id]}) recalled")

    first = await probe.call(client, "chat:assemble", params)
    if first is not None:
        variant.first_ms = probe.latencies_ms[0]
        check(first)
    for _ in range(warmup):
        if (result := await probe.call(client, "chat:assemble", params)) is not None:
            check(result)
    meter = LoadMeter(pid)
    last = first
    for _ in range(calls):
        if (result := await variant.calls.call(client, "chat:assemble", params)) is not None:
            check(result)
            last = result
    variant.load = meter.stop()
    variant.calls.errors.update(probe.errors)
    variant.shape = shape_of(last) if last is not None else {}


# --------------------------------------------------------------------------- the run


@dataclass
class Report:
    machine: dict[str, Any]
    command: str
    config: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)
    setup: dict[str, Calls] = field(default_factory=dict)  # memory:typed:add, chat:message:add, other
    setup_s: dict[str, float] = field(default_factory=dict)
    variants: list[Variant] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    server_exit: int | None = None

    @property
    def errors(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for calls in [*self.setup.values(), *(v.calls for v in self.variants)]:
            total.update(calls.errors)
        return dict(total)

    @property
    def failed(self) -> bool:
        return (bool(self.errors) or self.server_exit != 0 or len(self.variants) < 2
                or any(v.over_budget or v.leaks or not v.calls.latencies_ms for v in self.variants))

    def to_json(self) -> dict[str, Any]:
        return {"machine": self.machine, "command": self.command, "config": self.config, "data": self.data,
                "setup": {k: {"latency": asdict(spread(c.latencies_ms)), "errors": dict(c.errors),
                              "first_ms": c.latencies_ms[0] if c.latencies_ms else None,
                              "wall_s": self.setup_s.get(k)} for k, c in self.setup.items()},
                "assemble": [v.to_json() for v in self.variants], "memory": self.memory,
                "errors": self.errors, "server_exit": self.server_exit, "failed": self.failed}


async def character(client: RpcClient, calls: Calls, project: Project, name: str, description: str) -> int:
    result = await calls.call(client, "kg:entity:upsert", {
        "projectId": project.project_id, "kind": "character", "name": name, "description": description})
    if result is None:
        raise RuntimeError(f"kg:entity:upsert of {name} failed: {dict(calls.errors)}")
    return int(result["entity"]["id"])


async def conversation(client: RpcClient, calls: Calls, project: Project, system: int, user: int) -> str:
    result = await calls.call(client, "chat:conversation:create", {
        "projectId": project.project_id, "systemCharacterId": system, "userCharacterId": user,
        "templateName": TEMPLATE, "options": OPTIONS})
    if result is None:
        raise RuntimeError(f"chat:conversation:create failed: {dict(calls.errors)}")
    return str(result["conversationId"])


async def run_benchmark(args: argparse.Namespace,
                        progress: Callable[[str], None] = lambda _: None) -> Report:
    machine = benchlib.machine_facts()
    machine["memory_kib"] = mem_total_kib()
    report = Report(machine=machine, command=benchlib.command_line(), config=vars(args).copy())
    report.config.pop("save", None)
    cast = ZH if args.language == "zh" else EN
    rng = random.Random(args.seed)
    pair = memory_specs(cast, args.memories, rng, narrow=CONVERSATION_SCOPE)
    others = memory_specs(cast, args.distractors, rng, narrow=0.0)
    said = message_specs(cast, args.messages, rng)
    report.data = {
        "language": args.language, "memories": len(pair), "distractors": len(others),
        "types": dict(Counter(m.memory_type for m in pair)),
        "importance": {str(k): v for k, v in sorted(Counter(m.importance for m in pair).items())},
        "conversation_scope": sum(m.conversation_scope for m in pair),
        "distinct_summaries": len({m.summary for m in pair}),
        "summary_chars": {"min": min((len(m.summary) for m in pair), default=0),
                          "max": max((len(m.summary) for m in pair), default=0)},
        "messages": len(said), "important_messages": sum(m.important for m in said),
        "message_chars": {"min": min((len(m.content) for m in said), default=0),
                          "max": max((len(m.content) for m in said), default=0),
                          "total": sum(len(m.content) for m in said)},
    }
    memories, messages, other = Calls(), Calls(), Calls()
    report.setup = {"memory:typed:add": memories, "chat:message:add": messages, "other": other}
    with tempfile.TemporaryDirectory(prefix="strata-bench-character-") as tmp:
        async with benchlib.running_server(Path(tmp) / "data") as server:
            pid = server.process.pid
            ready = memory_kib(pid)
            client = await RpcClient.open(server.url, server.token, max_size=None)
            try:
                project = await Project.open(client, Path(tmp) / "novel", language=args.language)
                system = await character(client, other, project, *cast.system)
                user = await character(client, other, project, *cast.user)
                third = await character(client, other, project, *cast.third)
                cid = await conversation(client, other, project, system, user)
                ids = {"system": system, "user": user}
                forbidden: dict[int, str] = {}
                encoder: dict[str, int] = {}
                narrow: dict[int, str] = {}
                progress(f"adding {len(pair):,} memories of the pair and {len(others):,} of another pair")
                started = time.perf_counter()
                for n, spec in enumerate([*pair, *others]):
                    distractor = n >= len(pair)
                    params: dict[str, Any] = {
                        "projectId": project.project_id, "memoryType": spec.memory_type,
                        "importance": spec.importance, "summary": spec.summary, "content": spec.content,
                        "systemCharacterId": system, "userCharacterId": third if distractor else user}
                    if spec.conversation_scope:
                        params |= {"scope": "conversation", "conversationId": cid}
                    if spec.about is not None:
                        params["characterId"] = system if distractor else ids[spec.about]
                    added = await memories.call(client, "memory:typed:add", params)
                    if n == 0:
                        encoder = memory_kib(pid)  # the first add loads the encoder
                    if added is not None and distractor:
                        forbidden[int(added["id"])] = "of the other pair"
                    elif added is not None and spec.conversation_scope:
                        narrow[int(added["id"])] = "of the first conversation's own scope"
                report.setup_s["memory:typed:add"] = time.perf_counter() - started
                progress(f"adding {len(said):,} messages")
                started = time.perf_counter()
                for message in said:
                    await messages.call(client, "chat:message:add", {
                        "conversationId": cid, "role": message.role, "content": message.content,
                        "important": message.important})
                report.setup_s["chat:message:add"] = time.perf_counter() - started
                await wait_quiet(pid, 30.0)
                after_setup = memory_kib(pid)
                progress(f"chat:assemble, continuing: {args.warmup} warm-up and {args.calls} calls")
                continuing = Variant("continuing", cid)
                report.variants.append(continuing)
                await measure(client, continuing, warmup=args.warmup, calls=args.calls, pid=pid,
                              forbidden=forbidden)
                fresh = Variant("new", await conversation(client, other, project, system, user))
                report.variants.append(fresh)
                progress(f"chat:assemble, new conversation: {args.new_calls} calls")
                await measure(client, fresh, warmup=min(args.warmup, args.new_calls), calls=args.new_calls,
                              pid=pid, forbidden={**forbidden, **narrow})
                after = memory_kib(pid)
            finally:
                await client.close()
            report.machine["loadavg_after"] = list(os.getloadavg())
        report.server_exit = server.process.returncode
    report.memory = {"ready_rss_kib": ready.get("VmRSS"), "encoder_rss_kib": encoder.get("VmRSS"),
                     "setup_rss_kib": after_setup.get("VmRSS"),
                     "after_rss_kib": after.get("VmRSS"), "after_hwm_kib": after.get("VmHWM")}
    return report


# --------------------------------------------------------------------------- output


def _ms(value: float | None) -> str:
    return fmt(value, 2)


def _mib(kib: int | None) -> str:
    return fmt(kib / 1024 if kib is not None else None, 1)


def _section(section: dict[str, Any]) -> str:
    steps = f" ({'+'.join(section['steps'])})" if section["steps"] else ""
    return f"{section['id']} {section['tokens']}{steps}"


def render(report: Report) -> str:
    m, data = report.machine, report.data
    memory = f", {m['memory_kib'] / 2**20:.1f} GiB RAM" if m.get("memory_kib") else ""
    after_load = m.get("loadavg_after", [math.nan])[0]
    types = ", ".join(f"{k} {v:,}" for k, v in sorted(data["types"].items(), key=lambda kv: -kv[1]))
    out = [
        *benchlib.machine_lines(m, memory),
        f"         load average before {m['loadavg'][0]:.2f}, after {after_load:.2f}",
        f"Command: {report.command}",
        f"Data:    {data['language']}; {data['memories']:,} memories of the pair ({types}; "
        f"{data['conversation_scope']:,} in the conversation's scope; "
        f"{data['distinct_summaries']:,} distinct summaries of {data['summary_chars']['min']} to "
        f"{data['summary_chars']['max']} characters) and "
        f"{data['distractors']:,} of another pair;",
        f"         {data['messages']:,} messages of {data['message_chars']['min']} to "
        f"{data['message_chars']['max']} characters ({data['message_chars']['total']:,} in all), "
        f"{data['important_messages']} marked important; options {json.dumps(OPTIONS)}",
        "",
        "Setup calls, latency in ms (nearest rank; first: the first call, which loads the encoder)",
    ]
    rows = []
    for key in ("memory:typed:add", "chat:message:add"):
        s = spread(report.setup[key].latencies_ms)
        samples = report.setup[key].latencies_ms
        rows.append([key, f"{s.count:,}", _ms(samples[0] if samples else None), _ms(s.mean), _ms(s.p50),
                     _ms(s.p95), _ms(s.p99), _ms(s.max), fmt(report.setup_s.get(key), 1)])
    out += table(["call", "count", "first", "mean", "p50", "p95", "p99", "max", "wall s"], rows)
    out += ["", "chat:assemble, latency in ms over the websocket (nearest rank; first: the very first call)"]
    rows = []
    for v in report.variants:
        s = spread(v.calls.latencies_ms)
        p90 = percentile(sorted(v.calls.latencies_ms), 90)
        rows.append([f"{v.label} conversation", f"{s.count:,}", _ms(v.first_ms), _ms(s.mean), _ms(s.p50),
                     _ms(p90), _ms(s.p95), _ms(s.p99), _ms(s.max)])
    out += table(["conversation", "calls", "first", "mean", "p50", "p90", "p95", "p99", "max"], rows)
    out += ["", "What the last answer held"]
    rows = []
    for v in report.variants:
        sh = v.shape
        if not sh:
            continue
        rows.append([f"{v.label} conversation", f"{sh['token_count']:,}", f"{sh['budget_total']:,}",
                     f"{sh['system_prompt_tokens']:,}", f"{sh['memory_count']} ({sh['memory_tokens']} tk)",
                     f"{sh['history_kept']}/{sh['history_candidates']} ({sh['history_tokens']:,} tk)",
                     str(sh["prompt_messages"]), fmt(sh["reply_kib"], 1)])
    out += table(["conversation", "tokenCount", "budget.total", "systemPrompt", "memories",
                  "history kept/cand.", "messages", "reply KiB"], rows)
    for v in report.variants:
        if v.shape:
            sections = ", ".join(_section(s) for s in v.shape["sections"] if s["tokens"])
            out.append(f"  {v.label}: sections {sections}; {len(v.recalled)} distinct memories recalled over "
                       f"the run")
            if v.shape["warnings"]:
                out.append(f"  {v.label}: warnings {', '.join(v.shape['warnings'])}")
    if len(report.variants) == 2 and all(v.shape for v in report.variants):
        continuing, fresh = (set(v.shape["memory_ids"]) for v in report.variants)
        out.append(f"  recalled by both: {len(continuing & fresh)} of {len(continuing)} (continuing) and "
                   f"{len(fresh)} (new)")
    out.append("")
    for v in report.variants:
        load = v.load
        if load is None or not v.calls.latencies_ms:
            continue
        server = (load.server_user_s or 0.0) + (load.server_sys_s or 0.0)
        out.append(f"Server CPU, {v.label}: {server * 1e3 / len(v.calls.latencies_ms):.1f} ms per call "
                   f"({pct(load.share(server))} of a core); client {pct(load.share(load.own_s))}, others "
                   f"{pct(load.share(load.others_s))}")
    mem = report.memory
    out.append(f"Server RSS: {_mib(mem['ready_rss_kib'])} MiB ready, "
               f"{_mib(mem['encoder_rss_kib'])} MiB after the first memory (the encoder loaded), "
               f"{_mib(mem['setup_rss_kib'])} MiB after setup, "
               f"{_mib(mem['after_rss_kib'])} MiB after the runs (peak {_mib(mem['after_hwm_kib'])})")
    out.append(f"Errors: {', '.join(f'{k} {v}' for k, v in sorted(report.errors.items())) or 'none'}")
    for v in report.variants:
        budget = f"{v.over_budget} over budget.total" if v.over_budget else "none over budget.total"
        tokens = (f"tokenCount {min(v.token_counts)} to {max(v.token_counts)}" if v.token_counts
                  else "no answers")
        out.append(f"Checks, {v.label}: {tokens}, {budget}, {len(v.leaks)} forbidden memories recalled")
        out += [f"  {leak}" for leak in v.leaks]
    noisy = [v.label for v in report.variants if v.load is not None and v.load.noisy]
    if noisy:
        out.append(benchlib.noisy_warning(noisy))
    if report.server_exit != 0:
        out.append(f"warning: the server exited with {report.server_exit}")
    return "\n".join(out).rstrip() + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--language", choices=("en", "zh"), default="en")
    p.add_argument("--memories", type=int, default=2000, help="typed memories of the pair")
    p.add_argument("--distractors", type=int, default=200, help="typed memories of another pair")
    p.add_argument("--messages", type=int, default=500)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--calls", type=int, default=200,
                   help="timed chat:assemble calls of the continuing conversation")
    p.add_argument("--new-calls", type=int, default=50, help="timed chat:assemble calls, new conversation")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--save", type=Path, default=None, metavar="PATH", help="also write the JSON report")
    args = p.parse_args(argv)
    if min(args.calls, args.new_calls) < 1:
        p.error("--calls and --new-calls must be positive")
    if min(args.memories, args.distractors, args.messages, args.warmup) < 0:
        p.error("--memories, --distractors, --messages and --warmup must not be negative")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = asyncio.run(run_benchmark(args, progress=benchlib.progress))
    benchlib.emit(report.to_json(), lambda: render(report), as_json=args.json, save=args.save)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
