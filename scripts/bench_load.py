"""Load benchmark: many simultaneous context:assemble calls against a real server.

Run from the repository root::

    .venv/bin/python scripts/bench_load.py --duration 0 --plot sweep.png   # the sweep (a few minutes)
    .venv/bin/python scripts/bench_load.py                 # the sweep, then the overload and rate search
    .venv/bin/python scripts/bench_load.py --json          # the same figures as JSON
    .venv/bin/python scripts/bench_load.py --data-dir /tmp/kept ...  # index once, reuse it next time

The server is ``python -m main serve`` on a fresh data dir with its default
limits, except ``--max-connections``: the default of 32 is raised to hold the
``--connections`` (50) plus a few. The data is seeded through JSON-RPC only: by
default one project (Chinese; with ``--projects`` more, 3 in 5 Chinese and the
rest English) of 125 chapters of 2,500 to 3,500 tokens, 40 constraints (10 of
them kg-derived), 60 knowledge-graph entities, 20 semantic rules (15 confirmed)
and 50 episodic memories, on the default budget profile (an 8k window).
Deterministic for a ``--seed``. After seeding, the run waits until every
project's retrieval index is settled (``index:status``), so the phases measure
assemblies and not the first indexing; the time it took is reported.

Phases, in order:

1. **Sweep** (``--sweep``, default 50, 100, 200, 500 and 1,000): for each
   load N, N ``context:assemble`` requests sent at once from the connections
   (pipelined), ``--per-document`` (4) to each of N/4 documents while there
   are documents enough, spread evenly over all of them past that (1,000: 8
   per document, so half of them queue behind the per-document limit). A
   document's requests are neighbouring keystrokes: cursors
   ``--cursor-step`` (3) characters apart, one skill and instruction
   (``--vary request``: each its own). The first point runs on cold caches.
   Refusals (``CONTEXT_BACKPRESSURE``) are counted apart and never enter the
   latency percentiles; a refusal at a load within the per-document limit is
   an error. ``--plot PNG`` draws p50/p95/p99, throughput and server CPU per
   assembly against load, and the refusals apart. The 500 point is judged
   against spec 004 (p50 < 120, p95 < 250, p99 < 500 ms, no errors, every
   ``tokenCount`` within its budget total).
2. **Typing** (``--typing``, default 300 keystrokes): one writer in one
   document, an assembly per keystroke sent when the previous one answered,
   the cursor one character further each time, retrieval on (after one
   unmeasured pass over the same keystrokes elsewhere in the document).
   Reported apart too: the keystrokes whose retrieval query is new (the
   cursor passed a sentence's end: a search runs, unless the server kept
   that query's result from an earlier request) and the others.
   **Writing** (``--writing``, default none), before it: one writer typing
   new text at the end of a chapter (another chapter's prose), each
   keystroke a ``document:write`` of the chapter, then an assembly at its
   end, ``--writing-pause`` seconds (0.15) after the last answer; only the
   assemblies are timed, split as above; the chapter is written back after.
3. **Burst, 4 per document** (``--bursts``, default none): 4 requests for
   every document at once, each at its own random cursor and skill.
   The first runs on cold caches.
4. **Burst, 20 per document**: the same with 20 requests per document: 4 run,
   8 queue, the rest must be refused at once with ``CONTEXT_BACKPRESSURE``;
   queued ones that would wait past 2 s are refused too. The latency of
   refusals is reported apart from successes.
5. **Sustained**: requests at a fixed rate (open loop: sent on schedule, not
   when the previous answer came), each to a random document, round-robin
   over the connections. Probe runs of ``--probe-seconds`` double the rate
   until p95 reaches ``--target-ms`` (100) or a request fails, then bisect;
   the highest rate that held is then run for ``--duration`` seconds, and if
   the long run misses the target, again 15% lower (``--confirm-steps``).
   ``--duration 0`` skips it.

Latency is per request, from just before its frame is sent to its reply.
Throughput is requests answered per second of the phase's wall time. Every
successful result's ``tokenCount`` is checked against its budget total. Peak
RSS is the server's ``VmHWM`` from ``/proc/PID/status`` after each phase (it
only grows). Server, client and other processes' CPU are reported as in
``bench_rpc.py``: the clients run in this process and share the two cores
with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import itertools
import json
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from websockets.asyncio.client import ClientConnection, connect

from scripts import benchlib
from scripts.benchlib import Load, LoadMeter, Template, pct, sentence, spread, table
from services.retrieval.query import settled
from services.tokenizer import resolve_tokenizer
from tests.support.process import ServerProcess

SKILLS = ("continue", "polish", "expand", "rewrite")
PER_DOCUMENT_LIMIT = 4  # the server's assemblies per document at once; more queue, or are refused
SPEC = {"p50_ms": 120.0, "p95_ms": 250.0, "p99_ms": 500.0}  # spec 004 at 500 simultaneous assemblies
SPEC_LOAD = 500
DEGRADED = ("KG_UNAVAILABLE", "MEMORY_UNAVAILABLE", "RETRIEVAL_UNAVAILABLE", "CONSTRAINTS_UNAVAILABLE",
            "CONTEXT_BUDGET_FALLBACK")

# --------------------------------------------------------------------------- the data

_ZH_SURNAMES = "林苏陈周吴郑王李赵孙钱何许沈韩杨朱秦施张孔曹严金魏陶姜谢邹喻"
_ZH_GIVEN = "远晴默岚舟川若屿宁珂澜砚棠溪野桥初遥青禾安然知秋"
_ZH_PLACES = ["灯塔", "北港", "旧码头", "盐沼", "灯室", "礁石滩", "渔村", "钟楼", "废弃船坞", "海角"]
_ZH_OBJECTS = ["铜钥匙", "旧马灯", "航海日志", "褪色的信", "怀表", "望远镜", "雾笛", "船票", "油布包"]
_ZH_WEATHER = ["海风很冷", "雨一直下", "雾从海面上漫过来", "浪一层一层地拍在礁石上", "天色暗得很快",
               "远处有雷声", "月光落在积水里", "潮水退得很远"]
_ZH_ACTIONS = ["沿着台阶往下走", "推开那扇生锈的门", "把马灯举高了一点", "在窗边站了很久",
               "蹲下来数着木板", "翻开那本航海日志", "把信折好放回口袋", "听着雾笛一声一声地响"]
_ZH_LINES = ["上去看看吧", "别回头", "钥匙在哪里", "你早就知道了", "灯不能灭", "明天船就来了",
             "我们得等潮水退下去", "那封信是写给你的"]
_ZH_RULES = ["动作场景偏好短句", "对白前后少用副词修饰", "用天气映衬人物情绪", "章节结尾留一个悬念",
             "少用成语堆砌", "人物对话保留口语感", "环境描写不超过三句", "用具体物件推动情节"]
_EN_FIRST = ["Adrian", "Mara", "Elliot", "Nora", "Felix", "Iris", "Jonah", "Vera", "Tobias", "Lena",
             "Caspian", "Hazel", "Rowan", "Sylvie", "Declan", "Maeve", "Silas", "Ada", "Conor", "Ines"]
_EN_LAST = ["Hale", "Marsh", "Reed", "Quill", "Vance", "Rook", "Ashby", "Crane", "Lowe", "Finch"]
_EN_PLACES = ["the lighthouse", "the north pier", "Gull Point", "the salt marsh", "Harbor Road",
              "the lamp room", "the old boathouse", "Keeper's Cottage", "the chapel", "the ferry slip"]
_EN_OBJECTS = ["a brass key", "the logbook", "a faded letter", "the pocket watch", "a spyglass",
               "the foghorn lever", "a ferry ticket", "an oilcloth parcel"]
_EN_WEATHER = ["the wind was cold", "the rain did not stop", "fog rolled in from the sea",
               "waves broke on the rocks", "the light failed early", "thunder moved along the coast"]
_EN_ACTIONS = ["went down the stairs", "pushed the rusted door open", "raised the lantern",
               "stood at the window for a long time", "counted the loose boards", "opened the logbook"]
_EN_LINES = ["We should have left before the tide turned", "The lamp has to stay lit tonight",
             "I never told you about the letter", "Count the steps, not the hours",
             "You knew about the key all along", "Listen, the foghorn stopped"]
_EN_RULES = ["Short sentences in action scenes", "Few adverbs around dialogue", "Weather mirrors mood",
             "End chapters on a question", "Keep dialogue colloquial", "Objects move the plot"]


@dataclass(frozen=True)
class ProjectData:
    """One project's records and chapters, as plain JSON-RPC params (no project id yet)."""

    name: str
    language: str
    chapters: dict[str, str]
    constraints: list[dict[str, Any]]
    entities: list[dict[str, Any]]
    rules: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    narrative_person: str
    style_notes: str


# (rng, who, other, place, object) -> one sentence
_ZH_TEMPLATES: tuple[Template, ...] = (
    lambda rng, who, other, place, obj: f"{who}{rng.choice(_ZH_ACTIONS)}，{rng.choice(_ZH_WEATHER)}。",
    lambda rng, who, other, place, obj: f"“{rng.choice(_ZH_LINES)}。”{who}低声说，没有看{other}。",
    lambda rng, who, other, place, obj: f"{who}在{place}站了一会儿，手里还握着{obj}。",
    lambda rng, who, other, place, obj: (f"第{rng.randint(2, 40)}级台阶上落着一层灰，"
                                         f"{rng.choice(_ZH_WEATHER)}。"),
    lambda rng, who, other, place, obj: f"{who}把{obj}交给{other}，说起{place}的事。",
)
_EN_TEMPLATES: tuple[Template, ...] = (
    lambda rng, who, other, place, obj: f"{who} {rng.choice(_EN_ACTIONS)}, and {rng.choice(_EN_WEATHER)}.",
    lambda rng, who, other, place, obj: (f"\"{rng.choice(_EN_LINES)},\" {who} said quietly, "
                                         f"without looking at {other}."),
    lambda rng, who, other, place, obj: f"{who} waited at {place}, still holding {obj}.",
    lambda rng, who, other, place, obj: (f"Dust lay on the {rng.randint(2, 40)}th step; "
                                         f"{rng.choice(_EN_WEATHER)}."),
    lambda rng, who, other, place, obj: f"{who} gave {obj} to {other} and spoke about {place}.",
)


def _zh_sentence(rng: random.Random, cast: Sequence[str]) -> str:
    return sentence(rng, cast, _ZH_PLACES, _ZH_OBJECTS, _ZH_TEMPLATES)


def _en_sentence(rng: random.Random, cast: Sequence[str]) -> str:
    return sentence(rng, cast, _EN_PLACES, _EN_OBJECTS, _EN_TEMPLATES)


def build_project(index: int, language: str, count: Callable[[str], int], *, seed: int, documents: int,
                  min_tokens: int, max_tokens: int, constraints: int = 40, kg_constraints: int = 10,
                  entities: int = 60, rules: int = 20, episodes: int = 50) -> ProjectData:
    """A deterministic project in ``language`` ("zh" or "en")."""
    rng = random.Random(seed * 1000 + index)
    zh = language == "zh"
    if zh:
        names = [s + g for s in _ZH_SURNAMES for g in _ZH_GIVEN]
    else:
        names = [f"{first} {last}" for last in _EN_LAST for first in _EN_FIRST]
    rng.shuffle(names)
    cast = names[:12]
    one_sentence = _zh_sentence if zh else _en_sentence
    joiner = "" if zh else " "

    def text(tokens: int) -> str:
        return benchlib.prose(rng, one_sentence, cast, tokens, count, joiner)

    chapters = {}
    for n in range(documents):
        title = f"# 第{n + 1}章\n\n" if zh else f"# Chapter {n + 1}\n\n"
        name = f"卷一/第{n + 1:02d}章.md" if zh else f"part-1/chapter-{n + 1:02d}.md"
        chapters[name] = title + text(rng.randint(min_tokens, max_tokens)) + "\n"
    constraint_records = benchlib.constraint_rows(
        rng, constraints, kg_constraints,
        lambda n: (f"{rng.choice(cast)}从不{rng.choice(_ZH_ACTIONS)}（规则 {n + 1}）" if zh else
                   f"{rng.choice(cast)} never {rng.choice(_EN_ACTIONS)} (rule {n + 1})"))
    entity_rows = []
    pool = [(name, "character") for name in names[:entities]]
    places = [(p, "location") for p in (_ZH_PLACES if zh else _EN_PLACES)]
    objects = [(o, "object") for o in (_ZH_OBJECTS if zh else _EN_OBJECTS)]
    pool = (pool[:max(0, entities - len(places) - len(objects))] + places + objects)[:entities]
    for name, kind in pool:
        entity_rows.append({"kind": kind, "name": name,
                            "description": joiner.join(one_sentence(rng, cast) for _ in range(2))})
    rule_rows = [{"text": f"{rng.choice(_ZH_RULES if zh else _EN_RULES)} ({n + 1})", "category": "style",
                  "confidence": round(rng.uniform(0.5, 0.99), 2), "confirmed": n < rules * 3 // 4}
                 for n in range(rules)]
    episode_rows = [{"instruction": (f"续写{rng.choice(cast)}在{rng.choice(_ZH_PLACES)}的场景" if zh else
                                     f"Continue {rng.choice(cast)} at {rng.choice(_EN_PLACES)}"),
                     "output": text(rng.randint(60, 140)), "skillId": rng.choice(SKILLS)}
                    for _ in range(episodes)]
    return ProjectData(
        name=f"{'小说' if zh else 'novel'}-{index + 1}", language=language, chapters=chapters,
        constraints=constraint_records, entities=entity_rows, rules=rule_rows, episodes=episode_rows,
        narrative_person="第一人称" if zh else "first person, past tense",
        style_notes="冷静克制的叙述，短句为主。" if zh else "Restrained narration, mostly short sentences.")


# --------------------------------------------------------------------------- clients


@dataclass
class Outcome:
    """What one request got: its latency, and its error code or the warnings of its result."""

    latency_ms: float
    code: str  # "ok" or the error's data.code
    retry_after_ms: int | None = None
    warnings: tuple[str, ...] = ()
    over_budget: bool = False  # a result whose tokenCount passed its budget total


class LoadClient:
    """One websocket that pipelines requests and matches replies by id."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[float, asyncio.Future[Outcome]]] = {}
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, url: str, token: str) -> LoadClient:
        ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                           compression=None, max_size=None)
        return cls(ws)

    async def _read(self) -> None:
        with contextlib.suppress(Exception):
            async for raw in self.ws:
                received = time.perf_counter()
                message = json.loads(raw)
                sent, future = self._pending.pop(message["id"])
                latency = (received - sent) * 1e3
                if "error" in message:
                    data = message["error"].get("data", {})
                    outcome = Outcome(latency, str(data.get("code")), data.get("retryAfterMs"))
                else:
                    result = message["result"]
                    warnings = tuple(w.split(":", 1)[0] for w in result.get("warnings", ()))
                    total = result.get("budget", {}).get("total")
                    over = total is not None and result.get("tokenCount", 0) > total
                    outcome = Outcome(latency, "ok", warnings=warnings, over_budget=over)
                future.set_result(outcome)
        for _, future in self._pending.values():
            if not future.done():
                future.set_result(Outcome(math.nan, "CONNECTION_LOST"))

    async def send(self, method: str, params: dict[str, Any]) -> asyncio.Future[Outcome]:
        """Send one request now; the future resolves with its outcome."""
        id_ = next(self._ids)
        text = json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": id_},
                          ensure_ascii=False)
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._pending[id_] = (time.perf_counter(), future)
        await self.ws.send(text)
        return future

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


# --------------------------------------------------------------------------- seeding


@dataclass(frozen=True)
class Target:
    """A document requests go to."""

    project_id: str
    document_id: str
    length: int  # code points, the cursor's upper bound
    language: str
    text: str = field(default="", repr=False, compare=False)  # the document as seeded


async def settle_index(url: str, token: str, project_ids: Sequence[str], timeout: float) -> dict[str, Any]:
    """Wait until no project's retrieval index is indexing; its documents and chunks then."""
    from tests.support.client import RpcClient

    rpc = await RpcClient.open(url, token)
    try:
        deadline = time.monotonic() + timeout
        while True:
            states = [await rpc.call("index:status", {"projectId": p}) for p in project_ids]
            if not any(state["indexing"] for state in states) or time.monotonic() > deadline:
                return {"settled": not any(state["indexing"] for state in states),
                        "documents": sum(state["documents"] for state in states),
                        "chunks": sum(state["chunks"] for state in states)}
            await asyncio.sleep(0.25)
    finally:
        await rpc.close()


async def seed(url: str, token: str, projects: Sequence[tuple[ProjectData, Path]]) -> list[Target]:
    """Create every project through JSON-RPC, several at once; return the documents to target."""
    from tests.support.client import RpcClient  # the suite's plain client, for one-off calls

    async def one(data: ProjectData, folder: Path) -> list[Target]:
        rpc = await RpcClient.open(url, token)
        try:
            await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
            opened = await rpc.call("project:open", {"path": str(folder), "name": data.name})
            pid = opened["project"]["projectId"]
            settings = (await rpc.call("project:settings:get", {"projectId": pid}))["settings"]
            await rpc.call("project:settings:update", {
                "projectId": pid, "version": settings["version"], "language": data.language,
                "narrativePerson": data.narrative_person, "styleNotes": data.style_notes})
            calls = ([("document:write", {"documentId": d, "text": t}) for d, t in data.chapters.items()]
                     + [("constraints:create", c) for c in data.constraints]
                     + [("kg:entity:upsert", e) for e in data.entities]
                     + [("memory:semantic:upsert", r) for r in data.rules]
                     + [("memory:episodic:add", e) for e in data.episodes])
            for start in range(0, len(calls), 16):
                await asyncio.gather(*(rpc.call(method, {"projectId": pid, **params})
                                       for method, params in calls[start:start + 16]))
            return [Target(pid, d, len(t), data.language, t) for d, t in data.chapters.items()]
        finally:
            await rpc.close()

    found = await asyncio.gather(*(one(data, folder) for data, folder in projects))
    return [target for targets in found for target in targets]


async def reopen(url: str, token: str, projects: Sequence[tuple[ProjectData, Path]]) -> list[Target]:
    """Open projects seeded by an earlier run on the same data dir (``--data-dir``); the documents
    to target, as :func:`seed` returns them."""
    from tests.support.client import RpcClient

    rpc = await RpcClient.open(url, token)
    try:
        targets = []
        for data, folder in projects:
            opened = await rpc.call("project:open", {"path": str(folder), "name": data.name})
            pid = opened["project"]["projectId"]
            targets += [Target(pid, d, len(t), data.language, t) for d, t in data.chapters.items()]
        return targets
    finally:
        await rpc.close()


def seeded_as(args: argparse.Namespace) -> dict[str, Any]:
    """What a kept data dir was seeded with: reused only when all of it is the same."""
    return {"projects": args.projects, "documents": args.documents, "min_tokens": args.min_tokens,
            "max_tokens": args.max_tokens, "seed": args.seed,
            "embedding": os.environ.get("STRATA_EMBEDDING", "")}


SEEDED = "seeded.json"  # in a kept data dir: what it was seeded with (seeded_as)


def kept_data(root: Path, args: argparse.Namespace) -> bool:
    """Whether ``root`` holds data seeded as ``args`` asks (then it is reused), or nothing yet (then
    it is seeded); a folder holding anything else is refused rather than seeded twice."""
    marker = root / SEEDED
    if marker.is_file() and json.loads(marker.read_text(encoding="utf-8")) == seeded_as(args):
        return True
    if root.exists() and any(root.iterdir()):
        raise SystemExit(f"--data-dir {root} holds other data (seeded otherwise, or not by this "
                         "benchmark): give an empty or new folder")
    root.mkdir(parents=True, exist_ok=True)
    return False


INSTRUCTIONS = {"zh": ["续写这一段，保持悬念。", "润色这段对白，让语气更克制。", "扩写环境描写。", None],
                "en": ["Continue the scene and keep the suspense.", "Tighten the dialogue.",
                       "Expand the description of the weather.", None]}


def request_params(target: Target, rng: random.Random) -> dict[str, Any]:
    """An assemble request as an editor would send it: its own cursor, skill and instruction."""
    skill = rng.choice(("continue", "continue", *SKILLS[1:]))
    cursor = target.length if skill == "continue" and rng.random() < 0.5 else rng.randint(0, target.length)
    params: dict[str, Any] = {"projectId": target.project_id, "documentId": target.document_id,
                              "cursorPosition": cursor, "skillId": skill}
    instruction = rng.choice(INSTRUCTIONS[target.language])
    if instruction is not None:
        params["additionalInput"] = instruction
    return params


def neighbour_params(target: Target, rng: random.Random, count: int, step: int,
                     vary: str = "document") -> list[dict[str, Any]]:
    """``count`` requests for one document as neighbouring keystrokes send them: cursors ``step``
    characters apart from a random start (``step`` 0: each its own random cursor), with one skill
    and instruction for all of them (``vary`` "document") or each its own ("request")."""
    if step <= 0:
        return [request_params(target, rng) for _ in range(count)]
    span = step * (count - 1)
    start = rng.randint(0, max(target.length - span, 0))
    shared = request_params(target, rng)
    requests = []
    for n in range(count):
        params = dict(shared) if vary == "document" else request_params(target, rng)
        params["cursorPosition"] = min(start + n * step, target.length)
        requests.append(params)
    return requests


def sweep_params(targets: Sequence[Target], total: int, per_document: int, rng: random.Random,
                 step: int, vary: str = "document") -> list[dict[str, Any]]:
    """``total`` requests, ``per_document`` to each document while there are documents enough
    (``total / per_document`` of them, chosen at random), spread evenly over all of them past that;
    each document's requests are neighbours (:func:`neighbour_params`); in random order."""
    documents = min(len(targets), max(1, math.ceil(total / per_document)))
    chosen = rng.sample(list(targets), documents)
    counts = [total // documents + (1 if n < total % documents else 0) for n in range(documents)]
    params = [p for target, n in zip(chosen, counts, strict=True)
              for p in neighbour_params(target, rng, n, step, vary)]
    rng.shuffle(params)
    return params


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class Latency:
    """Latency of some requests in milliseconds (nearest-rank percentiles)."""

    count: int
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


def latency(samples: Sequence[float]) -> Latency:
    ms = spread(samples)
    return Latency(count=ms.count, mean_ms=ms.mean, p50_ms=ms.p50, p95_ms=ms.p95, p99_ms=ms.p99,
                   max_ms=ms.max)


def sizes(values: Sequence[int]) -> dict[str, int]:
    ordered = sorted(values)
    return {"count": len(ordered), "min": ordered[0], "median": ordered[len(ordered) // 2],
            "max": ordered[-1]}


def memory_kib(pid: int) -> dict[str, int]:
    """VmHWM (peak resident set) and VmRSS of ``pid``, in KiB (Linux)."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                found[key] = int(value.split()[0])
    return found


@dataclass
class PhaseResult:
    """One measured phase: who was asked what, and what came back how fast."""

    label: str
    requests: int
    wall_s: float
    ok: Latency
    codes: dict[str, int]  # "ok" and every error data.code, with counts
    refused: Latency  # CONTEXT_BACKPRESSURE replies
    refused_at_once: Latency  # ... of them, those answered in under 1 s (full queue)
    retry_after_ms: list[int]  # min and max hint seen
    degraded: dict[str, int]  # results that carried a source-unavailable warning, by code
    memory_kib: dict[str, int]
    load: Load
    notes: dict[str, Any] = field(default_factory=dict)
    over_budget: int = 0  # results whose tokenCount passed their budget total

    @property
    def throughput(self) -> float:
        return self.requests / self.wall_s if self.wall_s > 0 else math.nan

    @property
    def errors(self) -> int:
        return sum(n for code, n in self.codes.items() if code != "ok")

    @property
    def server_ms_per_assembly(self) -> float | None:
        """Server CPU (user + sys) per successful assembly, in ms."""
        ok = self.codes.get("ok", 0)
        if self.load.server_user_s is None or not ok:
            return None
        return ((self.load.server_user_s or 0.0) + (self.load.server_sys_s or 0.0)) * 1e3 / ok


def summarize(label: str, outcomes: Sequence[Outcome], wall_s: float, pid: int, load: Load,
              **notes: Any) -> PhaseResult:
    refused = [o for o in outcomes if o.code == "CONTEXT_BACKPRESSURE"]
    hints = [o.retry_after_ms for o in refused if o.retry_after_ms is not None]
    degraded = Counter(w for o in outcomes for w in o.warnings if w in DEGRADED)
    return PhaseResult(
        label=label, requests=len(outcomes), wall_s=wall_s,
        ok=latency([o.latency_ms for o in outcomes if o.code == "ok"]),
        codes=dict(Counter(o.code for o in outcomes)),
        refused=latency([o.latency_ms for o in refused]),
        refused_at_once=latency([o.latency_ms for o in refused if o.latency_ms < 1000]),
        retry_after_ms=[min(hints), max(hints)] if hints else [],
        degraded=dict(degraded), memory_kib=memory_kib(pid), load=load, notes=notes,
        over_budget=sum(o.over_budget for o in outcomes))


async def burst(clients: Sequence[LoadClient], targets: Sequence[Target], per_document: int,
                rng: random.Random, pid: int, label: str) -> PhaseResult:
    """``per_document`` requests for every target, all sent at once, spread over the clients."""
    params = [request_params(t, rng) for t in targets for _ in range(per_document)]
    rng.shuffle(params)
    return await send_burst(clients, params, pid, label, per_document=per_document, documents=len(targets))


async def send_burst(clients: Sequence[LoadClient], params: Sequence[dict[str, Any]], pid: int, label: str,
                     **notes: Any) -> PhaseResult:
    """Every request in ``params`` sent at once, round-robin over the clients (pipelined on each)."""
    shares = [list(params[n::len(clients)]) for n in range(len(clients))]

    async def send_all(client: LoadClient, mine: list[dict[str, Any]]) -> list[asyncio.Future[Outcome]]:
        return [await client.send("context:assemble", p) for p in mine]

    meter = LoadMeter(pid)
    started = time.perf_counter()
    futures = [f for sent in await asyncio.gather(*(send_all(c, s) for c, s in zip(clients, shares,
                                                                                  strict=True)))
               for f in sent]
    outcomes = await asyncio.gather(*futures)
    wall = time.perf_counter() - started
    return summarize(label, outcomes, wall, pid, meter.stop(), connections=len(clients), **notes)


async def typing(client: LoadClient, target: Target, keystrokes: int, rng: random.Random, pid: int,
                 label: str) -> PhaseResult:
    """One writer typing: an assembly per keystroke, each sent when the previous one answered, the
    cursor one character further each time (from a random place), one skill and instruction."""
    params = neighbour_params(target, rng, 1, 1)[0]
    start = rng.randint(0, max(target.length - keystrokes, 0))
    meter = LoadMeter(pid)
    started = time.perf_counter()
    outcomes = []
    # Whether each keystroke's retrieval query is new: the query is the text before the cursor up to
    # its last whole sentence (services/retrieval/query.py settled), so it changes as the cursor
    # passes a sentence's end. Only a new query can run a search: one the server has not kept from an
    # earlier request (the warm-up's keystrokes, a sweep's) for the same index.
    ends = [len(settled(target.text[:min(start + n, target.length)])) for n in range(keystrokes)]
    new_query = [n == 0 or ends[n] != ends[n - 1] for n in range(keystrokes)]
    for n in range(keystrokes):
        params["cursorPosition"] = min(start + n, target.length)
        outcomes.append(await (await client.send("context:assemble", dict(params))))
    wall = time.perf_counter() - started
    split = by_query(outcomes, new_query) if target.text else {}
    return summarize(label, outcomes, wall, pid, meter.stop(), keystrokes=keystrokes,
                     skill=params["skillId"], **split)


async def writing(client: LoadClient, target: Target, prose: str, pause: float, pid: int,
                  label: str) -> PhaseResult:
    """One writer typing new text at the end of a chapter: each keystroke saves the chapter
    (``document:write``, as an editor saving at every keystroke) and then assembles at its end,
    ``pause`` seconds after the previous answer; only the assemblies are timed. The chapter's text is
    written back afterwards."""
    where = {"projectId": target.project_id, "documentId": target.document_id}
    base = target.text.rstrip() + "\n\n"
    meter = LoadMeter(pid)
    started = time.perf_counter()
    outcomes = []
    ends = [len(settled(base + prose[:n + 1])) for n in range(len(prose))]
    new_query = [n == 0 or ends[n] != ends[n - 1] for n in range(len(prose))]
    try:
        for n in range(len(prose)):
            text = base + prose[:n + 1]
            saved = await (await client.send("document:write", {**where, "text": text}))
            if saved.code != "ok":
                raise RuntimeError(f"document:write answered {saved.code}")
            assemble = {**where, "skillId": "continue", "cursorPosition": len(text)}
            outcomes.append(await (await client.send("context:assemble", assemble)))
            await asyncio.sleep(pause)
    finally:
        await (await client.send("document:write", {**where, "text": target.text}))
    wall = time.perf_counter() - started
    return summarize(label, outcomes, wall, pid, meter.stop(), keystrokes=len(prose), pause_s=pause,
                     **by_query(outcomes, new_query))


def by_query(outcomes: Sequence[Outcome], new_query: Sequence[bool]) -> dict[str, dict[str, float]]:
    """The answered keystrokes' latencies, those whose retrieval query was new and the others apart."""
    split = {}
    for name, picked in (("new_query", True), ("same_query", False)):
        ms = latency([o.latency_ms for o, new in zip(outcomes, new_query, strict=True)
                      if new is picked and o.code == "ok"])
        split[name] = {"count": ms.count, "p50_ms": ms.p50_ms, "p95_ms": ms.p95_ms}
    return split


async def at_rate(clients: Sequence[LoadClient], targets: Sequence[Target], rate: float, seconds: float,
                  rng: random.Random, pid: int, label: str) -> PhaseResult:
    """Open loop: request i is sent at start + i/rate to a random document, whatever came back."""
    count = max(1, int(rate * seconds))
    meter = LoadMeter(pid)
    started = time.perf_counter()
    futures = []
    lag = 0.0
    for i in range(count):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            lag = max(lag, -delay)
        futures.append(await clients[i % len(clients)].send("context:assemble",
                                                            request_params(rng.choice(targets), rng)))
    outcomes = await asyncio.gather(*futures)
    wall = time.perf_counter() - started
    return summarize(label, outcomes, wall, pid, meter.stop(), rate=rate, seconds=seconds,
                     max_send_lag_ms=lag * 1e3)


def holds(result: PhaseResult, target_ms: float) -> bool:
    """The rate held: nothing failed, p95 under target, and the sender kept to its schedule."""
    return (result.errors == 0 and result.ok.p95_ms < target_ms
            and result.notes["max_send_lag_ms"] < target_ms)


async def find_rate(probe: Callable[[float], Any], start: float, steps: int, target_ms: float,
                    ceiling: float = 20_000) -> tuple[float | None, list[PhaseResult]]:
    """The highest rate that holds: double from ``start`` until one fails, then bisect ``steps`` times."""
    probes: list[PhaseResult] = []
    good: float | None = None
    bad: float | None = None
    rate = start
    while rate <= ceiling:
        result = await probe(rate)
        probes.append(result)
        if holds(result, target_ms):
            good = rate
            if bad is not None:
                break
            rate *= 2
        else:
            bad = rate
            if good is not None:
                break
            rate /= 2
            if rate < 1:
                break
    if good is not None and bad is not None and bad > good:
        for _ in range(steps):
            mid = round((good + bad) / 2)
            if mid in (good, bad):
                break
            result = await probe(mid)
            probes.append(result)
            if holds(result, target_ms):
                good = mid
            else:
                bad = mid
    return good, probes


# --------------------------------------------------------------------------- the run


@dataclass
class Report:
    machine: dict[str, Any]
    command: str
    config: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)
    sweep: list[PhaseResult] = field(default_factory=list)
    phases: list[PhaseResult] = field(default_factory=list)
    probes: list[PhaseResult] = field(default_factory=list)
    sustained_rate: float | None = None
    server_exit: int | None = None

    def to_json(self) -> dict[str, Any]:
        def phase(p: PhaseResult) -> dict[str, Any]:
            row = asdict(p)
            row["throughput_per_s"] = p.throughput
            row["server_ms_per_assembly"] = p.server_ms_per_assembly
            row["load"]["server_cpu_share"] = p.load.share(
                (p.load.server_user_s or 0.0) + (p.load.server_sys_s or 0.0))
            return row
        return {"machine": self.machine, "command": self.command, "config": self.config,
                "data": self.data, "sweep": [phase(p) for p in self.sweep],
                "phases": [phase(p) for p in self.phases],
                "probes": [phase(p) for p in self.probes], "sustained_rate": self.sustained_rate,
                "server_exit": self.server_exit}

    @property
    def unexpected_errors(self) -> int:
        """Failures that are not the backpressure the overload phase asks for."""
        return sum(n for p in (*self.sweep, *self.phases) for code, n in p.codes.items()
                   if code != "ok" and not (code == "CONTEXT_BACKPRESSURE" and p.notes.get("overload")))

    @property
    def over_budget(self) -> int:
        return sum(p.over_budget for p in (*self.sweep, *self.phases, *self.probes))


def server_child(root: Path, connections: int) -> contextlib.AbstractAsyncContextManager[ServerProcess]:
    """The server with its default limits, except room for ``connections`` (the default is 32)."""
    return benchlib.running_server(root / "data", "--max-connections", str(max(32, connections + 8)))


def mem_total_kib() -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    return None


async def run_benchmark(args: argparse.Namespace,
                        progress: Callable[[str], None] = lambda _: None) -> Report:
    machine = benchlib.machine_facts()
    machine["memory_kib"] = mem_total_kib()
    progress("timing the speed reference")
    machine["speed_before"] = benchlib.speed_reference()
    report = Report(machine=machine, command=benchlib.command_line(), config=vars(args).copy())
    report.config.pop("save", None)
    report.config.pop("plot", None)
    report.config["data_dir"] = None if args.data_dir is None else str(args.data_dir)
    rng = random.Random(args.seed)
    count = resolve_tokenizer().count
    languages = ["zh" if n % 5 in (0, 2, 4) else "en" for n in range(args.projects)]
    progress(f"building {args.projects} projects x {args.documents} documents")
    projects = [build_project(n, language, count, seed=args.seed, documents=args.documents,
                              min_tokens=args.min_tokens, max_tokens=args.max_tokens)
                for n, language in enumerate(languages)]
    report.data = {
        "projects": len(projects), "languages": dict(Counter(languages)),
        "documents": sum(len(p.chapters) for p in projects),
        "chapter_tokens": sizes([count(t) for p in projects for t in p.chapters.values()]),
        "per_project": {"constraints": len(projects[0].constraints), "entities": len(projects[0].entities),
                        "rules": len(projects[0].rules), "episodes": len(projects[0].episodes)},
    }
    with contextlib.ExitStack() as stack:
        if args.data_dir is None:
            root, kept = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="strata-bench-"))), False
        else:
            root, kept = args.data_dir, kept_data(args.data_dir, args)
        async with server_child(root, args.connections) as server:
            pid = server.process.pid
            progress("reopening the kept data" if kept else "seeding over JSON-RPC")
            started = time.perf_counter()
            folders = [(p, root / "projects" / p.name) for p in projects]
            targets = await (reopen if kept else seed)(server.url, server.token, folders)
            if args.data_dir is not None and not kept:
                (root / SEEDED).write_text(json.dumps(seeded_as(args)), encoding="utf-8")
            report.data["seed_s"] = time.perf_counter() - started
            report.data["reused_data"] = kept
            progress("waiting for the retrieval index to settle")
            started = time.perf_counter()
            report.data["index"] = await settle_index(server.url, server.token,
                                                      sorted({t.project_id for t in targets}),
                                                      args.index_timeout)
            report.data["index"]["seconds"] = time.perf_counter() - started
            clients = [await LoadClient.open(server.url, server.token) for _ in range(args.connections)]
            try:
                for n, level in enumerate(args.sweep):
                    progress(f"sweep: {level} at once")
                    params = sweep_params(targets, level, args.per_document, rng, args.cursor_step, args.vary)
                    documents = len({(p["projectId"], p["documentId"]) for p in params})
                    result = await send_burst(clients, params, pid, f"{level} at once" + (
                        " (cold)" if n == 0 else ""), level=level, documents=documents,
                        per_document=level / documents, overload=level > PER_DOCUMENT_LIMIT * documents)
                    report.sweep.append(result)
                    await asyncio.sleep(args.pause)
                if args.writing > 0:
                    progress(f"writing: {args.writing} keystrokes at the end of a chapter")
                    target, source = rng.sample(list(targets), 2) if len(targets) > 1 else (targets[0],) * 2
                    prose = source.text.strip()[:args.writing]
                    report.phases.append(await writing(clients[0], target, prose, args.writing_pause, pid,
                                                       f"writing, {len(prose)} keystrokes"))
                    await asyncio.sleep(args.pause)
                if args.typing > 0:
                    progress(f"typing: {args.typing} keystrokes in one document")
                    target = rng.choice(targets)
                    await typing(clients[0], target, args.typing, rng, pid, "warm-up")  # first assembly
                    report.phases.append(await typing(clients[0], target, args.typing, rng, pid,
                                                      f"typing, {args.typing} keystrokes"))
                    await asyncio.sleep(args.pause)
                for n in range(args.bursts):
                    progress(f"burst {n + 1}/{args.bursts}: {args.per_document} per document")
                    label = f"burst {n + 1}, {args.per_document}/document" + (" (cold)" if n == 0 else "")
                    report.phases.append(await burst(clients, targets, args.per_document, rng, pid, label))
                    await asyncio.sleep(args.pause)
                progress(f"overload burst: {args.overload_per_document} per document")
                overload = await burst(clients, targets, args.overload_per_document, rng, pid,
                                       f"burst, {args.overload_per_document}/document")
                overload.notes["overload"] = True
                report.phases.append(overload)
                await asyncio.sleep(args.pause)
                if args.duration > 0:
                    await sustained(args, report, clients, targets, rng, pid, progress)
            finally:
                for client in clients:
                    await client.close()
            report.machine["loadavg_after"] = list(os.getloadavg())
        report.machine["speed_after"] = benchlib.speed_reference()
        report.server_exit = server.process.returncode
    return report


async def sustained(args: argparse.Namespace, report: Report, clients: Sequence[LoadClient],
                    targets: Sequence[Target], rng: random.Random, pid: int,
                    progress: Callable[[str], None]) -> None:
    async def probe(rate: float) -> PhaseResult:
        progress(f"probe: {rate:g} requests/s for {args.probe_seconds:g} s")
        result = await at_rate(clients, targets, rate, args.probe_seconds, rng, pid, f"probe {rate:g}/s")
        await asyncio.sleep(args.pause)
        return result

    if args.rate is not None:
        rate: float | None = args.rate
    else:
        rate, report.probes = await find_rate(probe, args.start_rate, args.search_steps, args.target_ms)
    for attempt in range(args.confirm_steps + 1):
        if rate is None:
            break
        progress(f"sustained: {rate:g} requests/s for {args.duration:g} s")
        result = await at_rate(clients, targets, rate, args.duration, rng, pid,
                               f"sustained {rate:g}/s, {args.duration:g} s")
        report.phases.append(result)
        if args.rate is not None or holds(result, args.target_ms):
            report.sustained_rate = rate
            return
        if attempt < args.confirm_steps:  # a short probe held, the long run did not: step down
            rate = max(1.0, round(rate * 0.85))
            await asyncio.sleep(args.pause)
    report.sustained_rate = None


# --------------------------------------------------------------------------- output


def _fmt(value: float | None, digits: int = 1) -> str:
    return benchlib.fmt(value, digits)


def _codes(result: PhaseResult) -> str:
    errors = {k: v for k, v in result.codes.items() if k != "ok"}
    return ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none"


def _phase_rows(phases: Sequence[PhaseResult]) -> list[list[str]]:
    rows = []
    for p in phases:
        server = (p.load.server_user_s or 0.0) + (p.load.server_sys_s or 0.0)
        rows.append([p.label, str(p.requests), str(p.codes.get("ok", 0)), _fmt(p.ok.p50_ms),
                     _fmt(p.ok.p95_ms), _fmt(p.ok.p99_ms), _fmt(p.ok.max_ms), _fmt(p.throughput, 0),
                     _fmt(p.memory_kib.get("VmHWM", 0) / 1024, 0), pct(p.load.share(server)),
                     _fmt(server * 1e3 / p.requests if p.requests else None),
                     pct(p.load.share(p.load.own_s)), pct(p.load.share(p.load.others_s))])
    return rows


def _sweep_rows(sweep: Sequence[PhaseResult]) -> list[list[str]]:
    rows = []
    for p in sweep:
        refused = p.codes.get("CONTEXT_BACKPRESSURE", 0)
        other = p.errors - refused
        server = (p.load.server_user_s or 0.0) + (p.load.server_sys_s or 0.0)
        rows.append([p.label, str(p.notes.get("documents", "-")), _fmt(p.notes.get("per_document"), 1),
                     str(p.codes.get("ok", 0)), str(refused), str(other), str(p.over_budget),
                     _fmt(p.ok.p50_ms), _fmt(p.ok.p95_ms), _fmt(p.ok.p99_ms), _fmt(p.ok.max_ms),
                     _fmt(p.throughput, 0), _fmt(p.server_ms_per_assembly, 2), pct(p.load.share(server)),
                     pct(p.load.share(p.load.others_s))])
    return rows


def spec_verdict(sweep: Sequence[PhaseResult]) -> str | None:
    """Whether the 500-at-once point meets spec 004: its three percentiles, no error or refusal,
    no result over its budget."""
    point = next((p for p in sweep if p.notes.get("level") == SPEC_LOAD), None)
    if point is None:
        return None
    misses = [f"{name[:-3]} {getattr(point.ok, name):,.1f} ms (limit {limit:g})"
              for name, limit in SPEC.items() if not getattr(point.ok, name) < limit]
    if point.errors:
        misses.append(f"{point.errors} errors or refusals")
    if point.over_budget:
        misses.append(f"{point.over_budget} results over budget")
    head = f"Spec 004 at {SPEC_LOAD} at once (p50 < 120, p95 < 250, p99 < 500 ms, no errors, within budget): "
    return head + ("met" if not misses else "NOT met: " + "; ".join(misses))


def plot_sweep(sweep: Sequence[PhaseResult], path: Path, title: str = "") -> None:
    """p50/p95/p99 and throughput against the number of simultaneous requests, and the refusals
    apart, as a PNG (matplotlib, imported only here)."""
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")
    levels = [int(p.notes.get("level", p.requests)) for p in sweep]
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(7.5, 9),
                                              gridspec_kw={"height_ratios": [3, 2, 1.2]})
    for name, style in (("p50_ms", "o-"), ("p95_ms", "s-"), ("p99_ms", "^-")):
        top.plot(levels, [getattr(p.ok, name) for p in sweep], style, label=name[:-3])
    for name, limit in SPEC.items():
        top.axhline(limit, linestyle=":", linewidth=1, color="grey")
        top.annotate(f"spec {name[:-3]} < {limit:g} ms at {SPEC_LOAD}", (levels[0], limit),
                     textcoords="offset points", xytext=(2, 2), fontsize=7, color="grey")
    top.set_yscale("log")
    top.set_ylabel("latency of successful replies (ms)")
    top.legend(loc="upper left")
    if title:
        top.set_title(title, fontsize=9)
    middle.plot(levels, [p.throughput for p in sweep], "o-", color="tab:green", label="replies/s")
    middle.set_ylabel("replies/s")
    twin = middle.twinx()
    twin.plot(levels, [p.server_ms_per_assembly or math.nan for p in sweep], "d--", color="tab:purple",
              label="server CPU ms/assembly")
    twin.set_ylabel("server CPU ms per assembly")
    twin.set_ylim(bottom=0)
    handles = middle.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    middle.legend(handles, [str(h.get_label()) for h in handles], loc="upper left", fontsize=8)
    for axis in (top, middle):
        axis.set_xscale("log")
        axis.set_xticks(levels, [str(n) for n in levels])
        axis.minorticks_off()
        axis.grid(True, which="both", alpha=0.3)
    middle.set_ylim(bottom=0)
    refused = [p.codes.get("CONTEXT_BACKPRESSURE", 0) for p in sweep]
    other = [p.errors - r for p, r in zip(sweep, refused, strict=True)]
    names = [str(n) for n in levels]
    bottom.bar(names, refused, color="tab:red", label="CONTEXT_BACKPRESSURE")
    bottom.bar(names, other, bottom=refused, color="black", label="other errors")
    bottom.set_ylim(0, max(1, *(r + o for r, o in zip(refused, other, strict=True))) * 1.15)
    bottom.set_ylabel("refused or failed")
    bottom.set_xlabel("simultaneous context:assemble requests")
    bottom.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(report: Report) -> str:
    m = report.machine
    memory = f", {m['memory_kib'] / 2**20:.1f} GiB RAM" if m.get("memory_kib") else ""
    data = report.data
    after = m.get("loadavg_after", [math.nan])[0]
    languages = ", ".join(f"{v} {k}" for k, v in data["languages"].items())
    tokens = data["chapter_tokens"]
    index = data.get("index", {})
    out = [
        *benchlib.machine_lines(m, memory),
        f"         load average before {m['loadavg'][0]:.2f}, after {after:.2f}",
        benchlib.speed_line(m.get("speed_before"), m.get("speed_after")),
        f"Command: {report.command}",
        f"Data:    {data['projects']} projects ({languages}), {data['documents']} documents of "
        f"{tokens['min']:,} to {tokens['max']:,} tokens (median {tokens['median']:,}); per project "
        + ", ".join(f"{v} {k}" for k, v in data["per_project"].items())
        + f"; seeded over JSON-RPC in {data['seed_s']:.1f} s",
        f"Index:   {index.get('documents', 0)} documents, {index.get('chunks', 0)} chunks, settled "
        f"{'after' if index.get('settled') else 'NOT within'} {index.get('seconds', 0.0):.1f} s more",
        "",
        "context:assemble over the websocket (latency of successful replies in ms; throughput in"
        " replies/s; peak RSS of the server in MiB; CPU as a share of one core; ms/req: server CPU"
        " per request, user+sys)",
    ]
    if report.over_budget:
        out.append(f"warning: {report.over_budget} results had a tokenCount over their budget total")
    if report.sweep:
        c = report.config
        out.append("")
        out.append(f"Sweep: requests sent at once from {c['connections']} connections, "
                   f"{c['per_document']} per document while documents last, cursors {c['cursor_step']} "
                   "characters apart, skill and "
                   f"instruction shared per {c['vary']} (latency of successful replies in ms; refused: "
                   "CONTEXT_BACKPRESSURE, counted apart; ms/asm: server CPU per successful assembly)")
        out += table(["load", "docs", "per doc", "ok", "refused", "errors", "over budget", "p50", "p95",
                      "p99", "max", "replies/s", "ms/asm", "server", "others"], _sweep_rows(report.sweep))
        verdict = spec_verdict(report.sweep)
        if verdict:
            out.append(verdict)
    if report.phases:
        out.append("")
        out += table(["phase", "requests", "ok", "p50", "p95", "p99", "max", "req/s", "peak RSS", "server",
                      "ms/req", "clients", "others"], _phase_rows(report.phases))
        for p in report.phases:
            if "new_query" in p.notes:
                new, same = p.notes["new_query"], p.notes["same_query"]
                out.append(f"{p.label}: {new['count']} keystrokes with a new retrieval query (a search "
                           "unless kept from before), "
                           f"p50 {_fmt(new['p50_ms'])} / p95 {_fmt(new['p95_ms'])} ms; {same['count']} with "
                           f"the query before, p50 {_fmt(same['p50_ms'])} / p95 {_fmt(same['p95_ms'])} ms")
    out.append("")
    out.append("Errors and refusals (CONTEXT_BACKPRESSURE latency in ms; 'at once' = answered in under 1 s)")
    rows = [[p.label, _codes(p), str(p.refused.count), _fmt(p.refused_at_once.p50_ms),
             _fmt(p.refused_at_once.p95_ms), _fmt(p.refused_at_once.max_ms),
             str(p.refused.count - p.refused_at_once.count), _fmt(p.refused.max_ms),
             "-" if not p.retry_after_ms else f"{p.retry_after_ms[0]}..{p.retry_after_ms[1]}",
             ", ".join(f"{k} {v}" for k, v in sorted(p.degraded.items())) or "none"]
            for p in (*report.sweep, *report.phases)]
    out += table(["phase", "errors by code", "refused", "at once p50", "p95", "max", "after wait",
                  "max", "retryAfterMs", "degraded results"], rows)
    if report.probes:
        out.append("")
        out.append("Rate search (open loop; holds = no error, p95 under target, sender on schedule)")
        rows = [[p.label, str(p.requests), _fmt(p.ok.p50_ms), _fmt(p.ok.p95_ms), _fmt(p.ok.p99_ms),
                 _codes(p), _fmt(p.notes["max_send_lag_ms"]),
                 "yes" if holds(p, report.config["target_ms"]) else "no"] for p in report.probes]
        out += table(["probe", "requests", "p50", "p95", "p99", "errors", "send lag max", "holds"], rows)
    out.append("")
    if report.config.get("duration", 0) > 0:
        rate = report.sustained_rate
        out.append(f"Highest rate held for {report.config['duration']:g} s (p95 < "
                   f"{report.config['target_ms']:g} ms): "
                   + ("none found" if rate is None else f"{rate:g} requests/s"))
    noisy = [p.label for p in (*report.sweep, *report.phases, *report.probes) if p.load.noisy]
    if noisy:
        out.append(benchlib.noisy_warning(noisy, advice=None))
    return "\n".join(out).rstrip() + "\n"


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError("a comma-separated list of request counts") from None
    if any(n < 1 for n in levels):
        raise argparse.ArgumentTypeError("request counts must be positive")
    return levels


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--projects", type=int, default=1)
    p.add_argument("--documents", type=int, default=125, help="chapters per project")
    p.add_argument("--min-tokens", type=int, default=2500, help="smallest chapter")
    p.add_argument("--max-tokens", type=int, default=3500, help="largest chapter")
    p.add_argument("--connections", type=int, default=50)
    p.add_argument("--sweep", type=_levels, default=[50, 100, 200, 500, 1000], metavar="N,N,...",
                   help="simultaneous requests of each sweep point, in order ('' for none)")
    p.add_argument("--cursor-step", type=int, default=3,
                   help="characters between the cursors of one document's requests in a sweep point "
                        "(0: each request its own random cursor)")
    p.add_argument("--vary", choices=("document", "request"), default="document",
                   help="in a sweep point, one skill and instruction per document, or each request its own")
    p.add_argument("--plot", type=Path, default=None, metavar="PNG",
                   help="draw the sweep (percentiles, throughput, refusals against load) to this PNG")
    p.add_argument("--typing", type=int, default=300,
                   help="keystrokes of the single-writer phase (an assembly each, the cursor moving one "
                        "character at a time; 0: none)")
    p.add_argument("--writing", type=int, default=0,
                   help="keystrokes of the writing phase (new text typed at the end of a chapter: a save and "
                        "an assembly each; 0: none)")
    p.add_argument("--writing-pause", type=float, default=0.15,
                   help="seconds between a writing keystroke's answer and the next keystroke")
    p.add_argument("--per-document", type=int, default=4, help="requests per document in a burst")
    p.add_argument("--bursts", type=int, default=0, help="bursts of --per-document (the first is cold)")
    p.add_argument("--overload-per-document", type=int, default=20,
                   help="requests per document in the backpressure burst")
    p.add_argument("--duration", type=float, default=60.0,
                   help="seconds of the sustained run (0: no rate search, no sustained run)")
    p.add_argument("--rate", type=float, default=None,
                   help="sustained rate in requests/s (default: search for the highest that holds)")
    p.add_argument("--start-rate", type=float, default=50.0, help="first probe of the rate search")
    p.add_argument("--probe-seconds", type=float, default=5.0, help="length of each probe")
    p.add_argument("--search-steps", type=int, default=3, help="bisection steps after doubling")
    p.add_argument("--target-ms", type=float, default=100.0, help="p95 the sustained rate must hold")
    p.add_argument("--confirm-steps", type=int, default=2,
                   help="if the long run misses the target, retry this many times 15%% lower")
    p.add_argument("--pause", type=float, default=1.0, help="seconds of rest between phases")
    p.add_argument("--index-timeout", type=float, default=600.0,
                   help="seconds to wait for the retrieval index to settle after seeding")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                   help="keep the server's data and the projects here, and reuse them when a run with the "
                        "same data and STRATA_EMBEDDING seeded them (the index is built once; default: a "
                        "new temporary folder)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--save", type=Path, default=None, metavar="PATH", help="also write the JSON report")
    args = p.parse_args(argv)
    if min(args.projects, args.documents, args.connections, args.per_document, args.overload_per_document,
           args.min_tokens) < 1 or args.max_tokens < args.min_tokens or min(args.typing, args.writing,
                                                                           args.writing_pause) < 0:
        p.error("counts and sizes must be positive (and --max-tokens at least --min-tokens)")
    if (args.bursts < 0 or args.duration < 0 or args.probe_seconds <= 0 or args.start_rate <= 0
            or args.confirm_steps < 0):
        p.error("--bursts and --duration must not be negative, probes positive")
    if args.rate is not None and args.rate <= 0:
        p.error("--rate must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = asyncio.run(run_benchmark(args, progress=benchlib.progress))
    if args.plot is not None and report.sweep:
        m = report.machine
        plot_sweep(report.sweep, args.plot, f"Strata context:assemble, {report.data['documents']} documents, "
                   f"{args.connections} connections; {m['cpu']}, {m['usable_cores']} cores")
    benchlib.emit(report.to_json(), lambda: render(report), as_json=args.json, save=args.save)
    return 1 if report.unexpected_errors or report.over_budget or report.server_exit != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
