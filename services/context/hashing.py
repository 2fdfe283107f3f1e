"""Stable-prefix hashes and where a new prefix parts from the previous one."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from services.context.models import Divergence


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Prefixes(NamedTuple):
    hashes: dict[str, str]  # section -> the hash of the prompt up to its end
    sizes: dict[str, int]  # section -> the UTF-8 bytes of the prompt up to its end


def prefix_hashes(prompt: str, ends: Mapping[str, int]) -> dict[str, str]:
    """The hash of the prompt up to the end of each section (cache breakpoints)."""
    return hash_prefixes(prompt, ends).hashes


def hash_prefixes(prompt: str, ends: Mapping[str, int]) -> Prefixes:
    """The hash and the UTF-8 size of the prompt up to the end of each section.

    One running hash over the prompt, copied at each end in turn, rather than each prefix hashed
    from the start: the prompt is read and encoded once, not once per section.
    """
    running = hashlib.sha256()
    at = size = 0
    found: dict[int, tuple[str, int]] = {}
    for end in sorted(set(ends.values())):
        if end > at:
            data = prompt[at:end].encode("utf-8", "surrogatepass")
            running.update(data)
            size += len(data)
            at = end
        found[end] = running.copy().hexdigest(), size
    return Prefixes({section: found[end][0] for section, end in ends.items()},
                    {section: found[end][1] for section, end in ends.items()})


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
