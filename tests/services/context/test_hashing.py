"""Stable-prefix hashes and the first byte where two prefixes part."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.hashing import divergence, hash_prefixes, prefix_hashes, sha256_hex
from services.context.models import Divergence
from services.context.render import join_sections
from tests.services.context.factory import novel


def _join(texts: dict[str, str]) -> tuple[str, dict[str, int]]:
    return join_sections(novel(), texts)


def _prefix(rules: str, settings_text: str = "") -> str:
    """A stable prefix of the novel plan: Rules and Settings joined."""
    return _join({"rules": rules, "settings": settings_text})[0]


def _ends(*prefixes: tuple[str, str]) -> tuple[tuple[str, int], ...]:
    """Each stable section's end in UTF-8 bytes, the larger of the prefixes' (as the service
    compares a prefix with the previous one)."""
    widest = {"rules": 0, "settings": 0}
    for rules, settings_text in prefixes:
        prompt, ends = _join({"rules": rules, "settings": settings_text})
        for section in widest:
            widest[section] = max(widest[section], len(prompt[:ends[section]].encode()))
    return tuple(widest.items())


def test_sha256_hex_of_utf8_bytes() -> None:
    """The hash is SHA-256 hex of the UTF-8 bytes; a lone surrogate hashes instead of failing."""
    assert sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex("灯塔") == hashlib.sha256("灯塔".encode()).hexdigest()
    assert sha256_hex("a\ud800") == hashlib.sha256(b"a\xed\xa0\x80").hexdigest()


def test_prefix_hashes_cover_the_prompt_up_to_each_layer_end() -> None:
    """Each layer's hash is of the prompt up to that layer's end; an empty layer repeats the previous."""
    prompt, ends = _join({"rules": "R", "retrieved": "X", "immediate": "I"})
    hashes = prefix_hashes(prompt, ends)
    assert hashes == {
        "rules": sha256_hex("R"),
        "settings": sha256_hex("R"),
        "retrieved": sha256_hex("R\n\nX"),
        "immediate": sha256_hex("R\n\nX\n\nI"),
    }
    assert list(hashes) == ["rules", "settings", "retrieved", "immediate"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("灯塔\n\ud800"), max_size=60),
       st.dictionaries(st.sampled_from(["rules", "settings", "retrieved", "immediate", "a", "b"]),
                       st.integers(min_value=0, max_value=70), max_size=6))
def test_each_prefix_hash_is_the_hash_of_the_prompt_up_to_its_end(prompt: str, ends: dict[str, int]) -> None:
    """For any prompt (lone surrogates included) and any ends, in any order, repeated or past the
    end, each section's hash is SHA-256 of exactly prompt[:end], in the order the ends were given,
    and its size the UTF-8 bytes of prompt[:end]."""
    hashes = prefix_hashes(prompt, ends)
    assert hashes == {section: sha256_hex(prompt[:end]) for section, end in ends.items()}
    assert list(hashes) == list(ends)
    both = hash_prefixes(prompt, ends)
    assert both.hashes == hashes
    assert both.sizes == {s: len(prompt[:end].encode("utf-8", "surrogatepass")) for s, end in ends.items()}


def test_no_divergence_for_equal_prefixes() -> None:
    """Equal prefixes do not diverge."""
    ends = _ends(("规则", "偏好"))
    assert divergence(_prefix("规则", "偏好"), _prefix("规则", "偏好"), ends) is None


def test_offset_counts_utf8_bytes_and_names_the_layer() -> None:
    """A change in Settings after Chinese rules is reported at its UTF-8 byte offset, in Settings."""
    previous = _prefix("规则", "偏好甲")
    current = _prefix("规则", "偏好乙")
    assert (previous, current) == ("规则\n\n偏好甲", "规则\n\n偏好乙")
    # "规则" is 6 bytes, the separator 2, "偏好" 6: the first differing byte is inside 甲/乙.
    expected = next(i for i, (a, b) in enumerate(zip(previous.encode(), current.encode(), strict=True))
                    if a != b)
    assert expected >= 14
    ends = _ends(("规则", "偏好甲"), ("规则", "偏好乙"))
    assert divergence(previous, current, ends) == Divergence("settings", expected)


def test_change_in_rules_is_reported_in_rules() -> None:
    """The first differing byte inside the Rules text names Rules."""
    ends = _ends(("1. A", "S"), ("1. B", "S"))
    assert divergence(_prefix("1. A", "S"), _prefix("1. B", "S"), ends) == Divergence("rules", 3)


def test_appended_layer_is_reported_where_it_starts() -> None:
    """When the new prefix extends the old one, it diverges at the old end, in the layer added there."""
    ends = _ends(("R", ""), ("R", "S"))
    assert divergence(_prefix("R"), _prefix("R", "S"), ends) == Divergence("settings", 1)


def test_rules_grown_or_shrunk_is_rules() -> None:
    """A Rules part that got longer or shorter is reported in Rules, whichever prefix holds it."""
    short, long = _prefix("1. A", "S"), _prefix("1. A\n2. B", "S")
    both = _ends(("1. A", "S"), ("1. A\n2. B", "S"))
    assert divergence(short, long, both) == Divergence("rules", 5)
    assert divergence(long, short, both) == Divergence("rules", 5)
    shrunk = _ends(("R", "S"), ("R", ""))
    assert divergence(_prefix("R", "S"), _prefix("R"), shrunk) == Divergence("settings", 1)


def test_any_number_of_stable_sections_is_named_by_its_end() -> None:
    """With three stable sections, the offset falls in the first whose end lies past it; past every
    end (a longer prefix), in the last."""
    ends = (("a", 2), ("b", 4), ("c", 6))
    assert divergence("xxyyzz", "xxyYzz", ends) == Divergence("b", 3)
    assert divergence("xxyyzz", "Xxyyzz", ends) == Divergence("a", 0)
    assert divergence("xxyyzz", "xxyyzz!", ends) == Divergence("c", 6)
    assert divergence("", "x", ()) == Divergence("", 0)


TEXT = st.text(alphabet=st.sampled_from(list("ab规则偏好😀\n. ")), max_size=12)


@settings(max_examples=150, deadline=None)
@given(rules=TEXT, settings_text=TEXT, old_rules=TEXT, old_settings=TEXT)
def test_byte_offset_is_the_first_differing_byte(rules: str, settings_text: str, old_rules: str,
                                                 old_settings: str) -> None:
    """For any two prefixes, the offset is the first differing UTF-8 byte (or the shorter length)."""
    current = _prefix(rules, settings_text)
    previous = _prefix(old_rules, old_settings)
    found = divergence(previous, current, _ends((rules, settings_text), (old_rules, old_settings)))
    old, new = previous.encode(), current.encode()
    if old == new:
        assert found is None
        return
    assert found is not None
    offset = found.byte_offset
    assert old[:offset] == new[:offset]
    assert offset == min(len(old), len(new)) or old[offset] != new[offset]
    rules_end = max(len(rules.encode()), len(old_rules.encode()))
    assert found.layer == ("rules" if offset < rules_end else "settings")
