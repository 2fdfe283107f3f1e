"""The blocks a conversation writes for the model, and the completions it asks the seam for.

Keyframes and reminders use the seed's MCP context format (seed 003, section 1.3), so the display
pruning (:mod:`services.characters.display`) hides them and flags them. A keyframe's text comes from
a client's completion (purpose ``character.keyframe``) or, without one, from a deterministic
extract; memories are extracted (purpose ``character.memories``) only from a client's answer that
is a well-formed JSON array of memories, all of it or nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from services.summaries.seam import CompletionMessage, CompletionRequest

KEYFRAME_CHARS = 1200  # a keyframe's summary, at most
KEYFRAME_TOKENS = 400
EXTRACTION_TOKENS = 800
MAX_EXTRACTED = 20
_FENCE = re.compile(r"^```(?:json)?[ \t]*\n(?P<body>.*)\n```$", re.DOTALL | re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[。！？!?])|(?<=\.)\s")


@dataclass(frozen=True, slots=True)
class Turn:
    """One message as a transcript shows it: who spoke and what they said (display text)."""

    speaker: str
    text: str


def _mcp(kind: str, key: str, payload: dict[str, Any]) -> str:
    body = json.dumps({"schema": f"urn:am7:narrative:{kind}", "data": payload}, ensure_ascii=False,
                      separators=(",", ":"))
    # "<" only occurs inside JSON strings here: escaped, a summary that holds "</mcp:context>" (a
    # model's answer may) cannot end the block early and show the rest of it.
    body = body.replace("<", "\\u003c")
    return (f'<mcp:context type="resource" uri="am7://{kind}/{key}" ephemeral="true">\n{body}\n'
            "</mcp:context>")


def keyframe_block(conversation_id: str, summary: str, characters: Sequence[str]) -> str:
    state = {"summary": summary, "characters": ", ".join(characters)}
    return _mcp("keyframe", conversation_id, {"state": state})


def reminder_block(conversation_id: str, reminder: str) -> str:
    return _mcp("reminder", conversation_id, {"reminder": reminder})


def reminder_text(first_name: str, has_episodes: bool, language: str) -> str:
    if language == "zh":
        text = f"提醒：只以{first_name}的身份、用第一人称回应，每次一到四句，保持角色。"
        return text + ("按照剧集指引推进。" if has_episodes else "")
    text = (f"Reminder: respond only as {first_name}, in the first person, in 1-4 sentences; "
            "stay in character.")
    return text + (" Follow the episode guidance." if has_episodes else "")


def transcript(turns: Sequence[Turn]) -> str:
    return "\n".join(f"{t.speaker}: {t.text}" for t in turns if t.text.strip())


def keyframe_request(turns: Sequence[Turn], previous: str | None, names: Sequence[str], language: str,
                     prefer: str | None = None) -> CompletionRequest:
    who = "、".join(names) if language == "zh" else " and ".join(names)
    instruction = (f"用不超过六句话概括{who}这段对话里发生的事：事件、关系的变化、说出的事实。只写概括。"
                   if language == "zh" else
                   f"Summarize what happened between {who} in this conversation in at most six sentences: "
                   "events, changes in their relationship, facts revealed. Write only the summary.")
    body = (f"{'此前的概括' if language == 'zh' else 'Earlier summary'}: {previous}\n\n" if previous else "")
    return CompletionRequest(purpose="character.keyframe", max_tokens=KEYFRAME_TOKENS, prefer=prefer,
                             messages=(CompletionMessage("system", instruction),
                                       CompletionMessage("user", body + transcript(turns))))


def extractive_keyframe(turns: Sequence[Turn], previous: str | None, names: Sequence[str],
                        language: str) -> str:
    """Without a model: the start of the previous summary, then each turn's first sentence, to
    :data:`KEYFRAME_CHARS`. ``names`` are not repeated: the keyframe block names the characters."""
    label = "此前：" if language == "zh" else "Earlier: "
    earlier = label + first_sentence(previous, 200) if previous else ""
    lines = [earlier] if earlier else []
    lines += [f"{t.speaker}: {first_sentence(t.text, 160)}" for t in turns if t.text.strip()]
    return " ".join(lines)[:KEYFRAME_CHARS].rstrip()


def first_sentence(text: str, limit: int) -> str:
    """``text`` up to its first sentence end, at most ``limit`` characters."""
    text = " ".join(text.split())
    parts = _SENTENCE_END.split(text, maxsplit=1)
    head = parts[0].strip() if parts else text
    return head[:limit].rstrip()


def extraction_request(turns: Sequence[Turn], types: Sequence[str], language: str,
                       prefer: str | None = None) -> CompletionRequest:
    instruction = (
        "Extract any new facts, relationship changes or notable events from this exchange. Answer with "
        "a JSON array of memories and nothing else, or [] when there is nothing new. Each memory: "
        '{"memoryType": one of ' + ", ".join(types) + ', "importance": 1-10, "summary": one sentence, '
        '"content": the detail}.'
        + (" Write summaries in Chinese." if language == "zh" else ""))
    return CompletionRequest(purpose="character.memories", max_tokens=EXTRACTION_TOKENS, prefer=prefer,
                             messages=(CompletionMessage("system", instruction),
                                       CompletionMessage("user", transcript(turns))))


class Extracted(BaseModel):
    """One memory as an extraction answer gives it."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    memoryType: Literal["NOTE", "FACT", "EVENT", "RELATIONSHIP", "PERSONALITY", "PREFERENCE", "RULE",
                        "OUTCOME"]
    importance: StrictInt = Field(ge=1, le=10)
    summary: str = Field(min_length=1, max_length=2000, pattern=r"\S")
    content: str = Field(default="", max_length=16_000)

    @property
    def memory_type(self) -> str:
        return self.memoryType


class Malformed(ValueError):
    """The answer is not a well-formed JSON array of memories (``reason`` says how, never quoting it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_memories(text: str, model: Any) -> list[Any]:
    """Every entry of a JSON array answer, each validated by pydantic ``model``; all or none."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):
        raise Malformed("not_json") from None
    if not isinstance(raw, list):
        raise Malformed("not_array")
    if len(raw) > MAX_EXTRACTED:
        raise Malformed("too_many")
    try:
        return [model.model_validate(entry) for entry in raw]
    except ValidationError:
        raise Malformed("invalid_memory") from None
