"""The process heap: the allocator's arena cap and giving freed memory back."""

from __future__ import annotations

import ctypes
import threading

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


def test_without_glibc_both_calls_do_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where there is no glibc (macOS, Windows) the cap says it did not take and the trim only
    collects; neither raises."""
    monkeypatch.setattr(memory, "_glibc", lambda: None)
    assert memory.limit_arenas() is False
    memory.collect_and_trim()


def test_freed_memory_is_returned_on_a_thread_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """return_freed_memory does not block its caller: the collection and trim run on a daemon
    thread named strata-trim."""
    ran = threading.Event()
    names: list[str] = []

    def collect_and_trim() -> None:
        names.append(threading.current_thread().name)
        ran.set()

    monkeypatch.setattr(memory, "collect_and_trim", collect_and_trim)
    memory.return_freed_memory()
    assert ran.wait(10)
    assert names == ["strata-trim"]
