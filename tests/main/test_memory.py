"""The process heap: the allocator's arena cap and giving freed memory back."""

from __future__ import annotations

import ctypes

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
