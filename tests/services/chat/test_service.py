"""The chat manager: submits assemble the intent prompt; rolling summaries run behind, never ahead."""

from __future__ import annotations

import asyncio
import threading

import pytest

from services.chat.normalize import Normalizer
from services.chat.service import ChatService, ChatSettings, language_of
from services.chat.sessions import SessionLimits, SessionStore
from services.context.counting import CountCache
from services.errors import ChatBudgetTooSmall, ChatMessageTooLong, ChatSessionNotFound, ProjectNotFound
from services.profiles.plans import BuiltInPlans
from services.summaries.seam import Summarizer
from services.tokenizer.deferred import DeferredTokenizer
from services.tokenizer.resolve import resolve_tokenizer
from tests.services.chat.support import FakeWorkspace, ScriptedCompleter
from tests.services.context.factory import counter


def service(completer: ScriptedCompleter, threshold: int = 12) -> ChatService:
    return ChatService(store=SessionStore(SessionLimits()), normalizer=Normalizer.builtin(),
                       plans=BuiltInPlans(), counter=counter(), summarizer=Summarizer(completer),
                       workspace=FakeWorkspace({"p1": "Moonfall"}),
                       settings=ChatSettings(summary_threshold=threshold))


async def past_threshold(chat: ChatService) -> str:
    """A new session of 13 user messages, "open chapter 1" to "open chapter 13": one past the
    threshold of 12, with four messages out of the recent window."""
    sid = (await chat.submit(None, None, "open chapter 1")).session_id
    for n in range(2, 14):
        await chat.submit(sid, None, f"open chapter {n}")
    return sid


async def settle(chat: ChatService, session_id: str) -> None:
    async with asyncio.timeout(10):
        await chat.settled(session_id)


async def test_submit_normalizes_records_and_returns_the_context() -> None:
    """The message is normalized, recorded, and the context holds the earlier user messages."""
    chat = service(ScriptedCompleter())
    first = await chat.submit(None, "p1", "how about workspace workspace 5")
    assert (first.original, first.normalized) == ("how about workspace workspace 5", "workspace 5")
    second = await chat.submit(first.session_id, None, "请打开第五章")
    assert second.context.recent_user_messages == ("workspace 5",)
    assert second.context.current == "打开第五章"
    assert chat.session(first.session_id).project_id == "p1"
    assert second.assembly.prompt.endswith("Current user message: 打开第五章")


async def test_no_summary_until_the_threshold_is_passed() -> None:
    """Up to the threshold no summary is asked for."""
    completer = ScriptedCompleter()
    chat = service(completer, threshold=12)
    sid = (await chat.submit(None, None, "open chapter 1")).session_id
    for n in range(2, 13):
        await chat.submit(sid, None, f"open chapter {n}")
    await asyncio.sleep(0)
    assert completer.seen == []
    assert chat.session(sid).summary is None


async def test_a_clients_summary_covers_what_fell_out_and_is_used_next() -> None:
    """Past the threshold the messages before the recent window are summarized; the next submit
    carries that summary, from the client, with no fallback warning."""
    completer = ScriptedCompleter(answer="User opens chapters one by one.")
    chat = service(completer, threshold=12)
    sid = await past_threshold(chat)
    await settle(chat, sid)
    request = completer.seen[0]
    assert request.purpose == "chat.summary"
    told = request.messages[1].content
    assert "open chapter 4" in told
    assert "open chapter 5" not in told  # still in the window of the latest message
    turn = await chat.submit(sid, None, "chapter 14")
    assert turn.context.summary == "User opens chapters one by one."
    assert turn.summary_source == "client"
    assert not any(w.startswith("SUMMARY_FALLBACK") for w in turn.warnings)
    assert len(turn.context.recent_user_messages) == 8


async def test_the_next_summary_rolls_the_previous_one_forward() -> None:
    """A summary is refreshed once four more messages fell out of the window, with the previous
    summary and only the messages since."""
    completer = ScriptedCompleter(answer="Summary one.")
    chat = service(completer, threshold=12)
    sid = await past_threshold(chat)
    await settle(chat, sid)
    completer.answer = "Summary two."
    for n in range(14, 17):
        await chat.submit(sid, None, f"open chapter {n}")
        await settle(chat, sid)
    assert len(completer.seen) == 1  # three more out of the window: not yet
    await chat.submit(sid, None, "open chapter 17")
    await settle(chat, sid)
    assert len(completer.seen) == 2
    told = completer.seen[-1].messages[1].content
    assert "Previous summary: Summary one." in told
    assert "open chapter 4\n" not in told
    assert [f"open chapter {n}" in told for n in range(5, 9)] == [True] * 4
    assert "open chapter 9" not in told
    assert chat.session(sid).summary == "Summary two."


async def test_without_a_completion_the_extractive_summary_warns() -> None:
    """A completer with no answer: the extractive summary, and SUMMARY_FALLBACK on the next submit."""
    chat = service(ScriptedCompleter(fail="no_client"))
    sid = await past_threshold(chat)
    await settle(chat, sid)
    turn = await chat.submit(sid, None, "chapter 14")
    assert turn.summary_source == "extractive"
    assert turn.context.summary
    assert any(w.startswith("SUMMARY_FALLBACK") for w in turn.warnings)


async def test_submits_never_wait_for_a_summary() -> None:
    """While the client has not answered, submits return at once and say a summary is pending."""
    completer = ScriptedCompleter()
    completer.gate.clear()
    chat = service(completer)
    sid = await past_threshold(chat)
    await asyncio.sleep(0)
    turn = await asyncio.wait_for(chat.submit(sid, None, "chapter 14"), 5)
    assert turn.summary_pending is True
    assert turn.context.summary is None
    completer.gate.set()
    await settle(chat, sid)
    assert chat.session(sid).summary is not None
    await chat.aclose()


async def test_reset_drops_a_summary_being_made() -> None:
    """A reset while a summary is made: the summary never lands on the reset session."""
    completer = ScriptedCompleter()
    completer.gate.clear()
    chat = service(completer)
    sid = await past_threshold(chat)
    await asyncio.sleep(0)
    chat.reset(sid)
    completer.gate.set()
    async with asyncio.timeout(10):
        await chat.idle()
    assert chat.session(sid).summary is None
    assert chat.summary_state(sid) == (None, False)


async def test_errors_are_the_chats_own() -> None:
    """Unknown sessions and projects, overlong messages and a budget without room have codes."""
    chat = service(ScriptedCompleter())
    with pytest.raises(ChatSessionNotFound):
        await chat.submit("nope", None, "hi")
    with pytest.raises(ChatSessionNotFound):
        chat.reply("nope", "hi")
    with pytest.raises(ChatSessionNotFound):
        chat.reset("nope")
    with pytest.raises(ProjectNotFound):
        await chat.submit(None, "p-missing", "hi")
    with pytest.raises(ChatMessageTooLong) as long:
        await chat.submit(None, None, "x" * 8001)
    assert long.value.fields == {"length": 8001, "limit": 8000}
    with pytest.raises(ChatBudgetTooSmall) as small:
        await chat.submit(None, None, "chapter 5", token_budget=100)
    assert small.value.fields["tokenBudget"] == 100
    assert small.value.fields["fixedTokens"] > 100


def test_language_follows_the_newest_message_with_letters() -> None:
    """zh when the newest message with letters is mostly Chinese, en otherwise or with none."""
    assert language_of(["打开第五章", "open chapter 4"]) == "zh"
    assert language_of(["open chapter 5", "打开第四章"]) == "en"
    assert language_of(["5", "打开"]) == "zh"
    assert language_of(["123"]) == "en"


async def test_summary_state_of_forgotten_sessions_is_pruned() -> None:
    """Once the store no longer holds a session, its summary state goes when room is needed."""
    chat = ChatService(store=SessionStore(SessionLimits(max_sessions=2)), normalizer=Normalizer.builtin(),
                       plans=BuiltInPlans(), counter=counter(), summarizer=Summarizer(ScriptedCompleter()),
                       workspace=FakeWorkspace(), settings=ChatSettings(summary_threshold=1))
    ids = []
    for _ in range(4):  # each new session evicts the least recently used past two
        sid = (await chat.submit(None, None, "open chapter 1")).session_id
        for n in range(2, 11):
            await chat.submit(sid, None, f"open chapter {n}")
        await chat.settled(sid)
        ids.append(sid)
    assert ids[0] not in chat.store
    assert chat.summary_state(ids[0]) == (None, False)
    assert chat.summary_state(ids[-1])[0] == "client"


async def test_the_first_submit_builds_the_servers_encoding_on_a_worker_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's encoding is built on its first count (about 0.3 s): a chat submit that comes
    before anything counted builds it on a worker thread, not on the event loop, and counts with it."""
    builds: list[int] = []
    real = DeferredTokenizer._build

    def watched(self: DeferredTokenizer) -> object:
        builds.append(threading.get_ident())
        return real(self)

    monkeypatch.setattr(DeferredTokenizer, "_build", watched)
    deferred = CountCache(resolve_tokenizer("cl100k_base", deferred=True))
    assert not deferred.ready
    chat = ChatService(store=SessionStore(SessionLimits()), normalizer=Normalizer.builtin(),
                       plans=BuiltInPlans(), counter=deferred, summarizer=Summarizer(ScriptedCompleter()),
                       workspace=FakeWorkspace({"p1": "Moonfall"}), settings=ChatSettings())
    turn = await chat.submit(None, "p1", "open chapter 5")
    assert deferred.ready
    assert len(builds) == 1
    assert builds[0] != threading.get_ident()
    assert turn.assembly.token_count == counter().count(turn.assembly.prompt)
