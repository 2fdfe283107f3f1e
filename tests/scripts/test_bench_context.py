"""Smoke tests of scripts/bench_context.py: tiny counts, sane result structure, never speed."""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

import pytest
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import bench_context
from services.context.counting import CountCache
from services.context.engine import assemble
from services.context.models import Layer
from services.tokenizer import resolve_tokenizer

TINY = {"chapter_tokens": 800, "constraints": 6, "kg_constraints": 2, "entities": 8, "rules": 4,
        "candidates": 12}


def assert_sane(stats: bench_context.Stats, calls: int) -> None:
    assert stats.calls == calls
    assert stats.errors == 0
    assert 0 < stats.p50_ms <= stats.p95_ms <= stats.p99_ms <= stats.max_ms
    assert stats.mean_ms <= stats.max_ms


@pytest.fixture(scope="module")
def counter() -> CountCache:
    return CountCache(resolve_tokenizer())


@pytest.fixture(scope="module")
def corpus(counter: CountCache) -> bench_context.Corpus:
    return bench_context.build_corpus(counter.count, **TINY)


def test_summarize_is_nearest_rank_in_milliseconds() -> None:
    """Percentiles are nearest-rank on the sorted samples; an empty phase gives NaN, not a crash."""
    stats = bench_context.summarize([3.0, 1.0, 2.0, 4.0], errors=2)
    assert (stats.calls, stats.errors, stats.p50_ms, stats.p99_ms, stats.max_ms) == (4, 2, 2.0,
                                                                                     4.0, 4.0)
    assert stats.mean_ms == 2.5
    assert math.isnan(bench_context.summarize([]).p50_ms)


def test_corpus_has_the_requested_shape_and_is_deterministic(counter: CountCache,
                                                            corpus: bench_context.Corpus) -> None:
    """Counts match the arguments, the chapter reaches its size, the same seed gives the same data."""
    assert len(corpus.constraints) == 6
    assert sum(c["source"] == "kg" for c in corpus.constraints) == 2
    assert len(corpus.entities) == 8
    assert len({e["name"] for e in corpus.entities}) == 8
    assert len(corpus.rules) == 4
    assert all(r["confirmed"] for r in corpus.rules)
    assert len(corpus.passages) == len(corpus.episodes) == 12
    assert all(0 <= score <= 1 for _, score in corpus.passages)
    assert counter.count(corpus.chapter) >= 800
    assert any("\u4e00" <= ch <= "\u9fff" for ch in corpus.chapter)
    assert any(ch.isascii() and ch.isalpha() for ch in corpus.chapter)
    assert bench_context.build_corpus(counter.count, **TINY) == corpus


async def test_engine_request_gathers_every_record(counter: CountCache,
                                                   corpus: bench_context.Corpus) -> None:
    """The request carries all records as items, the candidates in Retrieved, a window before the cursor."""
    cursor = len(corpus.chapter) - 1
    request = await bench_context.engine_request(corpus, corpus.chapter, cursor, counter)
    sections = [item.section for item in request.items]
    assert sections.count("constraints") == 6
    assert sections.count("entities") == 8
    assert sections.count("preferences") == 4
    passages = [item for item in request.items if item.section == "passages"]
    assert len(passages) == 12
    assert {item.layer for item in passages} == {Layer.RETRIEVED}
    assert request.window is not None
    assert corpus.chapter[:cursor].endswith(request.window.before)
    assert assemble(request, counter).token_count > 0


async def test_engine_hash_and_cold_phases_count_every_call(counter: CountCache,
                                                            corpus: bench_context.Corpus) -> None:
    """Warm, moving-cursor and cold engine runs, the hash and the cold document: no errors."""
    tokenizer = counter.tokenizer
    cursors = bench_context.cursors_near_end(corpus.chapter, 4)
    assert len(set(cursors)) == 4
    base = await bench_context.engine_request(corpus, corpus.chapter, cursors[0], counter)
    moving = [await bench_context.engine_request(corpus, corpus.chapter, c, counter)
              for c in cursors[1:]]
    warm = CountCache(tokenizer)
    runs = [
        bench_context.run_engine("warm", lambda i: (base, warm), 5,
                                 warmup=bench_context.repeat(2, base, lambda: warm)),
        bench_context.run_engine("moving", lambda i: (moving[i], warm), 3),
        bench_context.run_engine("cold", lambda i: (base, CountCache(tokenizer)), 2),
    ]
    for run, calls in zip(runs, (5, 3, 2), strict=True):
        assert_sane(run.phase.stats, calls)
        assert len(run.budget_ms) == calls
        assert set(run.stages_ms) == set(bench_context.STAGES)
        assert all(len(v) == calls for v in run.stages_ms.values())
        assert run.phase.load is not None
        assert run.phase.load.wall_s > 0
    assert runs[0].last is not None
    hashed = bench_context.bench_hash(runs[0].last, 5)
    assert_sane(hashed.stats, 5)
    document = bench_context.long_document(counter.count, 1500)
    cold = await bench_context.bench_cold_document(corpus, document, tokenizer, 2)
    assert_sane(cold.stats, 2)
    assert cold.notes["document_tokens"] >= 1500
    assert 0 < cold.notes["assemble_p50_ms"] <= cold.stats.max_ms


def test_judge_compares_each_target_with_its_phase() -> None:
    """A figure under its limit is met, one over it is not; unmeasured targets are left out."""
    def phase(group: str, label: str, value: float) -> bench_context.Phase:
        return bench_context.Phase(group, label, bench_context.summarize([value]))

    targets = {t.name: t for t in bench_context.judge([
        phase("engine", "warm, same request", 1.5), phase("hash", "prefix_hashes", 25.0)])}
    assert targets["warm in-process assemble p50 < 2 ms"].met
    assert not targets["spec: hash p95 < 20 ms"].met
    assert not any(name.startswith("spec: inspect") for name in targets)


def test_app_logging_restores_the_logging_setup(tmp_path: Path) -> None:
    """The server-style logging is undone afterwards: same structlog config, same root handlers."""
    before = structlog.get_config()
    handlers = list(logging.getLogger().handlers)
    with bench_context.app_logging(tmp_path / "bench.log"):
        structlog.get_logger("bench.test").info("bench.logged", n=1)
    assert structlog.get_config() == before
    assert logging.getLogger().handlers == handlers
    line = json.loads((tmp_path / "bench.log").read_text(encoding="utf-8").splitlines()[-1])
    assert (line["event"], line["n"], line["level"]) == ("bench.logged", 1, "info")


def test_bad_counts_are_usage_errors() -> None:
    with pytest.raises(SystemExit):
        bench_context.parse_args(["--engine-calls", "0"])
    with pytest.raises(SystemExit):
        bench_context.parse_args(["--constraints", "3", "--kg-constraints", "4"])


def test_main_prints_a_complete_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole script with tiny counts, real server included: exit 0 and every phase reported."""
    code = bench_context.main([
        "--engine-calls", "3", "--cursors", "2", "--cold-calls", "2", "--hash-calls", "3",
        "--cold-runs", "1", "--rpc-calls", "2", "--socket-calls", "2", "--clients", "2",
        "--calls-per-client", "2", "--warmup", "1", "--profile-calls", "2",
        "--chapter-tokens", "600", "--long-tokens", "1200", "--constraints", "4",
        "--kg-constraints", "1", "--entities", "5", "--rules", "2", "--candidates", "6", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["machine"]["cores"] >= 1
    assert report["machine"]["tokenizer"]["encoding"]
    assert report["data"]["constraints"] == 4
    assert report["data"]["retrieval_candidates"] == 6
    phases = [(p["group"], p["stats"]["calls"]) for p in report["phases"]]
    assert phases == [("engine", 3), ("engine", 2), ("engine", 2), ("budget", 3), ("budget", 2),
                      ("budget", 2), ("hash", 3), ("cold64k", 1), ("dispatcher", 2),
                      ("dispatcher", 2), ("dispatcher", 2), ("socket", 2), ("socket", 4)]
    for phase in report["phases"]:
        stats = phase["stats"]
        assert stats["errors"] == 0
        assert 0 < stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"] <= stats["max_ms"]
    assert report["phases"][-1]["notes"] == {"clients": 2, "documents": 2}
    assert len(report["targets"]) == len(bench_context.TARGETS)
    assert all(isinstance(t["met"], bool) for t in report["targets"])
    for name in ("engine", "dispatcher"):
        shares = [g["share"] for g in report["profile"][name]["groups"].values()]
        assert sum(shares) == pytest.approx(1.0)
        assert report["profile"][name]["top"]
