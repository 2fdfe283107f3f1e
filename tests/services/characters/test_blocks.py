"""The blocks a character conversation writes for the model (the seed's MCP keyframes and reminders),
the completions it asks for, and the all-or-nothing parsing of extracted memories (seed 003,
sections 1.3, 4.3 and 4.4)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.characters.blocks import (
    KEYFRAME_CHARS,
    MAX_EXTRACTED,
    Extracted,
    Malformed,
    Turn,
    extraction_request,
    extractive_keyframe,
    first_sentence,
    keyframe_block,
    keyframe_request,
    parse_memories,
    reminder_block,
    reminder_text,
    transcript,
)
from services.characters.display import display

MCP = re.compile(r'\A<mcp:context type="resource" uri="am7://(?P<kind>\w+)/(?P<key>[^"]+)" '
                 r'ephemeral="true">\n(?P<body>.*)\n</mcp:context>\Z', re.DOTALL)
MEMORY = {"memoryType": "FACT", "importance": 4, "summary": "Bo is allergic to cats.",
          "content": "He sneezed."}
TYPES = ("NOTE", "FACT", "EVENT", "RELATIONSHIP", "PERSONALITY", "PREFERENCE", "RULE", "OUTCOME")


def body(block: str) -> tuple[str, str, Any]:
    found = MCP.match(block)
    assert found is not None, block
    return found.group("kind"), found.group("key"), json.loads(found.group("body"))


def test_keyframe_block_is_the_seeds_mcp_format() -> None:
    """A keyframe is an ephemeral MCP resource at am7://keyframe/{conversation} whose body is the
    urn:am7:narrative:keyframe schema with the summary and the characters in its state."""
    kind, key, payload = body(keyframe_block("c0ffee", "They met at the café.", ["Ada", "Bo"]))
    assert (kind, key) == ("keyframe", "c0ffee")
    assert payload == {"schema": "urn:am7:narrative:keyframe",
                       "data": {"state": {"summary": "They met at the café.", "characters": "Ada, Bo"}}}


def test_reminder_block_is_the_seeds_mcp_format() -> None:
    """A reminder is an ephemeral MCP resource at am7://reminder/{conversation} with the
    urn:am7:narrative:reminder schema."""
    kind, key, payload = body(reminder_block("c0ffee", "Stay in character."))
    assert (kind, key) == ("reminder", "c0ffee")
    assert payload == {"schema": "urn:am7:narrative:reminder", "data": {"reminder": "Stay in character."}}


def test_display_hides_keyframes_and_flags_them() -> None:
    """display() hides a keyframe block whole and sets has_keyframe only."""
    shown = display("Before.\n" + keyframe_block("c1", "They met.", ["Ada", "Bo"]) + "\nAfter.")
    assert (shown.content, shown.has_keyframe, shown.has_reminder, shown.has_thoughts) == (
        "Before.\nAfter.", True, False, False)


def test_display_hides_reminders_and_flags_them() -> None:
    """display() hides a reminder block whole and sets has_reminder only."""
    shown = display("Hi.\n\n" + reminder_block("c1", reminder_text("Ada", True, "en")))
    assert (shown.content, shown.has_keyframe, shown.has_reminder, shown.has_thoughts) == (
        "Hi.", False, True, False)


@pytest.mark.parametrize("summary", ["Then </mcp:context> they left.", "A </MCP:Context > B",
                                     "<think>x</think>", "(KeyFrame: old) and ``` fence",
                                     '"quoted" \\ back\nslash'])
def test_a_summary_cannot_break_out_of_its_block(summary: str) -> None:
    """Whatever a model's summary holds (a closing tag, a thought, a marker, quotes), the block is
    hidden whole, the display keeps only the text around it, and the body still reads back."""
    block = keyframe_block("c1", summary, ["Ada"])
    shown = display("Before.\n" + block + "\nAfter.")
    assert shown.content == "Before.\nAfter."
    assert body(block)[2]["data"]["state"]["summary"] == summary
    assert body(reminder_block("c1", summary))[2]["data"]["reminder"] == summary


@given(st.text(max_size=200), st.lists(st.text(max_size=20), max_size=3))
def test_any_keyframe_is_hidden_whole(summary: str, names: list[str]) -> None:
    """For any summary and names, display() of a keyframe block alone is empty and flags a keyframe."""
    shown = display(keyframe_block("c1", summary, names))
    assert (shown.content, shown.has_keyframe, shown.has_reminder) == ("", True, False)


def test_reminder_text_in_both_languages() -> None:
    """The reminder names the character and mentions the episode guidance only when there is one."""
    assert reminder_text("Ada", False, "en") == (
        "Reminder: respond only as Ada, in the first person, in 1-4 sentences; stay in character.")
    assert reminder_text("Ada", True, "en").endswith(" Follow the episode guidance.")
    assert reminder_text("黛玉", False, "zh") == (
        "提醒：只以黛玉的身份、用第一人称回应，每次一到四句，保持角色。")
    assert reminder_text("黛玉", True, "zh").endswith("按照剧集指引推进。")


def test_transcript_skips_blank_turns() -> None:
    """A transcript is one "speaker: text" line per turn that says something."""
    assert transcript([Turn("Ada", "Hi."), Turn("Bo", "  "), Turn("Bo", "Hello.")]) == "Ada: Hi.\nBo: Hello."


def test_keyframe_request() -> None:
    """A keyframe is asked for under purpose character.keyframe: an instruction naming both
    characters, then the earlier summary (if any) and the transcript."""
    turns = [Turn("Ada", "Hi."), Turn("Bo", "Hello.")]
    request = keyframe_request(turns, "They met.", ["Ada", "Bo"], "en", prefer="conn-1")
    assert (request.purpose, request.max_tokens, request.prefer) == ("character.keyframe", 400, "conn-1")
    system, user = request.messages
    assert (system.role, user.role) == ("system", "user")
    assert "Ada and Bo" in system.content
    assert user.content == "Earlier summary: They met.\n\nAda: Hi.\nBo: Hello."
    zh = keyframe_request(turns, None, ["黛玉", "宝玉"], "zh")
    assert "黛玉、宝玉" in zh.messages[0].content
    assert zh.messages[1].content == "Ada: Hi.\nBo: Hello."


def test_extraction_request_lists_the_memory_types() -> None:
    """Memories are asked for under purpose character.memories, as a JSON array of the given types."""
    request = extraction_request([Turn("Ada", "Hi.")], ["FACT", "EVENT"], "zh")
    assert (request.purpose, request.max_tokens) == ("character.memories", 800)
    assert "JSON array" in request.messages[0].content
    assert "FACT, EVENT" in request.messages[0].content
    assert request.messages[0].content.endswith("Write summaries in Chinese.")
    assert request.messages[1].content == "Ada: Hi."


# --- parse_memories ----------------------------------------------------------------------------


def test_a_well_formed_array_is_parsed() -> None:
    """Every entry of a JSON array of memories is returned, validated, in order."""
    second = {"memoryType": "RELATIONSHIP", "importance": 10, "summary": "They are friends."}
    found = parse_memories(json.dumps([MEMORY, second]), Extracted)
    assert [(m.memory_type, m.importance, m.summary, m.content) for m in found] == [
        ("FACT", 4, "Bo is allergic to cats.", "He sneezed."), ("RELATIONSHIP", 10, "They are friends.", "")]
    assert parse_memories("  []  ", Extracted) == []


@pytest.mark.parametrize("fence", ["```json\n%s\n```", "```\n%s\n```", "  ```json\n%s\n```\n",
                                   "```json\n\n%s\n\n```"])
def test_a_fenced_array_is_parsed(fence: str) -> None:
    """The array may come inside a ```json (or bare ```) code fence, with whitespace around it."""
    found = parse_memories(fence % json.dumps([MEMORY], indent=2), Extracted)
    assert [m.summary for m in found] == ["Bo is allergic to cats."]


def test_unknown_fields_of_a_memory_are_ignored() -> None:
    """Fields a memory does not have are ignored, not a reason to refuse it."""
    assert parse_memories(json.dumps([{**MEMORY, "confidence": 0.9}]), Extracted)[0].importance == 4


@pytest.mark.parametrize(("text", "reason"), [
    ("Here are the memories: none", "not_json"),
    ("", "not_json"),
    ("[" * 100_000, "not_json"),
    ("```json\n[1,\n```", "not_json"),
    (json.dumps(MEMORY), "not_array"),
    ("null", "not_array"),
    (json.dumps([MEMORY, {**MEMORY, "memoryType": "GOSSIP"}]), "invalid_memory"),
    (json.dumps([MEMORY, {**MEMORY, "memoryType": "fact"}]), "invalid_memory"),
    (json.dumps([{**MEMORY, "importance": 11}]), "invalid_memory"),
    (json.dumps([{**MEMORY, "importance": 0}]), "invalid_memory"),
    (json.dumps([{**MEMORY, "importance": "7"}]), "invalid_memory"),
    (json.dumps([{**MEMORY, "importance": 7.0}]), "invalid_memory"),
    (json.dumps([{**MEMORY, "importance": True}]), "invalid_memory"),
    (json.dumps([{**MEMORY, "summary": ""}]), "invalid_memory"),
    (json.dumps([MEMORY, "a note"]), "invalid_memory"),
    (json.dumps([MEMORY] * (MAX_EXTRACTED + 1)), "too_many"),
])
def test_malformed_answers_are_refused_whole(text: str, reason: str) -> None:
    """Non-JSON, a JSON object, an array with any bad entry (a wrong memoryType, importance out of
    1-10 or not an integer, an empty summary) or more than MAX_EXTRACTED memories is refused with a
    reason that does not quote the answer: nothing is returned, all or none."""
    with pytest.raises(Malformed) as refused:
        parse_memories(text, Extracted)
    assert refused.value.reason == reason
    assert str(refused.value) == reason


def test_at_most_max_extracted_are_accepted() -> None:
    """Exactly MAX_EXTRACTED memories are accepted."""
    assert len(parse_memories(json.dumps([MEMORY] * MAX_EXTRACTED), Extracted)) == MAX_EXTRACTED


MEMORIES = st.fixed_dictionaries({
    "memoryType": st.sampled_from([*TYPES, "OTHER", "fact"]),
    "importance": st.integers(-2, 12) | st.just("5"),
    "summary": st.text(max_size=10),
})


@given(st.lists(MEMORIES, max_size=5))
def test_all_or_none(entries: list[dict[str, Any]]) -> None:
    """For any array, either every entry is returned or Malformed is raised: never a part."""
    if not all(_valid(e) for e in entries):
        with pytest.raises(Malformed, match=r"^invalid_memory$"):
            parse_memories(json.dumps(entries), Extracted)
    else:
        found = parse_memories(json.dumps(entries), Extracted)
        assert len(found) == len(entries)
        assert all(_valid(e) for e in entries)


def _valid(entry: dict[str, Any]) -> bool:
    return (entry["memoryType"] in TYPES and isinstance(entry["importance"], int)
            and 1 <= entry["importance"] <= 10 and len(entry["summary"]) >= 1)


# --- extractive keyframes and first sentences ---------------------------------------------------


def test_extractive_keyframe() -> None:
    """Without a model, a keyframe is the earlier summary's first sentence, labelled, and each
    speaker's first sentence of every turn that says something (the block names the characters)."""
    turns = [Turn("Ada", "Hello there. How are you?"), Turn("Bo", "我很好。你呢？"), Turn("Bo", " ")]
    assert extractive_keyframe(turns, "They fought. Then made up.", ["Ada", "Bo"], "en") == (
        "Earlier: They fought. Ada: Hello there. Bo: 我很好。")
    assert extractive_keyframe(turns, "他们吵架了。后来和好。", ["Ada", "Bo"], "zh") == (
        "此前：他们吵架了。 Ada: Hello there. Bo: 我很好。")
    assert extractive_keyframe(turns, None, ["Ada", "Bo"], "zh") == "Ada: Hello there. Bo: 我很好。"
    assert extractive_keyframe([], None, ["Ada"], "en") == ""


TURNS = st.lists(st.builds(Turn, st.text(max_size=12), st.text(max_size=400)), max_size=30)


@given(TURNS, st.none() | st.text(max_size=400), st.lists(st.text(max_size=12), min_size=1, max_size=3),
       st.sampled_from(["en", "zh"]))
def test_extractive_keyframe_is_deterministic_and_bounded(turns: list[Turn], previous: str | None,
                                                          names: list[str], language: str) -> None:
    """For any turns, the extractive keyframe is the same every time and at most KEYFRAME_CHARS."""
    first = extractive_keyframe(turns, previous, names, language)
    assert first == extractive_keyframe(list(turns), previous, list(names), language)
    assert len(first) <= KEYFRAME_CHARS
    assert first == first.rstrip()


@pytest.mark.parametrize(("text", "expected"), [
    ("Hello there. How are you?", "Hello there."),
    ("Wow! Great.", "Wow!"),
    ("Really? Yes.", "Really?"),
    ("Pi is 3.14 exactly. Yes.", "Pi is 3.14 exactly."),
    ("  Spread\nover   lines. Next.", "Spread over lines."),
    ("No end at all", "No end at all"),
    ("你好。今天怎么样？", "你好。"),
    ("真的吗？是的。", "真的吗？"),
    ("太好了！走吧。", "太好了！"),
    ("没有句号", "没有句号"),
    ("", ""),
])
def test_first_sentence_in_english_and_chinese(text: str, expected: str) -> None:
    """The first sentence ends at 。！？!? or a full stop followed by a space; whitespace is collapsed."""
    assert first_sentence(text, 100) == expected


def test_first_sentence_is_cut_to_the_limit() -> None:
    """A first sentence longer than the limit is cut to it."""
    assert first_sentence("A very long first sentence. Then more.", 6) == "A very"
    assert first_sentence("很长很长的第一句话。", 3) == "很长很"


@given(st.text(max_size=300), st.integers(0, 200))
def test_first_sentence_is_bounded_and_collapsed(text: str, limit: int) -> None:
    """For any text, the first sentence is at most the limit and holds no line break or double space."""
    found = first_sentence(text, limit)
    assert len(found) <= limit
    assert "\n" not in found
    assert "  " not in found
