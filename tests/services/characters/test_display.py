"""The display text of character-chat messages: thoughts, reminders and keyframes hidden, all else kept."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.characters.display import Display, display

# Seed 003, section 1.3: the keyframe block the chat server writes.
SEED_KEYFRAME = (
    '<mcp:context type="resource" uri="am7://keyframe/cfg-42" ephemeral="true">\n'
    '{"schema":"urn:am7:narrative:keyframe","data":{"state":{\n'
    '  "summary":"They argued about the map.", "analysis":"Tension rises.", "rating":"M",'
    ' "characters":"Ada, Bo"}}}\n'
    "</mcp:context>\n"
)
REMINDER_BLOCK = (
    '<mcp:context type="resource" uri="am7://reminder/cfg-42" ephemeral="true">\n'
    '{"schema":"urn:am7:narrative:reminder","data":{"items":[{"key":"user-reminder",'
    '"value":"Stay in character (no OOC)."}]}}\n'
    "</mcp:context>\n"
)


def shown(content: str) -> str:
    return display(content).content


def flags(content: str) -> tuple[bool, bool, bool]:
    result = display(content)
    return result.has_thoughts, result.has_reminder, result.has_keyframe


# --- thoughts ------------------------------------------------------------------------------------


def test_a_think_block_is_hidden_and_flagged() -> None:
    """<think>...</think> disappears from the display text and sets has_thoughts only."""
    result = display("<think>The user wants a greeting.</think>Hello there.")
    assert result == Display("Hello there.", has_thoughts=True, has_reminder=False, has_keyframe=False)


def test_a_thought_block_in_chinese_text_is_hidden() -> None:
    """<thought> blocks are thoughts too; the Chinese text around them is kept exactly."""
    result = display("他抬起头。<thought>她在想什么？也许是那封信。</thought>她笑了。")
    assert result.content == "他抬起头。她笑了。"
    assert result.has_thoughts


def test_tag_names_match_in_any_case_and_opening_tags_may_carry_attributes() -> None:
    """<THINK type="inner">...</Think > is a thought block: ASCII case and attributes do not matter."""
    assert shown('<THINK type="inner">plan</Think >Yes.') == "Yes."
    assert shown("<Thought\tid='1'>plan</THOUGHT>是的。") == "是的。"


def test_several_multiline_blocks_are_all_hidden() -> None:
    """Every block goes, however many lines it spans."""
    content = (
        "<think>\nStep 1: read the scene.\nStep 2: answer.\n</think>\n\n"
        "Ada opened the door.\n\n<thought>\n她会害怕吗？\n</thought>\n\nBo waited."
    )
    assert shown(content) == "Ada opened the door.\n\nBo waited."


def test_an_unclosed_thought_hides_everything_after_it() -> None:
    """A model cut mid-thought: from the opening tag to the end of the message nothing is shown."""
    result = display("Ada nodded.\n\n<think>Now I should describe the storm and then")
    assert result.content == "Ada nodded."
    assert result.has_thoughts


def test_a_stray_closing_tag_is_removed_alone() -> None:
    """Some models put the opening tag in the prompt: only the lone </think> goes, its text stays."""
    result = display("I should be brief.</think>\n\nHello!")
    assert result.content == "I should be brief.\n\nHello!"
    assert result.has_thoughts


def test_a_self_closing_thought_is_removed() -> None:
    """<think/> (an empty thought) is removed and counts as a thought."""
    assert display("<think/>你好。") == Display("你好。", True, False, False)


def test_thought_blocks_do_not_nest() -> None:
    """A block ends at the first closing tag of its name; the later stray closing tag goes alone."""
    assert shown("<think>a<think>b</think>c</think>d") == "cd"


def test_a_block_ends_only_at_its_own_closing_tag() -> None:
    """<think> is not closed by </thought>: it runs to the end of the message."""
    assert shown("Hi.<think>x</thought>y") == "Hi."


def test_near_misses_are_text() -> None:
    """<thinking>, a <think without ">" and a tag broken over lines are not tags."""
    for content in ("<thinking>hm</thinking> ok", "I <think so", "<think\n>no</think\n>", "a <thinks> b"):
        assert display(content) == Display(content, False, False, False)


# --- MCP context blocks --------------------------------------------------------------------------


def test_the_seed_keyframe_block_is_hidden_and_flagged() -> None:
    """The keyframe block of seed 003, section 1.3, is hidden whole and sets has_keyframe only."""
    result = display(SEED_KEYFRAME + "\nAda looked back at the map.")
    assert result == Display("Ada looked back at the map.", False, False, True)


def test_a_reminder_block_appended_to_a_user_message_is_hidden() -> None:
    """The server appends a reminder block after the user's text: the user's text stays."""
    result = display("我们去码头吧。\n" + REMINDER_BLOCK)
    assert result == Display("我们去码头吧。", False, True, False)


def test_the_uri_decides_first_then_the_schema() -> None:
    """uri am7://reminder/... or am7://keyframe/... decides; without one, the body's schema does."""
    by_uri = "<mcp:context uri='AM7://Keyframe/x'>{\"schema\":\"urn:am7:narrative:reminder\"}</mcp:context>"
    assert flags(by_uri) == (False, False, True)
    by_schema = (
        '<mcp:context type="resource">\n{"schema": "urn:am7:narrative:keyframe", "data": {}}\n</mcp:context>'
    )
    assert flags(by_schema) == (False, False, True)
    reminder_schema = '<mcp:context>{"schema":"urn:am7:narrative:reminder","data":{}}</mcp:context>'
    assert flags(reminder_schema) == (False, True, False)
    bare_uri = '<mcp:context uri="am7://reminder">Stay in character.</mcp:context>'
    assert flags(bare_uri) == (False, True, False)


def test_a_reasoning_block_is_a_thought() -> None:
    """An MCP block of type="reasoning" (or with schema urn:am7:llm:reasoning) counts as a thought."""
    reasoning = (
        '<mcp:context type="reasoning" ephemeral="true">\n{"schema":"urn:am7:llm:reasoning"}\n</mcp:context>'
    )
    assert display(reasoning + "\nHi.") == Display("Hi.", True, False, False)


def test_other_context_blocks_are_hidden_without_a_flag() -> None:
    """A memory or citation block was written for the model: hidden, but no flag is set."""
    memory = (
        '<mcp:context type="resource" uri="am7://memory/ada/bo" ephemeral="true">\n'
        '{"schema":"urn:am7:narrative:memory","data":{"lastSession":"They reconciled."}}\n</mcp:context>\n'
    )
    assert display(memory + "Good morning.") == Display("Good morning.", False, False, False)


def test_an_uri_inside_another_attribute_value_does_not_count() -> None:
    """Attributes are read as attributes: a uri= quoted inside title="..." is not the block's uri."""
    block = "<mcp:context title=\"see uri='am7://reminder/x'\" uri=\"am7://citations/1\">c</mcp:context>ok"
    assert display(block) == Display("ok", False, False, False)


def test_an_unclosed_context_block_hides_the_rest() -> None:
    """A context block without </mcp:context> runs to the end of the message."""
    unclosed = 'Hi.\n<mcp:context uri="am7://keyframe/1">{"schema":'
    assert display(unclosed) == Display("Hi.", False, False, True)


# --- the older text markers ----------------------------------------------------------------------


def test_an_old_keyframe_message_with_nested_parentheses_is_hidden_whole() -> None:
    """The old server's "(KeyFrame: (Summary of ...) analysis)" goes to its matching parenthesis."""
    result = display("(KeyFrame: (Summary of Ada and Bo in aM/R-rated roleplay) They argued (again).)")
    assert result == Display("", False, False, True)


def test_an_old_reminder_goes_to_its_matching_parenthesis_and_the_text_after_stays() -> None:
    """From "(Reminder" to its ")" on the same paragraph is hidden; the rest of the line stays."""
    result = display('走吧。(Reminder: {"value": "stay (calm)"}) 好的。')
    assert result == Display("走吧。 好的。", False, True, False)


def test_an_unclosed_marker_hides_to_the_end_of_the_message() -> None:
    """Without a ")" before the paragraph ends, everything from the marker on is hidden."""
    content = "Let's go.\n(Reminder: stay in character\n\nA later paragraph (with an aside) is hidden too."
    assert display(content) == Display("Let's go.", False, True, False)


def test_markers_are_exact_words() -> None:
    """(reminder, (Reminders and (KeyFrames are prose; a marker may be followed by Chinese text."""
    for content in ("(reminder: buy milk)", "(Reminders are useful.)", "(KeyFrames of the film)"):
        assert display(content) == Display(content, False, False, False)
    assert display("好。(Reminder：保持角色)") == Display("好。", False, True, False)


# --- code blocks -----------------------------------------------------------------------------------


def test_tags_inside_a_fenced_code_block_are_kept() -> None:
    """A writer pasting an example: tags and markers inside ``` or ~~~ fences are text."""
    content = (
        "Use it like this:\n```xml\n<think>plan</think>\n(Reminder: x\n```\n"
        "~~~~\n<mcp:context uri=\"am7://keyframe/1\">k</mcp:context>\n~~~~\nDone."
    )
    assert display(content) == Display(content, False, False, False)


def test_blocks_outside_a_fence_are_still_hidden() -> None:
    """Only the fence is protected: a thought after it goes."""
    content = "```\n<think>kept</think>\n```\n<think>hidden</think>\nAfter."
    assert shown(content) == "```\n<think>kept</think>\n```\nAfter."


def test_a_fence_closes_only_with_at_least_as_many_of_its_characters() -> None:
    """```` is not closed by ``` nor by ~~~~; an unclosed fence protects to the end."""
    content = "````\n```\n~~~~\n<think>still code</think>"
    assert display(content) == Display(content, False, False, False)


def test_a_code_block_inside_a_thought_is_hidden_with_it() -> None:
    """Inside a hidden block only its end is looked for: a fence there is hidden too."""
    assert shown("<think>\n```python\nprint('x')\n```\n</think>\nDone.") == "Done."


# --- whitespace ------------------------------------------------------------------------------------


def test_blank_lines_around_a_removal_collapse_to_one() -> None:
    """At a removal, a whitespace run across lines keeps at most one blank line."""
    assert shown("Ada.\n\n\n<think>x</think>\n\n\n\nBo.") == "Ada.\n\nBo."
    assert shown("Ada.\n\n<think>x</think>\nBo.") == "Ada.\n\nBo."
    assert shown("Ada.<think>x</think>\n\nBo.") == "Ada.\n\nBo."


def test_a_block_on_its_own_line_leaves_the_lines_around_it_adjacent() -> None:
    """Removing a block that filled its own line(s) removes the line, not adds a blank one."""
    assert shown("Ada.\n<think>x</think>\nBo.") == "Ada.\nBo."
    assert shown("Ada.\n<think>1</think>\n<think>2</think>\nBo.") == "Ada.\nBo."
    assert shown("Ada.<think>x</think>\nBo.") == "Ada.\nBo."


def test_whitespace_away_from_removals_is_untouched() -> None:
    """Blank lines and double spaces elsewhere stay byte for byte."""
    assert shown("A\n\n\n\nB  C<think>x</think>") == "A\n\n\n\nB  C"


def test_a_removal_inside_a_line_keeps_one_side_of_the_space() -> None:
    """"Hello <think>x</think> world" reads "Hello world"; Chinese text joins without a space."""
    assert shown("Hello <think>x</think> world") == "Hello world"
    assert shown("Hello<think>x</think> world") == "Hello world"
    assert shown("他说<think>x</think>你好") == "他说你好"


def test_the_indentation_of_the_next_line_is_kept() -> None:
    """A Chinese paragraph indent after a removal stays, also on the first line."""
    story = "　　他走进房间。\n　　她没有抬头。"
    assert shown("<think>x</think>\n\n" + story) == story
    assert shown("第一段。\n\n<think>x</think>\n    code line") == "第一段。\n\n    code line"


def test_windows_line_breaks_are_kept() -> None:
    """Line breaks kept at a removal keep their \\r\\n."""
    assert shown("Ada.\r\n<think>x</think>\r\n\r\nBo.") == "Ada.\r\n\r\nBo."


def test_only_a_thought_leaves_nothing() -> None:
    """A message that is only hidden text shows as empty."""
    assert display("  <think>只是想想。</think>  \n") == Display("", True, False, False)


# --- what forms once something is removed ----------------------------------------------------------


def test_a_tag_formed_by_a_removal_is_recognised() -> None:
    """"<thi" + removed block + "nk>" is a <think> tag once joined: it hides what follows."""
    assert shown("Hi.\n<thi<think>x</think>nk>secret") == "Hi."
    assert shown("a </thi<think>x</think>nk > b") == "a b"


def test_a_marker_formed_by_a_removal_is_recognised() -> None:
    """"(Remin" + removed block + "der" is a reminder marker once joined."""
    assert display("ok (Remin<think>x</think>der: y) fine") == Display("ok fine", True, True, False)


def test_a_fence_formed_by_a_removal_protects_its_code() -> None:
    """"``" + removed block + "`" opens a fence once joined: the tag in it stays."""
    content = "``<think>x</think>`\n<think>example</think>\n```\nend"
    assert shown(content) == "```\n<think>example</think>\n```\nend"


# --- properties --------------------------------------------------------------------------------------

FRAGMENTS = [
    "<think>", "</think>", "<thought>", "</Thought >", "<think a='1'>", "<think/>", "<thi", "nk>", "nk", ">",
    "<", "</", "/", "(Reminder", "(KeyFrame", "(Remin", "der", "(Key", "Frame", ")", "(", ":", "\n", "\n\n",
    " ", "\t", "\u3000", "\r\n", "```", "``", "`", "~~~", "~", '<mcp:context uri="am7://reminder/x">',
    '<mcp:context type="reasoning">', "<mcp:context", "</mcp:context>", "mcp:context", '"schema":',
    '"urn:am7:narrative:keyframe"', "Hello", "中文", "她笑了。", "x", "=", '"', "'",
]
messages = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=40).map("".join)
MARKUP = re.compile(r"</?(?:think|thought|mcp:context)|\((?:Reminder|KeyFrame)", re.IGNORECASE)
plain_words = st.text(
    alphabet=st.one_of(st.sampled_from("abc xyz.,!?;:\n\t\u3000中文她笑了。<>()`~/'\""), st.characters()),
    max_size=60,
)


def trimmed(text: str) -> str:
    """Trailing whitespace and leading whitespace-only lines removed (the first line's indent kept)."""
    text = text.rstrip()
    while "\n" in text and not text[: text.index("\n")].strip():
        text = text[text.index("\n") + 1:]
    return text


@settings(max_examples=500, deadline=None)
@given(messages)
def test_display_never_raises_and_is_its_own_fixed_point(content: str) -> None:
    """display() always returns; displaying a display text changes nothing and finds nothing hidden."""
    once = display(content)
    twice = display(once.content)
    assert twice == Display(once.content, False, False, False)


@settings(max_examples=300, deadline=None)
@given(plain_words)
def test_text_without_markup_is_returned_unchanged_but_trimmed(content: str) -> None:
    """Without any tag or marker the text is kept (only its ends trimmed) and no flag is set."""
    if MARKUP.search(content):
        return
    assert display(content) == Display(trimmed(content), False, False, False)


safe_text = st.text(alphabet=st.sampled_from("abc xyz.,!?\n中文她笑了。"), min_size=1, max_size=30).map(
    str.strip
)


@settings(max_examples=200, deadline=None)
@given(safe_text, st.text(max_size=40), safe_text)
def test_a_thought_between_paragraphs_leaves_just_the_paragraphs(
    before: str, thought: str, after: str
) -> None:
    """Whatever a thought holds, a thought between two paragraphs leaves them one blank line apart."""
    if "</think" in thought.lower() or not before or not after:
        return
    result = display(f"{before}\n\n<think>{thought}</think>\n\n{after}")
    assert result == Display(f"{before}\n\n{after}", True, False, False)


@settings(max_examples=200, deadline=None)
@given(safe_text, st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=4))
def test_any_reminder_payload_is_hidden(before: str, data: dict[str, str]) -> None:
    """A reminder block appended to a message is hidden whatever JSON it carries."""
    body = json.dumps({"schema": "urn:am7:narrative:reminder", "data": data}, ensure_ascii=False)
    if "</mcp:context" in body.lower() or not before:
        return
    opening = '<mcp:context type="resource" uri="am7://reminder/c1" ephemeral="true">'
    block = f"{opening}\n{body}\n</mcp:context>\n"
    assert display(f"{before}\n{block}") == Display(before, False, True, False)


def test_display_is_frozen() -> None:
    """A Display is an immutable value."""
    result = display("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.content = "y"  # type: ignore[misc]


# --- pathological input ------------------------------------------------------------------------------

MIB = 1 << 20
# A bound on the wait, generous for a busy machine: a quadratic pass over 1 MiB would take hours,
# a linear one takes under a second here.
BOUND_SECONDS = 60.0


def repeat(unit: str, prefix: str = "") -> str:
    return prefix + unit * ((MIB - len(prefix)) // len(unit))


@pytest.mark.parametrize(
    "build",
    [
        lambda: repeat("<think>"),
        lambda: repeat("<think>x</think>"),
        lambda: repeat("</think>"),
        lambda: repeat("<"),
        lambda: repeat("(Reminder"),
        lambda: repeat("(Reminder)"),
        lambda: repeat("("),
        lambda: repeat("<thi<think>x</think>"),
        lambda: repeat("<think>x</think>", prefix="<think " + "a" * 500_000),
        lambda: repeat("`<think>x</think>", prefix="a" + " " * 500_000),
        lambda: repeat("<think>x</think>", prefix="</think" + " " * 500_000),
        lambda: repeat("(Reminder)b", prefix="<think a") + "\n",
    ],
    ids=["openers", "blocks", "closers", "less-than", "markers", "closed-markers", "parens",
         "formed-tags", "long-attributes", "long-indent", "long-closer", "markers-in-attributes"],
)
def test_a_mebibyte_of_pathological_markup_finishes_in_seconds(build: Callable[[], str]) -> None:
    """Linear time: 1 MiB full of openers, markers or near-misses is done well within the bound."""
    content = build()
    started = time.perf_counter()
    display(content)
    assert time.perf_counter() - started < BOUND_SECONDS
