"""Smoke tests of scripts/bench_load.py: tiny sizes, sane structure and behaviour, never speed."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import bench_load
from services.tokenizer import resolve_tokenizer

TINY = ["--projects", "2", "--documents", "2", "--min-tokens", "300", "--max-tokens", "500",
        "--connections", "3", "--bursts", "1", "--overload-per-document", "20", "--duration", "1",
        "--rate", "10", "--pause", "0"]


def test_projects_are_deterministic_bilingual_and_sized() -> None:
    """A seed gives the same project; chapters reach their size; records have the requested counts."""
    count = resolve_tokenizer().count
    zh = bench_load.build_project(0, "zh", count, seed=3, documents=2, min_tokens=300, max_tokens=400)
    again = bench_load.build_project(0, "zh", count, seed=3, documents=2, min_tokens=300, max_tokens=400)
    en = bench_load.build_project(1, "en", count, seed=3, documents=2, min_tokens=300, max_tokens=400)
    assert zh == again
    assert all(count(text) >= 300 for text in zh.chapters.values())
    assert all(name.startswith("卷一/") for name in zh.chapters)
    assert all(name.startswith("part-1/") for name in en.chapters)
    assert sum(c["source"] == "kg" for c in zh.constraints) == 10
    assert (len(zh.constraints), len(zh.entities), len(zh.rules), len(zh.episodes)) == (40, 60, 20, 50)
    assert len({e["name"] for e in en.entities}) == 60
    assert "the" in next(iter(en.chapters.values()))


def test_request_params_stay_in_the_document() -> None:
    """Every generated request names its document, a cursor within it and a known skill."""
    target = bench_load.Target("p", "a.md", 120, "en")
    rng = random.Random(1)
    for _ in range(200):
        params = bench_load.request_params(target, rng)
        assert 0 <= params["cursorPosition"] <= 120
        assert params["skillId"] in bench_load.SKILLS
        assert (params["projectId"], params["documentId"]) == ("p", "a.md")


def test_latency_is_nearest_rank_and_empty_is_nan() -> None:
    """Percentiles are nearest-rank in milliseconds; no samples gives NaN, not a crash."""
    stats = bench_load.latency([4.0, 1.0, 3.0, 2.0])
    assert (stats.count, stats.p50_ms, stats.p95_ms, stats.max_ms, stats.mean_ms) == (4, 2.0, 4.0, 4.0, 2.5)
    assert math.isnan(bench_load.latency([]).p95_ms)


async def test_rate_search_doubles_then_bisects() -> None:
    """The search doubles while a rate holds, then bisects between the last good and first bad."""
    tried: list[float] = []

    async def probe(rate: float) -> bench_load.PhaseResult:
        tried.append(rate)
        p95 = 50.0 if rate <= 300 else 500.0
        return fake_result(p95)

    best, probes = await bench_load.find_rate(probe, 50, steps=3, target_ms=100)
    assert tried[:4] == [50, 100, 200, 400]
    assert tried[4:] == [300, 350, 325]
    assert best == 300
    assert len(probes) == 7


def fake_result(p95: float) -> bench_load.PhaseResult:
    from scripts.benchlib import Load
    ok = bench_load.latency([p95])
    return bench_load.PhaseResult(label="x", requests=1, wall_s=1.0, ok=ok, codes={"ok": 1}, refused=ok,
                                  refused_at_once=ok, retry_after_ms=[], degraded={}, memory_kib={},
                                  load=Load(wall_s=1.0, own_s=0.0), notes={"max_send_lag_ms": 0.0})


def test_whole_run_against_a_real_server(capsys: pytest.CaptureFixture[str]) -> None:
    """One tiny run end to end: every 4-per-document request succeeds; at 20 per document each
    document answers 12 and refuses the rest with CONTEXT_BACKPRESSURE and a retryAfterMs hint;
    the sustained phase runs at the given rate; the phases start once the retrieval index has
    settled; peak RSS and machine facts are reported; the server exits cleanly; the readable table
    renders from the same report.
    """
    assert bench_load.main([*TINY, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    burst, overload, sustained = report["phases"]
    assert burst["requests"] == 2 * 2 * 4
    assert burst["codes"] == {"ok": 16}
    assert burst["ok"]["count"] == 16
    assert 0 < burst["ok"]["p50_ms"] <= burst["ok"]["p95_ms"] <= burst["ok"]["max_ms"]
    assert overload["requests"] == 4 * 20
    assert overload["codes"]["CONTEXT_BACKPRESSURE"] >= 4 * 8
    assert overload["codes"]["ok"] + overload["codes"]["CONTEXT_BACKPRESSURE"] == 80
    assert overload["refused"]["count"] == overload["codes"]["CONTEXT_BACKPRESSURE"]
    assert overload["retry_after_ms"][0] > 0
    assert sustained["notes"]["rate"] == 10
    assert sustained["requests"] == 10
    assert burst["memory_kib"]["VmHWM"] > 10_000
    assert report["machine"]["cores"] >= 1
    assert report["data"]["documents"] == 4
    assert (report["data"]["index"]["settled"], report["data"]["index"]["documents"]) == (True, 4)
    assert report["server_exit"] == 0
    assert report["sustained_rate"] == 10

    bench_load.main(TINY)
    table = capsys.readouterr().out
    assert "burst, 20/document" in table
    assert "CONTEXT_BACKPRESSURE" in table
    assert "Machine:" in table
