"""Gate: a few at work at once across all keys, the rest in arrival order, and how long that takes."""

from __future__ import annotations

import asyncio

import pytest

from services.concurrency.gate import Gate


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _work(gate: Gate, name: str, release: asyncio.Event, log: list[str]) -> None:
    async with gate.turn():
        log.append(name)
        await release.wait()


async def test_at_most_width_work_and_the_rest_go_in_arrival_order() -> None:
    """With a width of 2, two work, the others wait and get their turns in the order they came."""
    gate = Gate(2)
    releases = [asyncio.Event() for _ in range(5)]
    log: list[str] = []
    tasks = []
    for n in range(5):
        tasks.append(asyncio.create_task(_work(gate, str(n), releases[n], log)))
        await _settle()
    assert (log, gate.working, gate.waiting) == (["0", "1"], 2, 3)
    releases[1].set()
    await _settle()
    releases[0].set()
    await _settle()
    assert log == ["0", "1", "2", "3"]
    for release in releases:
        release.set()
    await asyncio.gather(*tasks)
    assert (log, gate.working, gate.waiting) == (["0", "1", "2", "3", "4"], 0, 0)


async def test_expected_time_is_the_queue_ahead_width_at_a_time_plus_one_turn() -> None:
    """A request arriving now is expected to be done after the waiting turns, ``width`` at a
    time, and then its own: (waiting / width + 1) x the recent duration of a turn."""
    gate = Gate(4, typical=0.1)
    assert gate.expected() == pytest.approx(0.1)
    release = asyncio.Event()
    tasks = [asyncio.create_task(_work(gate, str(n), release, [])) for n in range(10)]
    await _settle()
    assert (gate.working, gate.waiting) == (4, 6)
    assert gate.expected() == pytest.approx((6 / 4 + 1) * 0.1)
    release.set()
    await asyncio.gather(*tasks)


async def test_recent_duration_follows_finished_turns_only() -> None:
    """The running average moves a fifth of the way to each finished turn's duration; a turn that
    fails or is cancelled leaves it alone."""
    clock = FakeClock()
    gate = Gate(1, typical=0.05, clock=clock)
    async with gate.turn():
        clock.now += 1.05
    assert gate.recent == pytest.approx(0.25)

    async def failing() -> None:
        async with gate.turn():
            clock.now += 50.0
            raise ValueError("refused quickly or slowly, it says nothing about work")

    with pytest.raises(ValueError, match="refused"):
        await failing()
    never = asyncio.Event()
    cancelled = asyncio.create_task(_work(gate, "c", never, []))
    await _settle()
    clock.now += 50.0
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert gate.recent == pytest.approx(0.25)
    assert (gate.working, gate.waiting) == (0, 0)


async def test_a_cancelled_waiter_takes_no_turn() -> None:
    """A request cancelled while waiting never works, and the one behind it still gets its turn."""
    gate = Gate(1)
    first = asyncio.Event()
    log: list[str] = []
    tasks = [asyncio.create_task(_work(gate, "first", first, log))]
    await _settle()
    tasks.append(asyncio.create_task(_work(gate, "cancelled", asyncio.Event(), log)))
    done = asyncio.Event()
    done.set()
    tasks.append(asyncio.create_task(_work(gate, "last", done, log)))
    await _settle()
    tasks[1].cancel()
    await _settle()
    first.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[1], asyncio.CancelledError)
    assert log == ["first", "last"]
    assert (gate.working, gate.waiting) == (0, 0)


async def test_quiet_returns_once_no_work_holds_or_waits_for_a_turn() -> None:
    """quiet() returns at once on an idle gate; while work holds a turn and more waits, it waits,
    and returns only after the last turn is given back."""
    gate = Gate(1)
    await asyncio.wait_for(gate.quiet(), 1)
    releases = [asyncio.Event(), asyncio.Event()]
    log: list[str] = []
    tasks = [asyncio.create_task(_work(gate, str(n), releases[n], log)) for n in range(2)]
    await _settle()
    quiet = asyncio.create_task(gate.quiet())
    await _settle()
    releases[0].set()
    await _settle()
    assert (log, quiet.done()) == (["0", "1"], False)
    releases[1].set()
    await asyncio.wait_for(quiet, 1)
    await asyncio.gather(*tasks)
    assert (gate.working, gate.waiting) == (0, 0)


async def test_idle_says_whether_work_holds_or_waits_for_a_turn_from_any_thread() -> None:
    """idle() is true on an unused gate, false while work holds a turn or waits for one (asked
    from another thread too), and true again once the last turn is given back."""
    gate = Gate(1)
    assert gate.idle()
    releases = [asyncio.Event(), asyncio.Event()]
    log: list[str] = []
    tasks = [asyncio.create_task(_work(gate, str(n), releases[n], log)) for n in range(2)]
    await _settle()
    assert (gate.idle(), await asyncio.to_thread(gate.idle)) == (False, False)
    releases[0].set()
    await _settle()
    assert (log, gate.idle()) == (["0", "1"], False)
    releases[1].set()
    await asyncio.gather(*tasks)
    assert (gate.idle(), await asyncio.to_thread(gate.idle)) == (True, True)


async def test_rested_says_how_long_no_work_has_held_or_waited_for_a_turn() -> None:
    """rested(s) is true on a gate never used; false while work holds a turn and until ``s`` has
    passed since the last turn was given back; then true."""
    clock = FakeClock()
    gate = Gate(1, clock=clock)
    assert gate.rested(1.0)
    release = asyncio.Event()
    task = asyncio.create_task(_work(gate, "0", release, []))
    await _settle()
    clock.now += 5
    assert not gate.rested(1.0)
    release.set()
    await task
    clock.now += 0.9
    assert (gate.idle(), gate.rested(1.0)) == (True, False)
    clock.now += 0.1
    assert gate.rested(1.0)


async def test_a_cancelled_last_waiter_leaves_the_gate_quiet() -> None:
    """A request that gives up while waiting for its turn (its client went away) as the work ahead
    of it ends leaves nobody holding or waiting: quiet() returns, and the turn is free."""
    gate = Gate(1)
    release = asyncio.Event()
    log: list[str] = []
    holder = asyncio.create_task(_work(gate, "holder", release, log))
    await _settle()
    waiter = asyncio.create_task(_work(gate, "waiter", asyncio.Event(), log))
    await _settle()
    quiet = asyncio.create_task(gate.quiet())
    release.set()
    for _ in range(10):  # until the holder gave its turn to the waiter, which has not run yet
        if not gate.working:
            break
        await asyncio.sleep(0)
    assert (gate.working, gate.waiting, quiet.done()) == (0, 1, False)
    waiter.cancel()
    await asyncio.wait_for(quiet, 1)
    assert (gate.working, gate.waiting, log) == (0, 0, ["holder"])
    await holder
    async with gate.turn():
        assert gate.working == 1
