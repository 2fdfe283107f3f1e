"""Stable-prefix hashes and where a new prefix parts from the previous one."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence

from services.context.models import Divergence


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def prefix_hashes(prompt: str, ends: Mapping[str, int]) -> dict[str, str]:
    """The hash of the prompt up to the end of each section (cache breakpoints).

    One running hash over the prompt, copied at each end in turn, rather than each prefix hashed
    from the start: the prompt is read once, not once per section.
    """
    running = hashlib.sha256()
    at = 0
    found: dict[int, str] = {}
    for end in sorted(set(ends.values())):
        if end > at:
            running.update(prompt[at:end].encode("utf-8", "surrogatepass"))
            at = end
        found[end] = running.copy().hexdigest()
    return {section: found[end] for section, end in ends.items()}


def divergence(previous: str, current: str, ends: Sequence[tuple[str, int]]) -> Divergence | None:
    """Where two stable prefixes first differ: the UTF-8 byte offset, and the stable section.

    ``ends`` gives each stable section's end in UTF-8 bytes, the larger of the
    two prefixes' for each: a difference before it lies in that section (of one
    prefix or the other); one past them all, in the last.
    """
    old = previous.encode("utf-8", "surrogatepass")
    new = current.encode("utf-8", "surrogatepass")
    if old == new:
        return None
    # The common prefix of two byte strings (commonprefix works on any sequences).
    offset = len(os.path.commonprefix([old, new]))  # noqa: RUF071
    section = next((name for name, end in ends if offset < end), ends[-1][0] if ends else "")
    return Divergence(layer=section, byte_offset=offset)
