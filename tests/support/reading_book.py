"""A bilingual book of three chapters and 34 pages, for the reading companion's tests (seed 000):
chapter one (English) is pages 1-12, chapter two (Chinese) 13-24, chapter three (English) 25-34,
each page marked with ``<!-- page -->``."""

from __future__ import annotations

from typing import Any

MARK = "\n<!-- page -->\n"


def chapter_one() -> str:
    pages = [f"Mira climbed the stair of the lighthouse on day {n}. The lamp was cold.\n\n"
             f"Han waited below with the rope, counting the waves ({n})." for n in range(1, 13)]
    return "# The Lighthouse\n\n" + MARK.join(pages)


def chapter_two() -> str:
    pages = [f"苏晚在第{n}天点亮了灯。风很大，海浪拍打着礁石。\n\n她想起了那艘沉船和船上的人。"
             for n in range(1, 13)]
    return "# 第二章\n\n" + MARK.join(pages)


def chapter_three() -> str:
    pages = [f"The storm reached the harbour on night {n}. Nobody slept.\n\nThe keeper wrote in the log."
             for n in range(1, 11)]
    return "# The Storm\n\n" + MARK.join(pages)


CHAPTERS = (("ch01.md", chapter_one), ("ch02.md", chapter_two), ("ch03.md", chapter_three))


def summary(*pages: int, facts: tuple[str, ...] = ()) -> dict[str, Any]:
    """A valid summary citing ``pages``, with ``facts`` as given."""
    return {"entities": [{"name": "mira", "type": "character", "mentions": 1, "page_spans": list(pages)}],
            "events": [], "relationships": [], "facts": list(facts), "open_questions": []}
