"""What the benchmark and evaluation scripts share.

Machine facts, a speed reference and the command line of a run; nearest-rank statistics; who
used the CPU while a phase ran (this process, the server child, every other
process); logging settings that are restored afterwards; a real server child;
cProfile grouping; deterministic prose for generated projects; and the plain
text tables and JSON output of the reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.metadata
import json
import logging
import math
import os
import platform
import pstats
import random
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from tests.support.process import ServerProcess, start_server

REPO = Path(__file__).resolve().parents[1]
NOISY_SHARE = 0.1  # other processes' CPU (share of a core) above which a phase is flagged
RPC_LIBRARIES = ("websockets", "pydantic", "pydantic-core", "structlog")


# --------------------------------------------------------------------------- statistics


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (``q`` in 0..100)."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Spread:
    """Count, mean, nearest-rank percentiles and maximum of some samples (NaN when there are none)."""

    count: int
    mean: float
    p50: float
    p95: float
    p99: float
    max: float


def spread(samples: Iterable[float]) -> Spread:
    ordered = sorted(samples)
    count = len(ordered)
    return Spread(count=count, mean=sum(ordered) / count if count else math.nan,
                  p50=percentile(ordered, 50), p95=percentile(ordered, 95),
                  p99=percentile(ordered, 99), max=ordered[-1] if ordered else math.nan)


# --------------------------------------------------------------------------- machine


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def machine_facts(libraries: Sequence[str] = RPC_LIBRARIES) -> dict[str, Any]:
    """What the figures were measured on, with the versions of ``libraries``."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": affinity,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "libraries": {d: _version(d) for d in libraries},
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def speed_reference(repeats: int = 15) -> dict[str, float]:
    """How fast this machine runs now, in milliseconds: a fixed interpreter workload (objects, a
    sort, dict lookups: the engine's kind of work) and a fixed memory-bound one (a float32
    matrix-vector product over 117 MiB, more than the caches hold: the dense search's kind), each
    the median and the best of ``repeats`` runs.

    A virtual machine whose cores the host shares runs the same code at different speeds from one
    second to the next, with no steal time to show for it (on the machine of docs/performance.md,
    the interpreter workload took 9 to 37 ms within a minute): runs compared without this figure
    may compare the neighbours' load rather than the code."""
    import numpy as np

    matrix = np.ones((80_000, 384), np.float32)
    vector = np.ones(384, np.float32)

    def interpreter() -> int:
        rows = [(n % 97, -n * 0.5, f"item:{n}") for n in range(20_000)]
        rows.sort()
        index = {row[2]: row for row in rows}
        return sum(index[f"item:{n}"][0] for n in range(0, 20_000, 3))

    def timed(work: Callable[[], object]) -> tuple[float, float]:
        samples = []
        for _ in range(repeats):
            gc.collect()
            gc.disable()  # a collection's cost depends on the heap, not on the machine
            try:
                start = time.perf_counter()
                work()
                samples.append((time.perf_counter() - start) * 1000)
            finally:
                gc.enable()
        samples.sort()
        return round(samples[len(samples) // 2], 3), round(samples[0], 3)

    interpreter_ms, interpreter_best = timed(interpreter)
    memory_ms, memory_best = timed(lambda: matrix @ vector)
    return {"interpreter_ms": interpreter_ms, "interpreter_best_ms": interpreter_best,
            "memory_ms": memory_ms, "memory_best_ms": memory_best}


def speed_line(before: dict[str, float] | None, after: dict[str, float] | None) -> str:
    """The report's line of :func:`speed_reference` figures, taken before and after the run."""
    def one(speed: dict[str, float] | None) -> str:
        if not speed:
            return "-"
        return (f"interpreter {speed['interpreter_ms']:.1f} (best {speed['interpreter_best_ms']:.1f}), "
                f"memory {speed['memory_ms']:.2f} (best {speed['memory_best_ms']:.2f})")

    return f"Speed:   reference ms (median, best; lower is faster) before: {one(before)}; after: {one(after)}"


def script_command(script: str, argv: list[str] | None) -> str:
    """How a benchmark was run, from the arguments its ``main()`` was given (``sys.argv`` when
    None): under a test runner ``sys.argv`` holds the runner's own."""
    return " ".join([".venv/bin/python", f"scripts/{script}", *(sys.argv[1:] if argv is None else argv)])


def command_line() -> str:
    """How this run was started, with paths inside the repository made relative."""
    parts = [sys.executable, *sys.argv]
    for i, part in enumerate(parts):
        path = Path(part)
        if path.is_absolute() and path.is_relative_to(REPO):
            parts[i] = str(path.relative_to(REPO))
    return " ".join(parts)


# --------------------------------------------------------------------------- CPU load


def process_cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds used so far by process ``pid`` (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def machine_cpu() -> tuple[float, float, float] | None:
    """CPU seconds the whole machine has spent so far (Linux), None elsewhere.

    Returns (processes, interrupts, steal): user+nice+system time of every
    process; irq+softirq time (loopback networking lands here); time the
    hypervisor gave to someone else.
    """
    try:
        fields = Path("/proc/stat").read_text(encoding="ascii").split("\n", 1)[0].split()[1:9]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields)
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system) / tick, (irq + softirq) / tick, steal / tick


@dataclass(frozen=True)
class Load:
    """Who used the CPU while a phase ran (seconds; /proc counts in 10 ms ticks).

    ``others_s`` is the CPU of every other process on the machine: when it is
    more than a few percent of ``wall_s``, another job shared the cores and the
    phase is noisy. ``steal_s`` is the same for other virtual machines.
    """

    wall_s: float
    own_s: float
    server_user_s: float | None = None
    server_sys_s: float | None = None
    others_s: float | None = None
    interrupts_s: float | None = None
    steal_s: float | None = None

    def share(self, seconds: float | None) -> float | None:
        return None if seconds is None or self.wall_s <= 0 else seconds / self.wall_s

    @property
    def noisy(self) -> bool:
        return any((self.share(x) or 0.0) > NOISY_SHARE for x in (self.others_s, self.steal_s))


class LoadMeter:
    """Snapshot CPU counters now; :meth:`stop` returns the :class:`Load` since then."""

    def __init__(self, server_pid: int | None = None) -> None:
        self._pid = server_pid
        self._server = process_cpu(server_pid) if server_pid else None
        self._machine = machine_cpu()
        self._own = time.process_time()
        self._wall = time.perf_counter()

    def stop(self) -> Load:
        wall = time.perf_counter() - self._wall
        own = time.process_time() - self._own
        machine = machine_cpu()
        user = system = None
        if self._pid and self._server is not None:
            after = process_cpu(self._pid)
            user, system = after[0] - self._server[0], after[1] - self._server[1]
        if machine is None or self._machine is None:
            return Load(wall_s=wall, own_s=own, server_user_s=user, server_sys_s=system)
        processes, interrupts, steal = (b - a for a, b in zip(self._machine, machine, strict=True))
        others = max(0.0, processes - own - (user or 0.0) - (system or 0.0))
        return Load(wall_s=wall, own_s=own, server_user_s=user, server_sys_s=system,
                    others_s=others, interrupts_s=interrupts, steal_s=steal)


# --------------------------------------------------------------------------- logging


@contextlib.contextmanager
def structlog_settings(**settings: Any) -> Iterator[None]:
    """``structlog.configure(**settings)`` for the length of the block; the old configuration after."""
    saved = structlog.get_config()
    structlog.configure(**settings)
    try:
        yield
    finally:
        structlog.configure(**saved)


def quiet_logs() -> contextlib.AbstractContextManager[None]:
    """Send the services' logs to stderr, warnings and above only (stdout is the report); restore after."""
    return structlog_settings(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                              logger_factory=structlog.PrintLoggerFactory(sys.stderr))


# --------------------------------------------------------------------------- the server


@contextlib.asynccontextmanager
async def running_server(data_dir: Path, *flags: str) -> AsyncIterator[ServerProcess]:
    """``python -m main serve`` on ``data_dir`` as a child process, stopped (SIGTERM) after the block;
    an unclean exit is reported on stderr."""
    server = await asyncio.to_thread(start_server, data_dir, *flags)
    try:
        yield server
    finally:
        code = await asyncio.to_thread(server.terminate)
        if code != 0:
            print(f"warning: server exited with {code}: {server.stderr_text()[-1000:]}",
                  file=sys.stderr)


def request_text(method: str, params: Any, id_: int) -> str:
    """One JSON-RPC request frame, compact."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id_}
    if params is not None:
        message["params"] = params
    return json.dumps(message, separators=(",", ":"))


# --------------------------------------------------------------------------- profile

Function = tuple[str, int, str]  # cProfile's (file name, line, function name)


def group_profile(stats: pstats.Stats, group_of: Callable[[Function], str | None],
                  groups: Sequence[str] = ()) -> dict[str, float]:
    """Self seconds per group (``groups`` first, in order, even when empty); a function whose group
    is None (a builtin, generated code) is charged to its callers' groups by their time."""
    totals = dict.fromkeys(groups, 0.0)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for func, (_, _, self_time, _, callers) in raw.items():
        group = group_of(func)
        if group is not None:
            totals[group] = totals.get(group, 0.0) + self_time
            continue
        weights = {c: v[2] + v[3] for c, v in callers.items()}
        weight = sum(weights.values())
        if not weight:
            totals["other"] = totals.get("other", 0.0) + self_time
            continue
        for caller, spent in weights.items():
            target = group_of(caller) or "other"
            totals[target] = totals.get(target, 0.0) + self_time * spent / weight
    return totals


def top_functions(stats: pstats.Stats, limit: int) -> list[dict[str, Any]]:
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    rows = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:limit]
    return [{"function": _func_name(func), "calls": nc, "self_s": tt, "cum_s": ct}
            for func, (_, nc, tt, ct, _) in rows]


def _func_name(func: Function) -> str:
    filename, line, name = func
    if filename == "~":
        return name
    for marker in ("/site-packages/", "/lib/python3.", str(REPO)):
        if marker in filename:
            filename = filename.split(marker, 1)[1].split("/", 1)[-1] if marker.startswith(
                "/lib/python3.") else filename.split(marker, 1)[1]
            break
    return f"{filename.lstrip('/')}:{line}({name})"


def profile_report(stats: pstats.Stats, calls: int, top: int,
                   group_of: Callable[[Function], str | None],
                   groups: Sequence[str] = ()) -> dict[str, Any]:
    """Self time by group (largest first, with its share) and the ``top`` functions by self time."""
    totals = group_profile(stats, group_of, groups)
    total = sum(totals.values()) or 1.0
    return {"calls": calls,
            "groups": {g: {"self_s": s, "share": s / total}
                       for g, s in sorted(totals.items(), key=lambda kv: -kv[1])},
            "top": top_functions(stats, top)}


# --------------------------------------------------------------------------- generated prose

Template = Callable[[random.Random, str, str, str, str], str]  # (rng, who, other, place, object)


def sentence(rng: random.Random, cast: Sequence[str], places: Sequence[str], objects: Sequence[str],
             templates: Sequence[Template]) -> str:
    """Two of the cast, a place and an object, then one of the templates filled with them."""
    who, other = rng.choice(cast), rng.choice(cast)
    place, obj = rng.choice(places), rng.choice(objects)
    return templates[rng.randrange(len(templates))](rng, who, other, place, obj)


def prose(rng: random.Random, sentence: Callable[[random.Random, Sequence[str]], str],
          cast: Sequence[str], tokens: int, count: Callable[[str], int], joiner: str = "") -> str:
    """Paragraphs of 3 to 7 sentences until about ``tokens`` tokens."""
    paragraphs: list[str] = []
    total = 0
    while total < tokens:
        paragraph = joiner.join(sentence(rng, cast) for _ in range(rng.randint(3, 7)))
        paragraphs.append(paragraph)
        total += count(paragraph) + 1
    return "\n\n".join(paragraphs)


CONSTRAINT_KINDS = ("narrative", "character", "world", "style", "plot")


def constraint_rows(rng: random.Random, count: int, kg: int,
                    text: Callable[[int], str]) -> list[dict[str, Any]]:
    """``count`` constraints of every kind in turn, the last ``kg`` of them kg-derived."""
    return [{"kind": CONSTRAINT_KINDS[n % len(CONSTRAINT_KINDS)], "priority": rng.randint(1, 10),
             "source": "kg" if n >= count - kg else "user", "text": text(n)}
            for n in range(count)]


# --------------------------------------------------------------------------- output


def fmt(value: float | None, digits: int) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:,.{digits}f}"


def pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell: the first left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def machine_lines(machine: dict[str, Any], memory: str = "") -> list[str]:
    """The report's first two lines: the processor, cores and Python; the platform."""
    m = machine
    return [f"Machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable){memory}, {m['python']}",
            f"         {m['platform']}"]


def noisy_warning(phases: Sequence[str], advice: str | None = "run again on a quiet machine") -> str:
    return (f"warning: other processes or VMs used more than {NOISY_SHARE:.0%} of a core during: "
            + "; ".join(phases) + ". Those figures are noisy" + (f": {advice}." if advice else "."))


def progress(step: str) -> None:
    """A run's progress, on stderr (stdout is the report)."""
    print(f"... {step}", file=sys.stderr, flush=True)


def emit(data: Any, render: Callable[[], str], *, as_json: bool, save: Path | None = None) -> None:
    """Print the report (as JSON, or ``render()``'s text) and write its JSON to ``save`` too."""
    if save is not None:
        save.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(render(), end="")
