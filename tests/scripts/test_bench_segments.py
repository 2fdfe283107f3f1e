"""The segments benchmark runs end to end at a tiny size and reports what it measured."""

from __future__ import annotations

import asyncio

from scripts import bench_segments


def test_bench_segments_smoke() -> None:
    """Two scenes are timed over the in-process dispatcher; the crowd scene passes the NPC budget, so
    its NPC block is cut and says so; every call succeeded."""
    report = asyncio.run(bench_segments.run(calls=5, warmup=1))
    assert len(bench_segments.segments()) == 200
    scene, crowd = report["phases"]
    assert scene["calls"] == crowd["calls"] == 5
    assert scene["p50_ms"] > 0
    assert scene["truncated"] is None
    assert crowd["truncated"] is not None
    assert "warm segments:assemble p50" in bench_segments.render(report)
