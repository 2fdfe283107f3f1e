"""Command chat benchmark: many chat sessions submitting commands to a real server at once.

Run from the repository root::

    .venv/bin/python scripts/bench_chat.py                  # readable tables (about 25 s)
    .venv/bin/python scripts/bench_chat.py --json           # the same figures as JSON
    .venv/bin/python scripts/bench_chat.py --sessions 50    # a smaller run

The server is ``python -m main serve`` on a fresh data dir with its default
limits (1,000 chat sessions kept; ``--chat-max-sessions`` is raised only when
``--sessions`` asks for more, ``--max-connections`` only when ``--connections``
does), and the summary threshold set explicitly to its default, 12 messages.

The workload: ``--sessions`` (1,000) chat sessions, each of ``--messages`` (20)
user messages sent with ``chat:submit`` (no ``sessionId`` the first time, its id
after), each followed by the assistant's answer recorded with ``chat:reply``,
alternately a question ("Do you want to open chapter 7?", "你是想打开第七章吗？")
and a statement ("Opened chapter 7.", "已打开第七章。"); a session then holds 40
messages. The messages are the command chat's: "open chapter 12", "how about
chapter chapter 7", "打开第五章", "把灯塔那章调出来", "下一章" and so on, with
varying numbers, Chinese or English by session (one in ten messages in the
other language), deterministic for a ``--seed``. The sessions are spread
round-robin over ``--connections`` (16) websockets; at most ``--concurrency``
(32) sessions run at once, each strictly in turn (submit, its answer, reply,
its answer, the next submit). No client declares ``completions``, so every
rolling summary is the extractive fallback, made in the background on the
server once a session holds more than 12 messages and older messages fall
out of the recent window: that work is part of the measured load.

Measured:

* ``chat:submit`` latency (from just before the frame is sent to its reply) over
  all submits, and split by the session's size at the submit: at most 12
  messages (submits 1 to 6 of a session) and more than 12 (submits 7 on, past the
  summary threshold); and p50/p95 per submit position, with how many of them
  carried a summary;
* ``chat:reply`` latency;
* the server's VmRSS (``/proc/PID/status``) right after it is ready and after
  every session holds its messages and the server has gone quiet (its summaries
  made), and the difference per session in KiB; VmHWM at the end;
* the server's CPU (user + sys, ``/proc/PID/stat``) from the first call until it is
  quiet again, and the client's and other processes' CPU over the same time;
* per session, the last submit's answer: ``context.recentUserMessages`` holds
  exactly the 8 user messages before it (normalized, as their own submits
  returned them; fewer only where ``reductions`` says the budget dropped some),
  ``lastAssistantQuestion`` is the question answered just before, and
  ``tokenCount`` is at most ``budget.tokenBudget``.

The run exits 1 if any call fails or any session's check does.
"""

from __future__ import annotations

import argparse
import asyncio
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

from scripts import benchlib
from scripts.bench_load import mem_total_kib, memory_kib
from scripts.benchlib import Load, LoadMeter, Spread, fmt, pct, spread, table
from tests.support.client import RpcClient

SUMMARY_THRESHOLD = 12  # the server's default --chat-summary-threshold, passed explicitly
RECENT = 8  # the server's default recent window
CALL_TIMEOUT_S = 120.0

# --------------------------------------------------------------------------- the conversation

_DIGITS = "零一二三四五六七八九"


def chinese_number(n: int) -> str:
    """1..99 in Chinese numerals, as a chapter number is written (十二, 二十, 二十五)."""
    if not 0 < n < 100:
        raise ValueError("1..99 only")
    tens, ones = divmod(n, 10)
    head = "" if tens == 0 else ("十" if tens == 1 else _DIGITS[tens] + "十")
    return head + (_DIGITS[ones] if ones else "")


# Each takes (n, a second number) and gives one user message.
Command = Callable[[int, int], str]
_EN_COMMANDS: tuple[Command, ...] = (
    lambda n, m: f"open chapter {n}",
    lambda n, m: f"how about chapter chapter {n}",
    lambda n, m: f"chapter {n}",
    lambda n, m: f"can you open chapter {n} please",
    lambda n, m: f"go to chapter {n}",
    lambda n, m: "open the lighthouse chapter",
    lambda n, m: "next one",
    lambda n, m: "the previous chapter",
    lambda n, m: f"not this one, chapter {m}",
    lambda n, m: "search for the brass key",
    lambda n, m: f"open chapter {n} of the harbor novel",
    lambda n, m: "yes",
    lambda n, m: f"could you show me chapter {n} and then chapter {m}",
    lambda n, m: "create a new chapter called \"The North Pier\"",
)
_ZH_COMMANDS: tuple[Command, ...] = (
    lambda n, m: f"打开第{chinese_number(n)}章",
    lambda n, m: "把灯塔那章调出来",
    lambda n, m: "下一章",
    lambda n, m: "上一章",
    lambda n, m: f"不是这个，是第{chinese_number(m)}章",
    lambda n, m: f"帮我打开第{n}章",
    lambda n, m: f"请打开第{chinese_number(n)}章第{chinese_number(n)}章",
    lambda n, m: f"我想看第{chinese_number(n)}章",
    lambda n, m: "搜索铜钥匙",
    lambda n, m: "打开《北港》那一章",
    lambda n, m: "对",
    lambda n, m: f"麻烦跳到第{chinese_number(m)}章",
    lambda n, m: "新建一章叫旧码头",
)
_EN_QUESTIONS: tuple[Command, ...] = (
    lambda n, m: f"Do you want to open chapter {n}?",
    lambda n, m: f"Which one do you mean: chapter {n} or chapter {m}?",
    lambda n, m: "Should I open the next chapter?",
)
_EN_STATEMENTS: tuple[Command, ...] = (
    lambda n, m: f"Opened chapter {n}.",
    lambda n, m: f"Chapter {n} is open.",
    lambda n, m: "I found 3 chapters about the lighthouse.",
)
_ZH_QUESTIONS: tuple[Command, ...] = (
    lambda n, m: f"你是想打开第{chinese_number(n)}章吗？",
    lambda n, m: f"你指的是第{chinese_number(n)}章还是第{chinese_number(m)}章？",
    lambda n, m: "要打开下一章吗？",
)
_ZH_STATEMENTS: tuple[Command, ...] = (
    lambda n, m: f"已打开第{chinese_number(n)}章。",
    lambda n, m: f"第{chinese_number(n)}章已经打开了。",
    lambda n, m: "找到了三章和灯塔有关的内容。",
)


@dataclass(frozen=True)
class Turn:
    """One user message and the assistant's answer after it."""

    message: str
    reply: str
    question: bool


@dataclass(frozen=True)
class Script:
    """What one session says, in order."""

    language: str
    turns: tuple[Turn, ...]


def session_script(index: int, messages: int, seed: int) -> Script:
    """Session ``index``'s ``messages`` turns: Chinese for even sessions, English for odd, one
    message in ten in the other language; the answers alternate question, statement."""
    rng = random.Random(seed * 1_000_003 + index)
    language = "zh" if index % 2 == 0 else "en"
    turns = []
    for k in range(messages):
        speaks = language if rng.random() >= 0.1 else ("en" if language == "zh" else "zh")
        n, m = rng.randint(1, 60), rng.randint(1, 60)
        message = rng.choice(_ZH_COMMANDS if speaks == "zh" else _EN_COMMANDS)(n, m)
        question = k % 2 == 0
        replies = ((_ZH_QUESTIONS if question else _ZH_STATEMENTS) if language == "zh" else
                   (_EN_QUESTIONS if question else _EN_STATEMENTS))
        turns.append(Turn(message, rng.choice(replies)(n, m), question))
    return Script(language, tuple(turns))


# --------------------------------------------------------------------------- running a session


@dataclass(frozen=True)
class Submit:
    """One chat:submit as measured: its place in the session and what its answer said."""

    position: int  # 1-based: the session's n-th user message
    latency_ms: float
    summary: bool  # the context carried a rolling summary
    pending: bool  # a newer summary was being made


@dataclass
class SessionRun:
    """One session's calls: submit and reply latencies, errors, what the last submit answered."""

    index: int
    session_id: str | None = None
    submits: list[Submit] = field(default_factory=list)
    replies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # error codes of failed calls
    normalized: list[str] = field(default_factory=list)  # each submit's message.normalized
    last: dict[str, Any] | None = None  # the last submit's result


async def timed(client: RpcClient, method: str, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """(latency in ms, the whole reply); a reply that never comes is a TIMEOUT error."""
    started = time.perf_counter()
    try:
        reply = await asyncio.wait_for(client.request(method, params), CALL_TIMEOUT_S)
    except TimeoutError:
        reply = {"error": {"code": 0, "data": {"code": "TIMEOUT"}}}
    return (time.perf_counter() - started) * 1e3, reply


def error_code(reply: dict[str, Any]) -> str:
    error = reply["error"]
    data = error.get("data")
    return str(data["code"]) if isinstance(data, dict) and "code" in data else str(error.get("code"))


async def run_session(client: RpcClient, index: int, script: Script) -> SessionRun:
    """Every turn of ``script`` in order; the session stops at its first failed call."""
    run = SessionRun(index)
    for position, turn in enumerate(script.turns, start=1):
        params: dict[str, Any] = {"message": turn.message}
        if run.session_id is not None:
            params["sessionId"] = run.session_id
        latency, reply = await timed(client, "chat:submit", params)
        if "error" in reply:
            run.errors.append(error_code(reply))
            return run
        result = reply["result"]
        run.session_id = result["sessionId"]
        run.normalized.append(result["message"]["normalized"])
        run.submits.append(Submit(position, latency, result["context"]["summary"] is not None,
                                  bool(result["summaryPending"])))
        run.last = result
        latency, reply = await timed(client, "chat:reply",
                                     {"sessionId": run.session_id, "content": turn.reply})
        if "error" in reply:
            run.errors.append(error_code(reply))
            return run
        run.replies_ms.append(latency)
    return run


def check(run: SessionRun, script: Script) -> list[str]:
    """What is wrong with the session's last submit (nothing: an empty list)."""
    if run.errors:
        return [f"calls failed: {', '.join(run.errors)}"]
    if run.last is None or len(run.submits) != len(script.turns):
        return ["not every message was submitted"]
    last = run.last
    problems = []
    expected = run.normalized[-1 - RECENT:-1]
    recent = last["context"]["recentUserMessages"]
    dropped = any(r["step"] in ("cap_recent", "drop_recent") for r in last["reductions"])
    if recent != expected and not (dropped and recent == expected[len(expected) - len(recent):]):
        problems.append(f"recentUserMessages has {len(recent)} messages, not the {len(expected)} before "
                        "the last" + (" (and not the newest of them)" if dropped else ""))
    if last["currentUserMessage"] != run.normalized[-1]:
        problems.append("currentUserMessage is not the last message")
    before = script.turns[-2] if len(script.turns) > 1 else None
    question = before.reply if before is not None and before.question else None
    if last["context"]["lastAssistantQuestion"] != question:
        problems.append("lastAssistantQuestion is not the answer before the last message")
    if last["tokenCount"] > last["budget"]["tokenBudget"]:
        problems.append(f"tokenCount {last['tokenCount']} is over tokenBudget "
                        f"{last['budget']['tokenBudget']}")
    return problems


def budget_dropped(run: SessionRun) -> bool:
    return run.last is not None and any(r["step"] in ("cap_recent", "drop_recent")
                                        for r in run.last["reductions"])


async def wait_quiet(pid: int, timeout: float, window: float = 1.0, idle_s: float = 0.02) -> float:
    """Seconds until the server used less than ``idle_s`` of CPU over ``window`` (at most ``timeout``)."""
    started = time.perf_counter()
    previous = sum(benchlib.process_cpu(pid))
    while time.perf_counter() - started < timeout:
        await asyncio.sleep(window)
        now = sum(benchlib.process_cpu(pid))
        if now - previous < idle_s:
            break
        previous = now
    return time.perf_counter() - started


# --------------------------------------------------------------------------- the run


@dataclass
class Report:
    machine: dict[str, Any]
    command: str
    config: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)
    submit: dict[str, Spread] = field(default_factory=dict)  # all, upto_threshold, past_threshold
    reply: Spread | None = None
    positions: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    load: Load | None = None
    calls: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    server_exit: int | None = None

    @property
    def failed(self) -> bool:
        return bool(self.errors) or bool(self.checks.get("failed")) or self.server_exit != 0

    def to_json(self) -> dict[str, Any]:
        load = None
        if self.load is not None:
            load = asdict(self.load)
            load["noisy"] = self.load.noisy
        return {"machine": self.machine, "command": self.command, "config": self.config, "data": self.data,
                "submit": {k: asdict(v) for k, v in self.submit.items()},
                "reply": asdict(self.reply) if self.reply is not None else None,
                "positions": self.positions, "memory": self.memory, "load": load, "calls": self.calls,
                "errors": self.errors, "checks": self.checks, "server_exit": self.server_exit}


def server_flags(args: argparse.Namespace) -> list[str]:
    """The server's defaults, with room for more sessions or connections when asked."""
    flags = ["--chat-summary-threshold", str(SUMMARY_THRESHOLD)]
    if args.sessions > 1000:
        flags += ["--chat-max-sessions", str(args.sessions)]
    if args.connections + 8 > 32:
        flags += ["--max-connections", str(args.connections + 8)]
    return flags


def by_position(runs: Sequence[SessionRun], messages: int) -> list[dict[str, Any]]:
    rows = []
    for position in range(1, messages + 1):
        submits = [s for r in runs for s in r.submits if s.position == position]
        ms = spread(s.latency_ms for s in submits)
        rows.append({"position": position, "session_messages": 2 * position - 1, "count": ms.count,
                     "p50_ms": ms.p50, "p95_ms": ms.p95, "max_ms": ms.max,
                     "with_summary": sum(s.summary for s in submits),
                     "summary_pending": sum(s.pending for s in submits)})
    return rows


async def run_benchmark(args: argparse.Namespace,
                        progress: Callable[[str], None] = lambda _: None) -> Report:
    machine = benchlib.machine_facts()
    machine["memory_kib"] = mem_total_kib()
    report = Report(machine=machine, command=benchlib.command_line(), config=vars(args).copy())
    report.config.pop("save", None)
    scripts = [session_script(n, args.messages, args.seed) for n in range(args.sessions)]
    every = [t.message for s in scripts for t in s.turns]
    report.data = {"sessions": args.sessions, "messages_per_session": args.messages,
                   "languages": dict(Counter(s.language for s in scripts)),
                   "user_messages": len(every), "distinct_messages": len(set(every)),
                   "message_chars": {"min": min(map(len, every)), "max": max(map(len, every))}}
    with tempfile.TemporaryDirectory(prefix="strata-bench-chat-") as tmp:
        async with benchlib.running_server(Path(tmp) / "data", *server_flags(args)) as server:
            pid = server.process.pid
            ready = memory_kib(pid)
            clients = [await RpcClient.open(server.url, server.token, max_size=None)
                       for _ in range(args.connections)]
            try:
                limit = asyncio.Semaphore(args.concurrency)
                done = 0

                async def one(index: int) -> SessionRun:
                    nonlocal done
                    async with limit:
                        run = await run_session(clients[index % len(clients)], index, scripts[index])
                    done += 1
                    if done % max(1, args.sessions // 10) == 0:
                        progress(f"{done}/{args.sessions} sessions")
                    return run

                progress(f"{args.sessions} sessions x {args.messages} messages over {args.connections} "
                         f"connections, {args.concurrency} at once")
                meter = LoadMeter(pid)
                started = time.perf_counter()
                runs = await asyncio.gather(*(one(n) for n in range(args.sessions)))
                wall = time.perf_counter() - started
                progress("waiting for the server to go quiet (background summaries)")
                quiet_s = await wait_quiet(pid, args.settle_timeout)
                report.load = meter.stop()
                after = memory_kib(pid)
            finally:
                for client in clients:
                    await client.close()
            report.machine["loadavg_after"] = list(os.getloadavg())
        report.server_exit = server.process.returncode
    summarize(report, runs, scripts, args, wall=wall, quiet_s=quiet_s, ready=ready, after=after)
    return report


def summarize(report: Report, runs: Sequence[SessionRun], scripts: Sequence[Script], args: argparse.Namespace,
              *, wall: float, quiet_s: float, ready: dict[str, int], after: dict[str, int]) -> None:
    submits = [s for r in runs for s in r.submits]
    upto = (SUMMARY_THRESHOLD + 1) // 2  # submit k leaves the session with 2k - 1 messages
    report.submit = {"all": spread(s.latency_ms for s in submits),
                     "upto_threshold": spread(s.latency_ms for s in submits if s.position <= upto),
                     "past_threshold": spread(s.latency_ms for s in submits if s.position > upto)}
    replies = [ms for r in runs for ms in r.replies_ms]
    report.reply = spread(replies)
    report.positions = by_position(runs, args.messages)
    grown = after.get("VmRSS", 0) - ready.get("VmRSS", 0)
    report.memory = {"ready_rss_kib": ready.get("VmRSS"), "after_rss_kib": after.get("VmRSS"),
                     "after_hwm_kib": after.get("VmHWM"), "per_session_kib": grown / max(1, args.sessions)}
    calls = len(submits) + len(replies)
    load = report.load
    server = (load.server_user_s or 0.0) + (load.server_sys_s or 0.0) if load is not None else math.nan
    report.calls = {"submits": len(submits), "replies": len(replies), "wall_s": wall,
                    "quiet_after_s": quiet_s, "calls_per_s": calls / wall if wall > 0 else math.nan,
                    "server_cpu_s": server,
                    "server_cpu_ms_per_call": server * 1e3 / calls if calls else math.nan}
    report.errors = dict(Counter(code for r in runs for code in r.errors))
    failures = [(r.index, problem) for r, s in zip(runs, scripts, strict=True) for problem in check(r, s)]
    lasts = [r.last for r in runs if r.last is not None]
    report.checks = {
        "sessions": len(runs), "failed": len({i for i, _ in failures}),
        "failures": [{"session": i, "problem": p} for i, p in failures[:20]],
        "budget_dropped": sum(budget_dropped(r) for r in runs),
        "last_with_summary": sum(last["context"]["summary"] is not None for last in lasts),
        "last_extractive": sum(last["summarySource"] == "extractive" for last in lasts),
        "last_pending": sum(bool(last["summaryPending"]) for last in lasts),
        "last_tokens": ({"min": min(x["tokenCount"] for x in lasts),
                         "max": max(x["tokenCount"] for x in lasts)} if lasts else {}),
        "last_recent": dict(Counter(str(len(x["context"]["recentUserMessages"])) for x in lasts)),
    }


# --------------------------------------------------------------------------- output


def _ms(value: float) -> str:
    return fmt(value, 2)


def render(report: Report) -> str:
    m = report.machine
    memory = f", {m['memory_kib'] / 2**20:.1f} GiB RAM" if m.get("memory_kib") else ""
    after_load = m.get("loadavg_after", [math.nan])[0]
    data, calls, mem, checks = report.data, report.calls, report.memory, report.checks
    languages = ", ".join(f"{v} {k}" for k, v in data["languages"].items())
    out = [
        *benchlib.machine_lines(m, memory),
        f"         load average before {m['loadavg'][0]:.2f}, after {after_load:.2f}",
        f"Command: {report.command}",
        f"Data:    {data['sessions']:,} sessions ({languages}) x {data['messages_per_session']} user "
        "messages "
        f"({data['distinct_messages']:,} distinct of {data['user_messages']:,}, "
        f"{data['message_chars']['min']} to {data['message_chars']['max']} characters), each answered "
        f"with chat:reply; {report.config['connections']} connections, {report.config['concurrency']} "
        "sessions at once",
        f"Run:     {calls['submits'] + calls['replies']:,} calls in {calls['wall_s']:.1f} s "
        f"({fmt(calls['calls_per_s'], 0)} calls/s); the server was quiet {calls['quiet_after_s']:.1f} s "
        "after the last",
        "",
        "Latency in ms, from just before the send to the reply (nearest rank)",
    ]
    rows = []
    upto = (SUMMARY_THRESHOLD + 1) // 2
    labels = {"all": "chat:submit, all",
              "upto_threshold": f"chat:submit, session <= {SUMMARY_THRESHOLD} messages (1..{upto})",
              "past_threshold": f"chat:submit, session > {SUMMARY_THRESHOLD} messages "
                                f"({upto + 1}..{report.config['messages']})"}
    for key, label in labels.items():
        s = report.submit[key]
        rows.append([label, f"{s.count:,}", _ms(s.mean), _ms(s.p50), _ms(s.p95), _ms(s.p99), _ms(s.max)])
    if report.reply is not None:
        s = report.reply
        rows.append(["chat:reply", f"{s.count:,}", _ms(s.mean), _ms(s.p50), _ms(s.p95), _ms(s.p99),
                     _ms(s.max)])
    out += table(["calls", "count", "mean", "p50", "p95", "p99", "max"], rows)
    out.append("")
    out.append("chat:submit by position in the session (messages: the session's after recording it; "
               "summary: submits whose context carried one; pending: a newer one was being made)")
    out += table(["submit", "messages", "p50", "p95", "max", "summary", "pending"],
                 [[str(p["position"]), str(p["session_messages"]), _ms(p["p50_ms"]), _ms(p["p95_ms"]),
                   _ms(p["max_ms"]), f"{p['with_summary']:,}", f"{p['summary_pending']:,}"]
                  for p in report.positions])
    out.append("")
    load = report.load
    if load is not None:
        server = calls["server_cpu_s"]
        out.append(f"Server CPU: {server:.1f} s ({fmt(load.server_user_s, 1)} user + "
                   f"{fmt(load.server_sys_s, 1)} sys) = {calls['server_cpu_ms_per_call']:.2f} ms per call, "
                   f"{pct(load.share(server))} of a core over {load.wall_s:.1f} s; "
                   f"client {pct(load.share(load.own_s))}, others {pct(load.share(load.others_s))}")
    out.append(f"Server RSS: {fmt((mem['ready_rss_kib'] or 0) / 1024, 1)} MiB ready, "
               f"{fmt((mem['after_rss_kib'] or 0) / 1024, 1)} MiB after (peak "
               f"{fmt((mem['after_hwm_kib'] or 0) / 1024, 1)}): {fmt(mem['per_session_kib'], 1)} KiB "
               "per session")
    out.append(f"Errors: {', '.join(f'{k} {v}' for k, v in sorted(report.errors.items())) or 'none'}")
    recent = ", ".join(f"{k}: {v:,}" for k, v in sorted(checks["last_recent"].items()))
    tokens = checks["last_tokens"]
    out.append(f"Checks: {checks['sessions'] - checks['failed']:,} of {checks['sessions']:,} sessions pass; "
               f"last submit: recent messages {recent or '-'}, budget dropped some in "
               f"{checks['budget_dropped']:,}, tokenCount {tokens.get('min', '-')} to "
               f"{tokens.get('max', '-')}, "
               f"summary in {checks['last_with_summary']:,} ({checks['last_extractive']:,} extractive, "
               f"{checks['last_pending']:,} pending)")
    for failure in checks["failures"]:
        out.append(f"  session {failure['session']}: {failure['problem']}")
    if load is not None and load.noisy:
        out.append(benchlib.noisy_warning(["the run"], advice=None))
    if report.server_exit != 0:
        out.append(f"warning: the server exited with {report.server_exit}")
    return "\n".join(out).rstrip() + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sessions", type=int, default=1000)
    p.add_argument("--messages", type=int, default=20,
                   help="user messages per session, each followed by an assistant reply")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--concurrency", type=int, default=32, help="sessions running at once")
    p.add_argument("--settle-timeout", type=float, default=60.0,
                   help="seconds to wait at most for the server to go quiet after the last call")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--save", type=Path, default=None, metavar="PATH", help="also write the JSON report")
    args = p.parse_args(argv)
    if min(args.sessions, args.messages, args.connections, args.concurrency) < 1:
        p.error("--sessions, --messages, --connections and --concurrency must be positive")
    if args.settle_timeout < 0:
        p.error("--settle-timeout must not be negative")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = asyncio.run(run_benchmark(args, progress=benchlib.progress))
    benchlib.emit(report.to_json(), lambda: render(report), as_json=args.json, save=args.save)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
