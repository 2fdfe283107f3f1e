"""The benchmarks' shared helpers: the machine's speed reference."""

from __future__ import annotations

from scripts.benchlib import speed_line, speed_reference


def test_the_speed_reference_gives_each_workloads_median_and_best() -> None:
    """Both workloads are timed: positive milliseconds, the best never above the median."""
    speed = speed_reference(repeats=3)
    assert set(speed) == {"interpreter_ms", "interpreter_best_ms", "memory_ms", "memory_best_ms"}
    assert 0 < speed["interpreter_best_ms"] <= speed["interpreter_ms"]
    assert 0 < speed["memory_best_ms"] <= speed["memory_ms"]


def test_the_speed_line_shows_both_ends_of_a_run() -> None:
    """The report's line names the figures before and after, and a missing one as a dash."""
    before = {"interpreter_ms": 12.34, "interpreter_best_ms": 9.01, "memory_ms": 3.456, "memory_best_ms": 3.0}
    line = speed_line(before, None)
    assert line.startswith("Speed:")
    assert "before: interpreter 12.3 (best 9.0), memory 3.46 (best 3.00)" in line
    assert line.endswith("after: -")
