"""The seed's four prompt templates, word for word, filled with pages, paragraphs and summaries.

The expected texts are the seed's (shared/seeds/000, "Prompt Templates") copied here with the
values filled in by hand, so these tests need nothing beside the checkout.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.reading.layout import Paragraph
from services.reading.prompts import (
    ANSWER,
    CHAPTER,
    PAGE,
    PARAGRAPH,
    answer_prompt,
    chapter_prompt,
    json_array,
    page_prompt,
    paragraph_prompt,
)

R1 = '{"entities":[],"events":[],"relationships":[],"facts":["韩走进来。"],"open_questions":[]}'
R2 = '{"entities":[],"events":[],"relationships":[],"facts":["han sat down"],"open_questions":[]}'


def _paragraph(text: str, page: int = 12, intra: int = 3) -> Paragraph:
    return Paragraph(page, intra, "ch2.md", 0, len(text), text, 1, "0" * 64)


def test_paragraph_prompt() -> None:
    """The paragraph template with the page, the paragraph's number and its text."""
    system, user = paragraph_prompt(_paragraph("韩走进来。He sat {down}."))
    assert system == (
        "You are TaleLeaf's assistant. You ONLY know the provided paragraph from pages 12. You must not "
        "speculate about future plot events or use any knowledge beyond the supplied text. Return "
        "STRICT JSON matching the schema: entities[], events[], relationships[], facts[], open_questions[]."
    )
    assert user == (
        'Paragraph (p12.3): """韩走进来。He sat {down}."""\n'
        "Requirements:\n"
        "- Extract only what is explicitly supported by the paragraph.\n"
        "- Keep each field concise. Overall ≤ 85 tokens across all fields.\n"
        "- Normalize entity names (lowercase) and include page numbers in page_spans and evidence_pages.\n"
        "- If a field is empty, use an empty array.\n"
        "Return only JSON. No markdown."
    )


def test_page_prompt() -> None:
    """The page roll-up with the page number and the paragraph summaries as one compact array."""
    system, user = page_prompt(12, [R1, R2])
    assert system == (
        "You are compressing multiple paragraph JSON payloads into a concise page summary JSON for page 12. "
        "No spoilers beyond this page. Strictly aggregate and deduplicate "
        "entities/events/relationships/facts. Keep total ≤ 120 tokens when rendered. Return STRICT JSON."
    )
    assert user == f"Paragraph JSON payloads for page 12:\n[{R1},{R2}]"
    assert page_prompt(1, [])[1] == "Paragraph JSON payloads for page 1:\n[]"


def test_chapter_prompt() -> None:
    """The chapter roll-up with the chapter's index, its page range and its page summaries."""
    system, user = chapter_prompt(2, 10, 19, [R1])
    assert system == (
        "You are compressing multiple page JSON payloads into a concise chapter summary JSON for chapter 2. "
        "Include only content from pages 10–19. Keep total ≤ 300 tokens when rendered. Return STRICT JSON."
    )
    assert user == f"Page JSON payloads for chapter 2:\n[{R1}]"


def test_answer_prompt() -> None:
    """The runtime answer prompt with the window, the question and the three rendered blocks."""
    system, user = answer_prompt(1, 12, "who is Han again?", "CH", "PG", "(p3) Han came.")
    assert system == (
        "You are TaleLeaf's assistant. You ONLY know content from pages 1–12 of this book. Do NOT reveal, "
        "speculate about, or reference events beyond page 12. If the question asks for content beyond this "
        "range, explain it is outside the current reading window. Cite the page number(s) for each factual "
        "statement. Keep the answer concise."
    )
    assert user == (
        'Question: "who is Han again?"\n'
        "Context:\n"
        "- Chapter summaries (within window):\n"
        "CH\n"
        "- Page summaries (for relevant pages):\n"
        "PG\n"
        "- Paragraph evidence (selected, trimmed):\n"
        "(p3) Han came.\n"
        "\n"
        "Instructions:\n"
        "- Use the most relevant context only.\n"
        "- For each claim, include citations like (p12) or (pp12–13).\n"
        "- If you lack sufficient evidence within pages 1–12, say so explicitly."
    )


def test_templates_name_their_placeholders() -> None:
    """Each template's placeholders are the seed's, so a profile's copy can be checked against them."""
    assert PARAGRAPH.placeholders == {"page", "intra", "text"}
    assert PAGE.placeholders == {"page", "json_array"}
    assert CHAPTER.placeholders == {"chapter_index", "start_page", "end_page", "json_array"}
    assert ANSWER.placeholders == {"start", "end", "question", "chapter_summaries_rendered",
                                   "page_summaries_rendered", "paragraph_snippets_with_page_numbers"}


def test_fill_refuses_missing_or_unknown_values() -> None:
    """Filling with a value missing or one the template does not take is an error, not a blank."""
    with pytest.raises(ValueError, match="takes"):
        PAGE.fill(page=1)
    with pytest.raises(ValueError, match="takes"):
        PAGE.fill(page=1, json_array="[]", chapter=2)


@settings(max_examples=200, deadline=None)
@given(st.text(), st.integers(1, 999), st.integers(1, 99), st.lists(st.text(max_size=20), max_size=4))
def test_values_are_inserted_verbatim(text: str, page: int, intra: int, rendered: list[str]) -> None:
    """Whatever a paragraph or summary holds (braces included) lands in the prompt unchanged, around the
    template's own text."""
    _, user = paragraph_prompt(_paragraph(text, page, intra))
    head, tail = PARAGRAPH.user.split("{text}")
    assert user == head.format(page=page, intra=intra) + text + tail
    expected = f"Paragraph JSON payloads for page {page}:\n" + json_array(rendered)
    assert page_prompt(page, rendered)[1] == expected
    assert json_array(rendered) == "[" + ",".join(rendered) + "]"
