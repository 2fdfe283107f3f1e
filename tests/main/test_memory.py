"""The process heap: the allocator's arena cap and giving freed memory back."""

from __future__ import annotations

import ctypes
import gc

import pytest

from main import memory


def _glibc() -> bool:
    try:
        return hasattr(ctypes.CDLL("libc.so.6"), "mallopt")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc(), reason="the arena cap is glibc's")
def test_the_arena_cap_takes_on_glibc() -> None:
    """On glibc mallopt accepts the cap (it returns 1), and the call can be repeated."""
    assert memory.limit_arenas() is True
    assert memory.limit_arenas(memory.MAX_ARENAS) is True


@pytest.mark.skipif(not _glibc(), reason="the mmap threshold is glibc's")
def test_the_fixed_mmap_threshold_takes_on_glibc() -> None:
    """On glibc mallopt accepts the fixed threshold (it returns 1), and the call can be repeated."""
    assert memory.fix_mmap_threshold() is True
    assert memory.fix_mmap_threshold(memory.MMAP_THRESHOLD) is True


def test_without_glibc_both_calls_do_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where there is no glibc (macOS, Windows) the cap says it did not take and the trim only
    collects; neither raises."""
    monkeypatch.setattr(memory, "_glibc", lambda: None)
    assert memory.limit_arenas() is False
    assert memory.fix_mmap_threshold() is False
    memory.collect_and_trim()


def test_full_collections_wait_for_a_hundred_collections_of_the_middle_generation() -> None:
    """With the server's thresholds the collector's full pass (over every long-lived object: a
    100-300 ms stall once the caches are full) runs only after a hundred collections of the middle
    generation, however many objects survive into the oldest; CPython's own would run it after ten."""
    started: list[int] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    before = gc.get_threshold()
    gc.callbacks.append(record)
    try:
        memory.space_full_collections()
        gc.collect()
        started.clear()
        kept: list[list[list[int]]] = []
        while 2 not in started and started.count(1) < 200:
            kept.append([[] for _ in range(700)])  # all survive: the oldest generation grows
        assert 2 in started, "no full pass after 200 collections of the middle generation"
        assert started[:started.index(2)].count(1) >= 100
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*before)
