"""A conversation's messages as prompt items, budgeted by tokens, and the prompt's messages with each
kept turn in its own role (seed 003, section 2.3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.characters import persona
from services.characters.blocks import keyframe_block, reminder_block
from services.characters.history import (
    ITEM_PREFIX,
    MAX_PROTECTED,
    PROTECTED,
    SOURCE,
    Entry,
    HistoryProvider,
    bounded,
    entry,
    model_text,
    turn_messages,
)
from services.characters.options import ConversationOptions
from services.context.counting import CountCache
from services.context.engine import Request, assemble
from services.context.models import Assembly, BudgetProfile, Message, Window
from services.context.skills import get_skill
from services.profiles.plans import BuiltInPlans
from services.sources.base import GatherContext
from services.tokenizer import resolve_tokenizer

COUNTER = CountCache(resolve_tokenizer())
KEYFRAME = keyframe_block("c1", "They met at the café.", ["Ada", "Bo"])
REMINDER = reminder_block("c1", "Stay in character.")


def ctx(placement: Mapping[str, tuple[str, str]], project_id: str = "p1") -> GatherContext:
    return GatherContext(project_id=project_id, document_id="conversation:c1", language="en",
                         skill=get_skill("continue"), window=Window("", "", 0, 0, 0, 0), additional_input="",
                         counter=COUNTER, placement=placement)


# --- model_text and entry ----------------------------------------------------------------------


def test_model_text_strips_old_thoughts() -> None:
    """A stored reply's thoughts are not sent back to the model; what the writer saw is."""
    assert model_text("<think>She is lying.</think>I see.") == "I see."
    assert model_text("Hi <thought>hmm</thought> there") == "Hi there"


def test_model_text_keeps_messages_without_thoughts_as_they_are() -> None:
    """A message without thoughts is sent byte for byte, even where display() would tidy it."""
    assert model_text("  Hello,\n\n\n world  ") == "  Hello,\n\n\n world  "


@pytest.mark.parametrize("block", [REMINDER, KEYFRAME])
def test_model_text_keeps_everything_when_a_block_for_the_model_is_there(block: str) -> None:
    """A message that also holds a reminder or keyframe block is sent whole, thoughts included:
    the block was written for the model."""
    content = "<think>x</think>Fine.\n" + block
    assert model_text(content) == content
    assert model_text("Fine.\n" + block) == "Fine.\n" + block


def test_entry_of_a_message() -> None:
    """A message's prompt text is "Speaker: content" (thoughts stripped); the role's message holds
    the content alone; its id and protection are kept."""
    e = entry(7, 3, "assistant", "message", "<think>x</think>Hello.", "Ada", False)
    assert e == Entry(7, 3, "assistant", "Ada: Hello.", "Hello.", False)
    assert e.item_id == f"{ITEM_PREFIX}7" == "message:7"
    assert entry(8, 4, "user", "message", "Hi.", "Bo", True).protected
    assert entry(9, 5, "system", "message", "Note.", "", False).text == "Note."


def test_entry_of_a_keyframe_is_system_and_protected() -> None:
    """A keyframe, whoever stored it, is a protected system entry whose text is the block as it is."""
    e = entry(5, 2, "assistant", "keyframe", KEYFRAME, "Ada", False)
    assert (e.role, e.protected, e.text, e.content) == ("system", True, KEYFRAME, KEYFRAME)


# --- bounded -----------------------------------------------------------------------------------


def words(text: str) -> int:
    return len(text.split())


def make(seq: int, size: int, protected: bool = False) -> Entry:
    text = " ".join(["w"] * size)
    return Entry(seq, seq, "user", text, text, protected)


def test_bounded_keeps_the_newest_up_to_the_limit() -> None:
    """The newest entries are kept while the tokens before each are within the limit (the entry
    that passes the limit is kept, the next older is not), in conversation order."""
    entries = [make(n, 10) for n in range(1, 11)]
    assert [e.seq for e in bounded(entries, 30, words)] == [7, 8, 9, 10]
    assert [e.seq for e in bounded(entries, 29, words)] == [8, 9, 10]
    assert [e.seq for e in bounded(entries, 0, words)] == [10]
    assert bounded([], 100, words) == []


def test_bounded_adds_older_protected_entries() -> None:
    """Older protected entries beyond the bound are kept as candidates too, in seq order."""
    entries = [make(n, 10, protected=n in (2, 5)) for n in range(1, 11)]
    assert [e.seq for e in bounded(entries, 25, words)] == [2, 5, 8, 9, 10]


def test_bounded_keeps_at_most_max_protected_older_entries() -> None:
    """Of the older protected entries, only the newest MAX_PROTECTED are kept."""
    entries = [make(n, 1, protected=True) for n in range(1, MAX_PROTECTED + 11)] + [make(1000, 50)]
    kept = bounded(entries, 10, words)
    assert [e.seq for e in kept] == [*range(11, MAX_PROTECTED + 11), 1000]


@given(st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=150), st.integers(0, 200))
def test_bounded_matches_its_definition(spec: list[tuple[int, bool]], limit: int) -> None:
    """For any entries and limit: the newest suffix whose tokens before its oldest are within the
    limit, plus the newest MAX_PROTECTED protected entries older than it, sorted by seq."""
    entries = [make(n, size, protected) for n, (size, protected) in enumerate(spec, start=1)]
    start = len(entries)
    total = 0
    while start > 0 and total <= limit:
        start -= 1
        total += words(entries[start].text)
    older = [e for e in entries[:start] if e.protected][-MAX_PROTECTED:]
    expected = older + entries[start:]
    assert bounded(entries, limit, words) == expected


# --- HistoryProvider ---------------------------------------------------------------------------

ENTRIES = (entry(11, 1, "user", "message", "Hi.", "Bo", False),
           entry(12, 2, "assistant", "message", "Hello.", "Ada", True),
           entry(13, 3, "assistant", "keyframe", KEYFRAME, "", False))


def test_provider_names_its_source() -> None:
    """The provider fills chat.history and fails as HISTORY_UNAVAILABLE."""
    provider = HistoryProvider(ENTRIES)
    assert (provider.name, provider.warning) == ("history", "HISTORY_UNAVAILABLE")
    assert provider.sources == (SOURCE,)
    assert SOURCE == "chat.history"


async def test_provider_items_are_keyed_by_seq_and_placed_by_the_plan() -> None:
    """Each entry is an item where the plan places chat.history, keyed by its seq (plus PROTECTED
    when protected; the newest is too), counted by the context's counter, in the context's project."""
    items = await HistoryProvider(ENTRIES).gather(ctx({SOURCE: ("talk", "turns")}))
    assert [(i.id, i.layer, i.section, i.key, i.key_name) for i in items] == [
        ("message:11", "talk", "turns", 1.0, "order"),
        ("message:12", "talk", "turns", 2.0 + PROTECTED, "order"),
        ("message:13", "talk", "turns", 3.0 + PROTECTED, "order"),
    ]
    assert [i.text for i in items] == ["Bo: Hi.", "Ada: Hello.", KEYFRAME]
    assert [i.tokens for i in items] == [COUNTER.count(i.text) for i in items]
    assert {(i.source, i.project_id) for i in items} == {("chat", "p1")}


async def test_the_newest_entry_is_keyed_above_protected_ones() -> None:
    """The newest entry, protected or not, is keyed as protected, so it is above every other."""
    entries = (*ENTRIES, entry(14, 4, "user", "message", "And then?", "Bo", False))
    items = await HistoryProvider(entries).gather(ctx({SOURCE: ("history", "history")}))
    assert [i.key for i in items] == [1.0, 2.0 + PROTECTED, 3.0 + PROTECTED, 4.0 + PROTECTED]
    assert max(items, key=lambda i: i.key).id == "message:14"
    assert await HistoryProvider(()).gather(ctx({SOURCE: ("history", "history")})) == []


async def test_provider_gives_nothing_when_the_plan_does_not_place_chat_history() -> None:
    """A plan without chat.history gets no history items."""
    assert await HistoryProvider(ENTRIES).gather(ctx({"chat.recent": ("recent", "recent")})) == []


async def test_provider_with_a_long_history_runs_off_the_loop_the_same() -> None:
    """A history too large to count on the loop gives the same items (counted in a thread)."""
    long = tuple(entry(n, n, "user", "message", "word " * 400, "Bo", False) for n in range(1, 20))
    items = await HistoryProvider(long).gather(ctx({SOURCE: ("history", "history")}))
    assert [i.key for i in items] == [*(float(n) for n in range(1, 19)), 19.0 + PROTECTED]


# --- turn_messages on a real assembly of base-roleplay -----------------------------------------

ADA = persona.persona("Ada Lovelace", "A mathematician.\nPersonality: curious")
BO = persona.persona("Bo Chen", "A traveller.")


async def assembly(entries: Sequence[Entry], token_budget: int = 8192, output_reserve: int = 1024,
                   language: str = "en") -> Assembly:
    """base-roleplay assembled by the engine with ``entries`` as the chat.history items."""
    plan = await BuiltInPlans().plan("p1", "base-roleplay")
    values = ConversationOptions.model_validate({"tokenBudget": token_budget,
                                                 "outputReserve": output_reserve}).variables(language)
    bound = plan.bind(values)
    assert isinstance(bound.context_window, int)
    published = {**persona.values(ADA, "system", language), **persona.values(BO, "user", language),
                 "perspective": persona.dynamic(ADA, language)}
    variables = {**values, **published}
    items = tuple(await HistoryProvider(tuple(entries)).gather(ctx(bound.placed)))
    facts = frozenset({"always", *(k for k, v in {**bound.variables, **variables}.items() if v.strip())})
    request = Request(project_id="p1", language=language, plan=bound,
                      profile=BudgetProfile(context_window=bound.context_window,
                                            output_reserve=int(bound.output_reserve)),
                      system_prompt_tokens=0, items=items, window=None, variables=variables, facts=facts)
    return assemble(request, COUNTER)


def conversation() -> list[Entry]:
    return [entry(1, 1, "user", "message", "Hi there.", "Bo", False),
            entry(2, 2, "assistant", "message", "<think>who?</think>Hello.", "Ada", False),
            entry(3, 3, "assistant", "message", "Nice weather.", "Ada", False),
            entry(4, 4, "system", "keyframe", KEYFRAME, "", True),
            entry(5, 5, "user", "message", "It is.", "Bo", False),
            entry(6, 6, "user", "message", "Shall we walk?", "Bo", False)]


async def test_turn_messages_give_each_turn_its_role() -> None:
    """The system sections come first as one system message (the keyframe joined to it), then the
    user and assistant intros, then one message per turn in its role, consecutive turns of one role
    merged, each turn's content without its speaker."""
    entries = conversation()
    built = await assembly(entries)
    messages = turn_messages(built, "", {e.item_id: e for e in entries})
    system_sections = [layer.text for layer in built.layers.values() if layer.role == "system" and layer.text]
    assert messages == [
        Message("system", "\n\n".join([*system_sections, KEYFRAME])),
        Message("user", "I am Bo Chen. A traveller."),
        Message("assistant", "I am Ada Lovelace."),
        Message("user", "Hi there."),
        Message("assistant", "Hello.\n\nNice weather."),
        Message("user", "It is.\n\nShall we walk?"),
    ]
    assert messages[0].content.startswith("You control Ada Lovelace. A mathematician.")
    assert "Rules:\n1. Respond ONLY for Ada" in messages[0].content


async def test_turn_messages_put_the_system_prompt_first() -> None:
    """A system prompt opens the system message, before the system sections."""
    entries = conversation()
    messages = turn_messages(await assembly(entries), "Be kind.", {e.item_id: e for e in entries})
    assert messages[0].content.startswith("Be kind.\n\nYou control Ada Lovelace.")


async def test_turn_messages_merge_a_first_turn_with_the_intro_of_its_role() -> None:
    """A first turn by the assistant follows the assistant intro in the same message."""
    entries = [entry(1, 1, "assistant", "message", "Welcome.", "Ada", False)]
    messages = turn_messages(await assembly(entries), "", {e.item_id: e for e in entries})
    assert [m.role for m in messages] == ["system", "user", "assistant"]
    assert messages[-1].content == "I am Ada Lovelace.\n\nWelcome."


async def test_turns_dropped_by_the_budget_are_absent() -> None:
    """On a small budget the oldest turns are dropped; they are in no message, the protected
    keyframe and the newest turns are, and the prompt fits."""
    entries = [entry(n, n, "user" if n % 2 else "assistant", "message", f"turn {n} " + "blah " * 30,
                     "Bo" if n % 2 else "Ada", False) for n in range(1, 21)]
    entries[3] = entry(4, 4, "system", "keyframe", KEYFRAME, "", True)
    built = await assembly(entries, token_budget=700, output_reserve=100)
    fates = {r.id: r.fate for r in built.reports if r.id.startswith(ITEM_PREFIX)}
    dropped = {n for n in range(1, 21) if fates[f"message:{n}"] == "dropped"}
    assert dropped
    assert 1 in dropped
    assert 20 not in dropped
    assert 4 not in dropped
    assert built.token_count <= built.budget.total
    messages = turn_messages(built, "", {e.item_id: e for e in entries})
    text = "\n".join(m.content for m in messages)
    for n in range(1, 21):
        if n != 4:
            assert (f"turn {n} " in text) == (n not in dropped), n
    assert messages[0].content.endswith(KEYFRAME)
    roles = [m.role for m in messages]
    assert roles[0] == "system"
    assert "system" not in roles[1:]
    assert all(a != b for a, b in pairwise(roles))


async def test_the_newest_turn_outlives_protected_ones() -> None:
    """When protected messages alone would fill the budget, the newest turn (the one the model
    answers) is still kept, and is the last message."""
    entries = [entry(n, n, "user" if n % 2 else "assistant", "message", f"turn {n} " + "blah " * 30,
                     "Bo" if n % 2 else "Ada", n < 15) for n in range(1, 22)]
    built = await assembly(entries, token_budget=700, output_reserve=100)
    fates = {r.id: r.fate for r in built.reports if r.id.startswith(ITEM_PREFIX)}
    assert fates["message:21"] == "included"
    assert fates["message:20"] == "dropped"
    messages = turn_messages(built, "", {e.item_id: e for e in entries})
    assert messages[-1] == Message("user", entries[-1].content)


async def test_without_history_entries_turn_messages_are_the_assemblys_messages() -> None:
    """With no history the messages are exactly Assembly.messages()."""
    built = await assembly([])
    assert turn_messages(built, "sys", {}) == built.messages("sys")


async def test_turn_messages_in_chinese() -> None:
    """A Chinese project gets the Chinese template lines, the turns as they are."""
    entries = [entry(1, 1, "user", "message", "你好。", "Bo", False)]
    messages = turn_messages(await assembly(entries, language="zh"), "", {e.item_id: e for e in entries})
    assert messages[0].content.startswith("你扮演Ada Lovelace。")
    assert "规则：\n1. 只以Ada的身份" in messages[0].content
    assert messages[1:] == [Message("user", "我是Bo Chen。A traveller."),
                            Message("assistant", "我是Ada Lovelace。"), Message("user", "你好。")]
