"""The in-memory chat session store: sessions, replies, the seed's context block, bounds and expiry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from services.chat.sessions import (
    ChatContext,
    MessageTooLong,
    NoUserMessage,
    SessionLimits,
    SessionStore,
    UnknownSession,
    ends_with_question,
)


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _store(clock: FakeClock | None = None, **limits: int | float) -> SessionStore:
    return SessionStore(SessionLimits(**limits), clock if clock is not None else FakeClock())  # type: ignore[arg-type]


def _say(store: SessionStore, session_id: str | None, text: str) -> str:
    return store.submit(session_id, None, text, text).id


# --- create and continue -------------------------------------------------------------------------


def test_submit_without_an_id_creates_a_session_with_a_fresh_random_id() -> None:
    """Each submit without a session id makes a new session: a 16-character URL-safe id, never reused."""
    store = _store()
    first = store.submit(None, "p1", "how about workspace workspace 5", "workspace 5")
    second = store.submit(None, None, "open chapter 5", "chapter 5")
    assert first.id != second.id
    assert len(first.id) == 16
    assert all(c.isalnum() or c in "-_" for c in first.id)
    assert (first.project_id, second.project_id) == ("p1", None)
    assert len(store) == 2
    [message] = first.messages
    assert (message.role, message.content, message.original, message.is_question) == (
        "user", "workspace 5", "how about workspace workspace 5", False)


def test_submit_with_an_id_continues_that_session() -> None:
    """A submit naming a live session appends to it; a project id given replaces the session's."""
    clock = FakeClock()
    store = _store(clock)
    session_id = store.submit(None, "p1", "打开第五章", "打开第五章").id
    clock.now = 3.0
    store.reply(session_id, "已打开第五章。")
    same = store.submit(session_id, None, "how about the next one", "the next one")
    assert same.id == session_id
    assert same.project_id == "p1"
    assert [m.content for m in same.messages] == ["打开第五章", "已打开第五章。", "the next one"]
    assert [m.at for m in same.messages] == [0.0, 3.0, 3.0]
    assert store.submit(session_id, "p2", "x", "x").project_id == "p2"
    assert len(store) == 1


def test_an_unknown_session_id_is_an_error_for_every_call() -> None:
    """An id the store never made is UnknownSession (a LookupError) everywhere, and creates nothing."""
    store = _store()
    calls: list[Callable[[], object]] = [
        lambda: store.submit("nope", None, "a", "a"),
        lambda: store.reply("nope", "a"),
        lambda: store.reset("nope"),
        lambda: store.get("nope"),
        lambda: store.context("nope"),
        lambda: store.summarize("nope", "s", 0),
    ]
    for call in calls:
        with pytest.raises(UnknownSession) as caught:
            call()
        assert isinstance(caught.value, LookupError)
        assert caught.value.session_id == "nope"
    assert len(store) == 0


def test_a_new_store_knows_no_session_of_another() -> None:
    """Sessions live in one store's memory: a store made afresh (a restarted server) knows none of them."""
    session_id = _say(_store(), None, "open chapter 5")
    with pytest.raises(UnknownSession):
        _store().get(session_id)


# --- replies ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "question"),
    [
        ("Do you want to open Workspace 5?", True),
        ("你是想打开第五章吗？", True),
        ("Did you mean \"Chapter 5?\"  \n", True),
        ("你是说「第五章？」 ", True),
        ("Which one: ‘ch05’ or ‘ch06?’\u3000", True),
        ("?", True),
        ("Opening chapter 5.", False),
        ("Is it 5? Opening it now.", False),
        ("", False),
        ("  \"  ", False),
    ],
)
def test_a_reply_without_a_flag_is_a_question_when_it_ends_with_a_question_mark(content: str,
                                                                                  question: bool) -> None:
    """With no flag, a reply is a question iff it ends with ``?`` or ``？`` (trailing space, quotes aside)."""
    store = _store()
    session_id = _say(store, None, "open chapter 5")
    message = store.reply(session_id, content)
    assert message.is_question is question
    assert ends_with_question(content) is question
    assert (message.role, message.content, message.original) == ("assistant", content, None)


def test_an_explicit_question_flag_wins_over_the_question_mark() -> None:
    """isQuestion given is taken as it is, whatever the reply ends with."""
    store = _store()
    session_id = _say(store, None, "open chapter 5")
    assert store.reply(session_id, "Opening chapter 5.", True).is_question is True
    assert store.reply(session_id, "Which chapter?", False).is_question is False


# --- the context block ----------------------------------------------------------------------------


def _twenty_messages(store: SessionStore, last_reply: str) -> str:
    """u1 a1 u2 a2 … u9 a9 u10: 20 messages, the last assistant reply before u10 being ``last_reply``."""
    session_id = _say(store, None, "open chapter 1")
    for n in range(1, 10):
        store.reply(session_id, last_reply if n == 9 else f"Do you want chapter {n}?")
        _say(store, session_id, f"open chapter {n + 1}")
    assert len(store.get(session_id).messages) == 19
    return session_id


def test_a_long_sessions_context_holds_exactly_the_last_eight_user_messages_before_the_current() -> None:
    """20 messages: the summary, user messages 2..9 (not 10, the current one), the last question, and u10."""
    store = _store()
    session_id = _twenty_messages(store, "Do you want to open chapter 9?")
    store.reply(session_id, "Opening chapter 10.")  # after the current message: no part in its context
    assert len(store.get(session_id).messages) == 20
    assert store.summarize(session_id, "User is trying to open a chapter by number.", 12)
    assert store.context(session_id) == ChatContext(
        summary="User is trying to open a chapter by number.",
        recent_user_messages=tuple(f"open chapter {n}" for n in range(2, 10)),
        last_assistant_question="Do you want to open chapter 9?",
        current="open chapter 10",
    )
    assert store.context(session_id, recent=6).recent_user_messages == tuple(
        f"open chapter {n}" for n in range(4, 10))


def test_the_last_assistant_message_is_in_the_context_only_when_it_was_a_question() -> None:
    """Only the last assistant message counts: an earlier question behind a plain reply is not carried."""
    store = _store()
    session_id = _twenty_messages(store, "Opened chapter 9.")
    context = store.context(session_id)
    assert context.last_assistant_question is None
    assert context.summary is None
    assert len(context.recent_user_messages) == 8


def test_a_session_of_user_messages_only_has_no_assistant_question() -> None:
    """Twenty user messages in a row: the eight before the current, oldest first, and no question."""
    store = _store()
    session_id = _say(store, None, "m1")
    for n in range(2, 21):
        _say(store, session_id, f"m{n}")
    context = store.context(session_id)
    assert context.recent_user_messages == tuple(f"m{n}" for n in range(12, 20))
    assert (context.current, context.last_assistant_question) == ("m20", None)


def test_the_first_message_has_an_empty_context_and_the_normalized_text_is_used() -> None:
    """The first message has nothing before it; the block carries normalized texts, not the originals."""
    store = _store()
    session_id = store.submit(None, None, "how about workspace workspace 5", "workspace 5").id
    assert store.context(session_id) == ChatContext(None, (), None, "workspace 5")
    store.reply(session_id, "你是想打开第五章吗？")
    store.submit(session_id, None, "请 打开 第五章", "打开 第五章")
    expected = ChatContext(None, ("workspace 5",), "你是想打开第五章吗？", "打开 第五章")
    assert store.context(session_id) == expected
    with pytest.raises(ValueError, match="negative"):
        store.context(session_id, recent=-1)


def test_a_session_without_a_user_message_has_no_context() -> None:
    """After a reset (or when only replies are left) there is no current message: NoUserMessage."""
    store = _store()
    session_id = _say(store, None, "open chapter 5")
    store.reset(session_id)
    with pytest.raises(NoUserMessage):
        store.context(session_id)
    store.reply(session_id, "Anything else?")
    with pytest.raises(NoUserMessage):
        store.context(session_id)


# --- bounds --------------------------------------------------------------------------------------


def test_past_the_session_limit_the_least_recently_used_session_goes() -> None:
    """With room for two sessions, a third evicts the least recently used (any call naming one uses it)."""
    store = _store(max_sessions=2)
    a = _say(store, None, "a")
    b = _say(store, None, "b")
    store.get(a)
    c = _say(store, None, "c")
    assert len(store) == 2
    with pytest.raises(UnknownSession):
        store.get(b)
    assert store.get(a).id == a
    assert store.get(c).id == c


def test_messages_per_session_are_bounded_oldest_first_and_the_summary_follows() -> None:
    """Past max_messages the oldest go first; summary_upto counts only the kept messages it covers."""
    store = _store(max_messages=3)
    session_id = _say(store, None, "m1")
    _say(store, session_id, "m2")
    assert store.summarize(session_id, "sum", 2)
    assert store.get(session_id).summary_upto == 2
    _say(store, session_id, "m3")
    _say(store, session_id, "m4")
    session = store.get(session_id)
    assert [m.content for m in session.messages] == ["m2", "m3", "m4"]
    assert session.summary_upto == 1
    _say(store, session_id, "m5")
    assert store.get(session_id).summary_upto == 0
    assert store.get(session_id).summary == "sum"


def test_bytes_per_session_are_bounded_oldest_first() -> None:
    """The UTF-8 bytes of a session's texts (original and normalized) stay under the bound, oldest dropped."""
    store = _store(max_message_chars=4, max_session_bytes=40)
    session_id = store.submit(None, None, "第五章", "第五章").id  # 18 bytes
    store.submit(session_id, None, "ab", "ab")  # 4 bytes: 22
    store.reply(session_id, "第六章？")  # 12 bytes: 34
    assert store.get(session_id).bytes == 34
    store.submit(session_id, None, "第七章", "第七章")  # 18 bytes: 52, the first message goes: 34
    session = store.get(session_id)
    assert [m.content for m in session.messages] == ["ab", "第六章？", "第七章"]
    assert session.bytes == 34 == sum(m.size for m in session.messages)


def test_a_message_over_the_length_limit_is_refused_and_records_nothing() -> None:
    """Longer than max_message_chars (as sent, normalized, or a reply) is MessageTooLong, a ValueError."""
    store = _store(max_message_chars=5, max_session_bytes=40)
    with pytest.raises(MessageTooLong) as caught:
        store.submit(None, None, "abcdef", "abc")
    assert isinstance(caught.value, ValueError)
    assert (caught.value.length, caught.value.limit) == (6, 5)
    assert len(store) == 0
    session_id = _say(store, None, "abcde")
    with pytest.raises(MessageTooLong):
        store.submit(session_id, None, "abc", "abcdef")
    with pytest.raises(MessageTooLong):
        store.reply(session_id, "是第六章吗？？")
    assert [m.content for m in store.get(session_id).messages] == ["abcde"]


def test_limits_are_checked_when_made() -> None:
    """Bounds must be positive, and a session's bytes must hold the longest message on its own."""
    assert SessionLimits() == SessionLimits(1_000, 200, 256 * 1024, 1800.0, 8_000, 600)
    for bad in ({"max_sessions": 0}, {"max_messages": 0}, {"idle_seconds": 0}, {"max_summary_chars": 0},
                {"max_message_chars": 10, "max_session_bytes": 79}):
        with pytest.raises(ValueError, match="must"):
            SessionLimits(**bad)
    SessionLimits(max_message_chars=10, max_session_bytes=80)


# --- expiry, reset, summary -----------------------------------------------------------------------


def test_idle_sessions_expire_and_are_then_unknown() -> None:
    """A session idle longer than idle_seconds goes at expire() (or any later call); a use keeps it."""
    clock = FakeClock()
    store = _store(clock, idle_seconds=60)
    old = _say(store, None, "a")
    kept = _say(store, None, "b")
    clock.now = 50.0
    store.reply(kept, "ok")
    clock.now = 60.0
    assert store.expire() == ()  # exactly idle_seconds is not longer than it
    clock.now = 61.0
    assert store.expire() == (old,)
    assert len(store) == 1
    with pytest.raises(UnknownSession):
        store.get(old)
    with pytest.raises(UnknownSession):
        _say(store, old, "again")
    clock.now = 200.0
    with pytest.raises(UnknownSession):  # expired at this call, without an expire() first
        store.get(kept)
    assert len(store) == 0


def test_reset_forgets_messages_and_summary_but_keeps_the_session() -> None:
    """reset empties the session (messages, bytes, summary), keeps its id, refuses a summary from before."""
    store = _store()
    session_id = _say(store, None, "open chapter 5")
    store.reply(session_id, "Chapter 5?")
    stale_upto = store.get(session_id).recorded
    assert store.summarize(session_id, "User asked for chapter 5.", stale_upto)
    session = store.reset(session_id)
    assert (session.messages, session.bytes, session.summary, session.summary_upto) == ((), 0, None, 0)
    assert not store.summarize(session_id, "User asked for chapter 5.", stale_upto)
    _say(store, session_id, "open chapter 7")
    assert store.context(session_id) == ChatContext(None, (), None, "open chapter 7")
    assert store.summarize(session_id, "User asked for chapter 7.", store.get(session_id).recorded)


def test_a_summary_is_capped_and_never_replaced_by_an_older_one() -> None:
    """A summary is cut to max_summary_chars; one covering fewer messages than the kept one is refused."""
    store = _store(max_summary_chars=10)
    session_id = _say(store, None, "m1")
    _say(store, session_id, "m2")
    assert store.summarize(session_id, "x" * 30, 2)
    assert store.get(session_id).summary == "x" * 10
    assert not store.summarize(session_id, "older", 1)
    assert store.summarize(session_id, "same", 2)
    assert store.get(session_id).summary == "same"
    with pytest.raises(ValueError, match="upto"):
        store.summarize(session_id, "future", 3)


# --- the invariant ----------------------------------------------------------------------------------


@dataclass
class _Model:
    """What one session should hold: every message since its last reset, and whether it is alive."""

    history: list[tuple[str, str, bool]] = field(default_factory=list)  # (role, content, is_question)
    alive: bool = True
    last_used: float = 0.0
    used_seq: int = 0


@dataclass(frozen=True)
class _Op:
    """One step of the property: a call on the store, or a move of the clock."""

    kind: str  # new, submit, reply, reset, tick, expire
    index: int = 0  # which session made so far (modulo their number)
    text: str = ""
    flag: bool | None = None
    seconds: float = 0.0


_TEXT = st.text(alphabet="ab ?？章”", max_size=6)
_OPS = st.one_of(
    st.builds(_Op, kind=st.just("new"), text=_TEXT),
    st.builds(_Op, kind=st.just("submit"), index=st.integers(0, 7), text=_TEXT),
    st.builds(_Op, kind=st.just("reply"), index=st.integers(0, 7), text=_TEXT,
              flag=st.sampled_from([None, True, False])),
    st.builds(_Op, kind=st.just("reset"), index=st.integers(0, 7)),
    st.builds(_Op, kind=st.just("tick"), seconds=st.sampled_from([0.0, 1.0, 4.0, 10.0, 11.0])),
    st.builds(_Op, kind=st.just("expire")),
)


def _call(store: SessionStore, kind: str, session_id: str | None, text: str) -> object:
    if kind == "reply":
        return store.reply(session_id or "none", text)
    if kind == "reset":
        return store.reset(session_id or "none")
    return store.submit(session_id, None, text, text)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(_OPS, max_size=40),
    max_sessions=st.integers(1, 3),
    max_messages=st.integers(1, 6),
    max_chars=st.integers(1, 5),
    extra_bytes=st.integers(0, 30),
    recent=st.integers(0, 4),
)
@example(  # idle exactly idle_seconds is not yet expired
    ops=[_Op("new", text="a"), _Op("tick", seconds=10.0), _Op("new", text="b"), _Op("tick", seconds=1.0),
         _Op("submit", index=0, text="c")],
    max_sessions=3, max_messages=3, max_chars=3, extra_bytes=0, recent=2,
)
def test_after_any_operations_every_bound_holds_and_the_context_is_the_messages_just_before(
        ops: list[_Op], max_sessions: int, max_messages: int, max_chars: int,
        extra_bytes: int, recent: int) -> None:
    """Whatever the sequence of submits, replies, resets, clock ticks and expiries: sessions, messages
    and bytes stay within their bounds; a session keeps the newest messages, dropping the oldest only as
    the bounds require; idle and least recently used sessions go; the context holds the ``recent`` user
    messages immediately before the latest one, in order, and the last assistant message before it iff
    it was a question."""
    clock = FakeClock()
    limits = SessionLimits(max_sessions=max_sessions, max_messages=max_messages, idle_seconds=10,
                           max_message_chars=max_chars, max_session_bytes=8 * max_chars + extra_bytes)
    store = SessionStore(limits, clock)
    models: dict[str, _Model] = {}
    ids: list[str] = []
    seq = 0

    def expire_model() -> None:
        for model in models.values():
            if model.alive and clock.now - model.last_used > limits.idle_seconds:
                model.alive = False

    def touch(model: _Model) -> None:
        nonlocal seq
        seq += 1
        model.last_used, model.used_seq = clock.now, seq

    for op in ops:
        kind, text = op.kind, op.text
        touched: str | None = None
        if kind == "tick":
            clock.now += op.seconds
            continue
        if kind == "expire":
            store.expire()
            expire_model()
            continue
        if len(text) > max_chars:
            target = ids[op.index % len(ids)] if kind == "reply" and ids else None
            with pytest.raises(MessageTooLong):  # refused before anything else: no expiry, no use
                _call(store, kind, target, text)
            continue
        expire_model()
        if kind == "new":
            alive = [m for m in models.values() if m.alive]
            if len(alive) >= max_sessions:
                min(alive, key=lambda m: m.used_seq).alive = False
            touched = store.submit(None, None, text, text).id
            ids.append(touched)
            models[touched] = _Model()
            models[touched].history.append(("user", text, False))
            touch(models[touched])
        else:
            if not ids:
                continue
            session_id = ids[op.index % len(ids)]
            model = models[session_id]
            if not model.alive:
                with pytest.raises(UnknownSession):
                    _call(store, kind, session_id, text)
                continue
            if kind == "submit":
                store.submit(session_id, None, text, text)
                model.history.append(("user", text, False))
            elif kind == "reply":
                flag = op.flag
                message = store.reply(session_id, text, flag)
                model.history.append(("assistant", text, ends_with_question(text) if flag is None else flag))
                assert message.is_question is model.history[-1][2]
            else:
                store.reset(session_id)
                model.history.clear()
            touch(model)
            touched = session_id

        assert len(store) == sum(m.alive for m in models.values()) <= max_sessions
        assert touched is not None
        model = models[touched]
        session = store.get(touched)
        kept = [(m.role, m.content, m.is_question) for m in session.messages]
        assert kept == model.history[len(model.history) - len(kept):]
        sizes = [2 * _size(c) if r == "user" else _size(c) for r, c, _ in model.history]
        assert session.bytes == sum(sizes[len(sizes) - len(kept):]) <= limits.max_session_bytes
        assert len(kept) <= max_messages
        if len(kept) < len(model.history):  # one more, older message would break a bound
            older = sizes[len(sizes) - len(kept) - 1]
            assert len(kept) + 1 > max_messages or session.bytes + older > limits.max_session_bytes
        users = [i for i, (role, _, _) in enumerate(kept) if role == "user"]
        if not users:
            with pytest.raises(NoUserMessage):
                store.context(touched, recent)
            continue
        context = store.context(touched, recent)
        current = users[-1]
        assert context.current == kept[current][1]
        before = [kept[i][1] for i in users[:-1]]
        assert list(context.recent_user_messages) == before[len(before) - min(recent, len(before)):]
        replies = [m for m in kept[:current] if m[0] == "assistant"]
        expected = replies[-1][1] if replies and replies[-1][2] else None
        assert context.last_assistant_question == expected

    for session_id, model in models.items():
        expire_model()
        if model.alive:
            store.get(session_id)
            touch(model)
        else:
            with pytest.raises(UnknownSession):
                store.get(session_id)
