"""Smoke test of scripts/bench_first_index.py: tiny sizes, the report's shape, never speed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import bench_first_index


def test_a_tiny_run_times_the_first_index_and_the_assemblies_meanwhile(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The new project's index settles with its chapters in it, and the writer's assemblies sent
    meanwhile are counted with their percentiles."""
    assert bench_first_index.main(["--documents", "3", "--writer-documents", "1", "--min-tokens", "300",
                                   "--max-tokens", "500", "--ask-every", "0.05", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    index = report["index"]
    assert index["settled"] is True
    assert index["documents"] == 3
    assert index["chunks"] >= 3
    assert index["seconds"] > 0
    assembled = report["assemblies"]
    assert assembled["every_s"] == 0.05
    assert assembled["count"] == 0 or 0 < assembled["p50_ms"] <= assembled["max_ms"]
    assert "bench_first_index.py" in report["command"]
    assert report["machine"]["speed_before"]["interpreter_ms"] > 0
