"""Stable-prefix hashes and where a new prefix parts from the previous one."""

from __future__ import annotations

import hashlib

from services.context.models import LAYER_ORDER, Divergence, Layer


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def prefix_hashes(prompt: str, ends: dict[Layer, int]) -> dict[Layer, str]:
    """The hash of the prompt up to the end of each layer (cache breakpoints)."""
    return {layer: sha256_hex(prompt[: ends[layer]]) for layer in LAYER_ORDER}


def divergence(previous: str, current: str, ends: dict[Layer, int]) -> Divergence | None:
    """The first differing UTF-8 byte between two prefixes, and the layer it falls in."""
    old = previous.encode("utf-8", "surrogatepass")
    new = current.encode("utf-8", "surrogatepass")
    if old == new:
        return None
    limit = min(len(old), len(new))
    offset = next((i for i in range(limit) if old[i] != new[i]), limit)
    for layer in LAYER_ORDER:
        if offset < len(current[: ends[layer]].encode("utf-8", "surrogatepass")):
            return Divergence(layer=layer, byte_offset=offset)
    # The new prefix is the start of the old one: it parts at its own end, in the layer ending there.
    last = next((layer for layer in LAYER_ORDER if ends[layer] >= len(current)), LAYER_ORDER[-1])
    return Divergence(layer=last, byte_offset=offset)
