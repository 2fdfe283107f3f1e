"""The display text of a character-chat message, computed once on the server.

A stored message keeps its raw ``content``: the model's thoughts, the reminders and keyframes the
chat injected for the model. ``chat:message:list`` also returns ``displayContent`` and three flags
so that no client parses messages again (seed 003, section 5, phase 5). :func:`display` computes
them; it is pure and deterministic, and its output is its own fixed point:
``display(display(x).content).content == display(x).content``.

What is hidden
--------------

* **Thoughts**: ``<think>...</think>`` and ``<thought>...</thought>`` (``has_thoughts``). Tag
  names match in any ASCII case; the opening tag may carry attributes (``<think type="inner">``)
  and may close itself (``<think/>``); the block may span lines and a message may hold several.
  An opening tag without its closing tag hides everything after it (a model cut mid-thought). A
  closing tag with no opening tag is removed alone and the text before it stays (some models put
  the opening tag in the prompt); it still sets ``has_thoughts``. Blocks do not nest: a block
  ends at the first closing tag of its own name, and a later stray closing tag is removed alone.
* **MCP context blocks**: ``<mcp:context ...>...</mcp:context>``, as the chat server writes
  keyframes and reminders (seed 003, section 1.3). Each is hidden whole, or to the end of the
  message when it is not closed. Its kind comes from its ``uri`` attribute first:
  ``am7://reminder`` or ``am7://reminder/...`` is a reminder (``has_reminder``),
  ``am7://keyframe`` or ``am7://keyframe/...`` a keyframe (``has_keyframe``); else a block of
  ``type="reasoning"`` is a thought (``has_thoughts``); else the first ``"schema": "..."`` of the
  body decides (``urn:am7:narrative:reminder``, ``urn:am7:narrative:keyframe``,
  ``urn:am7:llm:reasoning``). Any other block (a memory block ``am7://memory/...``, citations)
  is hidden too, because it was written for the model, but sets no flag; so is a lone
  ``</mcp:context>``.
* **Older text markers** that the client pruned to, ``(Reminder`` and ``(KeyFrame`` (exact case,
  not followed by an ASCII letter or digit, so "(Reminders are..." is prose). The marker starts a
  parenthesis: what is hidden runs from it to its matching ``)`` (nested parentheses counted),
  provided that ``)`` comes before the paragraph ends (a blank line); otherwise everything from the
  marker to the end of the message is hidden, as the old client's ``pruneToMark`` did. The old
  server wrote ``(KeyFrame: (Summary of A and B ...) analysis)`` and ``(Reminder: {...})``.

Tags are one line: nothing between ``<`` and ``>`` may be a line break or another ``<`` or
``>`` (``<think`` on its own is text). ``<thinking>``, ``(Metrics`` and ``[interrupted]`` are
left as they are.

What is kept
------------

Text inside a fenced code block (a line of three or more backticks or tildes, closed by a line of
at least as many of the same character, or open to the end of the message) is never read for
tags or markers: a writer may paste an example of a tag. A fence is recognised only in shown text;
inside a hidden block only that block's end is looked for, so a code block inside a thought is
hidden with it. Inline code spans are not protected.

Everything else is byte-for-byte unchanged, except whitespace where something was removed. A
whitespace run that touches a removal and spans lines keeps as many line breaks as the most that
any one side of a removal had, at most two (one blank line), then the indentation of the line
that follows: a block on its own line between two lines leaves them adjacent, a paragraph break
on either side of it stays. A run within a line keeps the part before the removal, or else the
part after it (``"Hello <think>x</think> world"`` gives ``"Hello world"``). Whitespace elsewhere
is not touched. Finally trailing whitespace and leading whitespace-only lines go; the first line
keeps its own indentation (a Chinese paragraph indent ``"　　"`` is text). Whitespace is what
``str.isspace`` says, line breaks are ``"\n"`` (a ``"\r\n"`` kept at a removal stays whole).

Text that forms a tag or marker only once something inside it is removed (``<thi<think>x</think>nk>``)
is recognised as such, so the result never holds anything a second pass would remove.

Time
----

Linear in the length of the message, whatever it holds (1 MiB of ``<think>`` openers or
``(Reminder`` markers takes well under a second): the message is read once from left to right;
every pattern either has a bounded reach or consumes what it scans; after a removal only a
bounded tail of the kept text is looked at again, and what a tag's unbounded attributes would
need is answered from bookkeeping kept per piece of kept text (its last line break, ``>`` and
non-space) and from the next ``<``, ``>`` or line break of the input, which is remembered.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise
from typing import Final, Literal

__all__ = ["Display", "display"]


@dataclass(frozen=True, slots=True)
class Display:
    """A message as the writer sees it (``displayContent``) and what was taken out of it."""

    content: str
    has_thoughts: bool
    has_reminder: bool
    has_keyframe: bool


def display(content: str) -> Display:
    """The display text of a raw message and whether it held thoughts, reminders, keyframes."""
    return _Pruner(content).run()


_Kind = Literal["thought", "reminder", "keyframe", "other"]


def _anycase(word: str) -> str:
    # ASCII-only case folding: re.IGNORECASE would also fold "ı", "İ" and the Kelvin sign into tag
    # names, and re.ASCII would make \s ASCII-only, unlike the str.isspace() used for tidying.
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


_TAG_NAMES: Final = ("think", "thought", "mcp:context")
_NAME: Final = "(" + "|".join(_anycase(name) for name in _TAG_NAMES) + ")"
# An opening tag: the name, then whitespace, "/" or ">", then anything but "<", ">" or a line break.
_OPEN: Final = re.compile(rf"<{_NAME}(?=[^\S\n]|[/>])([^<>\n]*)>")
_CLOSE: Final = re.compile(rf"</{_NAME}[^\S\n]*>")
_OPEN_HEAD: Final = re.compile(rf"<{_NAME}(?=[^\S\n]|[/>])")
_CLOSE_HEAD: Final = re.compile(rf"</{_NAME}(?=[^\S\n]|>)")
_CLOSE_REST: Final = re.compile(r"[^\S\n]*>")
_CLOSERS: Final = {name: re.compile(rf"</{_anycase(name)}[^\S\n]*>") for name in _TAG_NAMES}
# Where an opening tag's attributes must end: its ">" if the first of these is one.
_TAG_STOP: Final = re.compile(r"[<>\n]")
_HEAD_CHARS: Final = 16  # longer than any tag head ("</mcp:context" and the character after it)

_MARKER: Final = re.compile(r"\((Reminder|KeyFrame)(?![A-Za-z0-9])")
_MARKER_WORDS: Final = ("(Reminder", "(KeyFrame")
_MARKER_TAIL: Final = max(len(word) for word in _MARKER_WORDS) - 1
_MARKER_SCAN: Final = re.compile(r"[()]|\n[^\S\n]*\n")

_TRIGGER: Final = re.compile(r"[<(`~]")
_RUN: Final = re.compile(r"`+|~+")
_FENCE_CLOSE: Final = {
    char: re.compile(rf"^[^\S\n]*({re.escape(char)}{{3,}})[^\S\n]*$", re.MULTILINE) for char in "`~"
}

# One attribute; a name must start after whitespace, "/" or a quote, so a long run of name
# characters is tried once, not from each of its positions.
_ATTRIBUTE: Final = re.compile(
    r"""(?<![^\s/"'])([^\s=/"'<>]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>`=]+))"""
)
_SCHEMA: Final = re.compile(r'"schema"\s*:\s*"([^"]*)"')
_SCHEMAS: Final[dict[str, _Kind]] = {
    "urn:am7:narrative:reminder": "reminder",
    "urn:am7:narrative:keyframe": "keyframe",
    "urn:am7:llm:reasoning": "thought",
}
_LEADING_BLANK_LINES: Final = re.compile(r"\s*\n")


def _attributes(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _ATTRIBUTE.finditer(text):
        name = match.group(1).lower()
        value = next((group for group in match.groups()[1:] if group is not None), "")
        found.setdefault(name, value)
    return found


def _block_kind(attributes: str, text: str, start: int, end: int) -> _Kind:
    """What an MCP context block with these attributes and body ``text[start:end]`` carries."""
    fields = _attributes(attributes)
    uri = fields.get("uri", "").strip().lower()
    for kind in ("reminder", "keyframe"):
        base = f"am7://{kind}"
        if uri == base or uri.startswith(base + "/"):
            return kind
    if fields.get("type", "").strip().lower() == "reasoning":
        return "thought"
    schema = _SCHEMA.search(text, start, end)
    if schema is not None:
        return _SCHEMAS.get(schema.group(1).strip().lower(), "other")
    return "other"


class _Pruner:
    """One left-to-right pass that copies shown text into ``pieces``.

    The text kept so far is a list of pieces; ``<`` and ``(``, and each run of backticks or
    tildes, are pieces of their own, so a token that starts in the kept text always starts at a
    piece boundary and removing it is popping pieces. For each piece we keep the position of the
    last line break, ``>`` and non-space up to its end: the checks after a removal are then O(1).
    """

    __slots__ = ("ends", "fences", "gts", "keyframe", "length", "lts", "n", "nls", "nws", "pieces",
                 "reminder", "seams", "stop", "stop_from", "text", "thoughts")

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.pieces: list[str] = []
        self.ends: list[int] = []
        self.nls: list[int] = []  # position of the last "\n" up to the end of each piece, or -1
        self.gts: list[int] = []  # the same for ">"
        self.nws: list[int] = []  # the same for any non-whitespace character
        self.length = 0
        self.lts: list[int] = []  # indexes of the pieces that are a shown "<"
        self.fences: list[int] = []  # where each fenced block ends in the kept text
        self.seams: list[int] = []  # where something was removed, ascending
        self.stop_from = -1
        self.stop = -1
        self.thoughts = False
        self.reminder = False
        self.keyframe = False

    # --- the kept text --------------------------------------------------------------------------

    def push(self, piece: str) -> None:
        start = self.length
        end = start + len(piece)
        newline = piece.rfind("\n")
        gt = piece.rfind(">")
        solid = len(piece.rstrip())
        self.nls.append(start + newline if newline >= 0 else (self.nls[-1] if self.nls else -1))
        self.gts.append(start + gt if gt >= 0 else (self.gts[-1] if self.gts else -1))
        self.nws.append(start + solid - 1 if solid else (self.nws[-1] if self.nws else -1))
        self.pieces.append(piece)
        self.ends.append(end)
        self.length = end

    def push_mark(self, char: str) -> None:
        """Push a single "<" or "(" (no line break, no ">", not whitespace): the hot path."""
        start = self.length
        self.nls.append(self.nls[-1] if self.nls else -1)
        self.gts.append(self.gts[-1] if self.gts else -1)
        self.nws.append(start)
        self.pieces.append(char)
        self.length = start + 1
        self.ends.append(self.length)

    def truncate(self, size: int) -> None:
        """Drop the kept text from ``size`` on (always a piece boundary)."""
        while self.length > size:
            self.pieces.pop()
            self.ends.pop()
            self.nls.pop()
            self.gts.pop()
            self.nws.pop()
            self.length = self.ends[-1] if self.ends else 0
        assert self.length == size
        while self.lts and self.lts[-1] >= len(self.pieces):
            self.lts.pop()
        while self.fences and self.fences[-1] > size:
            self.fences.pop()
        while self.seams and self.seams[-1] > size:
            self.seams.pop()

    def tail(self, size: int) -> str:
        """The last ``size`` characters kept (fewer if there are fewer)."""
        parts: list[str] = []
        got = 0
        index = len(self.pieces) - 1
        while index >= 0 and got < size:
            parts.append(self.pieces[index])
            got += len(self.pieces[index])
            index -= 1
        joined = "".join(reversed(parts))
        return joined[len(joined) - size:] if len(joined) > size else joined

    def head(self, piece: int, size: int) -> str:
        """Up to ``size`` kept characters from the start of piece ``piece``."""
        parts: list[str] = []
        got = 0
        while piece < len(self.pieces) and got < size:
            parts.append(self.pieces[piece])
            got += len(self.pieces[piece])
            piece += 1
        return "".join(parts)[:size]

    def line_is_blank(self) -> bool:
        """Whether the current line of the kept text holds only whitespace so far."""
        return not self.pieces or self.nws[-1] <= self.nls[-1]

    def next_stop(self, start: int) -> int:
        """The first "<", ">" or line break at or after ``start`` (remembered: calls move right)."""
        if not self.stop_from <= start <= self.stop:
            found = _TAG_STOP.search(self.text, start)
            self.stop_from = start
            self.stop = found.start() if found is not None else self.n
        return self.stop

    # --- the pass -------------------------------------------------------------------------------

    def run(self) -> Display:
        text = self.text
        at = 0
        while at < self.n:
            trigger = _TRIGGER.search(text, at)
            if trigger is None:
                self.push(text[at:])
                break
            start = trigger.start()
            if start > at:
                self.push(text[at:start])
            at = self.step(start)
        return Display(self.finish(), self.thoughts, self.reminder, self.keyframe)

    def step(self, at: int) -> int:
        """Read the token that may start at ``at`` (a trigger character); return where to go on."""
        text = self.text
        char = text[at]
        if char == "<":
            tag = _OPEN.match(text, at)
            if tag is not None:
                return self.seam(self.open_block(tag.group(1), tag.group(2), tag.end()))
            tag = _CLOSE.match(text, at)
            if tag is not None:
                self.stray(tag.group(1))
                return self.seam(tag.end())
            self.push_mark("<")
            self.lts.append(len(self.pieces) - 1)
            return at + 1
        if char == "(":
            marker = _MARKER.match(text, at)
            if marker is not None:
                return self.seam(self.marker(marker.group(1), marker.end()))
            self.push_mark("(")
            return at + 1
        run = _RUN.match(text, at)
        assert run is not None
        blank = self.line_is_blank()
        self.push(run.group())
        if blank and len(run.group()) >= 3:
            return self.fenced(char, len(run.group()), run.end())
        return run.end()

    def fenced(self, char: str, size: int, at: int) -> int:
        """Copy a fenced block whose opening run ends at ``at``; return where shown text resumes."""
        text = self.text
        end = self.n
        newline = text.find("\n", at)
        if newline >= 0:
            for closing in _FENCE_CLOSE[char].finditer(text, newline + 1):
                if len(closing.group(1)) >= size:
                    end = closing.end()
                    break
        if end > at:
            self.push(text[at:end])
        self.fences.append(self.length)
        return end

    def open_block(self, name: str, attributes: str, at: int) -> int:
        """Hide a block whose opening tag ends at ``at``; return where it ends."""
        lowered = name.lower()
        if attributes.rstrip().endswith("/"):
            body_end = end = at
        else:
            closing = _CLOSERS[lowered].search(self.text, at)
            body_end, end = (closing.start(), closing.end()) if closing is not None else (self.n, self.n)
        kind = _block_kind(attributes, self.text, at, body_end) if lowered == "mcp:context" else "thought"
        self.flag(kind)
        return end

    def stray(self, name: str) -> None:
        if name.lower() != "mcp:context":
            self.thoughts = True

    def marker(self, word: str, at: int) -> int:
        """Hide an old ``(Reminder``/``(KeyFrame`` text whose word ends at ``at``; return its end."""
        self.flag("reminder" if word == "Reminder" else "keyframe")
        depth = 1
        for found in _MARKER_SCAN.finditer(self.text, at):
            char = found.group()
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    return found.end()
            else:  # a blank line: the paragraph ended without the matching ")"
                break
        return self.n

    def flag(self, kind: _Kind) -> None:
        if kind == "thought":
            self.thoughts = True
        elif kind == "reminder":
            self.reminder = True
        elif kind == "keyframe":
            self.keyframe = True

    # --- after a removal ------------------------------------------------------------------------

    def seam(self, at: int) -> int:
        """Something was removed and the input goes on at ``at``: join the two sides."""
        self.mark()
        while True:
            joined = self.rejoin(at)
            if joined is None:
                return at
            at, removed = joined
            if not removed:
                return at
            self.mark()

    def mark(self) -> None:
        if not self.seams or self.seams[-1] != self.length:
            self.seams.append(self.length)

    def rejoin(self, at: int) -> tuple[int, bool] | None:
        """A tag, marker or fence that the kept text and the input at ``at`` now form together.

        Only tokens that start in the last bounded stretch of kept text can be formed: the last
        shown "<", a "(" among the last characters, a run of one or two backticks or tildes that
        opens its line. The leftmost one that completes wins, as it would in a fresh pass. Returns
        where the input goes on and whether something was removed (a fence removes nothing).
        """
        candidates: list[tuple[int, int]] = []
        if self.lts:
            candidates.append((self.ends[self.lts[-1]] - 1, 0))
        tail = self.tail(_MARKER_TAIL)
        base = self.length - len(tail)
        for offset, char in enumerate(tail):
            if char == "(" and any(word.startswith(tail[offset:]) for word in _MARKER_WORDS):
                candidates.append((base + offset, 1))
        run_start = self.open_run(at)
        if run_start is not None:
            candidates.append((run_start, 2))
        for start, kind in sorted(candidates):
            if kind == 0:
                joined = self.tag_across(start, at)
            elif kind == 1:
                joined = self.marker_across(start, at)
            else:
                joined = self.fence_across(start, at)
            if joined is not None:
                return joined
        return None

    def tag_across(self, start: int, at: int) -> tuple[int, bool] | None:
        # The kept text from the "<" on may hold no ">" and no line break (it would have ended or
        # broken the tag); it holds no other "<" (this is the last one).
        if self.gts[-1] >= start or self.nls[-1] >= start:
            return None
        kept = self.length - start
        head = self.head(self.lts[-1], _HEAD_CHARS)
        probe = head + self.text[at:at + _HEAD_CHARS] if kept < _HEAD_CHARS else head
        opening = _OPEN_HEAD.match(probe)
        if opening is not None:
            resume = at + max(0, opening.end() - kept)
            stop = self.next_stop(resume)
            if stop >= self.n or self.text[stop] != ">":
                return None
            inside = self.tail(kept - opening.end()) if opening.end() < kept else ""
            attributes = inside + self.text[resume:stop]
            self.truncate(start)
            return self.open_block(opening.group(1), attributes, stop + 1), True
        closing = _CLOSE_HEAD.match(probe)
        if closing is not None:
            # Whatever is kept after the name must be whitespace.
            if closing.end() < kept and self.nws[-1] >= start + closing.end():
                return None
            rest = _CLOSE_REST.match(self.text, at + max(0, closing.end() - kept))
            if rest is None:
                return None
            self.truncate(start)
            self.stray(closing.group(1))
            return rest.end(), True
        return None

    def marker_across(self, start: int, at: int) -> tuple[int, bool] | None:
        kept = self.tail(self.length - start)
        marker = _MARKER.match(kept + self.text[at:at + _HEAD_CHARS])
        if marker is None:
            return None
        self.truncate(start)
        return self.marker(marker.group(1), at + marker.end() - len(kept)), True

    def open_run(self, at: int) -> int | None:
        """Where a run of one or two fence characters that opens its line ends the kept text."""
        if at >= self.n or self.text[at] not in "`~":
            return None
        char = self.text[at]
        size = 0
        index = len(self.pieces) - 1
        # Three or more would have opened a fence already, or do not open their line: stop there.
        while size < 3 and index >= 0 and len(self.pieces[index]) <= 2 and not self.pieces[index].strip(char):
            size += len(self.pieces[index])
            index -= 1
        if size == 0 or size >= 3:
            return None
        if index >= 0 and self.nws[index] > self.nls[index]:
            return None
        return self.ends[index] if index >= 0 else 0

    def fence_across(self, start: int, at: int) -> tuple[int, bool] | None:
        run = _RUN.match(self.text, at)
        assert run is not None
        size = self.length - start + len(run.group())
        if size < 3:
            return None
        self.push(run.group())
        return self.fenced(self.text[at], size, run.end()), False

    # --- the result -----------------------------------------------------------------------------

    def finish(self) -> str:
        kept = "".join(self.pieces)
        if self.seams:
            kept = _close_gaps(kept, self.seams, self.fences)
        kept = kept.rstrip()
        leading = _LEADING_BLANK_LINES.match(kept)
        return kept[leading.end():] if leading is not None else kept


def _close_gaps(text: str, seams: list[int], fences: list[int]) -> str:
    """Tidy the whitespace run around each place where something was removed."""
    parts: list[str] = []
    last = 0
    index = 0
    while index < len(seams):
        seam = seams[index]
        fence = bisect_right(fences, seam)
        floor = max(last, fences[fence - 1] if fence else 0)  # never reach into a code block
        start = seam
        while start > floor and text[start - 1].isspace():
            start -= 1
        end = seam
        while end < len(text) and text[end].isspace():
            end += 1
        cuts = [seam - start]
        index += 1
        while index < len(seams) and seams[index] <= end:
            cuts.append(seams[index] - start)
            index += 1
        parts.append(text[last:start])
        parts.append(_close_gap(text[start:end], cuts))
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _close_gap(gap: str, cuts: list[int]) -> str:
    """One whitespace run split by removals into parts.

    Across lines: as many line breaks as the part with the most had, at most two (one blank
    line), so a block on its own line between two lines leaves them adjacent and a paragraph
    break on either side stays; then the indentation of the next line. Within a line: the first
    non-empty part, so the character right after the text before the gap stays the same.
    """
    bounds = [0, *cuts, len(gap)]
    parts = [gap[a:b] for a, b in pairwise(bounds)]
    first = gap.find("\n")
    if first < 0:
        return next((part for part in parts if part), "")
    last = gap.rfind("\n")
    breaks = [gap[first - 1:first + 1] if first and gap[first - 1] == "\r" else "\n"]
    if max(part.count("\n") for part in parts) >= 2:
        breaks.append(gap[last - 1:last + 1] if gap[last - 1] == "\r" else "\n")
    return "".join(breaks) + gap[last + 1:]
