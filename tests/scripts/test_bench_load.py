"""Smoke tests of scripts/bench_load.py: tiny sizes, sane structure and behaviour, never speed."""

from __future__ import annotations

import itertools
import json
import math
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import bench_load
from services.tokenizer import resolve_tokenizer

TINY = ["--projects", "2", "--documents", "2", "--min-tokens", "300", "--max-tokens", "500",
        "--connections", "3", "--sweep", "8,24", "--typing", "5", "--bursts", "1",
        "--overload-per-document", "20", "--duration", "1", "--rate", "10", "--pause", "0"]


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


@given(total=st.integers(1, 300), documents=st.integers(1, 40), step=st.integers(0, 9),
       vary=st.sampled_from(["document", "request"]), seed=st.integers(0, 2**16))
def test_sweep_requests_are_neighbours_spread_evenly(total: int, documents: int, step: int, vary: str,
                                                     seed: int) -> None:
    """A sweep point sends exactly its load: 4 per document while documents last, then evenly over
    all of them (counts differ by at most one); each document's cursors lie in the document and,
    with a step, are that many characters apart; with ``vary`` "document" one document's requests
    share their skill and instruction."""
    targets = [bench_load.Target("p", f"d{n}.md", 40 + 17 * n, "zh") for n in range(documents)]
    params = bench_load.sweep_params(targets, total, 4, random.Random(seed), step, vary)
    assert len(params) == total
    by_document: dict[str, list[dict[str, object]]] = {}
    for p in params:
        by_document.setdefault(str(p["documentId"]), []).append(p)
    counts = [len(v) for v in by_document.values()]
    assert len(by_document) == min(documents, -(-total // 4))
    assert max(counts) - min(counts) <= 1
    lengths = {t.document_id: t.length for t in targets}
    for document, mine in by_document.items():
        cursors = sorted(int(str(p["cursorPosition"])) for p in mine)
        assert all(0 <= c <= lengths[document] for c in cursors)
        if step and len(mine) * step <= lengths[document]:
            assert [b - a for a, b in itertools.pairwise(cursors)] == [step] * (len(mine) - 1)
        if step and vary == "document":
            assert len({(p["skillId"], p.get("additionalInput")) for p in mine}) == 1


def test_sweep_plot_is_a_png(tmp_path: Path) -> None:
    """The sweep's plot is written as a PNG, refusals included."""
    pytest.importorskip("matplotlib")
    points = [fake_result(p95, level=level) for p95, level in ((20.0, 50), (80.0, 500))]
    points[1].codes["CONTEXT_BACKPRESSURE"] = 3
    path = tmp_path / "sweep.png"
    bench_load.plot_sweep(points, path, "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_spec_verdict_names_every_miss() -> None:
    """The 500 point meets the spec only with all three percentiles under their limits, no error
    and no result over budget; a miss names what missed."""
    good = fake_result(100.0, level=500)
    assert bench_load.spec_verdict([good]) is not None
    assert str(bench_load.spec_verdict([good])).endswith("met")
    slow = fake_result(300.0, level=500)
    assert "p95 300.0 ms" in str(bench_load.spec_verdict([slow]))
    over = fake_result(100.0, level=500)
    over.over_budget = 2
    assert "2 results over budget" in str(bench_load.spec_verdict([over]))
    assert bench_load.spec_verdict([fake_result(100.0, level=50)]) is None


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


def fake_result(p95: float, level: int | None = None) -> bench_load.PhaseResult:
    from scripts.benchlib import Load
    ok = bench_load.latency([p95])
    notes: dict[str, object] = {"max_send_lag_ms": 0.0}
    if level is not None:
        notes["level"] = level
    return bench_load.PhaseResult(label="x", requests=1, wall_s=1.0, ok=ok, codes={"ok": 1}, refused=ok,
                                  refused_at_once=ok, retry_after_ms=[], degraded={}, memory_kib={},
                                  load=Load(wall_s=1.0, own_s=0.0, server_user_s=0.01, server_sys_s=0.0),
                                  notes=notes)


def test_whole_run_against_a_real_server(capsys: pytest.CaptureFixture[str]) -> None:
    """One tiny run end to end: the sweep sends each load at once (8: 4 to each of 2 documents,
    all assembled within budget; 24: 6 per document, every one assembled or refused); a writer's
    keystrokes each assemble, reported apart by whether their retrieval query was new; every
    4-per-document request succeeds; at 20 per document each
    document holds 12 at most and refuses the others with CONTEXT_BACKPRESSURE and a retryAfterMs
    hint (one sent at once with them but read after an earlier one finished takes its place);
    the sustained phase runs at the given rate; the phases start once the retrieval index has
    settled; peak RSS and machine facts are reported; the server exits cleanly; the readable table
    renders from the same report.
    """
    assert bench_load.main([*TINY, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    small, large = report["sweep"]
    assert (small["requests"], small["codes"], small["over_budget"]) == (8, {"ok": 8}, 0)
    assert (small["notes"]["documents"], small["notes"]["per_document"]) == (2, 4)
    assert small["server_ms_per_assembly"] > 0
    assert large["requests"] == 24
    assert large["codes"]["ok"] + large["codes"].get("CONTEXT_BACKPRESSURE", 0) == 24
    typed, burst, overload, sustained = report["phases"]
    assert (typed["requests"], typed["codes"], typed["notes"]["keystrokes"]) == (5, {"ok": 5}, 5)
    # The first keystroke's query is new; the others are new only where the cursor passed a sentence end.
    new_query, same_query = typed["notes"]["new_query"], typed["notes"]["same_query"]
    assert new_query["count"] >= 1
    assert new_query["count"] + same_query["count"] == 5
    assert burst["requests"] == 2 * 2 * 4
    assert burst["codes"] == {"ok": 16}
    assert burst["ok"]["count"] == 16
    assert 0 < burst["ok"]["p50_ms"] <= burst["ok"]["p95_ms"] <= burst["ok"]["max_ms"]
    assert overload["requests"] == 4 * 20
    # 12 of a document's 20 are held at most (4 run, 8 queue) and the rest are refused at once; one
    # that reaches the server after an earlier one finished takes its place, so of the 32 over the
    # limit most, not always all, are refused (30 to 32 measured on two cores).
    assert overload["codes"]["CONTEXT_BACKPRESSURE"] >= 4 * 8 // 2
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
    assert "8 at once (cold)" in table
    assert "Spec 004" not in table  # no 500 point
    assert "CONTEXT_BACKPRESSURE" in table
    assert "Machine:" in table
    assert "keystrokes with a new retrieval query" in table


def test_a_writer_typing_at_the_end_of_a_chapter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The writing phase types new text at the end of a chapter, a save and an assembly per
    keystroke, each answered; the keystrokes that end a sentence are reported apart; the chapter is
    written back afterwards (the next run on a kept data dir reuses the same data)."""
    kept = tmp_path / "kept"
    quick = ["--projects", "1", "--documents", "2", "--min-tokens", "300", "--max-tokens", "400",
             "--connections", "1", "--sweep", "", "--typing", "0", "--writing", "12", "--writing-pause", "0",
             "--overload-per-document", "1", "--duration", "0", "--pause", "0", "--data-dir", str(kept),
             "--json"]
    assert bench_load.main(quick) == 0
    report = json.loads(capsys.readouterr().out)
    written = report["phases"][0]
    assert (written["requests"], written["codes"], written["notes"]["keystrokes"]) == (12, {"ok": 12}, 12)
    assert written["notes"]["new_query"]["count"] + written["notes"]["same_query"]["count"] == 12
    assert bench_load.main(quick) == 0
    assert json.loads(capsys.readouterr().out)["data"]["reused_data"] is True


def test_a_kept_data_dir_is_seeded_once_and_reused(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """With --data-dir the first run seeds the folder and keeps it; a second run with the same data
    reopens the projects (their documents and index) instead of seeding again, and assembles them;
    a folder seeded otherwise is refused rather than seeded twice."""
    kept = tmp_path / "kept"
    quick = ["--projects", "1", "--documents", "2", "--min-tokens", "300", "--max-tokens", "400",
             "--connections", "2", "--sweep", "8", "--typing", "3", "--overload-per-document", "5",
             "--duration", "0", "--pause", "0", "--data-dir", str(kept), "--json"]
    assert bench_load.main(quick) == 0
    first = json.loads(capsys.readouterr().out)
    assert bench_load.main(quick) == 0
    second = json.loads(capsys.readouterr().out)
    assert (first["data"]["reused_data"], second["data"]["reused_data"]) == (False, True)
    assert second["data"]["index"]["documents"] == 2
    assert second["sweep"][0]["codes"] == {"ok": 8}
    with pytest.raises(SystemExit):
        bench_load.main([*quick, "--seed", "12"])
