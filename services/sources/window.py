"""The Immediate layer's window: text before (and after) the cursor, cut to the skill's shape.

Only a slice near the cursor is ever tokenized, so a 300k-character chapter
costs no more than a short one. The slice starts small (one character per
token) and grows only while it still fits, so Chinese text, at about one
token per character, is not counted six times over.
"""

from __future__ import annotations

from services.context.counting import CountCache
from services.context.models import Window
from services.context.skills import Skill
from services.context.trim import keep_head, keep_tail
from services.errors import InvalidInput

# No tokenizer in use averages more than this many characters per token on prose.
_MAX_CHARS_PER_TOKEN = 6
# The first slice tried, in characters per token, and the margin when growing it.
_FIRST_CHARS_PER_TOKEN = 1
_GROWTH_MARGIN = 1.25


def cut_window(text: str, cursor: int, skill: Skill, tokens: int, counter: CountCache) -> Window:
    """The window of ``tokens`` tokens around ``cursor`` (a code-point offset) for ``skill``."""
    if not 0 <= cursor <= len(text):
        raise InvalidInput("cursorPosition is outside the document", length=len(text))
    after_tokens = int(tokens * skill.after_share)
    before_tokens = tokens - after_tokens
    before = keep_tail(_slice(text, cursor, before_tokens, counter, backwards=True), before_tokens,
                       counter.count, counter.locate)
    after = keep_head(_slice(text, cursor, after_tokens, counter, backwards=False), after_tokens,
                      counter.count, counter.locate)
    return Window(before=before, after=after, start=cursor - len(before), cursor=cursor,
                  tokens_before=counter.count(before), tokens_after=counter.count(after), document=text)


def _slice(text: str, cursor: int, tokens: int, counter: CountCache, *, backwards: bool) -> str:
    """The text on one side of ``cursor`` that the cut to ``tokens`` tokens lies in.

    The smallest slice tried that holds more than ``tokens`` tokens, or failing that
    ``tokens`` x 6 characters (or up to the document's edge). Cutting the smaller slice
    gives the same window: the cut lies where the suffix (or prefix) from the cursor
    reaches ``tokens`` tokens, which is inside any slice that holds more (as long as a
    longer text never counts fewer tokens, which the cut's own search assumes too).
    """
    if tokens <= 0:
        return ""
    room = cursor if backwards else len(text) - cursor
    limit = min(room, tokens * _MAX_CHARS_PER_TOKEN)
    size = min(limit, tokens * _FIRST_CHARS_PER_TOKEN)
    while True:
        piece = text[cursor - size:cursor] if backwards else text[cursor:cursor + size]
        if size >= limit:
            return piece
        counted = counter.count(piece)
        if counted > tokens:
            return piece
        # Grow by the characters per token seen so far, with a margin.
        size = min(limit, max(size + 1, int(size * tokens / max(counted, 1) * _GROWTH_MARGIN)))
