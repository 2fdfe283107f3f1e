"""The seed's four prompt templates, verbatim, and the functions that fill them.

The template texts are the contract (seed 000, "Prompt Templates"): they are kept word for word,
the assistant's name and the limits written into them included, so that a profile can be checked
against them. Values are inserted as they are (``str.format`` does not look inside them), so a
paragraph or summary holding braces is safe.

``{json_array}`` is the summaries' canonical renderings (:func:`services.reading.summary.render`)
in order, as one compact JSON array: ``[`` + ``,``-joined + ``]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from string import Formatter

from services.reading.layout import Paragraph


@dataclass(frozen=True, slots=True)
class Template:
    system: str
    user: str

    @property
    def placeholders(self) -> frozenset[str]:
        return frozenset(name for text in (self.system, self.user)
                         for _, name, _, _ in Formatter().parse(text) if name is not None)

    def fill(self, **values: object) -> tuple[str, str]:
        """``(system, user)`` with every placeholder filled; a missing or unknown value is an error."""
        if set(values) != self.placeholders:
            raise ValueError(f"the template takes {sorted(self.placeholders)}, not {sorted(values)}")
        return self.system.format(**values), self.user.format(**values)


PARAGRAPH = Template(
    system=(
        "You are TaleLeaf's assistant. You ONLY know the provided paragraph from pages {page}. You must not "
        "speculate about future plot events or use any knowledge beyond the supplied text. Return STRICT "
        "JSON matching the schema: entities[], events[], relationships[], facts[], open_questions[]."
    ),
    user=(
        'Paragraph (p{page}.{intra}): """{text}"""\n'
        "Requirements:\n"
        "- Extract only what is explicitly supported by the paragraph.\n"
        "- Keep each field concise. Overall ≤ 85 tokens across all fields.\n"
        "- Normalize entity names (lowercase) and include page numbers in page_spans and evidence_pages.\n"
        "- If a field is empty, use an empty array.\n"
        "Return only JSON. No markdown."
    ),
)

PAGE = Template(
    system=(
        "You are compressing multiple paragraph JSON payloads into a concise page summary JSON for page "
        "{page}. No spoilers beyond this page. Strictly aggregate and deduplicate "
        "entities/events/relationships/facts. Keep total ≤ 120 tokens when rendered. Return STRICT JSON."
    ),
    user="Paragraph JSON payloads for page {page}:\n{json_array}",
)

CHAPTER = Template(
    system=(
        "You are compressing multiple page JSON payloads into a concise chapter summary JSON for chapter "
        "{chapter_index}. Include only content from pages {start_page}–{end_page}. Keep total ≤ 300 tokens "
        "when rendered. Return STRICT JSON."
    ),
    user="Page JSON payloads for chapter {chapter_index}:\n{json_array}",
)

ANSWER = Template(
    system=(
        "You are TaleLeaf's assistant. You ONLY know content from pages {start}–{end} of this book. Do NOT "
        "reveal, speculate about, or reference events beyond page {end}. If the question asks for content "
        "beyond this range, explain it is outside the current reading window. Cite the page number(s) for "
        "each factual statement. Keep the answer concise."
    ),
    user=(
        'Question: "{question}"\n'
        "Context:\n"
        "- Chapter summaries (within window):\n"
        "{chapter_summaries_rendered}\n"
        "- Page summaries (for relevant pages):\n"
        "{page_summaries_rendered}\n"
        "- Paragraph evidence (selected, trimmed):\n"
        "{paragraph_snippets_with_page_numbers}\n"
        "\n"
        "Instructions:\n"
        "- Use the most relevant context only.\n"
        "- For each claim, include citations like (p12) or (pp12–13).\n"
        "- If you lack sufficient evidence within pages {start}–{end}, say so explicitly."
    ),
)


def json_array(rendered: Sequence[str]) -> str:
    """Rendered summaries as one compact JSON array."""
    return "[" + ",".join(rendered) + "]"


def paragraph_prompt(paragraph: Paragraph) -> tuple[str, str]:
    return PARAGRAPH.fill(page=paragraph.page, intra=paragraph.intra, text=paragraph.text)


def page_prompt(page_number: int, paragraph_summaries: Sequence[str]) -> tuple[str, str]:
    """The page roll-up of the page's paragraph summaries (renderings, in paragraph order)."""
    return PAGE.fill(page=page_number, json_array=json_array(paragraph_summaries))


def chapter_prompt(chapter_index: int, start_page: int, end_page: int,
                   page_summaries: Sequence[str]) -> tuple[str, str]:
    """The chapter roll-up of the chapter's page summaries (renderings, in page order)."""
    return CHAPTER.fill(chapter_index=chapter_index, start_page=start_page, end_page=end_page,
                        json_array=json_array(page_summaries))


def answer_prompt(start: int, end: int, question: str, chapter_summaries_rendered: str,
                  page_summaries_rendered: str, paragraph_snippets: str) -> tuple[str, str]:
    """The runtime answer prompt for a reader at pages ``start``–``end``; the blocks come already rendered."""
    return ANSWER.fill(start=start, end=end, question=question,
                       chapter_summaries_rendered=chapter_summaries_rendered,
                       page_summaries_rendered=page_summaries_rendered,
                       paragraph_snippets_with_page_numbers=paragraph_snippets)
