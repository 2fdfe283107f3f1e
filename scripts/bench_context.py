"""Benchmark context assembly: the pure engine, the JSON-RPC methods, and a real server.

Run from the repository root::

    .venv/bin/python scripts/bench_context.py            # readable tables
    .venv/bin/python scripts/bench_context.py --json     # the same figures as JSON

The data is one realistic, deterministic project (seeded generator, bilingual):
50 constraints (15 of them kg-derived), 100 knowledge-graph entities, 30
confirmed semantic rules, 200 retrieval candidates and a 20k-token chapter of
Chinese prose mixed with English, with the cursor near its end. In-process
the 200 candidates are engine ``Item``\\ s in the novel profile's Retrieved
section (part ``passages``, each with a score), so the engine is measured
without the retrieval index; through the JSON-RPC methods and over the
websocket they are 200 episodic memories instead (the memory provider ranks
the newest ``EPISODES_CONSIDERED``: 200 since 2026-12-02, 50 before), beside
whatever the index finds.

Phases, in order (latency per call, reported in ms as p50/p95/p99):

1. **Engine** ``assemble(Request, CountCache, memo)`` on the ``novel`` plan: warm (one CountCache for the
   whole phase) with the same request repeated, warm with a new cursor
   position on every call, and cold (a fresh CountCache on every call).
2. **Budget** and **hash** alone: ``make_budget`` plus the engine's own
   ``budget`` (trimming) stage, per engine call; ``prefix_hashes`` over the
   assembled prompt.
3. **Cold 64k**: a document of about 64k tokens, the cursor at its end, a
   fresh CountCache per run: cut the window, count the items, assemble.
4. **Dispatcher**: ``context:assemble`` and ``context:inspect`` (an inspector
   ``CallContext`` with ``debug=True``) through the app's own ``Dispatcher``,
   built in-process as ``strata serve`` builds it, warm; and
   ``context:assemble`` with a new cursor on every call.
5. **Websocket**: ``context:assemble`` against ``python -m main serve
   --debug``, warm, 1 client sequential and N clients (8 by default) at once,
   each on its own document.

In-process phases log as the server does by default (JSON lines at info, to
a file). Every phase reports the CPU other processes used meanwhile, as
``bench_rpc.py`` does. Then cProfile of the warm engine path and of warm
``context:assemble`` dispatches, self time grouped by module.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import itertools
import json
import logging
import math
import os
import pstats
import random
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import structlog
from websockets.asyncio.client import ClientConnection, connect

from ipc.context import CallContext, Peer, Role
from ipc.dispatch import Dispatcher
from ipc.protocol import Call
from main.config import Config
from main.stores import open_services
from main.wiring import EPISODES_CONSIDERED, build_registry
from scripts import benchlib
from scripts.benchlib import LoadMeter, fmt, pct, percentile, request_text, sentence, table
from services.caches import SourceCaches
from services.context.budget import make_budget, window_allowance
from services.context.counting import CountCache
from services.context.engine import Request, assemble
from services.context.hashing import prefix_hashes
from services.context.memo import BoundedMemo
from services.context.models import DEFAULT_PROFILE, Assembly, Item, Layer, Window
from services.context.render import join_sections
from services.context.skills import get_skill
from services.profiles.plans import BuiltInPlans
from services.sources.base import GatherContext
from services.sources.providers import (
    KnowledgeGraphProvider,
    SemanticMemoryProvider,
    UserConstraintsProvider,
)
from services.sources.window import cut_window
from services.tokenizer import Tokenizer, resolve_tokenizer

PROJECT_ID = "bench-project"
SKILL = "continue"
LANGUAGE = "zh"
# The providers' per-project caches, made once as the composition root makes them for the app.
SOURCE_CACHES = SourceCaches()

# --------------------------------------------------------------------------- the corpus

_SURNAMES = "林苏陈周吴郑王李赵孙钱何许沈韩杨朱秦施张孔曹严金魏陶姜谢邹喻柏"
_GIVEN = "远晴默岚舟川若屿宁珂澜砚棠溪野桥初遥青禾安然知秋白鹭星河"
_EN_NAMES = ["Adrian", "Mara", "Elliot", "Nora", "Felix", "Iris", "Jonah", "Vera", "Tobias",
             "Lena", "Caspian", "Hazel", "Rowan", "Sylvie", "Declan"]
_PLACES = ["灯塔", "北港", "旧码头", "盐沼", "灯室", "礁石滩", "渔村", "钟楼", "废弃船坞", "海角",
           "Saltmarsh Inn", "Harbor Road", "the North Pier", "Gull Point", "Keeper's Cottage"]
_OBJECTS = ["铜钥匙", "旧马灯", "航海日志", "褪色的信", "怀表", "望远镜", "雾笛", "船票", "油布包",
            "a brass compass"]
_CONCEPTS = ["潮汐", "守夜", "旧约定", "失踪案", "灯语", "航线", "暗号", "遗嘱", "北风", "盐税"]
_WEATHER = ["海风很冷", "雨一直下", "雾从海面上漫过来", "浪一层一层地拍在礁石上", "天色暗得很快",
            "远处有雷声", "月光落在积水里", "潮水退得很远"]
_ACTIONS = ["沿着台阶往下走", "推开那扇生锈的门", "把马灯举高了一点", "在窗边站了很久",
            "蹲下来数着木板", "翻开那本航海日志", "把信折好放回口袋", "听着雾笛一声一声地响",
            "摸到墙上的裂缝", "数着自己的脚步"]
_THOUGHTS = ["想起第二章那晚看见的东西", "忽然明白了那句话的意思", "不知道该不该说出来",
             "觉得有人在身后看着", "记起了父亲说过的话", "发现钥匙不见了", "听见楼上有脚步声"]
_EN_LINES = ["We should have left before the tide turned", "The lamp has to stay lit tonight",
             "I never told you about the letter", "Nobody keeps a lighthouse for the money",
             "Count the steps, not the hours", "The ferry isn't coming back",
             "You knew about the key all along", "Listen, the foghorn stopped"]
_ZH_LINES = ["上去看看吧", "别回头", "钥匙在哪里", "你早就知道了", "灯不能灭", "明天船就来了",
             "我们得等潮水退下去", "那封信是写给你的"]
_RULE_TEXTS = ["动作场景偏好短句", "对白前后少用副词修饰", "用天气映衬人物情绪", "章节结尾留一个悬念",
               "少用成语堆砌", "人物对话保留口语感", "English dialogue stays in English",
               "环境描写不超过三句", "避免直接描写心理活动", "用具体物件推动情节"]


@dataclass(frozen=True)
class Corpus:
    """One project's worth of writer data, as plain records (no ids, no project)."""

    chapter: str
    constraints: list[dict[str, Any]]
    entities: list[dict[str, Any]]
    rules: list[dict[str, Any]]
    passages: list[tuple[str, float]]  # retrieval candidates: text and score
    episodes: list[dict[str, Any]]
    narrative_person: str = "第一人称"
    style_notes: str = "冷静克制的叙述，中文为主，外国角色的对白保留英文原文。"
    instruction: str = "继续写 Adrian 在灯室里发现那封信之后的场景，保持悬念。"


# The default profile, as the assembly service resolves it for a project with the default budget.
NOVEL = BuiltInPlans().resolved["novel"].plan
# The engine's memo of one project, as the composition root keeps it.
MEMO = BoundedMemo()


def _character_names(rng: random.Random, count: int) -> list[str]:
    pairs = [s + g for s in _SURNAMES for g in _GIVEN]
    rng.shuffle(pairs)
    return pairs[:count]


# (rng, who, other, place, object) -> one sentence of mixed Chinese and English
_TEMPLATES: tuple[benchlib.Template, ...] = (
    lambda rng, who, other, place, obj: f"{who}{rng.choice(_ACTIONS)}，{rng.choice(_WEATHER)}。",
    lambda rng, who, other, place, obj: f"“{rng.choice(_ZH_LINES)}。”{who}低声说，没有看{other}。",
    lambda rng, who, other, place, obj: (f"“{rng.choice(_EN_LINES)},” {rng.choice(_EN_NAMES)} said, "
                                         f"and {who}没有回答。"),
    lambda rng, who, other, place, obj: f"{who}在{place}{rng.choice(_THOUGHTS)}，手里还握着{obj}。",
    lambda rng, who, other, place, obj: f"第{rng.randint(2, 40)}级台阶上落着一层灰，{rng.choice(_WEATHER)}。",
    lambda rng, who, other, place, obj: (
        f"The note in the {rng.choice(['drawer', 'logbook', 'lamp room', 'coat pocket'])} "
        f"said only: {rng.choice(_EN_LINES).lower()}."),
    lambda rng, who, other, place, obj: f"{who}和{other}在{place}等到天亮，{rng.choice(_WEATHER)}。",
    lambda rng, who, other, place, obj: f"{who}把{obj}交给{other}，说起{rng.choice(_CONCEPTS)}的事。",
)


def _sentence(rng: random.Random, cast: Sequence[str]) -> str:
    return sentence(rng, cast, _PLACES, _OBJECTS, _TEMPLATES)


def prose(rng: random.Random, cast: Sequence[str], tokens: int, count: Callable[[str], int]) -> str:
    """Paragraphs of mixed Chinese and English until about ``tokens`` tokens."""
    return benchlib.prose(rng, _sentence, cast, tokens, count)


def build_corpus(count: Callable[[str], int], *, chapter_tokens: int = 20_000, seed: int = 7,
                 constraints: int = 50, kg_constraints: int = 15, entities: int = 100,
                 rules: int = 30, candidates: int = 200) -> Corpus:
    """The benchmark project: deterministic for a seed, sized by the arguments."""
    rng = random.Random(seed)
    names = _character_names(rng, max(entities, 12))
    cast = names[:12] + _EN_NAMES[:4]  # the chapter's characters, all of them kg entities
    chapter = "# 第五章 暴风雨\n\n" + prose(rng, cast, chapter_tokens, count)
    constraint_records = benchlib.constraint_rows(
        rng, constraints, kg_constraints,
        lambda n: f"{rng.choice(cast)}{rng.choice(['不会', '从不', '总是'])}"
                  f"{rng.choice(_ACTIONS)}；{rng.choice(_CONCEPTS)}相关的情节不得提前揭示（规则 {n + 1}）")
    entity_rows: list[dict[str, Any]] = []
    # 60 Chinese characters (the chapter's cast first), 15 English ones, 15 places, 10 objects.
    pool = [*((name, "character") for name in names[:60]), *((n, "character") for n in _EN_NAMES),
            *((place, "location") for place in _PLACES), *((obj, "object") for obj in _OBJECTS),
            *((name, "character") for name in names[60:])]
    for n, (name, kind) in enumerate(pool[:entities]):
        description = "".join(_sentence(rng, cast) for _ in range(2))
        aliases = [name[-1] + "哥"] if kind == "character" and n % 3 == 0 and n < 60 else []
        entity_rows.append({"kind": kind, "name": name, "aliases": aliases,
                            "description": description})
    rule_rows = [{"text": f"{rng.choice(_RULE_TEXTS)}（偏好 {n + 1}）", "category": "style",
                  "confidence": round(rng.uniform(0.5, 0.99), 2), "confirmed": True}
                 for n in range(rules)]
    passages = [(prose(rng, cast, rng.randint(60, 140), count), round(rng.random(), 4))
                for _ in range(candidates)]
    episodes = [{"instruction": f"续写{rng.choice(cast)}在{rng.choice(_PLACES)}的场景",
                 "output": text} for text, _ in passages]
    return Corpus(chapter=chapter, constraints=constraint_records, entities=entity_rows,
                  rules=rule_rows, passages=passages, episodes=episodes)


def long_document(count: Callable[[str], int], tokens: int, seed: int = 64) -> str:
    """A chapter of about ``tokens`` tokens in the same style."""
    rng = random.Random(seed)
    return "# 第九章\n\n" + prose(rng, _character_names(rng, 12) + _EN_NAMES[:4], tokens, count)


# --------------------------------------------------------------------------- engine inputs


@dataclass(frozen=True)
class _Record:
    """Any stored record, as the providers read it (attribute access only)."""

    id: int
    project_id: str
    kind: str = ""
    text: str = ""
    source: str = "user"
    priority: int = 0
    name: str = ""
    aliases: tuple[str, ...] = ()
    description: str = ""
    confidence: float = 0.0
    confirmed: bool = True


async def _fixed(rows: Sequence[_Record]) -> Sequence[_Record]:
    return rows


def prepare_window(text: str, cursor: int, counter: CountCache) -> tuple[Window, int]:
    """The window and system-prompt tokens, as the service prepares them (``_prepare``)."""
    skill = get_skill(SKILL)
    system_tokens = counter.count(skill.prompt_for(LANGUAGE))
    budget = make_budget(DEFAULT_PROFILE, NOVEL, system_tokens)
    tokens = window_allowance(budget, NOVEL.section(Layer.IMMEDIATE))
    return cut_window(text, cursor, skill, tokens, counter), system_tokens


async def gather_items(corpus: Corpus, window: Window, counter: CountCache) -> tuple[Item, ...]:
    """The items the providers build for this window, plus the 200 retrieval candidates."""
    records = [_Record(id=n, project_id=PROJECT_ID, kind=r["kind"], text=r["text"],
                       source=r["source"], priority=r["priority"])
               for n, r in enumerate(corpus.constraints, start=1)]
    entities = [_Record(id=n, project_id=PROJECT_ID, kind=e["kind"], name=e["name"],
                        aliases=tuple(e["aliases"]), description=e["description"])
                for n, e in enumerate(corpus.entities, start=1)]
    rules = [_Record(id=n, project_id=PROJECT_ID, text=r["text"], confidence=r["confidence"])
             for n, r in enumerate(corpus.rules, start=1)]
    ctx = GatherContext(project_id=PROJECT_ID, document_id="chapter", language=LANGUAGE,
                        skill=get_skill(SKILL), window=window,
                        additional_input=corpus.instruction, counter=counter)
    items: list[Item] = []
    items += await UserConstraintsProvider(lambda _: _fixed(records)).gather(ctx)
    items += await KnowledgeGraphProvider(lambda _: _fixed(records), lambda _: _fixed(entities),
                                          sheets=SOURCE_CACHES.entity_sheets).gather(ctx)
    items += await SemanticMemoryProvider(lambda _: _fixed(rules)).gather(ctx)
    narrative = "叙述人称：" + corpus.narrative_person
    items.append(Item(id="settings:narrative", layer=Layer.RULES, section="narrative",
                      source="project", text=narrative, tokens=counter.count(narrative), key=1.0,
                      key_name="priority", project_id=PROJECT_ID, origin="project"))
    items.append(Item(id="settings:style", layer=Layer.SETTINGS, section="style", source="project",
                      text=corpus.style_notes, tokens=counter.count(corpus.style_notes), key=1.0,
                      key_name="confidence", project_id=PROJECT_ID, origin="project"))
    items += [Item(id=f"passage:{n}", layer=Layer.RETRIEVED, section="passages",
                   source="retrieval", text=text, tokens=counter.count(text), key=score,
                   key_name="score", project_id=PROJECT_ID)
              for n, (text, score) in enumerate(corpus.passages, start=1)]
    return tuple(items)


async def engine_request(corpus: Corpus, text: str, cursor: int, counter: CountCache) -> Request:
    """Everything the engine needs for ``cursor`` in ``text``, counted with ``counter``."""
    window, system_tokens = prepare_window(text, cursor, counter)
    items = await gather_items(corpus, window, counter)
    instruction = corpus.instruction.strip()
    return Request(project_id=PROJECT_ID, language=LANGUAGE, plan=NOVEL, profile=DEFAULT_PROFILE,
                   system_prompt_tokens=system_tokens, items=items, window=window,
                   instruction=instruction, instruction_tokens=counter.count(instruction))


def cursors_near_end(text: str, count: int, stride: int = 37) -> list[int]:
    """``count`` distinct cursor positions stepping back from the end of ``text``."""
    end = len(text) - 1
    return [max(0, end - n * stride) for n in range(count)]


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Stats:
    """Latency of one phase in milliseconds (nearest-rank percentiles)."""

    calls: int
    errors: int
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


def summarize(samples_ms: Sequence[float], errors: int = 0) -> Stats:
    ms = benchlib.spread(samples_ms)
    return Stats(calls=ms.count, errors=errors, mean_ms=ms.mean, p50_ms=ms.p50, p95_ms=ms.p95,
                 p99_ms=ms.p99, max_ms=ms.max)


@dataclass(frozen=True)
class Phase:
    """One measured figure: what it is, its latency and who used the CPU meanwhile."""

    group: str
    label: str
    stats: Stats
    load: benchlib.Load | None = None
    notes: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- logging


@contextlib.contextmanager
def app_logging(log_file: Path) -> Iterator[None]:
    """Log as ``strata serve`` does by default, without printing anything.

    The server writes JSON lines at ``info`` to its log file and to stderr
    (``main/logs.py``); here the stderr copy goes to ``/dev/null``. Loggers are
    not cached on first use, so everything is restored afterwards.
    """
    root = logging.getLogger()
    saved_level = root.level
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.processors.add_log_level, timestamper],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.JSONRenderer(ensure_ascii=False)])
    with open(os.devnull, "w", encoding="utf-8") as devnull:
        handlers: list[logging.Handler] = [logging.FileHandler(log_file, encoding="utf-8"),
                                           logging.StreamHandler(devnull)]
        for handler in handlers:
            handler.setFormatter(formatter)
            root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            with benchlib.structlog_settings(
                    processors=[structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
                                timestamper, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
                    wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
                    logger_factory=structlog.stdlib.LoggerFactory(),
                    cache_logger_on_first_use=False):
                yield
        finally:
            for handler in handlers:
                root.removeHandler(handler)
                handler.close()
            root.setLevel(saved_level)


# --------------------------------------------------------------------------- engine phases

STAGES = ("screen", "rules", "budget", "render", "hash")


@dataclass
class EngineRun:
    """One engine phase: per-call latency plus the engine's own stage timings."""

    phase: Phase
    stages_ms: dict[str, list[float]]
    budget_ms: list[float]  # make_budget + the trimming stage, per call
    last: Assembly | None = None


def repeat(times: int, request: Request, counter: Callable[[], CountCache]) -> Callable[[], None]:
    """A warm-up: assemble ``request`` ``times`` times, each with ``counter()``."""
    def run() -> None:
        for _ in range(times):
            assemble(request, counter(), MEMO)

    return run


def run_engine(label: str, pick: Callable[[int], tuple[Request, CountCache]], calls: int, *,
               warmup: Callable[[], None] | None = None, notes: dict[str, Any] | None = None,
               ) -> EngineRun:
    """Time ``assemble`` on ``pick(i)`` for i in 0..calls-1 (picking is not timed)."""
    if warmup is not None:
        warmup()
    stages: dict[str, list[float]] = {stage: [] for stage in STAGES}
    budget: list[float] = []
    samples: list[float] = []
    errors = 0
    last: Assembly | None = None
    clock = time.perf_counter
    meter = LoadMeter()
    for i in range(calls):
        request, counter = pick(i)
        t0 = clock()
        try:
            last = assemble(request, counter, MEMO)
        except Exception:  # counted, never fatal: the report shows it
            errors += 1
            continue
        t1 = clock()
        make_budget(request.profile, request.plan, request.system_prompt_tokens)
        t2 = clock()
        samples.append((t1 - t0) * 1e3)
        for stage in STAGES:
            stages[stage].append(last.timings_ms.get(stage, math.nan))
        budget.append(last.timings_ms.get("budget", math.nan) + (t2 - t1) * 1e3)
    phase = Phase("engine", label, summarize(samples, errors), meter.stop(), notes or {})
    return EngineRun(phase, stages, budget, last)


def bench_hash(assembly: Assembly, calls: int) -> Phase:
    """``prefix_hashes`` (four SHA-256 of growing prefixes) over an assembled prompt."""
    prompt, ends = join_sections(NOVEL, {name: layer.text for name, layer in assembly.layers.items()})
    samples: list[float] = []
    errors = 0
    clock = time.perf_counter
    meter = LoadMeter()
    for _ in range(calls):
        t0 = clock()
        hashes = prefix_hashes(prompt, ends)
        samples.append((clock() - t0) * 1e3)
        errors += hashes != assembly.prefix_hashes
    return Phase("hash", "prefix_hashes over the assembled prompt", summarize(samples, errors),
                 meter.stop(), {"prompt_chars": len(prompt),
                                "prompt_utf8_bytes": len(prompt.encode("utf-8"))})


async def bench_cold_document(corpus: Corpus, document: str, tokenizer: Tokenizer,
                              runs: int) -> Phase:
    """A fresh CountCache per run; cursor at the end: cut the window, count the items, assemble."""
    parts: dict[str, list[float]] = {"window": [], "items": [], "assemble": []}
    samples: list[float] = []
    errors = 0
    clock = time.perf_counter
    meter = LoadMeter()
    for _ in range(runs):
        counter = CountCache(tokenizer)
        t0 = clock()
        try:
            window, system_tokens = prepare_window(document, len(document), counter)
            t1 = clock()
            items = await gather_items(corpus, window, counter)
            instruction = corpus.instruction.strip()
            request = Request(project_id=PROJECT_ID, language=LANGUAGE, plan=NOVEL, profile=DEFAULT_PROFILE,
                              system_prompt_tokens=system_tokens, items=items, window=window,
                              instruction=instruction,
                              instruction_tokens=counter.count(instruction))
            t2 = clock()
            assemble(request, counter, BoundedMemo())
        except Exception:
            errors += 1
            continue
        t3 = clock()
        samples.append((t3 - t0) * 1e3)
        parts["window"].append((t1 - t0) * 1e3)
        parts["items"].append((t2 - t1) * 1e3)
        parts["assemble"].append((t3 - t2) * 1e3)
    notes = {f"{part}_p50_ms": percentile(sorted(values), 50) for part, values in parts.items()}
    notes["document_tokens"] = tokenizer.count(document)
    notes["document_chars"] = len(document)
    return Phase("cold64k", "fresh CountCache: cut window + count items + assemble",
                 summarize(samples, errors), meter.stop(), notes)


# --------------------------------------------------------------------------- the app

Caller = Callable[[str, dict[str, Any]], Awaitable[Any]]
_ids = itertools.count(1)


class RpcFailed(RuntimeError):
    """A call answered with a JSON-RPC error."""


def _result(reply: str | bytes | None, method: str) -> Any:
    if reply is None:
        raise RpcFailed(f"{method}: no reply")
    message = json.loads(reply)
    if "error" in message:
        error = message["error"]
        raise RpcFailed(f"{method}: {error.get('data', {}).get('code')}: {error.get('message')}")
    return message["result"]


def dispatcher_caller(dispatcher: Dispatcher, ctx: CallContext) -> Caller:
    async def call(method: str, params: dict[str, Any]) -> Any:
        return _result(await dispatcher.dispatch(Call(method, params, next(_ids)), ctx), method)

    return call


def socket_caller(ws: ClientConnection) -> Caller:
    """Sequential calls on one connection (each waits for its reply)."""
    async def call(method: str, params: dict[str, Any]) -> Any:
        await ws.send(request_text(method, params, next(_ids)))
        return _result(await ws.recv(), method)

    return call


def chapters(corpus: Corpus, count: Callable[[str], int], documents: int,
             tokens: int) -> dict[str, str]:
    """The project's chapters: the corpus chapter first, then others of the same size."""
    result = {"第五章.md": corpus.chapter}
    for n in range(1, documents):
        result[f"第{n + 5}章.md"] = long_document(count, tokens, seed=100 + n)
    return result


def write_chapters(folder: Path, documents: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in documents.items():
        (folder / name).write_text(text, encoding="utf-8")


async def seed_project(call: Caller, folder: Path, corpus: Corpus,
                       documents: dict[str, str]) -> str:
    """Write the chapters and create the project's records through the protocol."""
    await asyncio.to_thread(write_chapters, folder, documents)
    project_id = str((await call("project:open", {"path": str(folder), "name": "bench"}))
                     ["project"]["projectId"])
    settings = await call("project:settings:get", {"projectId": project_id})
    await call("project:settings:update", {
        "projectId": project_id, "version": settings["settings"]["version"], "language": LANGUAGE,
        "narrativePerson": corpus.narrative_person, "styleNotes": corpus.style_notes})
    for constraint in corpus.constraints:
        await call("constraints:create", {"projectId": project_id, **constraint})
    for entity in corpus.entities:
        await call("kg:entity:upsert", {"projectId": project_id, **entity})
    for rule in corpus.rules:
        await call("memory:semantic:upsert", {"projectId": project_id, **rule})
    for episode in corpus.episodes:
        await call("memory:episodic:add", {"projectId": project_id, **episode})
    return project_id


def assemble_params(project_id: str, document_id: str, cursor: int, corpus: Corpus) -> dict[str, Any]:
    return {"projectId": project_id, "documentId": document_id, "cursorPosition": cursor,
            "skillId": SKILL, "additionalInput": corpus.instruction}


@contextlib.asynccontextmanager
async def inproc_app(root: Path) -> AsyncIterator[Dispatcher]:
    """The whole app as ``strata serve`` builds it (debug mode), without a socket."""
    config = Config(data_dir=root / "data", debug=True)
    services = await asyncio.to_thread(open_services, config)
    try:
        yield Dispatcher(build_registry(config, services, lambda: 0))
    finally:
        await services.aclose()


def inspector_context() -> CallContext:
    return CallContext(peer=Peer(connection_id="bench-inspector", role=Role.INSPECTOR), debug=True)


async def bench_dispatch(dispatcher: Dispatcher, ctx: CallContext, method: str, label: str,
                         params: Callable[[int], dict[str, Any]], calls: int, warmup: int,
                         warmup_params: dict[str, Any] | None = None) -> Phase:
    """Time ``Dispatcher.dispatch`` of ``method`` with ``params(i)`` (JSON reply included)."""
    for _ in range(warmup):
        await dispatcher.dispatch(Call(method, warmup_params or params(0), next(_ids)), ctx)
    samples: list[float] = []
    errors = 0
    clock = time.perf_counter
    meter = LoadMeter()
    for i in range(calls):
        call = Call(method, params(i), next(_ids))
        t0 = clock()
        reply = await dispatcher.dispatch(call, ctx)
        t1 = clock()
        if reply is None or '"result":' not in reply:
            errors += 1
        else:
            samples.append((t1 - t0) * 1e3)
    return Phase("dispatcher", label, summarize(samples, errors), meter.stop(), {"method": method})


# --------------------------------------------------------------------------- websocket phases


async def _client(ws: ClientConnection, params: dict[str, Any], calls: int,
                  samples: list[float]) -> int:
    """Sequential context:assemble calls; returns the number of failed calls."""
    errors = 0
    clock = time.perf_counter
    for _ in range(calls):
        text = request_text("context:assemble", params, next(_ids))
        t0 = clock()
        await ws.send(text)
        reply = await ws.recv()
        t1 = clock()
        if isinstance(reply, str) and '"result":' in reply:
            samples.append((t1 - t0) * 1e3)
        else:
            errors += 1
    return errors


async def bench_socket(url: str, token: str, server_pid: int, label: str,
                       params: Sequence[dict[str, Any]], calls: int, warmup: int) -> Phase:
    """One connection per ``params`` entry, all started together, each sequential."""
    headers = {"Authorization": f"Bearer {token}"}
    async with contextlib.AsyncExitStack() as stack:
        sockets = [await stack.enter_async_context(
            connect(url, additional_headers=headers, compression=None, max_size=None))
            for _ in params]
        await asyncio.gather(*(_client(ws, p, warmup, []) for ws, p in zip(sockets, params,
                                                                            strict=True)))
        samples: list[float] = []
        meter = LoadMeter(server_pid)
        errors = await asyncio.gather(*(_client(ws, p, calls, samples)
                                        for ws, p in zip(sockets, params, strict=True)))
        load = meter.stop()
    return Phase("socket", label, summarize(samples, sum(errors)), load,
                 {"clients": len(params), "documents": len({p["documentId"] for p in params})})


# --------------------------------------------------------------------------- profile

_HARNESS = str(Path(__file__).resolve())


def _group_of(func: tuple[str, int, str]) -> str | None:
    filename = func[0]
    path = filename.replace("\\", "/")
    if filename in ("~", "<string>") or path.startswith("<frozen"):
        return None  # builtins and generated code: charged to their callers
    if "/services/context/" in path:
        return "context engine: " + path.rsplit("/", 1)[1]
    for marker, group in (("/services/sources/", "sources (providers, relevance, window)"),
                          ("/services/assembly/", "assembly service"),
                          ("/services/tokenizer/", "tokenizer (tiktoken)"),
                          ("tiktoken", "tokenizer (tiktoken)"),
                          ("/structlog/", "logging (structlog, stdlib)"),
                          ("/logging/", "logging (structlog, stdlib)"),
                          ("sqlalchemy", "store (SQLAlchemy, sqlite3, record services)"),
                          ("sqlite3", "store (SQLAlchemy, sqlite3, record services)"),
                          ("/services/store/", "store (SQLAlchemy, sqlite3, record services)"),
                          ("/services/knowledge/", "store (SQLAlchemy, sqlite3, record services)"),
                          ("/services/memory/", "store (SQLAlchemy, sqlite3, record services)"),
                          ("/services/projects/", "projects and documents"),
                          ("pydantic", "pydantic"), ("/json/", "json"),
                          ("/ipc/", "ipc"), ("/asyncio/", "asyncio"),
                          ("/concurrent/", "asyncio"), ("/selectors.py", "asyncio"),
                          ("/threading.py", "asyncio")):
        if marker in path:
            return group
    if path == _HARNESS:
        return "benchmark harness"
    return "other"


def _profile_report(profiler: cProfile.Profile, calls: int, top: int) -> dict[str, Any]:
    return benchlib.profile_report(pstats.Stats(profiler), calls, top, _group_of)


def profile_engine(request: Request, counter: CountCache, calls: int,
                   top: int = 15) -> dict[str, Any]:
    """cProfile of ``calls`` warm engine assemblies of the same request."""
    assemble(request, counter, MEMO)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        assemble(request, counter, MEMO)
    profiler.disable()
    return _profile_report(profiler, calls, top)


@contextlib.contextmanager
def inline_threads() -> Iterator[None]:
    """Run ``asyncio.to_thread`` work inline, so cProfile (one thread) sees all of it."""
    original = asyncio.to_thread

    async def inline(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    asyncio.to_thread = inline
    try:
        yield
    finally:
        asyncio.to_thread = original


async def profile_dispatch(dispatcher: Dispatcher, params: dict[str, Any], calls: int,
                           top: int = 15) -> dict[str, Any]:
    """cProfile of ``calls`` warm context:assemble dispatches, thread work run inline."""
    ctx = CallContext(peer=Peer("bench"))
    profiler = cProfile.Profile()
    with inline_threads():
        await dispatcher.dispatch(Call("context:assemble", params, next(_ids)), ctx)
        profiler.enable()
        for _ in range(calls):
            await dispatcher.dispatch(Call("context:assemble", params, next(_ids)), ctx)
        profiler.disable()
    return _profile_report(profiler, calls, top)


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """One threshold, the figure it is judged on and the verdict."""

    name: str
    figure: str
    limit_ms: float
    value_ms: float

    @property
    def met(self) -> bool:
        return self.value_ms < self.limit_ms


# (name, group, label prefix, statistic, limit in ms)
TARGETS: tuple[tuple[str, str, str, str, float], ...] = (
    ("warm in-process assemble p50 < 2 ms", "engine", "warm, same request", "p50", 2),
    ("budget computation p95 < 5 ms (warm)", "budget", "warm, same request", "p95", 5),
    ("budget computation p95 < 5 ms (new cursor)", "budget", "warm, new cursor", "p95", 5),
    ("budget computation p95 < 5 ms (cold)", "budget", "cold", "p95", 5),
    ("cold 64k-token document < 80 ms (p50)", "cold64k", "", "p50", 80),
    ("spec: assemble p50 < 120 ms (socket, 1 client)", "socket", "1 client", "p50", 120),
    ("spec: assemble p95 < 250 ms (socket, 1 client)", "socket", "1 client", "p95", 250),
    ("spec: assemble p99 < 500 ms (socket, 1 client)", "socket", "1 client", "p99", 500),
    ("spec: assemble p50 < 120 ms (socket, concurrent)", "socket", "clients", "p50", 120),
    ("spec: assemble p95 < 250 ms (socket, concurrent)", "socket", "clients", "p95", 250),
    ("spec: assemble p99 < 500 ms (socket, concurrent)", "socket", "clients", "p99", 500),
    ("spec: budget p95 < 80 ms (worst engine phase)", "budget", "*", "p95", 80),
    ("spec: inspect p95 < 180 ms", "dispatcher", "context:inspect", "p95", 180),
    ("spec: hash p95 < 20 ms", "hash", "", "p95", 20),
)


def judge(phases: Sequence[Phase]) -> list[Target]:
    """Each target whose phase was measured, judged on that phase (the worst one for ``*``)."""
    verdicts = []
    for name, group, prefix, statistic, limit in TARGETS:
        matching = [p for p in phases if p.group == group and p.stats.calls
                    and (prefix == "*" or prefix in p.label)]
        if not matching:
            continue
        values = {p.label: float(getattr(p.stats, f"{statistic}_ms")) for p in matching}
        label, value = max(values.items(), key=lambda kv: kv[1])
        verdicts.append(Target(name=name, figure=f"{group}: {label} {statistic}", limit_ms=limit,
                               value_ms=value))
    return verdicts


# --------------------------------------------------------------------------- whole run


@dataclass
class Report:
    machine: dict[str, Any]
    command: str
    data: dict[str, Any] = field(default_factory=dict)
    phases: list[Phase] = field(default_factory=list)
    profile: dict[str, Any] = field(default_factory=dict)

    @property
    def targets(self) -> list[Target]:
        return judge(self.phases)

    @property
    def errors(self) -> int:
        return sum(p.stats.errors for p in self.phases)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = [{**asdict(t), "met": t.met} for t in self.targets]
        return data


def _stage_notes(run: EngineRun) -> dict[str, Any]:
    return {stage: {"p50_ms": percentile(sorted(v), 50), "p95_ms": percentile(sorted(v), 95),
                    "p99_ms": percentile(sorted(v), 99)} for stage, v in run.stages_ms.items()}


def describe_data(corpus: Corpus, request: Request, assembly: Assembly,
                  count: Callable[[str], int]) -> dict[str, Any]:
    """What was assembled: sizes in, layers out, and why candidates were left out."""
    fates: dict[str, int] = {}
    for report in assembly.reports:
        key = report.fate if report.reason is None else f"{report.fate} ({report.reason})"
        fates[key] = fates.get(key, 0) + 1
    gathered: dict[str, int] = {}
    for item in request.items:
        gathered[item.section] = gathered.get(item.section, 0) + 1
    window = request.window
    return {
        "chapter_tokens": count(corpus.chapter), "chapter_chars": len(corpus.chapter),
        "constraints": len(corpus.constraints),
        "kg_constraints": sum(c["source"] == "kg" for c in corpus.constraints),
        "entities": len(corpus.entities), "semantic_rules": len(corpus.rules),
        "retrieval_candidates": len(corpus.passages), "episodes_over_rpc": len(corpus.episodes),
        "episodes_ranked_per_assembly": EPISODES_CONSIDERED,
        "gathered_items_by_section": gathered,
        "gathered_item_tokens": sum(i.tokens for i in request.items),
        "window_tokens": (window.tokens_before + window.tokens_after) if window else 0,
        "budget_total": assembly.budget.total, "prompt_tokens": assembly.token_count,
        "layers": {layer: {"tokens": result.tokens, "items": result.items,
                                 "truncated": result.truncated}
                   for layer, result in assembly.layers.items()},
        "candidates": fates, "warnings": list(assembly.warnings),
    }


async def run_benchmark(args: argparse.Namespace,
                        progress: Callable[[str], None] = lambda _: None) -> Report:
    report = Report(machine=benchlib.machine_facts(), command=benchlib.command_line())
    tokenizer = resolve_tokenizer()
    report.machine["tokenizer"] = asdict(tokenizer.info)
    setup = CountCache(tokenizer)
    corpus = build_corpus(setup.count, chapter_tokens=args.chapter_tokens, seed=args.seed,
                          constraints=args.constraints, kg_constraints=args.kg_constraints,
                          entities=args.entities, rules=args.rules, candidates=args.candidates)
    chapter = corpus.chapter
    cursors = cursors_near_end(chapter, args.cursors + 1)
    base_cursor, moving_cursors = cursors[0], cursors[1:]
    with tempfile.TemporaryDirectory(prefix="strata-bench-context-") as tmp:
        root = Path(tmp)
        with app_logging(root / "inproc.log"):
            progress("engine: warm, same request")
            base = await engine_request(corpus, chapter, base_cursor, CountCache(tokenizer))
            warm = CountCache(tokenizer)
            same = run_engine("warm, same request", lambda i: (base, warm), args.engine_calls,
                              warmup=repeat(args.warmup, base, lambda: warm))
            progress("engine: warm, new cursor each call")
            prep = CountCache(tokenizer)
            requests = [await engine_request(corpus, chapter, c, prep) for c in moving_cursors]
            moving_cache = CountCache(tokenizer)
            moving = run_engine("warm, new cursor each call",
                                lambda i: (requests[i], moving_cache), len(requests),
                                warmup=repeat(args.warmup, base, lambda: moving_cache),
                                notes={"cursors": len(requests), "stride_chars": 37})
            progress("engine: cold")
            cold = run_engine("cold, fresh CountCache each call",
                              lambda i: (base, CountCache(tokenizer)), args.cold_calls,
                              warmup=repeat(1, base, lambda: CountCache(tokenizer)))
            for run in (same, moving, cold):
                run.phase.notes["stages"] = _stage_notes(run)
                report.phases.append(run.phase)
            for run in (same, moving, cold):
                report.phases.append(Phase("budget", run.phase.label, summarize(run.budget_ms),
                                           run.phase.load, {"what": "make_budget + trimming"}))
            if same.last is not None:
                report.data = describe_data(corpus, base, same.last, setup.count)
                progress("hash")
                report.phases.append(bench_hash(same.last, args.hash_calls))
            progress("cold 64k-token document")
            document = long_document(setup.count, args.long_tokens)
            report.phases.append(await bench_cold_document(corpus, document, tokenizer,
                                                           args.cold_runs))
            if args.profile_calls:
                progress("profile: engine")
                report.profile["engine"] = profile_engine(base, warm, args.profile_calls)
            if not args.skip_rpc:
                await _dispatcher_phases(args, report, root, corpus, base_cursor, moving_cursors,
                                         progress)
        if not args.skip_socket:
            await _socket_phases(args, report, root, corpus, setup, base_cursor, progress)
    report.machine["loadavg_after"] = list(os.getloadavg())
    return report


async def _dispatcher_phases(args: argparse.Namespace, report: Report, root: Path, corpus: Corpus,
                             base_cursor: int, moving_cursors: Sequence[int],
                             progress: Callable[[str], None]) -> None:
    progress("dispatcher: seeding")
    async with inproc_app(root / "app") as dispatcher:
        inspector = inspector_context()
        document = "第五章.md"
        project_id = await seed_project(dispatcher_caller(dispatcher, inspector),
                                        root / "app-novel", corpus, {document: corpus.chapter})
        params = assemble_params(project_id, document, base_cursor, corpus)
        plain = CallContext(peer=Peer("bench"))
        progress("dispatcher: context:assemble")
        report.phases.append(await bench_dispatch(
            dispatcher, plain, "context:assemble", "context:assemble, warm (same request)",
            lambda i: params, args.rpc_calls, args.warmup))
        progress("dispatcher: context:inspect")
        report.phases.append(await bench_dispatch(
            dispatcher, inspector, "context:inspect", "context:inspect, warm (inspector, debug)",
            lambda i: params, args.rpc_calls, args.warmup))
        progress("dispatcher: context:assemble, new cursor")
        report.phases.append(await bench_dispatch(
            dispatcher, plain, "context:assemble", "context:assemble, new cursor each call",
            lambda i: assemble_params(project_id, document, moving_cursors[i], corpus),
            min(args.rpc_calls, len(moving_cursors)), args.warmup, warmup_params=params))
        if args.profile_calls:
            progress("profile: dispatcher")
            report.profile["dispatcher"] = await profile_dispatch(dispatcher, params,
                                                                  args.profile_calls)


async def _socket_phases(args: argparse.Namespace, report: Report, root: Path, corpus: Corpus,
                         setup: CountCache, base_cursor: int,
                         progress: Callable[[str], None]) -> None:
    documents = chapters(corpus, setup.count, args.clients, args.chapter_tokens)
    (root / "server").mkdir()
    progress("socket: starting the server and seeding")
    async with benchlib.running_server(root / "server" / "data", "--debug") as server:
        url, token, pid = server.url, server.token, server.process.pid
        async with connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                           compression=None, max_size=None) as ws:
            project_id = await seed_project(socket_caller(ws), root / "server-novel", corpus,
                                            documents)
        first = next(iter(documents))
        progress("socket: 1 client")
        report.phases.append(await bench_socket(
            url, token, pid, "1 client, sequential",
            [assemble_params(project_id, first, base_cursor, corpus)], args.socket_calls,
            args.warmup))
        progress(f"socket: {args.clients} clients")
        params = [assemble_params(project_id, name, len(text) - 1, corpus)
                  for name, text in documents.items()]
        report.phases.append(await bench_socket(
            url, token, pid, f"{args.clients} clients, one document each, sequential each",
            params, args.calls_per_client, max(1, args.warmup // 4)))


# --------------------------------------------------------------------------- output


def _fmt(value: float | None, digits: int = 2) -> str:
    return fmt(value, digits)


def _latency_rows(phases: Sequence[Phase]) -> list[list[str]]:
    return [[p.label, str(p.stats.calls), str(p.stats.errors), _fmt(p.stats.p50_ms),
             _fmt(p.stats.p95_ms), _fmt(p.stats.p99_ms), _fmt(p.stats.max_ms),
             pct(p.load.share(p.load.others_s) if p.load else None)] for p in phases]


_LATENCY = ["phase", "calls", "errors", "p50", "p95", "p99", "max", "others"]


def render(report: Report) -> str:
    m = report.machine
    out = [
        *benchlib.machine_lines(m),
        f"         tokenizer {m.get('tokenizer', {}).get('encoding', '-')}; load average before "
        f"{m['loadavg'][0]:.2f}, after {m.get('loadavg_after', [math.nan])[0]:.2f}",
        f"Command: {report.command}",
        "",
    ]
    d = report.data
    if d:
        out.append(
            f"Data: chapter {d['chapter_tokens']:,} tokens; {d['constraints']} constraints "
            f"({d['kg_constraints']} kg), {d['entities']} entities, {d['semantic_rules']} rules, "
            f"{d['retrieval_candidates']} retrieval candidates; gathered "
            f"{d['gathered_item_tokens']:,} item tokens + a {d['window_tokens']:,}-token window; "
            f"prompt {d['prompt_tokens']:,} of {d['budget_total']:,} tokens")
        out.append("      layers: " + ", ".join(
            f"{k} {v['tokens']} tokens/{v['items']} items{' (cut)' if v['truncated'] else ''}"
            for k, v in d["layers"].items()))
        out.append("      candidates: " + ", ".join(f"{k} {v}" for k, v in d["candidates"].items()))
        out.append("")
    sections = (("engine", "Engine assemble(Request, CountCache), in-process (ms)"),
                ("budget", "Budget computation: make_budget + the engine's trimming stage (ms)"),
                ("hash", "Hashing alone (ms)"),
                ("dispatcher", "Through the app's Dispatcher, in-process, JSON reply included (ms)"),
                ("cold64k", "Cold 64k-token document, cursor at the end (ms)"))
    for group, title in sections:
        phases = [p for p in report.phases if p.group == group]
        if phases:
            out += [title, *table(_LATENCY, _latency_rows(phases)), ""]
        if group == "engine" and phases:
            out.append("Engine stages (timings_ms; p50 / p95 ms)")
            rows = [[p.label, *(f"{_fmt(p.notes['stages'][s]['p50_ms'], 3)} / "
                                f"{_fmt(p.notes['stages'][s]['p95_ms'], 3)}" for s in STAGES)]
                    for p in phases if "stages" in p.notes]
            out += [*table(["phase", *STAGES], rows), ""]
        if group == "cold64k" and phases:
            n = phases[0].notes
            out += [f"  document {n['document_tokens']:,} tokens ({n['document_chars']:,} chars); "
                    f"p50 parts: window {_fmt(n['window_p50_ms'])}, items "
                    f"{_fmt(n['items_p50_ms'])}, assemble {_fmt(n['assemble_p50_ms'])}", ""]
    sockets = [p for p in report.phases if p.group == "socket"]
    if sockets:
        out.append("context:assemble over a websocket, python -m main serve --debug (ms; server "
                   "CPU per call in ms)")
        rows = [[*_latency_rows([p])[0][:-1], _fmt(_server_ms(p)), pct(p.load.share(p.load.own_s)
                                                                       if p.load else None),
                 pct(p.load.share(p.load.others_s) if p.load else None)] for p in sockets]
        out += [*table([*_LATENCY[:-1], "server CPU", "client CPU", "others"], rows), ""]
    targets = report.targets
    if targets:
        out.append("Targets")
        out += table(["target", "figure", "measured", "verdict"],
                     [[t.name, t.figure, _fmt(t.value_ms, 3), "met" if t.met else "NOT met"]
                      for t in targets])
        out.append("")
    for name, profile in report.profile.items():
        out.append(f"cProfile, {name}: {profile['calls']} warm calls (self time by group; "
                   "builtins charged to their callers)")
        out += table(["group", "share", "self s"],
                     [[g, f"{v['share']:.1%}", _fmt(v["self_s"], 3)]
                      for g, v in profile["groups"].items()])
        out += ["", "Top functions by self time"]
        out += table(["function", "calls", "self s", "cum s"],
                     [[t["function"][-90:], str(t["calls"]), _fmt(t["self_s"], 3),
                       _fmt(t["cum_s"], 3)] for t in profile["top"]])
        out.append("")
    noisy = [f"{p.group} {p.label} (others {pct(p.load.share(p.load.others_s))}, steal "
             f"{pct(p.load.share(p.load.steal_s))})" for p in report.phases
             if p.load is not None and p.load.noisy]
    if noisy:
        out.append(benchlib.noisy_warning(noisy))
    return "\n".join(out).rstrip() + "\n"


def _server_ms(phase: Phase) -> float | None:
    load = phase.load
    if load is None or load.server_user_s is None or load.server_sys_s is None:
        return None
    if not phase.stats.calls:
        return None
    return (load.server_user_s + load.server_sys_s) / phase.stats.calls * 1e3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--engine-calls", type=int, default=1000,
                   help="timed engine calls, warm with the same request")
    p.add_argument("--cursors", type=int, default=200,
                   help="distinct cursor positions (engine and dispatcher 'new cursor' phases)")
    p.add_argument("--cold-calls", type=int, default=30,
                   help="engine calls with a fresh CountCache each")
    p.add_argument("--hash-calls", type=int, default=2000, help="prefix_hashes calls")
    p.add_argument("--cold-runs", type=int, default=9, help="runs of the cold 64k-token document")
    p.add_argument("--rpc-calls", type=int, default=200,
                   help="in-process Dispatcher calls per phase")
    p.add_argument("--socket-calls", type=int, default=200, help="timed calls, 1-client phase")
    p.add_argument("--clients", type=int, default=8,
                   help="connections in the concurrent phase, one document each")
    p.add_argument("--calls-per-client", type=int, default=50,
                   help="timed calls per connection in the concurrent phase")
    p.add_argument("--warmup", type=int, default=20, help="untimed calls before each phase")
    p.add_argument("--profile-calls", type=int, default=300,
                   help="calls under cProfile, engine and dispatcher (0: no profile)")
    p.add_argument("--skip-rpc", action="store_true", help="no in-process Dispatcher phases")
    p.add_argument("--skip-socket", action="store_true", help="no websocket phases")
    data = p.add_argument_group("data (defaults: the realistic project)")
    data.add_argument("--seed", type=int, default=7)
    data.add_argument("--chapter-tokens", type=int, default=20_000)
    data.add_argument("--long-tokens", type=int, default=64_000,
                      help="size of the cold document")
    data.add_argument("--constraints", type=int, default=50)
    data.add_argument("--kg-constraints", type=int, default=15,
                      help="how many of the constraints are kg-derived")
    data.add_argument("--entities", type=int, default=100)
    data.add_argument("--rules", type=int, default=30, help="confirmed semantic rules")
    data.add_argument("--candidates", type=int, default=200,
                      help="retrieval candidates (episodic memories over RPC)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--save", type=Path, default=None, metavar="PATH",
                   help="also write the JSON report to PATH")
    args = p.parse_args(argv)
    counts = (args.engine_calls, args.cursors, args.cold_calls, args.hash_calls, args.cold_runs,
              args.rpc_calls, args.socket_calls, args.clients, args.calls_per_client,
              args.chapter_tokens, args.long_tokens)
    if min(counts) < 1:
        p.error("counts and sizes must be positive")
    if min(args.warmup, args.profile_calls, args.constraints, args.entities, args.rules,
           args.candidates) < 0:
        p.error("counts must not be negative")
    if not 0 <= args.kg_constraints <= args.constraints:
        p.error("--kg-constraints must be between 0 and --constraints")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = asyncio.run(run_benchmark(args, progress=benchlib.progress))
    benchlib.emit(report.to_json(), lambda: render(report), as_json=args.json, save=args.save)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
