"""From the model's intent to what to do: documents, projects, candidates, questions, in the user's
language."""

from __future__ import annotations

import pytest

from services.chat.intents import Conversation, Intent, resolve_intent
from services.errors import ProjectNotFound
from tests.services.chat.support import FakeWorkspace

WORKSPACE = FakeWorkspace(
    {"p1": "Moonfall", "p2": "月落", "p3": "Moonfall Notes"},
    {"p1": [("ch01.md", "Chapter 1: Arrival"), ("ch05.md", "Chapter 5: Harbor"), ("ch15.md", "Chapter 15"),
            ("a/lighthouse.md", "The Lighthouse"), ("b/lighthouse.md", "The Lighthouse")],
     "p2": [("第五章.md", "第五章 港口"), ("灯塔上.md", "灯塔（上）"), ("灯塔下.md", "灯塔（下）")]},
)


def talk(*messages: str, project: str | None = "p1", summary: str | None = None) -> Conversation:
    return Conversation(list(messages), summary, project)


async def test_a_number_names_one_document() -> None:
    """number 5 is ch05.md, never ch15.md."""
    resolved = await resolve_intent(Intent("open_document", number=5), talk("open chapter 5"), WORKSPACE)
    assert (resolved.outcome, resolved.document_id, resolved.project_id) == ("document", "ch05.md", "p1")


async def test_a_number_sent_as_the_name_still_counts() -> None:
    """A bare number in ``name`` is read as the chapter number."""
    resolved = await resolve_intent(Intent("open_document", name="5"), talk("5"), WORKSPACE)
    assert resolved.document_id == "ch05.md"


@pytest.mark.parametrize(("name", "project", "document"), [
    ("第五章", "p1", "ch05.md"), ("第5章", "p1", "ch05.md"), ("第十五章", "p1", "ch15.md"),
    ("chapter five", "p1", "ch05.md"), ("chapter 5", "p2", "第五章.md"), ("ch05.md", "p2", "第五章.md"),
])
async def test_a_name_that_spells_a_number_in_the_other_script_names_that_chapter(
        name: str, project: str, document: str) -> None:
    """A chapter named in Chinese finds an English project's chapter of that number, and the other
    way round, when no title or filename matches the name itself."""
    intent = Intent("open_document", name=name)
    resolved = await resolve_intent(intent, talk(name, project=project), WORKSPACE)
    assert (resolved.outcome, resolved.document_id) == ("document", document)


async def test_a_name_found_as_a_name_is_not_read_as_a_number() -> None:
    """A title that matches the name wins: the number it may spell is only a fallback."""
    intent = Intent("open_document", name="灯塔（上）")
    resolved = await resolve_intent(intent, talk("灯塔（上）", project="p2"), WORKSPACE)
    assert resolved.document_id == "灯塔上.md"
    missing = await resolve_intent(Intent("open_document", name="第九章"), talk("第九章"), WORKSPACE)
    assert missing.outcome == "not_found"


async def test_an_ambiguous_name_lists_candidates_and_asks() -> None:
    """Two equal titles: both candidates, and a question naming them."""
    resolved = await resolve_intent(Intent("open_document", name="The Lighthouse"), talk("the lighthouse"),
                                    WORKSPACE)
    assert resolved.outcome == "ambiguous"
    assert {c.document_id for c in resolved.candidates} == {"a/lighthouse.md", "b/lighthouse.md"}
    assert resolved.reply == "Which one do you mean: The Lighthouse, The Lighthouse?"


async def test_chinese_replies_for_chinese_users() -> None:
    """A Chinese conversation gets Chinese replies: which one, not found."""
    lamp = await resolve_intent(Intent("open_document", name="灯塔"), talk("灯塔", project="p2"), WORKSPACE)
    assert lamp.reply == "你指的是哪一个：灯塔（上）、灯塔（下）？"
    gone = await resolve_intent(Intent("open_document", number=9), talk("第九章", project="p2"), WORKSPACE)
    assert (gone.outcome, gone.reply) == ("not_found", "没有找到第九章。")


async def test_unsupported_asks_about_an_implied_target_or_lists_what_works() -> None:
    """An implied target gets a clarifying question; none gets "not supported" and the intents."""
    asked = await resolve_intent(Intent("unsupported"), talk("打开第五章", "嗯"), WORKSPACE)
    assert (asked.outcome, asked.reply) == ("clarify", "你是想打开第五章吗？")
    summarized = talk("hmm", summary="User asked for chapter 5.")
    from_summary = await resolve_intent(Intent("unsupported"), summarized, WORKSPACE)
    assert from_summary.reply == "Do you want to open chapter 5?"
    nothing = await resolve_intent(Intent("unsupported"), talk("what's the weather"), WORKSPACE)
    assert nothing.outcome == "unsupported"
    assert nothing.supported_intents == ("open_project", "open_document", "search", "create_document")


async def test_projects_by_name_and_documents_need_a_project() -> None:
    """A project by its exact name wins over a longer one; a document intent without a project
    says to open one; a project that vanished is PROJECT_NOT_FOUND."""
    lost = talk("x", project=None)
    project = await resolve_intent(Intent("open_project", name="moonfall"), lost, WORKSPACE)
    assert (project.outcome, project.project_id, project.name) == ("project", "p1", "Moonfall")
    none = await resolve_intent(Intent("open_document", number=1), talk("x", project=None), WORKSPACE)
    assert none.outcome == "no_project"
    with pytest.raises(ProjectNotFound):
        await resolve_intent(Intent("open_document", number=1), talk("x", project="gone"), WORKSPACE)


async def test_relative_moves_and_pass_through_intents() -> None:
    """next of ch01 is ch05 in reading order; searches and new documents come back as they are."""
    following = await resolve_intent(Intent("open_document", relative="next"), talk("next"), WORKSPACE,
                                     current_document_id="ch01.md")
    assert following.document_id == "ch05.md"
    search = await resolve_intent(Intent("search", query="storm"), talk("search storm"), WORKSPACE)
    assert (search.outcome, search.query, search.project_id) == ("search", "storm", "p1")
    create = await resolve_intent(Intent("create_document", name="Dawn"), talk("new chapter Dawn"), WORKSPACE)
    assert (create.outcome, create.name) == ("create", "Dawn")
    empty = await resolve_intent(Intent("open_document"), talk("open"), WORKSPACE)
    assert (empty.outcome, empty.reply) == ("not_found", "Which one do you want to open?")
