"""Records ranked by relevance, made once per records version: the keys an assembly stamps on them
are what scoring each record against the cursor's features gives."""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet

import pytest

from services.context.models import Item
from services.sources.ranked import Ranked
from services.sources.relevance import Overlaps, features, similarity

OWNS = [features("林远 灯塔看守人"), features("苏晴 城里的医生"), frozenset()]
TEMPLATES = [Item(id=f"entity:{n}", layer="rules", section="entities", source="kg:character", text=f"t{n}",
                  tokens=2, key=0.0, key_name="relevance", project_id="p1", origin="kg", names=(f"n{n}",))
             for n in range(3)]
NEAR = features("林远走上灯塔，海风很大。")


def test_items_are_the_templates_with_each_records_similarity_as_key() -> None:
    """Without a scale, a record's key is its similarity to the cursor's features, rounded to six
    places; every other field is the template's."""
    items = Ranked.of(TEMPLATES, OWNS).items(NEAR)
    assert [i.key for i in items] == [round(similarity(own, NEAR), 6) for own in OWNS] == [0.4, 0.0, 0.0]
    assert [i.id for i in items] == ["entity:0", "entity:1", "entity:2"]
    assert all(i.names == t.names and i.origin == "kg" and i.text == t.text
               for i, t in zip(items, TEMPLATES, strict=True))
    assert all(t.key == 0.0 for t in TEMPLATES)  # the templates themselves are not changed


def test_weighted_keys_add_each_records_base() -> None:
    """With a scale and a base (a past interaction's recency), a key is
    round(scale x similarity + base, 6), the same arithmetic as scoring one record at a time."""
    base = [0.3 * math.pow(0.85, rank) for rank in range(3)]
    keys = Ranked.of(TEMPLATES, OWNS, scale=0.7, base=base).keys(NEAR)
    assert keys == [round(0.7 * similarity(own, NEAR) + b, 6) for own, b in zip(OWNS, base, strict=True)]
    assert keys == [0.58, 0.255, 0.21675]


def test_no_features_near_the_cursor_scores_nothing() -> None:
    """An empty cursor text leaves every similarity at zero (only the base stays)."""
    assert Ranked.of(TEMPLATES, OWNS).keys(frozenset()) == [0.0, 0.0, 0.0]
    assert Ranked.of(TEMPLATES, OWNS, scale=0.7, base=[0.3, 0.2, 0.1]).keys(frozenset()) == [0.3, 0.2, 0.1]


def test_keys_for_equal_features_are_scored_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """keys_for gives keys() as a tuple; features equal to the last ones scored (a writer's next
    keystroke, mostly: a new set, the same features) get the last answer without scoring again,
    and other features are scored."""
    ranked = Ranked.of(TEMPLATES, OWNS, scale=0.7, base=[0.3, 0.2, 0.1])
    scored: list[AbstractSet[str]] = []
    shares = Overlaps.shares

    def counted(self: Overlaps, near: AbstractSet[str]) -> list[float]:
        scored.append(near)
        return shares(self, near)

    monkeypatch.setattr(Overlaps, "shares", counted)
    other = features("苏晴在城里。")
    answers = [ranked.keys_for(near) for near in (NEAR, frozenset(set(NEAR)), other, NEAR)]
    assert len(scored) == 3  # NEAR, other, NEAR again
    assert answers == [tuple(ranked.keys(near)) for near in (NEAR, NEAR, other, NEAR)]
