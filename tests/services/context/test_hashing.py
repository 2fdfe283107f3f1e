"""Stable-prefix hashes and the first byte where two prefixes part."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.hashing import divergence, prefix_hashes, sha256_hex
from services.context.models import Divergence, Layer
from services.context.render import join_layers


def _ends(rules: str, settings_text: str = "") -> dict[Layer, int]:
    return join_layers({Layer.RULES: rules, Layer.SETTINGS: settings_text})[1]


def test_sha256_hex_of_utf8_bytes() -> None:
    """The hash is SHA-256 hex of the UTF-8 bytes; a lone surrogate hashes instead of failing."""
    assert sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex("灯塔") == hashlib.sha256("灯塔".encode()).hexdigest()
    assert sha256_hex("a\ud800") == hashlib.sha256(b"a\xed\xa0\x80").hexdigest()


def test_prefix_hashes_cover_the_prompt_up_to_each_layer_end() -> None:
    """Each layer's hash is of the prompt up to that layer's end; an empty layer repeats the previous."""
    prompt, ends = join_layers({Layer.RULES: "R", Layer.RETRIEVED: "X", Layer.IMMEDIATE: "I"})
    hashes = prefix_hashes(prompt, ends)
    assert hashes == {
        Layer.RULES: sha256_hex("R"),
        Layer.SETTINGS: sha256_hex("R"),
        Layer.RETRIEVED: sha256_hex("R\n\nX"),
        Layer.IMMEDIATE: sha256_hex("R\n\nX\n\nI"),
    }


def _rules_end(*rules: str) -> int:
    return max(len(r.encode()) for r in rules)


def test_no_divergence_for_equal_prefixes() -> None:
    """Equal prefixes do not diverge."""
    assert divergence("规则\n\n偏好", "规则\n\n偏好", _rules_end("规则")) is None


def test_offset_counts_utf8_bytes_and_names_the_layer() -> None:
    """A change in Settings after Chinese rules is reported at its UTF-8 byte offset, in Settings."""
    previous = "规则\n\n偏好甲"
    current = "规则\n\n偏好乙"
    # "规则" is 6 bytes, the separator 2, "偏好" 6: the first differing byte is inside 甲/乙.
    expected = next(i for i, (a, b) in enumerate(zip(previous.encode(), current.encode(), strict=True))
                    if a != b)
    assert expected >= 14
    assert divergence(previous, current, _rules_end("规则")) == Divergence(Layer.SETTINGS, expected)


def test_change_in_rules_is_reported_in_rules() -> None:
    """The first differing byte inside the Rules text names Rules."""
    assert divergence("1. A\n\nS", "1. B\n\nS", _rules_end("1. B")) == Divergence(Layer.RULES, 3)


def test_appended_layer_is_reported_where_it_starts() -> None:
    """When the new prefix extends the old one, it diverges at the old end, in the layer added there."""
    assert divergence("R", "R\n\nS", _rules_end("R")) == Divergence(Layer.SETTINGS, 1)


def test_rules_grown_or_shrunk_is_rules() -> None:
    """A Rules part that got longer or shorter is reported in Rules, whichever prefix holds it."""
    both = _rules_end("1. A", "1. A\n2. B")
    assert divergence("1. A\n\nS", "1. A\n2. B\n\nS", both) == Divergence(Layer.RULES, 5)
    assert divergence("1. A\n2. B\n\nS", "1. A\n\nS", both) == Divergence(Layer.RULES, 5)
    assert divergence("R\n\nS", "R", _rules_end("R")) == Divergence(Layer.SETTINGS, 1)


TEXT = st.text(alphabet=st.sampled_from(list("ab规则偏好😀\n. ")), max_size=12)


@settings(max_examples=150, deadline=None)
@given(rules=TEXT, settings_text=TEXT, old_rules=TEXT, old_settings=TEXT)
def test_byte_offset_is_the_first_differing_byte(rules: str, settings_text: str, old_rules: str,
                                                 old_settings: str) -> None:
    """For any two prefixes, the offset is the first differing UTF-8 byte (or the shorter length)."""
    current, _ = join_layers({Layer.RULES: rules, Layer.SETTINGS: settings_text})
    previous, _ = join_layers({Layer.RULES: old_rules, Layer.SETTINGS: old_settings})
    found = divergence(previous, current, _rules_end(rules, old_rules))
    old, new = previous.encode(), current.encode()
    if old == new:
        assert found is None
        return
    assert found is not None
    offset = found.byte_offset
    assert old[:offset] == new[:offset]
    assert offset == min(len(old), len(new)) or old[offset] != new[offset]
    assert found.layer is (Layer.RULES if offset < _rules_end(rules, old_rules) else Layer.SETTINGS)
