"""The server's memory while clients ask for large replies and never read them.

Run from the repository root::

    .venv/bin/python scripts/bench_reply_memory.py                 # 8 clients x 64 reads of 2 MiB
    .venv/bin/python scripts/bench_reply_memory.py --clients 1 --json

The server (``python -m main serve``) opens a project holding one plain-text document of ``--mib``
MiB and indexes it. Then ``--clients`` connections each send ``--reads`` ``document:read`` of it and
never read a reply, while one more connection asks ``system:info`` every 250 ms and reads its
answers. Reported (docs/reliability.md, "Reply memory"): the server's peak RSS above its RSS just
before the reads (``VmHWM``, reset through ``/proc/PID/clear_refs``), the longest ``system:info``
round trip meanwhile, and how many of the silent clients the server cut off, and why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import benchlib
from tests.support.client import RpcClient

PING_EVERY = 0.25


def _status_mib(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS


def _document(mib: float) -> str:
    line = "The lamp room was cold, and the keeper counted the steps down to the shore again.\n"
    return line * int(mib * 2**20 / len(line))


async def _settled(rpc: RpcClient, project_id: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = await rpc.call("index:status", {"projectId": project_id})
        if not status["indexing"] and status["documents"] >= 1:
            return
        await asyncio.sleep(0.5)
    raise TimeoutError("the index did not settle")


async def _silent(url: str, token: str, frames: list[str]) -> ClientConnection:
    """A client that sends ``frames`` and never reads: its library stops taking from the socket
    once one message waits unread (``max_queue=1``)."""
    ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None,
                       max_queue=1, compression=None)
    for frame in frames:
        await ws.send(frame)
    return ws


async def _ping(rpc: RpcClient, stop: asyncio.Event, latencies: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await rpc.call("system:info")
        latencies.append(time.perf_counter() - started)
        await asyncio.sleep(PING_EVERY)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="strata-reply-memory-") as tmp:
        root = Path(tmp)
        folder = root / "projects" / "lighthouse"
        folder.mkdir(parents=True)
        (folder / "plain.md").write_text(_document(args.mib), encoding="utf-8")
        async with benchlib.running_server(root / "data") as server:
            pid = server.process.pid
            rpc = await RpcClient.open(server.url, server.token)
            pinger = await RpcClient.open(server.url, server.token)
            try:
                opened = await rpc.call("project:open", {"path": str(folder)})
                project_id = opened["project"]["projectId"]
                await _settled(rpc, project_id, args.timeout)
                frames = [benchlib.request_text("document:read", {"projectId": project_id,
                                                                  "documentId": "plain.md"}, n)
                          for n in range(args.reads)]
                _reset_peak(pid)
                before = _status_mib(pid, "VmRSS")
                stop = asyncio.Event()
                latencies: list[float] = []
                ping = asyncio.ensure_future(_ping(pinger, stop, latencies))
                silent = await asyncio.gather(*(_silent(server.url, server.token, frames)
                                                for _ in range(args.clients)))
                await asyncio.sleep(args.seconds)
                stop.set()
                await ping
                peak = _status_mib(pid, "VmHWM")
                for ws in silent:
                    ws.transport.abort()
            finally:
                await rpc.close()
                await pinger.close()
            drops = [json.loads(line) for line in server.stderr_text().splitlines()
                     if "ws.dropped_slow_reader" in line]
    return {
        "machine": benchlib.machine_facts(),
        "command": args.command,
        "clients": args.clients, "reads": args.reads, "document_mib": args.mib,
        "asked_mib": round(args.clients * args.reads * args.mib, 1),
        "rss_before_mib": round(before, 1),
        "peak_growth_mib": round(peak - before, 1),
        "longest_ping_s": round(max(latencies), 3) if latencies else None,
        "pings": len(latencies),
        "dropped": {why: sum(1 for d in drops if d.get("why") == why)
                    for why in sorted({str(d.get("why")) for d in drops})},
    }


def render(report: dict[str, Any]) -> str:
    rows = [[str(report["clients"]), str(report["reads"]), f"{report['document_mib']:g}",
             f"{report['asked_mib']:g}", f"+{report['peak_growth_mib']:,.0f}",
             f"{report['longest_ping_s']}", json.dumps(report["dropped"])]]
    header = ["silent clients", "reads each", "document MiB", "asked MiB", "peak RSS growth MiB",
              "longest system:info s", "cut off (why)"]
    return "\n".join([*benchlib.table(header, rows), "", f"command: {report['command']}", ""])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="silent clients (default 8)")
    parser.add_argument("--reads", type=int, default=64, help="document:read frames each (default 64)")
    parser.add_argument("--mib", type=float, default=2.0, help="the document's size in MiB (default 2)")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long to watch (default 15)")
    parser.add_argument("--timeout", type=float, default=600.0, help="for the index to settle")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--save", type=Path, help="also write the JSON report here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.command = benchlib.script_command("bench_reply_memory.py", argv)
    report = asyncio.run(run(args))
    benchlib.emit(report, lambda: render(report), as_json=args.json, save=args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
