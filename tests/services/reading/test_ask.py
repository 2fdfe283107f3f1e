"""The reading companion's orchestrator with the real context engine: the reading-companion profile
fills the seed's answer template, and a part from outside the window withholds the prompt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from services.assembly.service import AssembleRequest, ContextService, Outcome
from services.context.models import Item
from services.reading import parts as reading_parts
from services.reading.ask import PageOutOfRange, ReadingCompanion, WindowBreach
from services.reading.summary import Level
from services.reading.units import Stored
from services.sources.base import GatherContext
from tests.services.assembly.fakes import Settings, World
from tests.services.reading.reading_fakes import FakeHit, edition, hit_on, stored

QUESTION = "Who sank the Aurora?"


@pytest.fixture
def context() -> ContextService:
    return World(project_id="p1", settings=Settings(language="en")).service()


def companion(assembler: object, hits: Sequence[FakeHit] = (), failing: bool = False) -> ReadingCompanion:
    async def summaries(project_id: str) -> dict[Level, dict[str, Stored]]:
        e = await edition()
        return stored(e.book, {2: "page two: the aurora passes", 4: "page four: han sank the aurora"},
                      {1: "chapter one: mira keeps the lamp", 2: "chapter two: han is the traitor"})

    async def search(project_id: str, query: str, limit: int) -> Sequence[FakeHit]:
        if failing:
            raise OSError("index damaged")
        return hits

    async def load(project_id: str) -> object:
        return await edition()

    return ReadingCompanion(edition=load, summaries=summaries, search=search,  # type: ignore[arg-type]
                            assembler=assembler)  # type: ignore[arg-type]


async def test_the_window_gives_only_its_own_summaries_and_evidence(context: ContextService) -> None:
    """Pages 1..3 with a search that also hits page 4: chapter one's and page two's summaries and page
    two's paragraph are in the prompt; nothing of page 4 or chapter two is."""
    e = await edition()
    answer = await companion(context, [hit_on(e.book, 4), hit_on(e.book, 2)]).ask("p1", 1, 3, QUESTION)
    prompt = answer.outcome.assembly.prompt
    assert "chapter one: mira keeps the lamp" in prompt
    assert "page two: the aurora passes" in prompt
    assert "(p2.1) Far out, the Aurora passed the rocks." in prompt
    for later in ("Secret", "traitor", "page four"):
        assert later not in prompt
    assert {u.part.id for u in answer.parts} >= {"chapter:1", "page:2", "paragraph:p2.1"}
    assert all(u.part.pages[1] <= 3 for u in answer.parts)


async def test_a_failing_search_still_finds_evidence_by_words(context: ContextService) -> None:
    """With the index failing, the answer still comes, its evidence found by shared rare words, with a
    warning saying so."""
    answer = await companion(context, failing=True).ask("p1", 1, 3, QUESTION)
    assert "(p2.1) Far out, the Aurora passed the rocks." in answer.outcome.assembly.prompt
    assert answer.warnings
    assert answer.warnings[0].startswith("RETRIEVAL_UNAVAILABLE")


async def test_a_window_outside_the_book_is_refused(context: ContextService) -> None:
    """End past the last page, a start of 0 or an end before the start is PageOutOfRange naming the field."""
    with pytest.raises(PageOutOfRange) as past:
        await companion(context).ask("p1", 1, 6, QUESTION)
    assert (past.value.field, past.value.page_count) == ("end", 5)
    with pytest.raises(PageOutOfRange):
        await companion(context).ask("p1", 3, 2, QUESTION)


class Planting:
    """The real engine, with one more item planted where paragraph evidence goes: what a faulty
    source would deliver."""

    def __init__(self, context: ContextService, item_id: str) -> None:
        self.context = context
        self.item_id = item_id

    async def assemble(self, request: AssembleRequest) -> Outcome:
        return await self.context.assemble(replace(request, providers=(*request.providers, self)))

    name = "planted"
    warning = "PLANTED"
    sources = ("reading.evidence",)

    async def gather(self, ctx: GatherContext) -> Sequence[Item]:
        section, part = ctx.place("reading.evidence") or ("", "")
        return [Item(self.item_id, section, part, "reading.paragraph", "Secret: Han sank the Aurora.", 8,
                     9.0, "relevance", ctx.project_id)]


async def test_an_item_that_is_not_a_window_part_withholds_the_prompt(context: ContextService) -> None:
    """An item the orchestrator did not make (here planted by a faulty source) is a breach: the
    prompt is withheld rather than returned."""
    with pytest.raises(WindowBreach) as breach:
        await companion(Planting(context, "paragraph:p4.1")).ask("p1", 1, 3, QUESTION)
    assert breach.value.part == "paragraph:p4.1"
    assert breach.value.allowed == (1, 3)


async def test_a_part_claiming_a_later_page_withholds_the_prompt(context: ContextService,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """If part selection ever let a later page through, the check before returning catches it by the
    part's pages."""
    e = await edition()
    spoiler = reading_parts.Part("paragraph:p4.1", "paragraph", "(p4.1) Secret", (4, 4), 1.0)
    original = reading_parts.evidence_parts
    monkeypatch.setattr(reading_parts, "evidence_parts",
                        lambda *args: [*original(*args), spoiler])
    with pytest.raises(WindowBreach) as breach:
        await companion(context, [hit_on(e.book, 2)]).ask("p1", 1, 3, QUESTION)
    assert breach.value.pages == (4, 4)
