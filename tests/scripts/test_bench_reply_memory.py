"""Smoke test of scripts/bench_reply_memory.py: tiny sizes, the report's shape, never memory or speed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts import bench_reply_memory


def test_a_tiny_run_reports_the_peak_and_the_reading_clients_round_trips(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Silent clients send their reads; the report has the server's peak growth, the reading
    client's round trips, and the command that made it."""
    assert bench_reply_memory.main(["--clients", "2", "--reads", "3", "--mib", "0.1", "--seconds", "1",
                                    "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["clients"], report["reads"], report["document_mib"]) == (2, 3, 0.1)
    assert report["asked_mib"] == 0.6
    assert report["rss_before_mib"] > 0
    assert report["pings"] >= 1
    assert report["longest_ping_s"] > 0
    assert isinstance(report["dropped"], dict)
    assert report["command"].endswith("scripts/bench_reply_memory.py --clients 2 --reads 3 --mib 0.1 "
                                      "--seconds 1 --json")
