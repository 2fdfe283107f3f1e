"""Memory in the prompt: the query hierarchy, the budget split and the rendered block (plain and MCP)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.characters.memories import MEMORY_TYPES, MemoryDraft, MemoryIndex, TypedMemory, TypedMemoryStore
from services.characters.recall import (
    Layout,
    RecallSettings,
    Recollection,
    cut,
    memory_order,
    recall,
    select,
)
from services.projects import ProjectRecord
from services.store import Database
from services.tokenizer import resolve_tokenizer
from tests.services.characters.test_memories import WordsEmbedding

A, B, C = 3, 7, 11
START = datetime(2025, 1, 15, 12, tzinfo=UTC)
TOKENS = resolve_tokenizer().count
EN = Layout("plain", "en", A, B, "Ann", "Bo")


def words(text: str) -> int:
    """A counter with exact, additive counts: one token per whitespace-separated word."""
    return len(text.split())


def memory(memory_id: int, summary: str, memory_type: str = "FACT", importance: int = 5,
           days: float = 0) -> TypedMemory:
    return TypedMemory.model_validate({
        "id": memory_id, "project_id": "p", "memory_type": memory_type, "importance": importance,
        "summary": summary, "content": "", "source": "user", "system_character_id": A,
        "user_character_id": B, "scope": "pair", "character_id": None, "conversation_id": None,
        "message_id": None, "created_at": START + timedelta(days=days)})


def lines(text: str) -> list[str]:
    return text.split("\n") if text else []


def test_each_category_keeps_to_its_share() -> None:
    """With every category oversupplied, relationship gets 40 % of the budget left by the title,
    facts 30 % and the last session the rest, cut at a word; each header is paid for by its first
    memory."""
    relationship = [memory(i, "we are close", "RELATIONSHIP", days=i) for i in range(1, 11)]
    facts = [memory(100 + i, "she likes rain", days=i) for i in range(10)]
    last = " ".join(f"word{i}" for i in range(100))
    chosen = select([*relationship, *facts], last, layout=EN, budget=100, count=words)
    # 100 - 5 (title) - 1 = 94 available: shares 37, 28, 28. A line costs 4 + 1, a header 1 + 1.
    assert chosen.count == 7 + 5  # 2 + 7 * 5 = 37; 2 + 5 * 5 = 27
    assert lines(chosen.relationship) == ["- we are close"] * 7
    assert lines(chosen.facts) == ["- she likes rain"] * 5
    # 28 and the 2 left: "Last time:" and the newline take 3
    assert chosen.last_session == " ".join(f"word{i}" for i in range(27))
    assert words(chosen.context) <= 100
    assert chosen.context.startswith("Memories of Ann and Bo:\nRelationship:\n- we are close\n")
    assert "\nFacts:\n- she likes rain\n" in chosen.context
    assert chosen.context.endswith("\nLast time: " + chosen.last_session)


def test_unused_shares_go_to_the_waiting_memories() -> None:
    """Tokens a category leaves (no relationship memories, no last session) go to the memories
    still waiting, in the same order: here facts fill the whole budget."""
    facts = [memory(i, "she likes rain", days=i) for i in range(1, 31)]
    chosen = select(facts, "", layout=EN, budget=100, count=words)
    # 94 available: 2 + 5 * 5 = 27 in the facts' share, 13 * 5 = 65 of the 67 left
    assert chosen.count == 18
    assert chosen.ids == tuple(range(30, 12, -1))
    assert words(chosen.context) <= 100


def test_a_short_last_session_leaves_its_share_to_memories() -> None:
    """A last session shorter than its share is kept whole and the rest of its share goes to
    memories."""
    facts = [memory(i, "she likes rain", days=i) for i in range(1, 31)]
    chosen = select(facts, "They made up.", layout=EN, budget=100, count=words)
    assert chosen.last_session == "They made up."
    assert chosen.count == 17  # 94 - 6 (the session line) - 27 = 61 left: 12 * 5 more
    assert words(chosen.context) <= 100


def test_order_is_importance_then_newest() -> None:
    """Within a category the most important memory comes first, then the newest; memories let in
    from leftover tokens take their place in that order."""
    found = [memory(1, "old but vital", "RELATIONSHIP", 9, days=0),
             memory(2, "newer plain", "RELATIONSHIP", 5, days=5),
             memory(3, "newest plain", "RELATIONSHIP", 5, days=9),
             memory(4, "a fact", "FACT", 2, days=1),
             memory(5, "a weighty fact", "RULE", 7, days=0)]
    chosen = select(found, "", layout=EN, budget=500, count=words)
    assert chosen.ids == (1, 3, 2, 5, 4)
    assert lines(chosen.relationship) == ["- old but vital", "- newest plain", "- newer plain"]
    assert lines(chosen.facts) == ["- a weighty fact", "- a fact"]
    assert chosen.count == 5


def test_chinese_and_empty() -> None:
    """Plain blocks are localized; empty categories are left out; nothing at all renders as ""."""
    zh = Layout("plain", "zh", A, B, "林远", "阿梅")
    chosen = select([memory(1, "阿梅怕猫")], "他们和好了。", layout=zh, budget=500, count=TOKENS)
    assert chosen.context == "林远与阿梅的记忆：\n事实：\n- 阿梅怕猫\n上次：他们和好了。"
    only_relationship = select([memory(1, "old friends", "RELATIONSHIP")], "", layout=EN, budget=500,
                               count=TOKENS)
    assert only_relationship.context == "Memories of Ann and Bo:\nRelationship:\n- old friends"
    nothing = select([], "", layout=EN, budget=500, count=TOKENS)
    assert nothing == Recollection("", "", "", "", 0)
    assert nothing.variables() == {"memory.context": "", "memory.relationship": "", "memory.facts": "",
                                   "memory.lastSession": "", "memory.count": "0", "hasMemories": ""}
    assert select([memory(1, "x")], "y", layout=EN, budget=3, count=TOKENS).context == ""


def test_variables() -> None:
    """variables() gives the seed's template variables, as strings."""
    chosen = select([memory(1, "met at a café", "RELATIONSHIP"), memory(2, "likes blue")], "They talked.",
                    layout=EN, budget=500, count=TOKENS)
    assert chosen.variables() == {
        "memory.context": chosen.context, "memory.relationship": "- met at a café",
        "memory.facts": "- likes blue", "memory.lastSession": "They talked.", "memory.count": "2",
        "hasMemories": "true"}


def _mcp_data(context: str) -> dict[str, Any]:
    match = re.fullmatch(r'<mcp:context type="resource" uri="am7://memory/3/7" ephemeral="true">\n'
                         r"(.*)\n</mcp:context>", context, re.DOTALL)
    assert match is not None, context
    parsed: dict[str, Any] = json.loads(match.group(1))
    return parsed


def test_mcp_block() -> None:
    """The MCP block is the seed's resource: compact JSON inside the tags, relationship entries with
    their session date, facts without, lastSession; a "<" in a memory cannot close the tag."""
    mcp = Layout("mcp", "en", A, B, "Ann", "Bo")
    found = [memory(1, "They met at a coffee shop", "RELATIONSHIP", 8),
             memory(2, "Had an argument", "RELATIONSHIP", 6, days=5),
             memory(3, "User's favorite color is blue </mcp:context>", "FACT", 3),
             memory(4, "可以用中文", "PREFERENCE", 4)]
    chosen = select(found, "They reconciled.", layout=mcp, budget=500, count=TOKENS)
    assert chosen.context.count("</mcp:context>") == 1
    assert "可以用中文" in chosen.context
    assert _mcp_data(chosen.context) == {"schema": "urn:am7:narrative:memory", "data": {
        "relationship": [{"summary": "They met at a coffee shop", "importance": 8, "session": "2025-01-15"},
                         {"summary": "Had an argument", "importance": 6, "session": "2025-01-20"}],
        "facts": [{"summary": "可以用中文", "importance": 4},
                  {"summary": "User's favorite color is blue </mcp:context>", "importance": 3}],
        "lastSession": "They reconciled."}}
    assert TOKENS(chosen.context) <= 500
    only_last = select([], "Bye.", layout=mcp, budget=500, count=TOKENS)
    assert _mcp_data(only_last.context)["data"] == {"lastSession": "Bye."}


def test_cut_at_sentence_then_word() -> None:
    """cut keeps the longest start that fits, ended at a sentence end in its second half, else at
    a clause end there, else never inside a word; Chinese without punctuation is cut between
    characters."""
    def fits(limit: int) -> Any:
        return lambda text: len(text) <= limit

    text = "First sentence here. Second one is longer than that."
    assert cut(text, fits(100)) == text
    assert cut(text, fits(30)) == "First sentence here."
    assert cut("alpha beta gamma delta", fits(13)) == "alpha beta"
    assert cut("supercalifragilistic", fits(5)) == ""
    assert cut("他们和好了。然后一起去看海，约定明年再见", fits(15)) == "他们和好了。然后一起去看海，"
    assert cut("他们和好了然后一起去看海约定明年再见", fits(8)) == "他们和好了然后一"
    assert cut("他们和好了。然后一起去", fits(9)) == "他们和好了。"


summaries = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=120)


@st.composite
def memories(draw: st.DrawFn) -> list[TypedMemory]:
    count = draw(st.integers(0, 25))
    return [memory(i + 1, draw(summaries), draw(st.sampled_from(MEMORY_TYPES)), draw(st.integers(1, 10)),
                   draw(st.floats(0, 1000))) for i in range(count)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(found=memories(), last=st.text(max_size=400), budget=st.integers(0, 700),
       layout=st.builds(Layout, st.sampled_from(["plain", "mcp"]), st.sampled_from(["en", "zh"]),
                        st.just(A), st.just(B), summaries, summaries),
       split=st.sampled_from([(0.4, 0.3, 0.3), (0.0, 0.5, 0.5), (1.0, 0.0, 0.0), (0.2, 0.2, 0.2)]))
def test_never_over_budget(found: list[TypedMemory], last: str, budget: int, layout: Layout,
                           split: tuple[float, float, float]) -> None:
    """Whatever the memories, last session, budget, split, format and language, the block's exact
    token count never exceeds the budget; each category is in importance-then-newest order (the
    most important first); an MCP block's JSON parses."""
    chosen = select(found, last, layout=layout, budget=budget, split=split, count=TOKENS)
    assert TOKENS(chosen.context) <= budget
    by_id = {m.id: m for m in found}
    assert len(set(chosen.ids)) == len(chosen.ids) == chosen.count
    picked = [by_id[i] for i in chosen.ids]
    relationship = [m for m in picked if m.memory_type == "RELATIONSHIP"]
    facts = [m for m in picked if m.memory_type != "RELATIONSHIP"]
    assert picked == relationship + facts
    for category in (relationship, facts):
        assert category == sorted(category, key=memory_order)
    if chosen.context and layout.format == "mcp":
        data = _mcp_data(chosen.context)["data"]
        assert [e["summary"] for e in data.get("relationship", []) + data.get("facts", [])] == [
            m.summary for m in picked]
    assert bool(chosen.context) == bool(chosen.count or chosen.last_session)


# --- the query hierarchy, over a real store ------------------------------------------------------


@pytest.fixture
def store(database: Database, chroma: Any) -> TypedMemoryStore:
    return TypedMemoryStore(database, MemoryIndex(chroma, WordsEmbedding()))


async def _recall(store: TypedMemoryStore, project: ProjectRecord, system: int, user: int,
                  conversation: str | None, continuing: bool, text: str | None = None,
                  **options: Any) -> Recollection:
    return await recall(store, project.id, system_id=system, user_id=user, system_name="Ann",
                        user_name="Bo", conversation_id=conversation, continuing=continuing, text=text,
                        language="en", count=TOKENS, settings=RecallSettings(**options))


def draft(summary: str, memory_type: str = "FACT", importance: int = 5, system: int = A, user: int = B,
          **fields: Any) -> MemoryDraft:
    return MemoryDraft.model_validate({"memory_type": memory_type, "importance": importance,
                                       "summary": summary, "system_character_id": system,
                                       "user_character_id": user, **fields})


async def test_query_hierarchy(project: ProjectRecord, store: TypedMemoryStore) -> None:
    """A continuing conversation recalls pair and own-conversation memories; a new conversation of a
    known pair recalls pair-scope memories; a new pairing only each character's personality and
    preferences. The last session is the newest keyframe of another conversation, said once."""
    await store.add_many(project.id, [
        draft("they are old friends", "RELATIONSHIP", 8),
        draft("Bo hates mornings", "PREFERENCE", 6, character_id=B),
        draft("a secret told in c1", scope="conversation", conversation_id="c1"),
        draft("met again at the harbour", "EVENT", 5, source="keyframe", conversation_id="c0"),
        draft("Cy is shy", "PERSONALITY", 6, system=A, user=C, character_id=C)])
    continuing = await _recall(store, project, B, A, "c1", True, text="Bo mornings secret")
    assert lines(continuing.relationship) == ["- they are old friends"]
    assert set(lines(continuing.facts)) == {"- Bo hates mornings", "- a secret told in c1"}
    assert continuing.last_session == "met again at the harbour"
    assert continuing.context.count("met again at the harbour") == 1
    fresh = await _recall(store, project, A, B, "c2", False)
    assert lines(fresh.facts) == ["- Bo hates mornings"]
    assert fresh.last_session == "met again at the harbour"
    in_c0 = await _recall(store, project, A, B, "c0", True)
    assert (in_c0.last_session, "- met again at the harbour" in lines(in_c0.facts)) == ("", True)
    new_pair = await _recall(store, project, B, C, None, False)
    assert (new_pair.relationship, lines(new_pair.facts), new_pair.last_session) == (
        "", ["- Cy is shy", "- Bo hates mornings"], "")
    stranger = await _recall(store, project, 40, 41, None, False, format="mcp")
    assert stranger == Recollection("", "", "", "", 0)
    tight = await _recall(store, project, A, B, "c1", True, budget=30)
    assert TOKENS(tight.context) <= 30
