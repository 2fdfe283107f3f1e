"""Smoke tests of scripts/bench_rpc.py: tiny counts, sane result structure, never speed."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import bench_rpc, benchlib


def assert_sane(stats: bench_rpc.Stats, calls: int) -> None:
    assert stats.calls == calls
    assert stats.errors == 0
    assert stats.wall_s > 0
    assert stats.calls_per_s > 0
    assert 0 < stats.p50_us <= stats.p95_us <= stats.p99_us <= stats.max_us
    assert stats.mean_us <= stats.max_us


def test_percentiles_are_nearest_rank_and_ordered() -> None:
    """percentile() is nearest-rank on a sorted list; summarize() converts seconds to us."""
    ordered = [float(x) for x in range(1, 101)]
    assert benchlib.percentile(ordered, 50) == 50.0
    assert benchlib.percentile(ordered, 95) == 95.0
    assert benchlib.percentile(ordered, 99) == 99.0
    assert benchlib.percentile([7.0], 99) == 7.0
    assert math.isnan(benchlib.percentile([], 50))
    stats = bench_rpc.summarize([0.003, 0.001, 0.002], wall_s=0.5, errors=1)
    assert (stats.calls, stats.errors, stats.calls_per_s) == (3, 1, 6.0)
    assert stats.p50_us == pytest.approx(2000.0)
    assert stats.p99_us == stats.max_us == pytest.approx(3000.0)


async def test_socket_phases_against_the_real_server_count_every_call() -> None:
    """1 sequential client and 2 pipelined clients against `python -m main serve`: all succeed."""
    async with bench_rpc.server_child() as (url, token, pid):
        one = await bench_rpc.run_socket_phase(url, token, label="one", clients=1, calls=5,
                                               warmup=2, server_pid=pid)
        two = await bench_rpc.run_socket_phase(url, token, label="two", clients=2, calls=4,
                                               pipeline=2, warmup=1, server_pid=pid)
    assert_sane(one.stats, 5)
    assert_sane(two.stats, 8)
    assert (one.clients, one.pipeline, two.clients, two.pipeline) == (1, 1, 2, 2)
    assert one.server == "strata"
    assert one.server_us_per_call() is not None
    for load in (one.load, two.load):
        assert load.wall_s > 0
        assert load.own_s >= 0
        assert load.server_user_s is not None
        assert load.others_s is not None
        assert load.others_s >= 0


async def test_socket_phase_reports_a_wrong_reply_as_an_error() -> None:
    """A call that fails (unknown method) is counted as an error, not as a latency sample."""
    async with bench_rpc.server_child() as (url, token, _):
        result = await bench_rpc.run_socket_phase(url, token, label="bad", clients=1, calls=3,
                                                  method="no:such-method")
    assert result.stats.errors == 3
    assert result.stats.calls == 0


async def test_baseline_server_answers_like_system_info() -> None:
    """The bare-websockets baseline child serves the same reply shape, so clients count it."""
    async with bench_rpc.baseline_child() as (url, token, pid):
        result = await bench_rpc.run_socket_phase(url, token, label="base", clients=2, calls=3,
                                                  server_pid=pid, server="baseline")
    assert_sane(result.stats, 6)
    assert result.server == "baseline"


def test_pipeline_beyond_the_servers_in_flight_limit_is_refused() -> None:
    """--pipeline above the server's max in-flight (64) is a usage error, not a silent refusal."""
    with pytest.raises(SystemExit):
        bench_rpc.parse_args(["--pipeline", str(bench_rpc.MAX_IN_FLIGHT + 1)])


async def test_in_process_paths_return_successful_replies() -> None:
    """Dispatcher.dispatch and Session.receive, for system:info and bench:ping, count every call."""
    with bench_rpc.server_logging():
        for method in ("system:info", bench_rpc.PING):
            dispatched = await bench_rpc.bench_dispatch(5, warmup=2, method=method)
            received = await bench_rpc.bench_session(5, warmup=2, method=method)
            assert_sane(dispatched.stats, 5)
            assert_sane(received.stats, 5)
            assert dispatched.method == received.method == method


async def test_step_breakdown_and_profile_cover_the_call() -> None:
    """Each step gets a positive time; the profile groups add up to 100% and list functions."""
    with bench_rpc.server_logging():
        steps = await bench_rpc.step_breakdown(20, session_mean_us=1000.0)
        profile = await bench_rpc.profile_session(20, top=5)
    assert all(value > 0 for value in steps.values())
    assert "rest of Session.receive (tasks, loop, bookkeeping)" in steps
    shares = [group["share"] for group in profile["groups"].values()]
    assert sum(shares) == pytest.approx(1.0)
    assert profile["groups"]["ipc (Strata code)"]["self_s"] > 0
    assert len(profile["top"]) == 5


def test_main_prints_a_complete_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole script with tiny counts: exit 0 and a JSON report with every phase."""
    code = bench_rpc.main(["--calls", "3", "--clients", "2", "--calls-per-client", "2",
                           "--warmup", "2", "--inproc-calls", "3", "--profile-calls", "10",
                           "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["machine"]["cores"] >= 1
    assert report["machine"]["python"].startswith("CPython 3.")
    socket = [(row["server"], row["clients"], row["stats"]["calls"]) for row in report["socket"]]
    assert socket == [("strata", 1, 3), ("strata", 2, 4), ("baseline", 1, 3), ("baseline", 2, 4)]
    assert [(row["label"], row["method"]) for row in report["inproc"]] == [
        ("Dispatcher.dispatch", "system:info"), ("Session.receive", "system:info"),
        ("Dispatcher.dispatch", bench_rpc.PING), ("Session.receive", bench_rpc.PING)]
    for row in report["socket"] + report["inproc"]:
        stats = row["stats"]
        assert stats["errors"] == 0
        assert stats["p50_us"] <= stats["p95_us"] <= stats["p99_us"]
    assert report["profile"]["calls"] == 10
