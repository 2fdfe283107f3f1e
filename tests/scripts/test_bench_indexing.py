"""Smoke test of scripts/bench_indexing.py: tiny sizes, the report's shape and behaviour, never speed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import bench_indexing


def test_a_tiny_run_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """Full index, paragraph edits and searches all run; an edit embeds a chunk or two, not the chapter;
    the logging configuration is left as it was."""
    before = structlog.get_config()
    assert bench_indexing.main(["--chapters", "1", "--sentences", "40", "--characters", "6000",
                                "--edits", "2", "--queries", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    full, edit = report["full_index"], report["paragraph_edit"]
    assert full["documents"] == 2
    assert full["chunks"] > 2
    assert full["chunks_per_s"] > 0
    assert edit["edits"] == 2
    assert edit["chunks"] > 5
    assert max(edit["embedded_per_edit"]) <= 2
    assert report["search"]["queries"] == 3
    assert "bench_indexing.py" in report["command"]
    assert structlog.get_config() == before


def test_the_big_chapter_reaches_its_size() -> None:
    """The edited chapter is at least the requested number of characters, in paragraphs."""
    text = bench_indexing.big_chapter(20_000)
    assert len(text) >= 20_000
    assert text.count("\n\n") > 10
