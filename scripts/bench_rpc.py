"""Benchmark the JSON-RPC round trip: over a real websocket and in-process.

Run from the repository root::

    .venv/bin/python scripts/bench_rpc.py            # readable table
    .venv/bin/python scripts/bench_rpc.py --json     # the same figures as JSON

Phases, in order:

1. **Socket, 1 client**: a real server child (``python -m main serve --port 0``)
   and one websocket connection sending ``system:info`` sequentially (send,
   wait for the reply, send the next).
2. **Socket, N clients** (50 by default): N connections opened up front, all
   released together; each sends sequentially (``--pipeline 1``, the default)
   or keeps up to ``--pipeline`` requests in flight on its connection (at most
   the server's ``max_in_flight`` of 64). The clients share this process's one
   event loop, so on a small machine they compete with the server for CPU; the
   client and server CPU time of each phase are reported to show who was busy.
3. **Baseline** (unless ``--no-baseline``): the same two client phases against
   a bare ``websockets`` server in a child process that answers every request
   with the same ``system:info`` reply bytes (one ``json.loads``, one
   ``json.dumps``, no Strata code), so the difference is the cost of Strata's
   ``ipc`` layer and the rest is the transport on this machine.
4. **In-process**: ``Dispatcher.dispatch`` on a ready :class:`Call` (no parse,
   no socket) and the whole ``Session.receive(text)`` path (parse, validate,
   schedule, dispatch, serialize) with a ``send`` that only hands the reply
   back; plus a direct timing of each step and a cProfile breakdown of the
   session path by library.

Latency is per call, from just before the send to the matching reply.
Logging is as the server runs by default: structlog filtering at ``info`` and a
``Dispatcher`` without ``trace``, so a successful call logs nothing.
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
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import structlog
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve

from ipc.channels.system import Limits, TokenizerDescription, register_system
from ipc.context import CallContext, Peer
from ipc.dispatch import Dispatcher, bind_params
from ipc.models import Ack, NoParams
from ipc.protocol import Call, parse_frame, success_reply
from ipc.registry import Registry
from ipc.session import Session
from scripts import benchlib
from scripts.benchlib import Load, LoadMeter, pct, request_text, table

SCRIPT = str(Path(__file__).resolve())
MAX_IN_FLIGHT = 64  # the server's default per-connection limit
PING = "bench:ping"  # an in-process-only method: no params, returns {"ok": true}


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Stats:
    """Latency and throughput of one phase; latencies in microseconds."""

    calls: int
    errors: int
    wall_s: float
    calls_per_s: float
    mean_us: float
    p50_us: float
    p95_us: float
    p99_us: float
    max_us: float


def summarize(latencies_s: list[float], wall_s: float, errors: int = 0) -> Stats:
    """Percentiles of per-call latencies (seconds in, microseconds out)."""
    us = benchlib.spread(x * 1e6 for x in latencies_s)
    return Stats(
        calls=us.count,
        errors=errors,
        wall_s=wall_s,
        calls_per_s=us.count / wall_s if wall_s > 0 else math.nan,
        mean_us=us.mean,
        p50_us=us.p50,
        p95_us=us.p95,
        p99_us=us.p99,
        max_us=us.max,
    )


# --------------------------------------------------------------------------- socket phases


@dataclass(frozen=True)
class SocketResult:
    """One socket phase: latency stats plus who spent the CPU."""

    label: str
    server: str
    method: str
    clients: int
    pipeline: int
    stats: Stats
    load: Load  # own_s is the clients' CPU

    def server_us_per_call(self, part: str = "total") -> float | None:
        """Server CPU per call (``user``, ``sys`` or ``total``); /proc ticks are 10 ms."""
        user, system = self.load.server_user_s, self.load.server_sys_s
        if user is None or system is None or not self.stats.calls:
            return None
        spent = {"user": user, "sys": system, "total": user + system}[part]
        return spent / self.stats.calls * 1e6


@dataclass
class _ClientTally:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0


async def _drive(ws: ClientConnection, method: str, params: Any, calls: int, pipeline: int,
                 tally: _ClientTally | None, deadline: float | None = None) -> None:
    """Make ``calls`` calls on ``ws`` keeping ``pipeline`` in flight; record if ``tally``."""
    ids = itertools.count(1)
    sent_at: dict[int, float] = {}
    sent = done = 0

    async def send_next() -> None:
        nonlocal sent
        id_ = next(ids)
        text = request_text(method, params, id_)
        sent_at[id_] = time.perf_counter()
        await ws.send(text)
        sent += 1

    while sent < min(pipeline, calls):
        await send_next()
    while done < sent:
        raw = await ws.recv()
        now = time.perf_counter()
        reply = json.loads(raw)
        id_ = reply.get("id") if isinstance(reply, dict) else None
        started = sent_at.pop(id_, None) if isinstance(id_, int) else None
        done += 1
        if tally is not None:
            if started is None or "result" not in reply:  # an error reply or an unknown id
                tally.errors += 1
            else:
                tally.latencies.append(now - started)
        if sent < calls and (deadline is None or now < deadline):
            await send_next()


async def run_socket_phase(url: str, token: str, *, label: str, clients: int, calls: int,
                           pipeline: int = 1, warmup: int = 0, method: str = "system:info",
                           params: Any = None, duration: float | None = None,
                           server_pid: int | None = None, server: str = "strata") -> SocketResult:
    """Open ``clients`` connections, warm each up, then time ``calls`` calls per client.

    With ``duration`` the timed part stops sending after that many seconds
    (``calls`` is then only an upper bound per client).
    """
    if not 1 <= pipeline <= MAX_IN_FLIGHT:
        raise ValueError(f"pipeline must be 1..{MAX_IN_FLIGHT} (the server's max in-flight)")
    headers = {"Authorization": f"Bearer {token}"}
    async with contextlib.AsyncExitStack() as stack:
        sockets = [
            await stack.enter_async_context(
                connect(url, additional_headers=headers, compression=None, max_queue=None))
            for _ in range(clients)
        ]
        if warmup:
            await asyncio.gather(*(_drive(ws, method, params, warmup, pipeline, None)
                                   for ws in sockets))
        tallies = [_ClientTally() for _ in sockets]
        meter = LoadMeter(server_pid)
        deadline = time.perf_counter() + duration if duration else None
        await asyncio.gather(*(_drive(ws, method, params, calls, pipeline, tally, deadline)
                               for ws, tally in zip(sockets, tallies, strict=True)))
        load = meter.stop()
    latencies = [x for t in tallies for x in t.latencies]
    return SocketResult(label=label, server=server, method=method, clients=clients,
                        pipeline=pipeline,
                        stats=summarize(latencies, load.wall_s, sum(t.errors for t in tallies)),
                        load=load)


# --------------------------------------------------------------------------- baseline server


async def _system_info_result() -> Any:
    """The exact ``result`` object Strata's system:info returns (for the baseline)."""
    reply = await Dispatcher(bench_registry()).dispatch(
        Call(method="system:info", params=None, id=0), CallContext(peer=Peer("bench")))
    assert reply is not None
    return json.loads(reply)["result"]


async def serve_baseline() -> None:
    """A bare websockets server: same reply bytes as system:info, no Strata code.

    Prints one ready line like the real server and exits when stdin closes.
    """
    with server_logging():
        result = await _system_info_result()

    async def answer(ws: ServerConnection) -> None:
        async for message in ws:
            request = json.loads(message)
            await ws.send(json.dumps({"jsonrpc": "2.0", "result": result, "id": request.get("id")},
                                     ensure_ascii=False, separators=(",", ":")))

    async with serve(answer, "127.0.0.1", 0, compression=None, max_queue=16) as server:
        port = server.sockets[0].getsockname()[1]
        print(json.dumps({"event": "ready", "url": f"ws://127.0.0.1:{port}/", "token": "-",
                          "pid": os.getpid()}), flush=True)
        await asyncio.to_thread(sys.stdin.buffer.read)  # until the parent closes our stdin


@contextlib.asynccontextmanager
async def baseline_child() -> AsyncIterator[tuple[str, str, int]]:
    """The baseline server as a child process: yields (url, token, pid)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, SCRIPT, "--baseline-server",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None
    assert stdout is not None
    try:
        ready = json.loads(await asyncio.wait_for(stdout.readline(), 60))
        yield str(ready["url"]), str(ready["token"]), process.pid
    finally:
        stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


# --------------------------------------------------------------------------- in-process


def server_logging(level: int = logging.INFO) -> contextlib.AbstractContextManager[None]:
    """structlog filtering at ``level`` as the server's default; restored afterwards."""
    return benchlib.structlog_settings(wrapper_class=structlog.make_filtering_bound_logger(level),
                              cache_logger_on_first_use=True)


def bench_registry() -> Registry:
    """The server's system channel, plus ``bench:ping`` (the smallest possible method)."""
    registry = Registry()
    register_system(
        registry, name="strata", version="bench",
        tokenizer=TokenizerDescription(encoding="cl100k_base", source="bundled", exact=True),
        limits=Limits(max_frame_bytes=8 * 2**20, max_in_flight=MAX_IN_FLIGHT, max_batch=64,
                      max_connections=128),
        connections=lambda: 1,
    )

    @registry.method(PING, params=NoParams, result=Ack, summary="Benchmark no-op.")
    async def ping(params: NoParams, ctx: CallContext) -> Ack:
        return Ack()

    return registry


@dataclass(frozen=True)
class InprocResult:
    label: str
    method: str
    stats: Stats  # calls_per_s counts only the timed calls, not the harness around them
    load: Load


async def bench_dispatch(calls: int, *, warmup: int = 0, method: str = "system:info",
                         registry: Registry | None = None) -> InprocResult:
    """``Dispatcher.dispatch`` on a ready Call: handler, pydantic in and out, reply JSON."""
    dispatcher = Dispatcher(registry or bench_registry())
    ctx = CallContext(peer=Peer("bench"))
    for i in range(warmup):
        await dispatcher.dispatch(Call(method=method, params=None, id=i), ctx)
    errors = 0
    latencies: list[float] = []
    clock = time.perf_counter
    meter = LoadMeter()
    for call in [Call(method=method, params=None, id=i) for i in range(calls)]:
        t0 = clock()
        reply = await dispatcher.dispatch(call, ctx)
        t1 = clock()
        latencies.append(t1 - t0)
        if reply is None or '"result":' not in reply:
            errors += 1
    return InprocResult(label="Dispatcher.dispatch", method=method,
                        stats=summarize(latencies, sum(latencies), errors), load=meter.stop())


class _Replies:
    """A ``send`` that hands each reply to whoever awaits the next one."""

    def __init__(self) -> None:
        self.waiter: asyncio.Future[str] | None = None
        self.count = 0

    async def send(self, text: str) -> None:
        self.count += 1
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(text)


def request_texts(method: str, start: int, calls: int) -> list[str]:
    return [request_text(method, None, i) for i in range(start, start + calls)]


async def _session_loop(session: Session, replies: _Replies, texts: list[str],
                        latencies: list[float] | None) -> int:
    loop = asyncio.get_running_loop()
    clock = time.perf_counter
    errors = 0
    for text in texts:
        waiter: asyncio.Future[str] = loop.create_future()
        replies.waiter = waiter
        t0 = clock()
        await session.receive(text)
        reply = await waiter
        t1 = clock()
        if latencies is not None:
            latencies.append(t1 - t0)
        if '"result":' not in reply:
            errors += 1
    return errors


async def bench_session(calls: int, *, warmup: int = 0, method: str = "system:info",
                        registry: Registry | None = None) -> InprocResult:
    """``Session.receive(text)`` to reply text: parse, validate, tasks, dispatch, serialize."""
    replies = _Replies()
    session = Session(Dispatcher(registry or bench_registry()), replies.send,
                      connection_id="bench")
    try:
        await _session_loop(session, replies, request_texts(method, 0, warmup), None)
        latencies: list[float] = []
        texts = request_texts(method, warmup, calls)
        meter = LoadMeter()
        errors = await _session_loop(session, replies, texts, latencies)
        load = meter.stop()
    finally:
        await session.close()
    if replies.count != warmup + calls:
        errors += abs(replies.count - warmup - calls)
    return InprocResult(label="Session.receive", method=method,
                        stats=summarize(latencies, sum(latencies), errors), load=load)


async def _per_call_us(fn: Callable[[], Awaitable[object]], calls: int) -> float:
    for _ in range(min(calls, 500)):
        await fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        await fn()
    return (time.perf_counter() - t0) / calls * 1e6


async def step_breakdown(calls: int, *, method: str = "system:info",
                         session_mean_us: float | None = None) -> dict[str, float]:
    """Mean microseconds of each step of one call, timed one step at a time."""
    registry = bench_registry()
    entry = registry.get(method)
    if entry is None:
        raise ValueError(f"unknown method {method}")
    ctx = CallContext(peer=Peer("bench"))
    text = request_text(method, None, 7)
    call = Call(method=method, params=None, id=7)
    params = bind_params(entry, None)
    result = await entry.handler(params, ctx)
    dumped = result.model_dump(mode="json", by_alias=True)

    async def parse() -> object:
        return parse_frame(text, 64)

    async def bind() -> object:
        return bind_params(entry, call.params)

    async def handler() -> object:
        return await entry.handler(params, ctx)

    async def dump() -> object:
        return result.model_dump(mode="json", by_alias=True)

    async def serialize() -> object:
        return success_reply(call.id, dumped)

    steps = {
        "parse_frame (json.loads + validate_entry)": await _per_call_us(parse, calls),
        "bind_params (pydantic model_validate)": await _per_call_us(bind, calls),
        "handler (builds the result model)": await _per_call_us(handler, calls),
        "model_dump(mode='json', by_alias)": await _per_call_us(dump, calls),
        "success_reply (json.dumps + utf-8 check)": await _per_call_us(serialize, calls),
    }
    if session_mean_us is not None:
        steps["rest of Session.receive (tasks, loop, bookkeeping)"] = max(
            0.0, session_mean_us - sum(steps.values()))
    return steps


# --------------------------------------------------------------------------- profile

_GROUPS = ("pydantic", "json", "structlog", "asyncio (event loop, tasks)", "ipc (Strata code)",
           "benchmark harness", "other")


def _group_of(func: tuple[str, int, str]) -> str | None:
    filename, _, name = func
    path = filename.replace("\\", "/")
    if "pydantic" in path or "pydantic" in name:
        return "pydantic"
    if "/json/" in path or "_json" in name or "json." in name:
        return "json"
    if "/structlog/" in path:
        return "structlog"
    if ("/asyncio/" in path or "asyncio" in name
            or path.endswith(("/selectors.py", "/_weakrefset.py"))):  # the loop's poll, task set
        return "asyncio (event loop, tasks)"
    if "/ipc/" in path:
        return "ipc (Strata code)"
    if path.endswith("bench_rpc.py"):
        return "benchmark harness"
    if filename in ("~", "<string>"):
        return None  # a builtin or a generated dataclass __init__: charge it to its callers
    return "other"


async def profile_session(calls: int, *, method: str = "system:info",
                          top: int = 15) -> dict[str, Any]:
    """cProfile ``calls`` Session.receive round trips; self time grouped by library."""
    replies = _Replies()
    session = Session(Dispatcher(bench_registry()), replies.send, connection_id="bench")
    profiler = cProfile.Profile()
    try:
        await _session_loop(session, replies, request_texts(method, 0, min(calls, 1000)), None)
        texts = request_texts(method, 10**6, calls)
        profiler.enable()
        await _session_loop(session, replies, texts, None)
        profiler.disable()
    finally:
        await session.close()
    return benchlib.profile_report(pstats.Stats(profiler), calls, top, _group_of, _GROUPS)


# --------------------------------------------------------------------------- whole run


@dataclass
class Report:
    machine: dict[str, Any]
    command: str
    socket: list[SocketResult] = field(default_factory=list)
    inproc: list[InprocResult] = field(default_factory=list)
    steps_us: dict[str, float] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for row, result in zip(data["socket"], self.socket, strict=True):
            row["server_cpu_us_per_call"] = {part: result.server_us_per_call(part)
                                             for part in ("user", "sys", "total")}
        return data


@contextlib.asynccontextmanager
async def server_child() -> AsyncIterator[tuple[str, str, int]]:
    """A real ``python -m main serve`` child on a fresh data dir: yields (url, token, pid)."""
    with tempfile.TemporaryDirectory(prefix="strata-bench-") as tmp:
        async with benchlib.running_server(Path(tmp) / "data") as server:
            yield server.url, server.token, server.process.pid


async def run_benchmark(args: argparse.Namespace,
                        progress: Callable[[str], None] = lambda _: None) -> Report:
    report = Report(machine=benchlib.machine_facts(), command=benchlib.command_line())
    if not args.skip_socket:
        servers = [("strata", server_child)]
        if args.baseline:
            servers.append(("baseline", baseline_child))
        for name, child in servers:
            async with child() as (url, token, pid):
                progress(f"socket, {name}: 1 client")
                report.socket.append(await run_socket_phase(
                    url, token, label="1 client, sequential", clients=1, calls=args.calls,
                    warmup=args.warmup, method=args.method, duration=args.duration,
                    server_pid=pid, server=name))
                progress(f"socket, {name}: {args.clients} clients")
                mode = "sequential" if args.pipeline == 1 else f"pipeline {args.pipeline}"
                report.socket.append(await run_socket_phase(
                    url, token, label=f"{args.clients} clients, {mode} each",
                    clients=args.clients, calls=args.calls_per_client, pipeline=args.pipeline,
                    warmup=max(1, args.warmup // args.clients), method=args.method,
                    duration=args.duration, server_pid=pid, server=name))
    with server_logging():
        progress("in-process")
        for method in ("system:info", PING):
            report.inproc.append(await bench_dispatch(args.inproc_calls, warmup=args.warmup,
                                                      method=method))
            report.inproc.append(await bench_session(args.inproc_calls, warmup=args.warmup,
                                                     method=method))
        session_mean = next(r.stats.mean_us for r in report.inproc
                            if r.label == "Session.receive" and r.method == "system:info")
        report.steps_us = await step_breakdown(args.inproc_calls, session_mean_us=session_mean)
        if args.profile_calls:
            progress("profile")
            report.profile = await profile_session(args.profile_calls)
    report.machine["loadavg_after"] = list(os.getloadavg())
    return report


# --------------------------------------------------------------------------- output


def _fmt(value: float | None, digits: int = 0) -> str:
    return benchlib.fmt(value, digits)


def render(report: Report) -> str:
    m = report.machine
    out = [
        *benchlib.machine_lines(m),
        "         " + ", ".join(f"{k} {v}" for k, v in m["libraries"].items()),
        f"         load average before {m['loadavg'][0]:.2f}, "
        f"after {m.get('loadavg_after', [math.nan])[0]:.2f}",
        f"Command: {report.command}",
        "",
    ]
    if report.socket:
        out.append("RPC round trip over a websocket (latency in ms; server CPU in us per call,"
                   " user+sys; client CPU and others' CPU as a share of one core)")
        rows = [[r.server, r.label, r.method, str(r.stats.calls), str(r.stats.errors),
                 _fmt(r.stats.p50_us / 1e3, 3), _fmt(r.stats.p95_us / 1e3, 3),
                 _fmt(r.stats.p99_us / 1e3, 3), _fmt(r.stats.calls_per_s),
                 f"{_fmt(r.server_us_per_call())} ({_fmt(r.server_us_per_call('user'))}"
                 f"+{_fmt(r.server_us_per_call('sys'))})",
                 pct(r.load.share(r.load.own_s)), pct(r.load.share(r.load.others_s))]
                for r in report.socket]
        out += table(["server", "phase", "method", "calls", "errors", "p50", "p95", "p99",
                      "calls/s", "server CPU", "client CPU", "others"], rows)
        out.append("")
    if report.inproc:
        out.append("In-process, no socket (us per call; others: other processes' CPU as a share"
                   " of one core)")
        rows = [[r.label, r.method, str(r.stats.calls), str(r.stats.errors),
                 _fmt(r.stats.mean_us, 1), _fmt(r.stats.p50_us, 1), _fmt(r.stats.p95_us, 1),
                 _fmt(r.stats.p99_us, 1), _fmt(r.stats.calls_per_s),
                 pct(r.load.share(r.load.others_s))]
                for r in report.inproc]
        out += table(["path", "method", "calls", "errors", "mean", "p50", "p95", "p99",
                      "calls/s", "others"], rows)
        out.append("")
    if report.steps_us:
        out.append("Steps of one system:info call, timed one at a time (us)")
        out += table(["step", "mean"], [[k, _fmt(v, 2)] for k, v in report.steps_us.items()])
        out.append("")
    if report.profile:
        out.append(f"cProfile of {report.profile['calls']} Session.receive calls "
                   "(self time by library; builtins charged to their callers)")
        groups = report.profile["groups"]
        out += table(["library", "share", "self s"],
                     [[g, f"{v['share']:.1%}", _fmt(v["self_s"], 3)]
                      for g, v in sorted(groups.items(), key=lambda kv: -kv[1]["self_s"])])
        out.append("")
        out.append("Top functions by self time")
        out += table(["function", "calls", "self s", "cum s"],
                     [[t["function"][-90:], str(t["calls"]), _fmt(t["self_s"], 3),
                       _fmt(t["cum_s"], 3)] for t in report.profile["top"]])
    phases = [(f"{r.server} {r.label}", r.load) for r in report.socket]
    phases += [(f"{r.label} {r.method}", r.load) for r in report.inproc]
    noisy = [f"{name} (others {pct(load.share(load.others_s))}, "
             f"steal {pct(load.share(load.steal_s))})" for name, load in phases if load.noisy]
    if noisy:
        out += ["", benchlib.noisy_warning(noisy)]
    return "\n".join(out).rstrip() + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--calls", type=int, default=5000, help="timed calls, 1-client phase")
    p.add_argument("--clients", type=int, default=50, help="connections in the concurrent phase")
    p.add_argument("--calls-per-client", type=int, default=400,
                   help="timed calls per connection in the concurrent phase")
    p.add_argument("--pipeline", type=int, default=1,
                   help=f"requests in flight per connection, concurrent phase (1..{MAX_IN_FLIGHT})")
    p.add_argument("--duration", type=float, default=None,
                   help="stop each socket phase after this many seconds (counts become caps)")
    p.add_argument("--warmup", type=int, default=500,
                   help="untimed calls first (socket: per phase, split across clients)")
    p.add_argument("--method", default="system:info", help="method called over the socket")
    p.add_argument("--inproc-calls", type=int, default=50000, help="calls per in-process path")
    p.add_argument("--profile-calls", type=int, default=20000,
                   help="Session.receive calls under cProfile (0: no profile)")
    p.add_argument("--skip-socket", action="store_true", help="only the in-process phases")
    p.add_argument("--no-baseline", dest="baseline", action="store_false",
                   help="skip the bare-websockets baseline server")
    p.add_argument("--baseline-server", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--save", type=Path, default=None, metavar="PATH",
                   help="also write the JSON report to PATH")
    args = p.parse_args(argv)
    if not 1 <= args.pipeline <= MAX_IN_FLIGHT:
        p.error(f"--pipeline must be between 1 and {MAX_IN_FLIGHT}")
    if min(args.calls, args.clients, args.calls_per_client, args.inproc_calls) < 1:
        p.error("counts must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.baseline_server:
        asyncio.run(serve_baseline())
        return 0
    report = asyncio.run(run_benchmark(args, progress=benchlib.progress))
    benchlib.emit(report.to_json(), lambda: render(report), as_json=args.json, save=args.save)
    failed = sum(r.stats.errors for r in report.socket) + sum(r.stats.errors for r in report.inproc)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
