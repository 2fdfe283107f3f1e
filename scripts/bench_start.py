"""Start and footprint of Strata's main process: spawn to ready line, and memory (RSS) over a session.

    .venv/bin/python scripts/bench_start.py                  # table; about a minute
    .venv/bin/python scripts/bench_start.py --json           # the same report as JSON
    .venv/bin/python scripts/bench_start.py --repo ../old    # the server of another checkout (before/after)

What it measures (docs/performance.md, "Start and footprint"):

* **Start**: ``--runs`` times, a fresh data dir each, the time from just before spawning
  ``python -m main serve --port 0`` (as the desktop shell does, ``tests/support/process.py``) until its
  ready line has been read; median and max. The server's RSS right after the ready line (``at ready``)
  and once a client has asked ``system:info`` and ``project:list`` (``idle``: the encoder is chosen and
  every channel has loaded, no project is open); ``loaded``: spawn to the moment ``project:list``
  answered (the server loads its channels other than the system one after the ready line).
* **Footprint**: one server with the default configuration (the e5 encoder) and
  ``--index-idle-minutes`` set to ``--idle-seconds``. A five-chapter project is opened, written,
  indexed until settled and assembled once (``one project``); then ``--projects`` - 1 more the same way
  (``N projects``, and the growth per further project); then nothing for longer than the idle time,
  and the RSS once the idle projects' indexes have been released (``released``); and a last assembly
  of the first project, which comes back from the store with the same prompt bytes (checked).
* **Restart**: the five-chapter project indexed and assembled once by one server, then
  ``--restarts`` times two new servers on the same data dir, as after a restart of the app; each
  opens the project and sends its first assembly, one at once (``at_once``), the other once the
  index has settled and a second passed (``settled``). Each reports the first assembly's time
  (``first_assembly_ms``), the longest ``system:info`` round trip of a second connection asking
  every 5 ms meanwhile (``longest_ping_ms``: how long the app's other calls waited), and the chunks
  its Retrieved layer holds (0: retrieval was not ready in time).

RSS is ``VmRSS`` of the server process from ``/proc``: resident memory, shared pages included.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import process
from tests.support.client import connected
from tests.support.scenarios import Project, zh_chapter

INSTRUCTION = "写林远想起那把铜钥匙藏在哪里"
KEY_FACT = "林远把铜钥匙藏在灯塔第三级台阶下的砖缝里，又用青苔盖住了缝隙。"
CHAPTERS = 5
SENTENCES = 60  # per chapter: about 1,500 characters, 60 sentence vectors


def chapters(seed: int) -> dict[str, str]:
    texts = {f"第{n:02d}章.md": zh_chapter(f"第{n}章", SENTENCES, start=seed * 1000 + n * SENTENCES)
             for n in range(1, CHAPTERS + 1)}
    texts["第02章.md"] += "\n\n" + KEY_FACT + "\n"
    return texts


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "system": f"{platform.system()} {platform.release()}",
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def spawn(data_dir: Path, repo: Path, *args: str) -> tuple[process.ServerProcess, float]:
    """A server child started from ``repo``, and the seconds from spawn to its ready line."""
    process.REPO = repo  # start_server runs ``python -m main`` in REPO: that checkout's server
    started = time.perf_counter()
    server = process.start_server(data_dir, *args, timeout=120)
    return server, time.perf_counter() - started


async def _info(server: process.ServerProcess) -> float:
    """Ask system:info, then project:list (which answers once every channel has loaded: the server
    loads them after its ready line); the seconds from the first call to that answer."""
    async with connected(server.url, server.token) as rpc:
        started = time.perf_counter()
        await rpc.call("system:info", {})
        await rpc.call("project:list", {})
        return time.perf_counter() - started


def start_runs(runs: int, repo: Path, env_args: list[str]) -> dict[str, Any]:
    times, at_ready, idle, loaded = [], [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="strata-start-") as tmp:
            server, seconds = spawn(Path(tmp) / "data", repo, *env_args)
            try:
                at_ready.append(rss_mib(server.process.pid))
                loaded.append(seconds + asyncio.run(_info(server)))
                idle.append(rss_mib(server.process.pid))
            finally:
                server.terminate()
                server.kill()
            times.append(seconds)
    return {"runs": runs, "ready_s": [round(t, 3) for t in times],
            "ready_median_s": round(statistics.median(times), 3), "ready_max_s": round(max(times), 3),
            "loaded_median_s": round(statistics.median(loaded), 3),
            "rss_at_ready_mib": round(statistics.median(at_ready), 1),
            "rss_idle_mib": round(statistics.median(idle), 1)}


async def _open_index_assemble(rpc: Any, folder: Path, seed: int) -> tuple[Project, str]:
    project = await Project.open(rpc, folder)
    texts = chapters(seed)
    for document_id, text in texts.items():
        await project.write(document_id, text)
    deadline = time.monotonic() + 600
    while True:
        status = await rpc.call("index:status", {"projectId": project.project_id})
        if not status["indexing"] and status["documents"] == len(texts):
            break
        if time.monotonic() > deadline:
            raise TimeoutError("the index did not settle")
        await asyncio.sleep(0.2)
    last = f"第{CHAPTERS:02d}章.md"
    result = await project.assemble(last, len(texts[last]), "continue", INSTRUCTION)
    return project, str(result["prompt"])


async def footprint(repo: Path, projects: int, idle_seconds: float, release: bool) -> dict[str, Any]:
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="strata-footprint-") as tmp:
        root = Path(tmp)
        args = ["--index-debounce", "0.1"]
        if release:
            args += ["--index-idle-minutes", str(idle_seconds / 60)]
        server, _ = await asyncio.to_thread(spawn, root / "data", repo, *args)
        pid = server.process.pid
        try:
            async with connected(server.url, server.token) as rpc:
                report["rss_at_ready_mib"] = round(rss_mib(pid), 1)
                first, prompt = await _open_index_assemble(rpc, root / "novel-1", 1)
                report["rss_one_project_mib"] = round(rss_mib(pid), 1)
                after = [report["rss_one_project_mib"]]
                for n in range(2, projects + 1):
                    await _open_index_assemble(rpc, root / f"novel-{n}", n)
                    after.append(round(rss_mib(pid), 1))
                report["rss_after_each_project_mib"] = after
                if projects > 1:
                    report["growth_per_project_mib"] = round((after[-1] - after[0]) / (projects - 1), 1)
                if release:
                    await asyncio.sleep(idle_seconds * 2.5)  # the sweep runs every idle/2 at most
                    report["rss_released_mib"] = round(rss_mib(pid), 1)
                    texts = chapters(1)
                    last = f"第{CHAPTERS:02d}章.md"
                    again = await first.assemble(last, len(texts[last]), "continue", INSTRUCTION)
                    report["same_prompt_after_release"] = again["prompt"] == prompt
                    report["rss_back_mib"] = round(rss_mib(pid), 1)
                    released = sum(1 for line in server.stderr_text().splitlines()
                                   if '"retrieval.released"' in line)
                    report["indexes_released"] = released
        finally:
            await asyncio.to_thread(server.terminate)
            server.kill()
    return report


async def _first_assembly(server: process.ServerProcess, folder: Path, settle: bool) -> dict[str, float]:
    """The first assembly after ``project:open`` (at once, or once the index has settled and a
    second passed): ms from its sending to its answer, the longest system:info round trip on
    another connection meanwhile, and the chunks in its Retrieved layer."""
    texts = chapters(1)
    last = f"第{CHAPTERS:02d}章.md"
    async with connected(server.url, server.token) as rpc, connected(server.url, server.token) as ping:
        await ping.call("system:info", {})
        await rpc.call("project:list", {})  # every channel loaded: what is measured is the project's
        project = await Project.open(rpc, folder)
        if settle:
            await _settled(rpc, project.project_id)
            await asyncio.sleep(1.0)
        started = time.perf_counter()
        assembly = asyncio.ensure_future(project.assemble(last, len(texts[last]), "continue", INSTRUCTION))
        longest = 0.0
        while not assembly.done():
            sent = time.perf_counter()
            await ping.call("system:info", {})
            longest = max(longest, time.perf_counter() - sent)
            await asyncio.sleep(0.005)
        result = await assembly
        return {"first_ms": (time.perf_counter() - started) * 1e3, "ping_ms": longest * 1e3,
                "chunks": int(result["layers"]["retrieved"]["chunks"])}


async def _settled(rpc: Any, project_id: str) -> None:
    deadline = time.monotonic() + 600
    while (await rpc.call("index:status", {"projectId": project_id}))["indexing"]:
        if time.monotonic() > deadline:
            raise TimeoutError("the index did not settle")
        await asyncio.sleep(0.1)


def restart_runs(runs: int, repo: Path) -> dict[str, Any]:
    """Each run: a restart into the indexed project, assembled at once; another, once settled."""
    found: dict[str, list[dict[str, float]]] = {"at_once": [], "settled": []}
    with tempfile.TemporaryDirectory(prefix="strata-restart-") as tmp:
        root = Path(tmp)
        server, _ = spawn(root / "data", repo, "--index-debounce", "0.1")
        try:
            async def seed() -> None:
                async with connected(server.url, server.token) as rpc:
                    await _open_index_assemble(rpc, root / "novel", 1)
            asyncio.run(seed())
        finally:
            server.terminate()
            server.kill()
        for _ in range(runs):
            for moment, runs_of in found.items():
                server, _ = spawn(root / "data", repo)
                try:
                    runs_of.append(asyncio.run(_first_assembly(server, root / "novel", moment == "settled")))
                finally:
                    server.terminate()
                    server.kill()
    report: dict[str, Any] = {"runs": runs}
    for moment, runs_of in found.items():
        firsts, pings = [r["first_ms"] for r in runs_of], [r["ping_ms"] for r in runs_of]
        report[moment] = {"first_assembly_ms": [round(t) for t in firsts],
                          "first_assembly_median_ms": round(statistics.median(firsts)),
                          "longest_ping_ms": [round(t) for t in pings],
                          "longest_ping_median_ms": round(statistics.median(pings)),
                          "retrieved_chunks": [int(r["chunks"]) for r in runs_of]}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="starts measured (default 7)")
    parser.add_argument("--projects", type=int, default=4, help="projects opened in the footprint phase")
    parser.add_argument("--idle-seconds", type=float, default=6.0,
                        help="--index-idle-minutes of the footprint server, in seconds (default 6)")
    parser.add_argument("--repo", type=Path, default=process.REPO, help="the checkout whose server runs")
    parser.add_argument("--no-release", action="store_true",
                        help="skip the idle phase (a server without --index-idle-minutes)")
    parser.add_argument("--no-footprint", action="store_true", help="measure the start only")
    parser.add_argument("--restarts", type=int, default=3,
                        help="restarts into an indexed project measured (0: none)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    repo = args.repo.resolve()
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
    report: dict[str, Any] = {"machine": machine(), "commit": commit,
                              "start": start_runs(args.runs, repo, [])}
    if not args.no_footprint:
        report["footprint"] = asyncio.run(footprint(repo, args.projects, args.idle_seconds,
                                                    not args.no_release))
    if args.restarts:
        report["restart"] = restart_runs(args.restarts, repo)
    report["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return
    m = report["machine"]
    print(f"{m['cpu']}, {m['cpus']} CPUs, {m['system']}, Python {m['python']}; commit {commit}; "
          f"load average {m['load_average']} -> {m['load_average_after']}")
    start = report["start"]
    print(f"spawn to ready line, {start['runs']} runs: median {start['ready_median_s']:.3f} s, "
          f"max {start['ready_max_s']:.3f} s  ({', '.join(f'{t:.2f}' for t in start['ready_s'])})")
    print(f"every channel loaded (project:list answered): median {start['loaded_median_s']:.3f} s")
    print(f"RSS at ready {start['rss_at_ready_mib']:.0f} MiB, idle (after system:info and project:list) "
          f"{start['rss_idle_mib']:.0f} MiB")
    for key, value in report.get("footprint", {}).items():
        print(f"{key:32s} {value}")
    for moment in ("at_once", "settled"):
        if "restart" in report:
            found = report["restart"][moment]
            print(f"restart, first assembly {moment.replace('_', ' ')}: "
                  f"{found['first_assembly_median_ms']} ms median ({found['first_assembly_ms']}), "
                  f"longest system:info meanwhile "
                  f"{found['longest_ping_median_ms']} ms ({found['longest_ping_ms']}), "
                  f"Retrieved chunks {found['retrieved_chunks']}")


if __name__ == "__main__":
    main()
