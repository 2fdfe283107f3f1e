"""Reading ahead: where the next queries start, and one speculative piece of work at a time, run
only while no assembly holds or waits for a turn."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from services.retrieval.query import last_sentence_end, settled
from services.retrieval.readahead import MOST_AHEAD, ReadAhead, Steps, next_queries

# Sentence ends of both languages, closers, line breaks and the characters around them.
TEXT = st.text(alphabet="林远灯塔走了ab 3.!?。！？；…」』”)\n", max_size=120)


def _changes(text: str, start: int, cursor: int, reach: int) -> list[int]:
    """The rule, looking at every cursor: where the last sentence end moves, through the first run
    of marks."""
    current = last_sentence_end(text[start:cursor])
    found: list[int] = []
    for position in range(cursor + 1, min(len(text), cursor + reach) + 1):
        end = last_sentence_end(text[start:position])
        if end is not None and end != current:
            found.append(position)
            current = end
            if len(found) == MOST_AHEAD:
                break
        elif found and text[position - 1] not in "。！？；….!?\n\"'”’)]」』）":
            break
    return found


@given(TEXT, st.data())
def test_next_queries_are_where_the_query_changes(text: str, data: st.DataObject) -> None:
    """next_queries looks only where a sentence end can start or end, and finds the cursors a
    look at every character finds: each where the last sentence end moves, nearest first, through
    the first sentence end's run of marks (at most MOST_AHEAD)."""
    cursor = data.draw(st.integers(0, len(text)))
    start = data.draw(st.integers(0, cursor))
    reach = data.draw(st.integers(1, 130))
    assert next_queries(text, start, cursor, reach=reach) == _changes(text, start, cursor, reach)


@given(TEXT, st.data())
def test_every_query_on_the_way_through_the_next_sentence_end_is_read_ahead(text: str,
                                                                           data: st.DataObject) -> None:
    """Moving the cursor one character at a time up to the last cursor read ahead, every query
    met that ends at a sentence end is the current one or one read ahead."""
    cursor = data.draw(st.integers(0, len(text)))
    ahead = next_queries(text, 0, cursor)
    known = {settled(text[:cursor])} | {settled(text[:c]) for c in ahead}
    for position in range(cursor, ahead[-1] + 1 if ahead else cursor):
        if last_sentence_end(text[:position]) is not None:
            assert settled(text[:position]) in known


def test_a_closing_quote_after_the_end_is_a_query_of_its_own() -> None:
    """“他走了。”她笑了。: inside the first sentence, the queries ahead end at 。 and then at ”."""
    text = "林远说：“他走了。”她笑了。"
    cursor = text.index("走")
    assert next_queries(text, 0, cursor) == [text.index("。") + 1, text.index("”") + 1]
    assert next_queries(text, 0, len(text)) == []


class Quiet:
    """A gate's quiet() under the test's control."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    async def __call__(self) -> None:
        await self.event.wait()


async def _quiet() -> None:
    """Always quiet."""


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_work_runs_only_once_quiet_and_once_per_key() -> None:
    """Scheduled work waits for quiet; scheduled again under the same key (the next keystroke in the
    same sentence), while waiting or after it ran, it does not run again."""
    quiet = Quiet()
    ahead = ReadAhead(quiet)
    runs: list[str] = []

    async def work() -> None:
        runs.append("a")

    ahead.schedule("a", work)
    await _settle()
    assert runs == []
    ahead.schedule("a", work)
    quiet.event.set()
    await _settle()
    ahead.schedule("a", work)
    await _settle()
    assert runs == ["a"]
    await ahead.aclose()


async def test_a_new_key_replaces_the_work_waiting() -> None:
    """Work under a new key (the writer moved on) replaces the work still waiting, which never runs."""
    quiet = Quiet()
    ahead = ReadAhead(quiet)
    runs: list[str] = []

    def work(name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            runs.append(name)
        return run

    ahead.schedule("a", work("a"))
    ahead.schedule("b", work("b"))
    quiet.event.set()
    await _settle()
    assert runs == ["b"]
    await ahead.aclose()


async def test_work_never_quiet_is_dropped_and_may_be_scheduled_again() -> None:
    """Work that found no quiet within ``wait`` seconds is dropped, and so is the work after a step
    that gave up (``False``); the same key may then be scheduled again, and runs."""
    quiet = Quiet()
    ahead = ReadAhead(quiet, wait=0)  # past its wait at the first step that is not quiet at once
    runs: list[str] = []

    async def work() -> None:
        runs.append("a")

    ahead.schedule("a", work)
    await _settle()
    quiet.event.set()
    await _settle()
    assert runs == []
    ahead.schedule("a", work)
    await _settle()
    assert runs == ["a"]

    async def gives_up() -> bool:
        runs.append("b")
        return False

    ahead.schedule("b", gives_up)
    await _settle()
    ahead.schedule("b", gives_up)
    await _settle()
    assert runs == ["a", "b", "b"]
    await ahead.aclose()


async def test_a_failure_is_logged_and_the_key_may_run_again() -> None:
    """Work that raises goes no further than a warning with the exception's type (never its text);
    the same key may be scheduled again."""
    ahead = ReadAhead(_quiet)
    calls: list[int] = []

    async def fails() -> None:
        calls.append(1)
        raise RuntimeError("林远的秘密")

    with capture_logs() as logs:
        ahead.schedule("a", fails)
        await _settle()
        ahead.schedule("a", fails)
        await _settle()
    assert calls == [1, 1]
    warnings = [e for e in logs if e.get("event") == "retrieval.read_ahead_failed"]
    assert [w["exc_type"] for w in warnings] == ["RuntimeError", "RuntimeError"]
    assert "林远" not in repr(logs)
    await ahead.aclose()


async def test_aclose_cancels_the_work_running() -> None:
    """aclose() cancels the work that is running and waits for it to end."""
    ahead = ReadAhead(_quiet)
    started, ended = asyncio.Event(), asyncio.Event()

    async def long() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            ended.set()

    ahead.schedule("a", long)
    await asyncio.wait_for(started.wait(), 1)
    await ahead.aclose()
    assert ended.is_set()


async def test_steps_of_a_search_somebody_waits_for_never_pause() -> None:
    """Without a pause, every step goes on at once."""
    assert Steps().wanted
    assert await asyncio.wait_for(Steps().go_on(), 1)


async def test_steps_read_ahead_go_on_when_the_pause_says_so_or_a_caller_joins() -> None:
    """A step read ahead waits for its pause: True goes on, False gives it up, a pause that fails
    gives it up too; a caller that joins (want) makes the waiting step go on at once."""
    async def yes() -> bool:
        return True

    async def no() -> bool:
        return False

    async def fails() -> bool:
        raise RuntimeError("pause failed")

    assert await Steps(yes).go_on()
    assert not await Steps(no).go_on()
    assert not await Steps(fails).go_on()
    never = asyncio.Event()

    async def held() -> bool:
        await never.wait()
        return False

    steps = Steps(held)
    waiting = asyncio.create_task(steps.go_on())
    await _settle()
    assert not waiting.done()
    steps.want()
    assert await asyncio.wait_for(waiting, 1)
    assert steps.wanted
