"""Stable-prefix hashes and where a new prefix parts from the previous one."""

from __future__ import annotations

import hashlib
import os

from services.context.models import LAYER_ORDER, Divergence, Layer


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def prefix_hashes(prompt: str, ends: dict[Layer, int]) -> dict[Layer, str]:
    """The hash of the prompt up to the end of each layer (cache breakpoints)."""
    return {layer: sha256_hex(prompt[: ends[layer]]) for layer in LAYER_ORDER}


def divergence(previous: str, current: str, rules_end: int) -> Divergence | None:
    """Where two stable prefixes first differ: the UTF-8 byte offset, and Rules or Settings.

    ``rules_end`` is the larger of the two prefixes' Rules lengths in UTF-8
    bytes: a difference before it lies in Rules (of one prefix or the other).
    """
    old = previous.encode("utf-8", "surrogatepass")
    new = current.encode("utf-8", "surrogatepass")
    if old == new:
        return None
    # The common prefix of two byte strings (commonprefix works on any sequences).
    offset = len(os.path.commonprefix([old, new]))  # noqa: RUF071
    return Divergence(layer=Layer.RULES if offset < rules_end else Layer.SETTINGS, byte_offset=offset)
