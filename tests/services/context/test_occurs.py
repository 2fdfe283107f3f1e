"""What a window can knock out or name, known per document text: the same answers as searching it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.context.candidates import candidates
from services.context.memo import BoundedMemo, NoMemo
from services.context.models import Item, Window
from services.context.occurs import MAX_NEEDLES, Documents, Occurs, make_near
from services.context.reduce import mentioned
from services.context.screening import window_knocks
from services.context.skills import get_skill
from services.sources.window import cut_window
from tests.services.context.factory import counter, item, novel_plan
from tests.services.context.test_candidates import _budget, _shape

# Few distinct characters, whitespace of several kinds among them: texts repeat and straddle it.
_ALPHABET = "灯塔林远雾潮ab \n\u3000\t。"
_texts = st.text(_ALPHABET, max_size=12)


def _window(document: str, start: int, cursor: int, end: int) -> Window:
    before, after = document[start:cursor], document[cursor:end]
    return Window(before, after, start, cursor, len(before), len(after), document=document)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[str, list[Item], Window]:
    document = draw(st.text(_ALPHABET, min_size=1, max_size=80))
    start, cursor, end = sorted(draw(st.lists(st.integers(0, len(document)), min_size=3, max_size=3)))

    def piece() -> str:
        """A slice of the document (whitespace changed or not), or any text."""
        a, b = sorted(draw(st.lists(st.integers(0, len(document)), min_size=2, max_size=2)))
        return draw(st.sampled_from([document[a:b], document[a:b].replace(" ", ""), draw(_texts)]))

    items = []
    for n in range(draw(st.integers(0, 8))):
        first, last = sorted(draw(st.lists(st.integers(0, 80), min_size=2, max_size=2)))
        span = draw(st.sampled_from([None, (first, last)]))
        items.append(item(f"chunk:d#{n}", draw(st.sampled_from(["passages", "history"])), piece() or "x",
                          span=span, tokens=1))
    for n in range(draw(st.integers(0, 5))):
        names = tuple(draw(st.lists(st.builds(piece) | st.just(""), max_size=3)))
        items.append(item(f"entity:{n}", "entities", piece() or "x", names=names, tokens=1))
    return document, items, _window(document, start, cursor, end)


@settings(max_examples=300, deadline=None)
@given(case=_cases())
def test_near_knocks_and_names_what_searching_the_window_does(case: tuple[str, list[Item], Window]) -> None:
    """For any document, window cut from it and candidates (texts from the document with its
    whitespace or without, spans anywhere, names empty or not), what the document's index says the
    window knocks out and names is exactly what searching the window gives."""
    document, items, win = case
    plan, memo = novel_plan(), NoMemo()
    near = make_near(plan.window_deduped, plan.mentioned_first, items, Occurs(document), memo.norm)
    end = win.cursor + len(win.after)
    assert near.knocks(win.before, win.after, win.start, end) == window_knocks(plan, items, win, memo)
    assert near.named(win.before, win.after) == mentioned(plan, items, win)


@settings(max_examples=100, deadline=None)
@given(case=_cases(), cursors=st.lists(st.integers(0, 80), min_size=1, max_size=6), explain=st.booleans())
def test_candidates_from_an_indexed_document_are_the_searched_ones(
        case: tuple[str, list[Item], Window], cursors: list[int], explain: bool) -> None:
    """Windows cut one after another from one document (the first searched, the rest answered from
    its index) give the very candidates, reports, order and names that searching each gives."""
    document, items, _ = case
    plan, memo = novel_plan(), BoundedMemo()
    budget = _budget(plan)
    for cursor in cursors:
        cursor = min(cursor, len(document))
        win = _window(document, max(0, cursor - 9), cursor, min(len(document), cursor + 9))
        assert _shape(candidates(plan, items, win, budget, memo, explain)) == _shape(
            candidates(plan, items, win, budget, NoMemo(), explain))
    assert memo.documents() == (1 if len(cursors) > 1 else 0)  # indexed from its second window


def test_a_document_is_indexed_from_its_second_window() -> None:
    """The first window cut from a text is searched (a keystroke's text is rarely seen again); from
    the second on, the text's index answers, the same one each time."""
    documents = Documents(max_documents=4, max_chars=1000)
    assert documents.occurs("灯塔在雾里。") is None
    first = documents.occurs("灯塔在雾里。")
    assert isinstance(first, Occurs)
    assert documents.occurs("灯塔在雾里。") is first
    assert documents.occurs("潮水退了。") is None


def test_documents_are_bounded_by_count_and_characters() -> None:
    """At most ``max_documents`` texts and ``max_chars`` characters (each text counted twice, for its
    whitespace-free copy) are indexed, the least recently used going first; a text seen once holds
    nothing of itself, and only the last ``max_documents`` of those are known again."""
    documents = Documents(max_documents=3, max_chars=100)
    for n in range(5):
        documents.occurs(f"第{n}章" * 5)
    assert len(documents) == 0  # each seen once: only their lengths and hashes
    assert documents.occurs("第4章" * 5) is not None  # among the last three seen: indexed now
    assert documents.occurs("第0章" * 5) is None  # its first sighting forgotten: seen as new
    for name in ("甲", "乙", "丙", "丁"):
        for _ in range(2):
            documents.occurs(name * 15)
    assert len(documents) == 3
    for _ in range(2):
        documents.occurs("长" * 40)  # 80 counted: with one of 30 beside it, 110 would pass 100
    assert len(documents) == 1


def test_a_documents_lookups_are_bounded() -> None:
    """A document's index answers at most MAX_NEEDLES texts and names; past that it starts again,
    and still answers rightly."""
    occurs = Occurs("灯塔守夜人林远在雾里点灯。")
    for n in range(MAX_NEEDLES + 10):
        assert occurs.has_text(f"x{n}") is False
        assert occurs.has_name(f"y{n}") is False
    texts, names = occurs.looked_up()
    assert 0 < texts <= MAX_NEEDLES
    assert 0 < names <= MAX_NEEDLES
    assert occurs.has_text("林远在雾里")
    assert occurs.has_name("林远")


def test_a_cut_window_names_its_document() -> None:
    """The Immediate window cut from a document carries the document, and its text is the
    document's slice at its offsets: what lets its knock-outs come from the document's index."""
    document = "灯塔守夜人林远在雾里点灯。潮水退了，旧船的桅杆露出来。" * 20
    win = cut_window(document, 100, get_skill("continue"), 40, counter())
    assert win.document is document
    assert win.before + win.after == document[win.start:win.cursor + len(win.after)]
