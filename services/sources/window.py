"""The Immediate layer's window: text before (and after) the cursor, cut to the skill's shape.

Only a slice near the cursor is ever tokenized, so a 300k-character chapter
costs no more than a short one.
"""

from __future__ import annotations

from services.context.counting import CountCache
from services.context.models import Window
from services.context.skills import Skill
from services.context.trim import keep_head, keep_tail
from services.errors import InvalidInput

# No tokenizer in use averages more than this many characters per token on prose.
_MAX_CHARS_PER_TOKEN = 6


def cut_window(text: str, cursor: int, skill: Skill, tokens: int, counter: CountCache) -> Window:
    """The window of ``tokens`` tokens around ``cursor`` (a code-point offset) for ``skill``."""
    if not 0 <= cursor <= len(text):
        raise InvalidInput("cursorPosition is outside the document", length=len(text))
    after_tokens = int(tokens * skill.after_share)
    before_tokens = tokens - after_tokens
    before_slice = text[max(0, cursor - before_tokens * _MAX_CHARS_PER_TOKEN):cursor]
    after_slice = text[cursor:cursor + after_tokens * _MAX_CHARS_PER_TOKEN] if after_tokens else ""
    before = keep_tail(before_slice, before_tokens, counter.count)
    after = keep_head(after_slice, after_tokens, counter.count)
    return Window(before=before, after=after, start=cursor - len(before), cursor=cursor,
                  tokens_before=counter.count(before), tokens_after=counter.count(after))
