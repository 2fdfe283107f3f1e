"""embed_batches: a pass's batches embedded on the spare core too, the same vectors in the same order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.retrieval.batches import Stopped, embed_batches

WAIT_S = 10.0  # a bound on waiting for the other thread, never reached when the code is right


class Recorder:
    """An encoder that records which thread embedded each batch; a batch's vectors are its texts
    upper-cased."""

    def __init__(self, gate: Callable[[int], None] | None = None) -> None:
        self.by_thread: dict[int, str] = {}
        self.calls: list[int] = []
        self.lock = threading.Lock()
        self._gate = gate

    def __call__(self, batch: tuple[int, list[str]]) -> list[str]:
        index, texts = batch
        with self.lock:
            self.calls.append(index)
            self.by_thread[index] = threading.current_thread().name
        if self._gate is not None:
            self._gate(index)
        return [text.upper() for text in texts]


def _batches(count: int) -> list[tuple[int, list[str]]]:
    return [(n, [f"s{n}a", f"s{n}b"]) for n in range(count)]


def _expected(batches: list[tuple[int, list[str]]]) -> list[list[str]]:
    return [[text.upper() for text in texts] for _, texts in batches]


def test_without_a_spare_core_every_batch_is_embedded_here_in_order() -> None:
    """No ``spare_core``: the calling thread embeds every batch, in order, and no helper starts."""
    batches = _batches(4)
    encoder = Recorder()
    helped: list[int] = []
    before = threading.active_count()
    out = list(embed_batches(encoder, batches, spare_core=None, stop=threading.Event(),
                             on_helped=helped.append))
    assert out == _expected(batches)
    assert encoder.calls == [0, 1, 2, 3]
    assert set(encoder.by_thread.values()) == {threading.current_thread().name}
    assert threading.active_count() == before
    assert helped == []


def test_with_the_spare_core_the_helper_takes_batches_from_the_end() -> None:
    """While the spare core is idle, the helper embeds batches from the end while this thread goes
    on from the start; the vectors come back in batch order and each batch is embedded once."""
    helper_started = threading.Event()

    def gate(index: int) -> None:
        if threading.current_thread().name == "strata-index-helper":
            helper_started.set()
        else:  # this thread waits until the helper has taken a batch, so both surely work
            assert helper_started.wait(WAIT_S)

    batches = _batches(6)
    encoder = Recorder(gate)
    helped: list[int] = []
    out = list(embed_batches(encoder, batches, spare_core=lambda: True, stop=threading.Event(),
                             on_helped=helped.append))
    assert out == _expected(batches)
    assert sorted(encoder.calls) == list(range(6))
    assert encoder.by_thread[5] == "strata-index-helper"
    assert encoder.by_thread[0] == threading.current_thread().name
    assert helped == [sum(1 for name in encoder.by_thread.values() if name == "strata-index-helper")]
    assert 1 <= helped[0] <= 5


def test_the_helper_stops_taking_batches_once_the_core_is_wanted() -> None:
    """The core is asked for before the helper starts and before each of its batches: answered no
    after the helper's first, it embeds only that one (the last), and this thread all the others."""
    answers = iter([True, True])
    taken = threading.Event()

    def gate(index: int) -> None:
        if threading.current_thread().name == "strata-index-helper":
            taken.set()
        else:
            assert taken.wait(WAIT_S)

    batches = _batches(5)
    encoder = Recorder(gate)
    out = list(embed_batches(encoder, batches, spare_core=lambda: next(answers, False),
                             stop=threading.Event()))
    assert out == _expected(batches)
    assert [i for i, name in encoder.by_thread.items() if name == "strata-index-helper"] == [4]


def test_a_failure_in_the_helper_is_raised_at_its_batch_turn() -> None:
    """A batch the helper failed to embed raises its error to the caller when that batch's turn
    comes, after the batches before it were yielded."""
    class Boom(Exception):
        pass

    helper_took = threading.Event()

    def embed(batch: tuple[int, list[str]]) -> list[str]:
        if threading.current_thread().name == "strata-index-helper":
            helper_took.set()
            raise Boom
        assert helper_took.wait(WAIT_S)  # this thread's first batch waits until the helper took one
        return [text.upper() for text in batch[1]]

    batches = _batches(3)
    got: list[Any] = []

    def read_all() -> None:
        for vectors in embed_batches(embed, batches, spare_core=lambda: True, stop=threading.Event()):
            got.append(vectors)

    with pytest.raises(Boom):
        read_all()
    assert got == _expected(batches)[:len(got)]
    assert len(got) < 3


def test_stop_ends_the_pass_and_the_helper_with_it() -> None:
    """``stop`` set between batches raises Stopped at the next one, and the helper has ended by
    the time the caller sees it."""
    stop = threading.Event()
    batches = _batches(8)

    def embed(batch: tuple[int, list[str]]) -> list[str]:
        if batch[0] == 0:
            stop.set()
        return [text.upper() for text in batch[1]]

    embedded = embed_batches(embed, batches, spare_core=lambda: True, stop=stop)
    with pytest.raises(Stopped):
        list(embedded)
    assert not any(t.name == "strata-index-helper" for t in threading.enumerate())


def test_leaving_early_waits_for_the_helpers_batch() -> None:
    """A caller that stops reading (an error while storing a batch) closes the generator, and the
    helper's batch under way has ended when close returns: nothing embeds past its pass."""
    entered, finished = threading.Event(), threading.Event()

    def embed(batch: tuple[int, list[str]]) -> list[str]:
        if threading.current_thread().name == "strata-index-helper":
            entered.set()
            time.sleep(0.2)  # a batch under way when the pass is left
            finished.set()
        else:
            assert entered.wait(WAIT_S)
        return [text.upper() for text in batch[1]]

    batches = _batches(6)
    embedded = embed_batches(embed, batches, spare_core=lambda: True, stop=threading.Event())
    assert next(embedded) == _expected(batches)[0]
    embedded.close()
    assert finished.is_set()
    assert not any(t.name == "strata-index-helper" for t in threading.enumerate())


def test_no_helper_starts_when_the_core_is_wanted_at_the_start_or_cannot_be_asked() -> None:
    """A pass whose spare core is busy when it begins, or whose question fails, embeds every batch
    on its own thread, in order, and starts no helper."""
    def fails() -> bool:
        raise RuntimeError("no answer")

    batches = _batches(4)
    for spare_core in (lambda: False, fails):
        encoder = Recorder()
        helped: list[int] = []
        out = list(embed_batches(encoder, batches, spare_core=spare_core, stop=threading.Event(),
                                 on_helped=helped.append))
        assert out == _expected(batches)
        assert set(encoder.by_thread.values()) == {threading.current_thread().name}
        assert helped == []


@settings(max_examples=60, deadline=None)
@given(count=st.integers(0, 9), answers=st.lists(st.booleans(), max_size=12))
def test_whatever_the_spare_core_says_the_vectors_are_the_sequential_ones(count: int,
                                                                          answers: list[bool]) -> None:
    """For any number of batches and any answers of the spare core over time, the yielded vectors
    are exactly those of embedding each batch in order, and each batch is embedded once."""
    said = iter(answers)
    batches = _batches(count)
    encoder = Recorder()
    out = list(embed_batches(encoder, batches, spare_core=lambda: next(said, False),
                             stop=threading.Event()))
    assert out == _expected(batches)
    assert sorted(encoder.calls) == list(range(count))
