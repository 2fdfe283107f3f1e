"""KeyedLimiter: per-key slots, a bounded queue, backpressure, and clean bookkeeping."""

from __future__ import annotations

import asyncio

import pytest

from services.concurrency.limiter import KeyedLimiter
from services.errors import Backpressure


async def _hold(limiter: KeyedLimiter, key: object, release: asyncio.Event, log: list[str],
                name: str) -> None:
    async with limiter.slot(key):
        log.append(f"in:{name}")
        await release.wait()
    log.append(f"out:{name}")


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_at_most_per_key_run_at_once_and_the_next_runs_when_one_leaves() -> None:
    """With two slots, a third request waits until one holder leaves, then runs."""
    limiter = KeyedLimiter(per_key=2, queue=4)
    release = [asyncio.Event() for _ in range(3)]
    log: list[str] = []
    tasks = [asyncio.create_task(_hold(limiter, "doc", release[n], log, str(n))) for n in range(3)]
    await _settle()
    assert log == ["in:0", "in:1"]
    release[0].set()
    await _settle()
    assert log == ["in:0", "in:1", "out:0", "in:2"]
    release[1].set()
    release[2].set()
    await asyncio.gather(*tasks)
    assert limiter._slots == {}


async def test_full_queue_is_refused_at_once_with_a_retry_hint() -> None:
    """Past per_key running plus queue waiting, a request gets CONTEXT_BACKPRESSURE immediately."""
    limiter = KeyedLimiter(per_key=2, queue=1, typical_ms=50.0)
    release = asyncio.Event()
    log: list[str] = []
    tasks = [asyncio.create_task(_hold(limiter, "doc", release, log, str(n))) for n in range(3)]
    await _settle()
    with pytest.raises(Backpressure) as raised:
        async with limiter.slot("doc"):
            pytest.fail("a refused request must not run")
    assert raised.value.data_code == "CONTEXT_BACKPRESSURE"
    # one queued: (1 + 1) / 2 slots -> one round of 50 ms
    assert raised.value.fields == {"retryAfterMs": 50, "limit": 2, "queue": 1}
    release.set()
    await asyncio.gather(*tasks)
    assert log.count("out:0") + log.count("out:1") + log.count("out:2") == 3
    assert limiter._slots == {}


async def test_retry_hint_grows_with_the_queue() -> None:
    """retryAfterMs is the number of rounds the queue needs, times the typical assembly time."""
    limiter = KeyedLimiter(per_key=1, queue=3, typical_ms=40.0)
    release = asyncio.Event()
    tasks = [asyncio.create_task(_hold(limiter, "doc", release, [], str(n))) for n in range(4)]
    await _settle()
    with pytest.raises(Backpressure) as raised:
        async with limiter.slot("doc"):
            pass
    assert raised.value.fields["retryAfterMs"] == 4 * 40
    release.set()
    await asyncio.gather(*tasks)


async def test_waiting_past_the_deadline_is_backpressure() -> None:
    """A queued request whose wait outlasts max_wait after all gives up with CONTEXT_BACKPRESSURE,
    hinting at the wait still expected then."""
    clock = FakeClock()
    limiter = KeyedLimiter(per_key=1, queue=2, max_wait=0.05, pace=lambda: 0.04, clock=clock)
    release = asyncio.Event()
    holder = asyncio.create_task(_hold(limiter, "doc", release, [], "0"))
    await _settle()
    with pytest.raises(Backpressure) as raised:
        async with limiter.slot("doc"):  # expected to wait 40 ms, so it queues; the holder stays
            pass
    assert raised.value.fields == {"retryAfterMs": 40, "limit": 1, "queue": 2}
    assert limiter._slots["doc"].holders == 1
    release.set()
    await holder
    assert limiter._slots == {}


async def test_different_keys_never_wait_on_each_other() -> None:
    """A full key does not slow another: the other key's request runs at once."""
    limiter = KeyedLimiter(per_key=1, queue=0, max_wait=5.0)
    release = asyncio.Event()
    log: list[str] = []
    busy = asyncio.create_task(_hold(limiter, ("p1", "a.md"), release, log, "a"))
    await _settle()
    async with asyncio.timeout(0.5), limiter.slot(("p1", "b.md")):
        log.append("in:b")
    with pytest.raises(Backpressure):
        async with limiter.slot(("p1", "a.md")):
            pass
    assert log == ["in:a", "in:b"]
    release.set()
    await busy
    assert limiter._slots == {}


async def test_cancelling_a_waiter_frees_its_place_in_the_queue() -> None:
    """A cancelled waiter leaves the queue, so the next request can queue and later run."""
    limiter = KeyedLimiter(per_key=1, queue=1)
    release = asyncio.Event()
    log: list[str] = []
    holder = asyncio.create_task(_hold(limiter, "doc", release, log, "holder"))
    await _settle()
    waiter = asyncio.create_task(_hold(limiter, "doc", asyncio.Event(), log, "waiter"))
    await _settle()
    assert limiter._slots["doc"].holders == 2
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limiter._slots["doc"].holders == 1
    third = asyncio.create_task(_hold(limiter, "doc", asyncio.Event(), log, "third"))
    await _settle()
    release.set()
    await holder
    await _settle()
    assert log == ["in:holder", "out:holder", "in:third"]
    third.cancel()
    with pytest.raises(asyncio.CancelledError):
        await third
    assert limiter._slots == {}


async def test_a_failing_body_releases_its_slot() -> None:
    """An exception inside the slot propagates and the slot is free again."""
    limiter = KeyedLimiter(per_key=1, queue=0)
    with pytest.raises(ValueError, match="boom"):
        async with limiter.slot("doc"):
            raise ValueError("boom")
    assert limiter._slots == {}
    async with asyncio.timeout(0.5), limiter.slot("doc"):
        assert limiter._slots["doc"].holders == 1


async def test_a_burst_sees_itself_and_bookkeeping_returns_to_empty() -> None:
    """Of a burst of 20 on one key with 2 slots and 3 queued, exactly 5 run and 15 are refused;
    afterwards no key is left behind."""
    limiter = KeyedLimiter(per_key=2, queue=3, max_wait=5.0)
    running = 0
    peak = 0

    async def request() -> str:
        nonlocal running, peak
        try:
            async with limiter.slot("doc"):
                running += 1
                peak = max(peak, running)
                await asyncio.sleep(0.01)
                running -= 1
        except Backpressure:
            return "refused"
        return "ran"

    results = await asyncio.gather(*(request() for _ in range(20)))
    assert (results.count("ran"), results.count("refused"), peak) == (5, 15, 2)
    assert limiter._slots == {}


async def test_a_waiter_cancelled_just_as_it_is_woken_passes_the_slot_on() -> None:
    """If the slot is handed to a waiter that is cancelled before it runs, the next waiter gets it."""
    limiter = KeyedLimiter(per_key=1, queue=2, max_wait=5.0)
    release = asyncio.Event()
    log: list[str] = []
    woken: list[asyncio.Task[None]] = []

    async def holder() -> None:
        async with limiter.slot("doc"):
            await release.wait()
        woken[0].cancel()  # the slot was just handed to this waiter; it has not run yet

    first = asyncio.create_task(holder())
    await _settle()
    woken.append(asyncio.create_task(_hold(limiter, "doc", asyncio.Event(), log, "woken")))
    await _settle()
    done = asyncio.Event()
    done.set()
    last = asyncio.create_task(_hold(limiter, "doc", done, log, "last"))
    await _settle()
    release.set()
    async with asyncio.timeout(1.0):
        await first
        await last
    with pytest.raises(asyncio.CancelledError):
        await woken[0]
    assert log == ["in:last", "out:last"]
    assert limiter._slots == {}


async def test_a_wait_past_the_deadline_is_refused_at_once() -> None:
    """A request whose expected wait for a slot exceeds max_wait is refused on arrival, not after
    waiting: here one hold is expected to take 1.5 s, so the second in the queue (3 s) is refused
    while the holder and the first in the queue are still where they were."""
    clock = FakeClock()
    limiter = KeyedLimiter(per_key=1, queue=8, max_wait=2.0, pace=lambda: 1.5, clock=clock)
    release = asyncio.Event()
    log: list[str] = []
    holder = asyncio.create_task(_hold(limiter, "doc", release, log, "holder"))
    await _settle()
    first = asyncio.create_task(_hold(limiter, "doc", asyncio.Event(), log, "first"))
    await _settle()
    refused = asyncio.create_task(_hold(limiter, "doc", asyncio.Event(), log, "refused"))
    await _settle()
    assert refused.done()
    error = refused.exception()
    assert isinstance(error, Backpressure)
    assert error.fields == {"retryAfterMs": 3000, "limit": 1, "queue": 8}
    assert not first.done()
    assert (log, limiter._slots["doc"].holders) == (["in:holder"], 2)
    release.set()
    await holder
    await _settle()
    assert log == ["in:holder", "out:holder", "in:first"]
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert limiter._slots == {}


async def test_expected_wait_counts_down_each_holders_expected_end() -> None:
    """Each holder is expected to end ``pace()`` after it got its slot; a newcomer with ``p``
    queued ahead waits for the ``p % per_key``-th earliest end plus ``p // per_key`` more holds."""
    clock = FakeClock()
    pace = [1.0]
    limiter = KeyedLimiter(per_key=2, queue=8, max_wait=2.0, pace=lambda: pace[0], clock=clock)
    release = asyncio.Event()
    tasks = [asyncio.create_task(_hold(limiter, "doc", release, [], "a"))]  # ends at +1.0
    await _settle()
    clock.now += 0.5
    pace[0] = 2.0
    tasks.append(asyncio.create_task(_hold(limiter, "doc", release, [], "b")))  # ends at +2.5
    await _settle()
    clock.now += 0.3  # a has 0.2 s left, b 1.7 s
    for name in ("q1", "q2"):  # 0.2 s and 1.7 s: both within max_wait, so both queue
        tasks.append(asyncio.create_task(_hold(limiter, "doc", release, [], name)))
        await _settle()
    assert limiter._slots["doc"].holders == 4
    with pytest.raises(Backpressure) as raised:  # 0.2 s plus one whole hold of 2.0 s
        async with limiter.slot("doc"):
            pass
    assert raised.value.fields["retryAfterMs"] == 2200
    release.set()
    await asyncio.gather(*tasks)
    assert limiter._slots == {}


async def test_a_holder_past_its_expected_end_counts_as_half_a_hold_more() -> None:
    """A holder that has outlasted its expected end is taken to need half a hold more, not zero:
    with holds now expected to take 3 s, the next request would wait 1.5 s, past a 1 s deadline."""
    clock = FakeClock()
    pace = [1.0]
    limiter = KeyedLimiter(per_key=1, queue=8, max_wait=1.0, pace=lambda: pace[0], clock=clock)
    release = asyncio.Event()
    holder = asyncio.create_task(_hold(limiter, "doc", release, [], "h"))
    await _settle()
    clock.now += 2.0
    pace[0] = 3.0
    with pytest.raises(Backpressure) as raised:
        async with limiter.slot("doc"):
            pass
    assert raised.value.fields["retryAfterMs"] == 1500
    release.set()
    await holder


async def test_without_a_pace_the_recent_hold_time_is_the_estimate() -> None:
    """By default a hold is expected to last as long as recent holds did: a running average that
    starts at typical_ms and moves a fifth of the way to each finished hold."""
    clock = FakeClock()
    limiter = KeyedLimiter(per_key=1, queue=0, typical_ms=50.0, clock=clock)
    assert limiter.recent_hold == 0.05
    async with limiter.slot("doc"):
        clock.now += 1.05
    assert limiter.recent_hold == pytest.approx(0.25)

    async def failing() -> None:
        async with limiter.slot("doc"):
            clock.now += 100.0
            raise RuntimeError("a failed hold")

    with pytest.raises(RuntimeError):
        await failing()
    assert limiter.recent_hold == pytest.approx(0.25)  # failures say nothing about hold times
    release = asyncio.Event()
    holder = asyncio.create_task(_hold(limiter, "doc", release, [], "h"))
    await _settle()
    with pytest.raises(Backpressure) as raised:  # queue of 0: full; its wait would be one hold
        async with limiter.slot("doc"):
            pass
    assert raised.value.fields["retryAfterMs"] == 250
    release.set()
    await holder


async def test_a_slot_just_handed_to_a_queued_request_counts_as_a_hold_starting_now() -> None:
    """Between a holder leaving and the queued request it woke starting, that request holds the
    slot (a hold starting now) and is no longer queued: a newcomer refused by the full queue is
    told to retry when that hold ends (1 s), not when the other, long hold does (4.9 s)."""
    clock = FakeClock()
    pace = [0.1]
    limiter = KeyedLimiter(per_key=2, queue=1, max_wait=2.0, pace=lambda: pace[0], clock=clock)
    short, long_, never = asyncio.Event(), asyncio.Event(), asyncio.Event()
    log: list[str] = []
    tasks = [asyncio.create_task(_hold(limiter, "doc", short, log, "short"))]  # ends in 0.1 s
    await _settle()
    pace[0] = 4.9
    tasks.append(asyncio.create_task(_hold(limiter, "doc", long_, log, "long")))  # ends in 4.9 s
    await _settle()
    pace[0] = 1.0
    tasks.append(asyncio.create_task(_hold(limiter, "doc", never, log, "queued")))  # waits 0.1 s
    await _settle()
    short.set()
    await asyncio.sleep(0)  # "short" leaves and wakes "queued", which has not run yet
    assert (log, len(limiter._slots["doc"].ends)) == (["in:short", "in:long", "out:short"], 1)
    with pytest.raises(Backpressure) as raised:
        async with limiter.slot("doc"):
            pass
    assert raised.value.fields["retryAfterMs"] == 1000
    await _settle()
    assert log[-1] == "in:queued"
    long_.set()
    tasks[2].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert limiter._slots == {}
