"""CharacterChat from real parts (SQLite, Chroma with the words encoder, the knowledge graph, the
context service and the profiles' plans) and a scripted completer: templates, creation, reminders,
keyframes, extraction, the assembled prompt and its budget, background warnings, deletion and
shutdown (seed 003)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.characters import blocks
from services.characters.conversations import Conversation, Role
from services.characters.display import display
from services.characters.options import ConversationOptions
from services.characters.service import MAX_MESSAGE_CHARS, Added, Event, template_names
from services.context.counting import CountCache
from services.errors import (
    CharacterNotFound,
    ChatMessageTooLong,
    ConversationNotFound,
    InputTooLarge,
    InvalidInput,
    ProfileNotFound,
)
from services.projects import ProjectRecord
from services.store import Database
from services.tokenizer import resolve_tokenizer
from tests.services.characters.support import Parts, PurposeCompleter, Unavailable, character_chat

KEYFRAME = "character.keyframe"
MEMORIES = "character.memories"
# Background work off unless a test turns it on.
QUIET: dict[str, Any] = {"remindEvery": 0, "keyframeEvery": 0, "extractMemories": False}
COUNTER = CountCache(resolve_tokenizer())  # the projects' tokenizer (gpt-4's cl100k_base)
SEPARATORS = 8  # tokens the prompt's section separators may add, at most, around the newest message
PROPERTY = settings(max_examples=30, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@dataclass(frozen=True)
class Pair:
    project_id: str
    su: int  # the system character, "Su Wan"
    han: int  # the user character, "Han Li"


@pytest.fixture
async def parts(database: Database, chroma: Any) -> AsyncIterator[Parts]:
    built = character_chat(database, chroma, wait=10.0)
    try:
        yield built
    finally:
        await built.chat.aclose()


@pytest.fixture
async def pair(parts: Parts, project: ProjectRecord) -> Pair:
    settings_ = await parts.projects.get_settings(project.id)
    await parts.projects.update_settings(project.id, settings_.version, language="en")
    su, _ = await parts.kg.upsert(project.id, kind="character", name="Su Wan",
                                  description="A lighthouse keeper.\nPersonality: quiet, watchful")
    han, _ = await parts.kg.upsert(project.id, kind="character", name="Han Li",
                                   description="A shipwright's son.")
    return Pair(project.id, su.id, han.id)


async def start(parts: Parts, pair: Pair, template: str = "Base Roleplay", **options: Any) -> Conversation:
    return await parts.chat.create(pair.project_id, pair.su, pair.han, template,
                                   ConversationOptions.model_validate({**QUIET, **options}))


async def talk(parts: Parts, conversation: Conversation, *lines: str) -> list[Added]:
    """Add ``lines`` alternating user and assistant, the user first."""
    roles: tuple[Role, Role] = ("user", "assistant")
    return [await parts.chat.add(conversation.id, roles[n % 2], line) for n, line in enumerate(lines)]


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "not in time"
        await asyncio.sleep(0.01)


def memory_json(*summaries: str, memory_type: str = "FACT") -> str:
    return json.dumps([{"memoryType": memory_type, "importance": 6, "summary": s, "content": f"About: {s}"}
                       for s in summaries])


# --- template names ----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("SMS Chat", ["SMS Chat", "sms-chat"]),
    ("sms_chat", ["sms_chat", "sms-chat"]),
    ("  Base   Roleplay ", ["Base   Roleplay", "base-roleplay"]),
    ("base-roleplay", ["base-roleplay"]),
    ("my_sms", ["my_sms", "my-sms"]),
])
def test_template_names_are_the_name_then_its_profile_spelling(name: str, expected: list[str]) -> None:
    """A template name means itself first (a project's profile named with an underscore is kept as
    is), then its display spelling as a profile name: lower case, spaces and underscores as dashes."""
    assert template_names(name) == expected


@given(st.text(alphabet=st.sampled_from("abcXYZ09 _-\t苏"), max_size=24))
def test_template_names_start_with_the_name_and_end_normalized(name: str) -> None:
    """For any name: the stripped name comes first, no name twice, and the last is a fixed point:
    no space, no underscore, lower case, and its own only meaning."""
    names = template_names(name)
    assert names[0] == name.strip()
    assert len(names) == len(set(names))
    last = names[-1]
    assert not any(c.isspace() for c in last)
    assert "_" not in last
    assert last == last.lower()
    assert template_names(last) == [last]


# --- create --------------------------------------------------------------------------------------


async def test_create_stores_the_profile_name_and_the_options(parts: Parts, pair: Pair) -> None:
    """A display name or a spelling with underscores resolves to the built-in profile's name; the
    conversation starts empty between the two characters with its options in camelCase."""
    for template, stored in (("SMS Chat", "sms-chat"), ("sms_chat", "sms-chat"), ("Base Roleplay",
                                                                                  "base-roleplay")):
        created = await start(parts, pair, template, rating="M")
        assert (created.template, created.project_id, created.system_character_id,
                created.user_character_id, created.message_count) == (stored, pair.project_id, pair.su,
                                                                      pair.han, 0)
        assert created.options["rating"] == "M"
        assert created.options["remindEvery"] == 0
        assert created.options == ConversationOptions.model_validate(created.options).model_dump(
            mode="json", by_alias=True)


async def test_a_project_profile_name_is_kept_as_is(parts: Parts, pair: Pair) -> None:
    """A project's profile named ``my_sms`` is the template ``my_sms``, even when ``my-sms`` also
    exists; a display name ("My SMS") finds the dashed one."""
    for name in ("my_sms", "my-sms"):
        await parts.profiles.put(pair.project_id, name, {"schema": "strata.profile/1", "name": name,
                                                         "extends": "sms-chat"})
    assert (await start(parts, pair, "my_sms")).template == "my_sms"
    assert (await start(parts, pair, "My SMS")).template == "my-sms"


async def test_create_refuses_characters_the_project_does_not_have(parts: Parts, pair: Pair,
                                                                  other_project: ProjectRecord) -> None:
    """A system or user id naming no entity of the project (absent, or another project's) is
    CharacterNotFound with that id, and no conversation is made."""
    stranger, _ = await parts.kg.upsert(other_project.id, kind="character", name="Cy")
    for system, user, missing in ((999_999, pair.han, 999_999), (pair.su, 999_998, 999_998),
                                  (pair.su, stranger.id, stranger.id)):
        with pytest.raises(CharacterNotFound) as raised:
            await parts.chat.create(pair.project_id, system, user, "base-roleplay", ConversationOptions())
        assert raised.value.fields == {"characterId": missing}
    assert await parts.chat.conversations.list(pair.project_id) == []


async def test_create_refuses_an_unknown_template(parts: Parts, pair: Pair) -> None:
    """A name that is no built-in nor project profile, in any spelling, is ProfileNotFound."""
    for template in ("Nope", "base roleplay 2", "SMS_Chatter"):
        with pytest.raises(ProfileNotFound):
            await start(parts, pair, template)
    assert await parts.chat.conversations.list(pair.project_id) == []


# --- add: reminders, limits, due flags -----------------------------------------------------------


@PROPERTY
@given(roles=st.lists(st.sampled_from(["user", "assistant", "system"]), min_size=1, max_size=12),
       remind=st.integers(0, 4), keyframe=st.integers(0, 4), extraction=st.integers(0, 3),
       extract=st.booleans())
async def test_reminders_keyframes_and_extractions_follow_their_periods(
        parts: Parts, pair: Pair, roles: list[Role], remind: int, keyframe: int, extraction: int,
        extract: bool) -> None:
    """A user message gets a reminder block once ``remindEvery`` messages passed since the last
    reminder (or the start), an assistant or system message never; ``keyframeDue`` every
    ``keyframeEvery`` messages (keyframes not counted); ``extractionDue`` on every
    ``memoryExtractionEvery``-th assistant message, only with extractMemories. 0 turns each off."""
    conversation = await start(parts, pair, remindEvery=remind, keyframeEvery=keyframe,
                               memoryExtractionEvery=extraction, extractMemories=extract)
    last_reminder, assistants = -1, 0
    for n, role in enumerate(roles):
        added = await parts.chat.add(conversation.id, role, f"Line {n} of the night.")
        await parts.chat.settled(conversation.id)
        reminded = role == "user" and remind > 0 and n - last_reminder - 1 >= remind
        last_reminder = n if reminded else last_reminder
        assistants += role == "assistant"
        shown = display(added.message.content)
        assert (shown.content, shown.has_reminder) == (f"Line {n} of the night.", reminded), n
        assert (f'uri="am7://reminder/{conversation.id}"' in added.message.content) == reminded
        assert added.keyframe_due == (keyframe > 0 and (n + 1) % keyframe == 0)
        assert added.extraction_due == (extract and extraction > 0 and role == "assistant"
                                        and assistants % extraction == 0)


async def test_a_reminder_names_the_character_and_the_episode(parts: Parts, pair: Pair) -> None:
    """The injected reminder tells the model to answer only as the system character's first name,
    and to follow the episode when the conversation has one; the writer's words stay first."""
    plain = await start(parts, pair, remindEvery=1)
    episodic = await start(parts, pair, remindEvery=1, episodes=["The Wreck"])
    for conversation, episode in ((plain, False), (episodic, True)):
        added = await talk(parts, conversation, "Hello.", "Hi.", "Where were you?")
        content = added[2].message.content
        assert content.startswith("Where were you?\n\n<mcp:context")
        assert "Reminder: respond only as Su, in the first person" in content
        assert ("Follow the episode guidance." in content) == episode


async def test_a_message_past_the_limit_or_blank_is_refused(parts: Parts, pair: Pair) -> None:
    """Past MAX_MESSAGE_CHARS a message is ChatMessageTooLong with its length and the limit, a
    blank one InvalidInput; neither is stored. A message of exactly the limit is stored."""
    conversation = await start(parts, pair)
    with pytest.raises(ChatMessageTooLong) as raised:
        await parts.chat.add(conversation.id, "user", "x" * (MAX_MESSAGE_CHARS + 1))
    assert raised.value.fields == {"length": MAX_MESSAGE_CHARS + 1, "limit": MAX_MESSAGE_CHARS}
    with pytest.raises(InvalidInput):
        await parts.chat.add(conversation.id, "user", " \n\t ")
    assert await parts.chat.conversations.messages(pair.project_id, conversation.id) == []
    added = await parts.chat.add(conversation.id, "assistant", "y" * MAX_MESSAGE_CHARS)
    assert len(added.message.content) == MAX_MESSAGE_CHARS


# --- keyframes -----------------------------------------------------------------------------------


async def test_a_keyframe_from_the_completer_is_a_message_and_a_pair_event(parts: Parts, pair: Pair) -> None:
    """Every keyframeEvery messages the completer's summary (asked with the window's transcript and
    the previous summary) becomes a system keyframe message in the seed's block and an EVENT memory
    of the pair (source keyframe, importance 5); only the last two keyframe messages stay in the
    conversation, every EVENT memory stays."""
    conversation = await start(parts, pair, keyframeEvery=2)
    summaries = [f"Keyframe {n}: Su and Han spoke of the storm." for n in range(4)]
    for n, summary in enumerate(summaries):
        parts.completer.answers[KEYFRAME] = summary
        added = await talk(parts, conversation, f"Question {n}?", f"Answer {n}.")
        assert [a.keyframe_due for a in added] == [False, True]
        await parts.chat.settled(conversation.id)
        if n == 0:
            stored = await parts.chat.conversations.messages(pair.project_id, conversation.id)
            assert [(m.role, m.kind) for m in stored] == [("user", "message"), ("assistant", "message"),
                                                          ("system", "keyframe")]
            assert stored[2].content == blocks.keyframe_block(conversation.id, summary, ["Su", "Han"])
    requests = [r for r in parts.completer.seen if r.purpose == KEYFRAME]
    assert len(requests) == 4
    assert requests[0].messages[1].content == "Han: Question 0?\nSu: Answer 0."
    assert requests[1].messages[1].content == (f"Earlier summary: {summaries[0]}\n\n"
                                               "Han: Question 1?\nSu: Answer 1.")
    stored = await parts.chat.conversations.messages(pair.project_id, conversation.id)
    keyframes = [m.content for m in stored if m.kind == "keyframe"]
    assert keyframes == [blocks.keyframe_block(conversation.id, s, ["Su", "Han"]) for s in summaries[2:]]
    assert sum(m.kind == "message" for m in stored) == 8
    memories, total = await parts.memories.list(pair.project_id, system_character_id=pair.han,
                                                user_character_id=pair.su)
    assert total == 4
    assert [m.content for m in memories] == summaries[::-1]
    assert {(m.memory_type, m.source, m.scope, m.importance, m.conversation_id, m.system_character_id,
             m.user_character_id) for m in memories} == {
        ("EVENT", "keyframe", "pair", 5, conversation.id, pair.su, pair.han)}
    assert parts.chat.events(conversation.id) == ([Event("keyframe", "stored", 1)] * 4, {"keyframe": 4})


async def test_a_keyframes_importance_counts_the_important_messages_of_its_window(parts: Parts,
                                                                                  pair: Pair) -> None:
    """A keyframe memory's importance is 5 plus one per important message among the keyframeEvery
    messages it summarizes, at most 10: important messages of an earlier window do not raise a
    later keyframe's importance."""
    parts.completer.answers[KEYFRAME] = "They talked."
    conversation = await start(parts, pair, keyframeEvery=2)
    await parts.chat.add(conversation.id, "user", "The key is under the third stone.", important=True)
    await parts.chat.add(conversation.id, "assistant", "I will remember it.", important=True)
    await parts.chat.settled(conversation.id)
    await talk(parts, conversation, "Nice weather.", "Yes.")
    await parts.chat.settled(conversation.id)
    memories, _ = await parts.memories.list(pair.project_id, conversation_id=conversation.id)
    assert [m.importance for m in memories] == [5, 7]  # newest first
    capped = await start(parts, pair, keyframeEvery=6)
    for n in range(6):
        await parts.chat.add(capped.id, ("user", "assistant")[n % 2], f"Vital {n}.", important=True)
    await parts.chat.settled(capped.id)
    memories, _ = await parts.memories.list(pair.project_id, conversation_id=capped.id)
    assert [m.importance for m in memories] == [10]


async def test_without_a_completion_the_keyframe_is_the_extractive_fallback(parts: Parts,
                                                                           pair: Pair) -> None:
    """When the completer raises CompletionUnavailable the keyframe is each turn's first sentence,
    stored like any keyframe, and its event is a fallback with SUMMARY_FALLBACK and the reason."""
    parts.completer.answers[KEYFRAME] = Unavailable("timeout")
    conversation = await start(parts, pair, keyframeEvery=2)
    await talk(parts, conversation, "The tide turned at midnight. Then the bell rang.",
               "And the lamp went dark.")
    await parts.chat.settled(conversation.id)
    text = "Han: The tide turned at midnight. Su: And the lamp went dark."
    stored = await parts.chat.conversations.messages(pair.project_id, conversation.id)
    assert stored[-1].content == blocks.keyframe_block(conversation.id, text, ["Su", "Han"])
    memories, _ = await parts.memories.list(pair.project_id, conversation_id=conversation.id)
    assert [(m.memory_type, m.source, m.content) for m in memories] == [("EVENT", "keyframe", text)]
    assert parts.chat.events(conversation.id) == (
        [Event("keyframe", "fallback", 1, "SUMMARY_FALLBACK: keyframe written without a model (timeout)")],
        {"keyframe": 1})


# --- extraction ----------------------------------------------------------------------------------


async def test_an_extracted_array_is_stored_whole_as_pair_memories_of_the_last_user_message(
        parts: Parts, pair: Pair) -> None:
    """Every memoryExtractionEvery exchanges the completer is asked about the last exchanges; each
    memory of a JSON array answer (fenced or not) is stored, source extraction, scope pair, its
    messageId the last user message, which history then protects."""
    parts.completer.answers[MEMORIES] = ("```json\n" + memory_json("Su lit the lamp too late.",
                                                                     "Han forgave her.") + "\n```")
    conversation = await start(parts, pair, extractMemories=True, memoryExtractionEvery=2)
    added = await talk(parts, conversation, "Did you see the ship?", "I lit the lamp too late.",
                       "It was not your fault.", "It was.")
    assert [a.extraction_due for a in added] == [False, False, False, True]
    await parts.chat.settled(conversation.id)
    [request] = parts.completer.seen
    assert request.purpose == MEMORIES
    assert request.messages[1].content == ("Han: Did you see the ship?\nSu: I lit the lamp too late.\n"
                                           "Han: It was not your fault.\nSu: It was.")
    memories, total = await parts.memories.list(pair.project_id, conversation_id=conversation.id)
    assert total == 2
    last_user = added[2].message.id
    assert sorted((m.summary, m.content, m.memory_type, m.importance, m.source, m.scope, m.message_id,
                   m.system_character_id, m.user_character_id) for m in memories) == [
        (s, f"About: {s}", "FACT", 6, "extraction", "pair", last_user, pair.su, pair.han)
        for s in ("Han forgave her.", "Su lit the lamp too late.")]
    assert parts.chat.events(conversation.id) == ([Event("extraction", "stored", 2)], {"extraction": 1})
    assert await parts.memories.message_ids(pair.project_id, conversation.id) == {last_user}


@pytest.mark.parametrize(("answer", "reason"), [
    (json.dumps({"memoryType": "FACT", "importance": 5, "summary": "An object."}), "not_array"),
    (json.dumps([{"memoryType": "FACT", "importance": 5, "summary": "Fine."},
                 {"memoryType": "GOSSIP", "importance": 5, "summary": "Bad type."}]), "invalid_memory"),
    (json.dumps([{"memoryType": "FACT", "importance": "5", "summary": "A string importance."}]),
     "invalid_memory"),
    ("Sure! Here are the memories: Su lit the lamp.", "not_json"),
    (memory_json(*(f"Memory {n}." for n in range(21))), "too_many"),
])
async def test_a_malformed_extraction_stores_nothing(parts: Parts, pair: Pair, answer: str,
                                                     reason: str) -> None:
    """An answer that is not a JSON array of at most 20 valid memories (an object, a bad entry
    beside good ones, prose, too many) stores nothing at all and records MEMORY_EXTRACTION_DROPPED
    with the reason."""
    parts.completer.answers[MEMORIES] = answer
    conversation = await start(parts, pair, extractMemories=True, memoryExtractionEvery=1)
    await talk(parts, conversation, "Did you see the ship?", "I lit the lamp too late.")
    await parts.chat.settled(conversation.id)
    assert (await parts.memories.list(pair.project_id))[1] == 0
    warning = (f"MEMORY_EXTRACTION_DROPPED: the answer was not a JSON array of memories ({reason}); "
               "nothing stored")
    assert parts.chat.events(conversation.id) == ([Event("extraction", "dropped", 0, warning)],
                                                  {"extraction": 1})


@pytest.mark.parametrize("summary", ["   ", "a lone \ud800 surrogate"])
async def test_an_extracted_memory_no_store_accepts_drops_the_answer(parts: Parts, pair: Pair,
                                                                     summary: str) -> None:
    """A memory the store refuses (a blank summary, a lone surrogate) is not a valid memory: the
    answer is dropped whole with MEMORY_EXTRACTION_DROPPED, like any other invalid entry
    (docs/character-chat.md), not reported as a failure."""
    parts.completer.answers[MEMORIES] = json.dumps([
        {"memoryType": "FACT", "importance": 5, "summary": "Su lit the lamp too late."},
        {"memoryType": "FACT", "importance": 5, "summary": summary}])
    conversation = await start(parts, pair, extractMemories=True, memoryExtractionEvery=1)
    await talk(parts, conversation, "Did you see the ship?", "I lit the lamp too late.")
    await parts.chat.settled(conversation.id)
    assert (await parts.memories.list(pair.project_id))[1] == 0
    [event] = parts.chat.events(conversation.id)[0]
    assert (event.status, event.stored) == ("dropped", 0)
    assert event.warning is not None
    assert event.warning.startswith("MEMORY_EXTRACTION_DROPPED")


async def test_without_a_client_nothing_is_extracted_and_it_says_so(parts: Parts, pair: Pair) -> None:
    """No completion for the extraction: nothing stored, MEMORY_EXTRACTION_UNAVAILABLE with the
    reason."""
    conversation = await start(parts, pair, extractMemories=True, memoryExtractionEvery=1)
    await talk(parts, conversation, "Did you see the ship?", "I lit the lamp too late.")
    await parts.chat.settled(conversation.id)
    assert (await parts.memories.list(pair.project_id))[1] == 0
    assert parts.chat.events(conversation.id) == ([Event(
        "extraction", "unavailable", 0, "MEMORY_EXTRACTION_UNAVAILABLE: no memories extracted (no_client)")],
        {"extraction": 1})


# --- assemble ------------------------------------------------------------------------------------


async def test_assemble_waits_for_the_pending_keyframe(parts: Parts, pair: Pair) -> None:
    """assemble first waits for the conversation's background work still running (a slow
    completer), so the prompt it builds holds the keyframe that work writes."""
    parts.completer.answers[KEYFRAME] = "Su promised to relight the lamp."
    parts.completer.gate.clear()
    conversation = await start(parts, pair, keyframeEvery=2)
    added = await talk(parts, conversation, "Will you relight it?", "I will.")
    assert added[-1].keyframe_due
    assembling = asyncio.create_task(parts.chat.assemble(conversation.id))
    await eventually(lambda: parts.completer.purposes() == [KEYFRAME])
    await asyncio.sleep(0.1)
    assert not assembling.done()
    parts.completer.gate.set()
    done = await asyncio.wait_for(assembling, 10)
    assert done.messages[0].role == "system"
    assert "Su promised to relight the lamp." in done.messages[0].content
    assert 'uri="am7://keyframe/' in done.outcome.assembly.prompt
    assert done.history_candidates == 3


async def test_assemble_waits_no_longer_than_its_bound(database: Database, chroma: Any, parts: Parts,
                                                        pair: Pair) -> None:
    """A completer that never answers holds assemble back only ``wait`` seconds: the prompt comes
    without the keyframe, which the next assembly holds once the work is done."""
    completer = PurposeCompleter({KEYFRAME: "Su kept the letter."})
    completer.gate.clear()
    quick = character_chat(database, chroma, completer, wait=0.2)
    try:
        options = ConversationOptions.model_validate({**QUIET, "keyframeEvery": 2})
        conversation = await quick.chat.create(pair.project_id, pair.su, pair.han, "base-roleplay", options)
        await quick.chat.add(conversation.id, "user", "What is in your hand?")
        await quick.chat.add(conversation.id, "assistant", "Nothing.")
        first = await asyncio.wait_for(quick.chat.assemble(conversation.id), 5)
        assert "Su kept the letter." not in first.messages[0].content
        completer.gate.set()
        second = await quick.chat.assemble(conversation.id)
        assert "Su kept the letter." in second.messages[0].content
    finally:
        await quick.chat.aclose()


async def test_history_keeps_the_newest_turns_and_an_important_one(parts: Parts, pair: Pair) -> None:
    """On a small tokenBudget the oldest small talk goes first and the newest turns stay, as one
    unbroken run up to the last message; an early message marked important outlives the small
    talk of its age."""
    conversation = await start(parts, pair, tokenBudget=600, outputReserve=100)
    for n in range(40):
        await parts.chat.add(conversation.id, ("user", "assistant")[n % 2],
                             "PLOT: the key is under the third stone." if n == 3 else
                             f"Small talk number {n:02} about the weather and the tides of the bay.",
                             important=n == 3)
    done = await parts.chat.assemble(conversation.id)
    assembly = done.outcome.assembly
    kept = [n for n in range(40) if f"number {n:02} " in assembly.prompt]
    assert "Su: PLOT: the key is under the third stone." in assembly.prompt
    assert kept == list(range(kept[0], 40))
    assert kept[0] > 4
    assert assembly.token_count <= assembly.budget.total == 500
    assert [r.step for r in assembly.reductions if r.section == "history"] == ["drop_oldest"]
    assert done.history_candidates == 40
    assert done.messages[-1].content == "Small talk number 39 about the weather and the tides of the bay."
    assert "PLOT: the key is under the third stone." in "\n".join(m.content for m in done.messages)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(budget=st.integers(256, 3000), room=st.integers(150, 3000),
       lengths=st.lists(st.integers(1, 400), max_size=16), memories=st.integers(0, 3),
       memory_budget=st.integers(0, 800))
async def test_the_prompt_never_passes_its_budget(parts: Parts, pair: Pair, budget: int, room: int,
                                                  lengths: list[int], memories: int,
                                                  memory_budget: int) -> None:
    """For any message lengths and counts, window, reserve and memory budget, tokenCount is at most
    budget.total (the window less the reserve); the kept history is the newest messages, and the
    newest one is always among them: a newest message that cannot fit refuses the assembly."""
    reserve = max(0, budget - room)
    conversation = await start(parts, pair, tokenBudget=budget, outputReserve=reserve,
                               memoryBudget=memory_budget)
    for n in range(memories):
        await parts.memories.add(pair.project_id, {
            "memory_type": ("RELATIONSHIP", "FACT")[n % 2], "importance": 9,
            "summary": f"Memory {n}: the storm, the lamp and the letter.", "scope": "conversation",
            "conversation_id": conversation.id, "system_character_id": pair.su,
            "user_character_id": pair.han})
    lines = [" ".join(f"m{n}w{k}" for k in range(length)) for n, length in enumerate(lengths)]
    for n, line in enumerate(lines):
        await parts.chat.add(conversation.id, ("user", "assistant")[n % 2], line)
    refused: dict[str, object] = {}
    try:
        done = await parts.chat.assemble(conversation.id)
    except InputTooLarge as exc:
        refused = exc.fields
    if refused:
        assert refused["total"] == budget - reserve
        if "newestTokens" in refused:  # else the sections that are never cut do not fit
            speaker = ("Han", "Su")[(len(lines) - 1) % 2]
            assert refused["newestTokens"] == COUNTER.count(f"{speaker}: {lines[-1]}")
        return
    assembly = done.outcome.assembly
    assert assembly.budget.total == budget - reserve
    assert assembly.token_count <= assembly.budget.total
    kept = [n for n in range(len(lines)) if re.search(rf"\bm{n}w0\b", assembly.prompt)]
    assert kept == list(range(len(lines) - len(kept), len(lines)))
    assert kept[-1:] == list(range(len(lines)))[-1:]
    fixed = sum(assembly.layers[s].tokens for s in ("identity", "rules", "rating", "perspective"))
    if lines:  # a refusal comes only when the newest message could not fit
        assert fixed + COUNTER.count(f"Han: {lines[-1]}") <= assembly.budget.total
    memory, tokens = done.memory_used()
    block = assembly.layers.get("memory")  # absent without recalled memories (its condition)
    assert (memory.count > 0) == (tokens > 0) == bool(block is not None and block.text)


async def test_fixed_sections_past_the_budget_refuse_the_assembly(parts: Parts, pair: Pair) -> None:
    """A window whose reserve leaves less than the sections that are never cut (identity, rules,
    rating) is InputTooLarge with the budget's total, not a prompt over it."""
    conversation = await start(parts, pair, tokenBudget=256, outputReserve=200)
    await talk(parts, conversation, "Hello.")
    with pytest.raises(InputTooLarge) as raised:
        await parts.chat.assemble(conversation.id)
    assert raised.value.fields["total"] == 56
    assert raised.value.fields["fixedTokens"] > 56


async def test_background_warnings_come_once_with_the_next_assembly(parts: Parts, pair: Pair) -> None:
    """The warnings of background work (a fallback keyframe, an unavailable extraction) are in the
    next assembly's warnings once; the one after has none, while the events stay listed."""
    conversation = await start(parts, pair, keyframeEvery=2, extractMemories=True, memoryExtractionEvery=1)
    await talk(parts, conversation, "The tide turned.", "The lamp went dark.")
    first = await parts.chat.assemble(conversation.id)
    assert sorted(first.warnings) == ["MEMORY_EXTRACTION_UNAVAILABLE: no memories extracted (no_client)",
                                      "SUMMARY_FALLBACK: keyframe written without a model (no_client)"]
    assert (await parts.chat.assemble(conversation.id)).warnings == ()
    events, done = parts.chat.events(conversation.id)
    assert sorted(e.kind for e in events) == ["extraction", "keyframe"]
    assert done == {"extraction": 1, "keyframe": 1}


# --- delete and shutdown -------------------------------------------------------------------------


async def test_delete_removes_the_conversation_and_its_own_memories_only(parts: Parts, pair: Pair) -> None:
    """Deleting a conversation deletes it, its messages and its conversation- and exchange-scoped
    memories; its pair memories and another conversation's memories stay."""
    conversation, other = await start(parts, pair), await start(parts, pair)
    [said] = await talk(parts, conversation, "Remember the bell.")
    base = {"memory_type": "FACT", "system_character_id": pair.su, "user_character_id": pair.han}
    pair_memory = await parts.memories.add(pair.project_id, {**base, "summary": "The bell rang.",
                                                             "conversation_id": conversation.id})
    for scope in ("conversation", "exchange"):
        await parts.memories.add(pair.project_id, {**base, "summary": f"Only {scope}.", "scope": scope,
                                                   "conversation_id": conversation.id,
                                                   "message_id": said.message.id})
    others = await parts.memories.add(pair.project_id, {**base, "summary": "Elsewhere.",
                                                        "scope": "conversation", "conversation_id": other.id})
    deleted = await parts.chat.delete(conversation.id)
    assert (deleted.id, deleted.message_count) == (conversation.id, 1)
    remaining, _ = await parts.memories.list(pair.project_id)
    assert {m.id for m in remaining} == {pair_memory.id, others.id}
    assert [c.id for c in await parts.chat.conversations.list(pair.project_id)] == [other.id]
    for gone in (parts.chat.delete(conversation.id), parts.chat.assemble(conversation.id),
                 parts.chat.add(conversation.id, "user", "Hello?")):
        with pytest.raises(ConversationNotFound):
            await gone


async def test_delete_cancels_pending_work(parts: Parts, pair: Pair) -> None:
    """A keyframe still waiting for its completion when the conversation is deleted is cancelled:
    no keyframe memory of the deleted conversation appears afterwards, and no event."""
    parts.completer.answers[KEYFRAME] = "Too late."
    parts.completer.gate.clear()
    conversation = await start(parts, pair, keyframeEvery=2)
    await talk(parts, conversation, "A last word?", "None.")
    await eventually(lambda: bool(parts.completer.seen))
    await asyncio.wait_for(parts.chat.delete(conversation.id), 5)
    parts.completer.gate.set()
    await asyncio.sleep(0.1)
    assert (await parts.memories.list(pair.project_id))[1] == 0
    assert parts.chat.events(conversation.id) == ([], {})


async def test_aclose_cancels_pending_work(parts: Parts, pair: Pair) -> None:
    """aclose cancels background work still waiting for a completion and returns promptly; the
    cancelled keyframe writes nothing, even once the completer would answer."""
    parts.completer.answers[KEYFRAME] = "Never written."
    parts.completer.gate.clear()
    conversation = await start(parts, pair, keyframeEvery=2)
    await talk(parts, conversation, "Goodnight.", "Goodnight.")
    await eventually(lambda: bool(parts.completer.seen))
    await asyncio.wait_for(parts.chat.aclose(), 5)
    parts.completer.gate.set()
    await asyncio.sleep(0.1)
    stored = await parts.chat.conversations.messages(pair.project_id, conversation.id)
    assert [m.kind for m in stored] == ["message", "message"]
    assert (await parts.memories.list(pair.project_id))[1] == 0
    assert parts.chat.events(conversation.id) == ([], {})
