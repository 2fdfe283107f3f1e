"""chat:resolve over a real websocket: intents resolved against a project's real documents.

Both languages; numbers, titles, file names, next/previous, ambiguous names, the clarifying
question for an unsupported intent, and "not supported yet".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient
from tests.support.scenarios import Project, rpc_error

EN_DOCS = {
    "ch01.md": "# Chapter 1: Arrival\n\nThe ferry docked at dawn.",
    "ch02.md": "# Chapter 2: The Storm\n\nWind.",
    "ch05.md": "# Chapter 5: Harbor Lights\n\nBoats.",
    "ch15.md": "# Chapter 15: The Long Night\n\nDark.",
    "drafts/lighthouse.md": "# The Lighthouse\n\nAn early draft.",
    "final/lighthouse.md": "# The Lighthouse\n\nThe final text.",
}
ZH_DOCS = {
    "第一章 启程.md": "# 第一章 启程\n\n渡船在黎明靠岸。",
    "第二章.md": "# 第二章 风暴\n\n风。",
    "第五章.md": "# 第五章 港口\n\n船。",
    "灯塔上.md": "# 灯塔（上）\n\n灯亮了。",
    "灯塔下.md": "# 灯塔（下）\n\n灯灭了。",
}


async def opened(rpc: RpcClient, folder: Path, docs: dict[str, str]) -> Project:
    project = await Project.open(rpc, folder)
    for document_id, text in docs.items():
        await project.write(document_id, text)
    return project


@pytest.fixture
async def en(rpc: RpcClient, tmp_path: Path) -> Project:
    return await opened(rpc, tmp_path / "Moonfall", EN_DOCS)


@pytest.fixture
async def zh(rpc: RpcClient, tmp_path: Path) -> Project:
    return await opened(rpc, tmp_path / "月落", ZH_DOCS)


async def session(rpc: RpcClient, project: Project | None, *messages: str) -> str:
    sid: str | None = None
    for message in messages:
        params: dict[str, Any] = {"message": message}
        if sid is not None:
            params["sessionId"] = sid
        if project is not None:
            params["projectId"] = project.project_id
        sid = str((await rpc.call("chat:submit", params))["sessionId"])
    assert sid is not None
    return sid


async def resolve(rpc: RpcClient, sid: str, **intent: Any) -> dict[str, Any]:
    extra = {k: intent.pop(k) for k in ("currentDocumentId", "projectId") if k in intent}
    result: dict[str, Any] = await rpc.call("chat:resolve", {"sessionId": sid, "intent": intent, **extra})
    return result


async def test_english_numbers_never_match_longer_numbers(rpc: RpcClient, en: Project) -> None:
    """"chapter 5" opens ch05.md, not ch15.md; chapter 15 opens ch15.md; a missing one is not found."""
    sid = await session(rpc, en, "open chapter 5")
    five = await resolve(rpc, sid, intent="open_document", number=5)
    assert five == {"outcome": "document", "projectId": en.project_id, "documentId": "ch05.md",
                    "title": "Chapter 5: Harbor Lights"}
    fifteen = await resolve(rpc, sid, intent="open_document", number=15)
    assert fifteen["documentId"] == "ch15.md"
    missing = await resolve(rpc, sid, intent="open_document", number=9)
    assert missing["outcome"] == "not_found"
    assert missing["reply"] == "I could not find chapter 9."


async def test_english_titles_file_names_and_relative_moves(rpc: RpcClient, en: Project) -> None:
    """A title fragment, a file name and next/previous of the open document all resolve."""
    sid = await session(rpc, en, "open the storm chapter")
    storm = await resolve(rpc, sid, intent="open_document", name="the storm")
    assert storm["documentId"] == "ch02.md"
    by_file = await resolve(rpc, sid, intent="open_document", name="ch01.md")
    assert by_file["documentId"] == "ch01.md"
    following = await resolve(rpc, sid, intent="open_document", relative="next", currentDocumentId="ch02.md")
    assert following["documentId"] == "ch05.md"
    before = await resolve(rpc, sid, intent="open_document", relative="previous", currentDocumentId="ch02.md")
    assert before["documentId"] == "ch01.md"


async def test_an_ambiguous_english_name_gives_candidates_and_asks(rpc: RpcClient, en: Project) -> None:
    """Two documents titled "The Lighthouse": both come back, and the question is recorded."""
    sid = await session(rpc, en, "open the lighthouse")
    result = await resolve(rpc, sid, intent="open_document", name="The Lighthouse")
    assert result["outcome"] == "ambiguous"
    assert sorted(c["documentId"] for c in result["candidates"]) == ["drafts/lighthouse.md",
                                                                     "final/lighthouse.md"]
    assert all(c["projectId"] == en.project_id for c in result["candidates"])
    assert result["reply"].startswith("Which one do you mean")
    after = await rpc.call("chat:submit", {"sessionId": sid, "message": "the final one"})
    assert after["context"]["lastAssistantQuestion"] == result["reply"]


async def test_chinese_numbers_titles_and_ambiguity(rpc: RpcClient, zh: Project) -> None:
    """第五章 by number; 风暴 by title; 灯塔 fits two documents and the reply asks in Chinese."""
    sid = await session(rpc, zh, "打开第五章")
    five = await resolve(rpc, sid, intent="open_document", number=5)
    assert five["documentId"] == "第五章.md"
    storm = await resolve(rpc, sid, intent="open_document", name="风暴")
    assert storm["documentId"] == "第二章.md"
    lamp = await resolve(rpc, sid, intent="open_document", name="灯塔")
    assert lamp["outcome"] == "ambiguous"
    assert sorted(c["documentId"] for c in lamp["candidates"]) == ["灯塔上.md", "灯塔下.md"]
    assert lamp["reply"].startswith("你指的是哪一个")
    assert lamp["reply"].endswith("？")
    gone = await resolve(rpc, sid, intent="open_document", number=8)
    assert gone["reply"] == "没有找到第八章。"


async def test_unsupported_with_a_target_in_the_conversation_asks_to_confirm(rpc: RpcClient,
                                                                            zh: Project, en: Project) -> None:
    """An unsupported intent after "打开第五章" asks "你是想打开第五章吗？" (recorded as a question);
    in English it asks "Do you want to open chapter 5?"."""
    sid = await session(rpc, zh, "打开第五章", "嗯那个")
    result = await resolve(rpc, sid, intent="unsupported")
    assert result == {"outcome": "clarify", "reply": "你是想打开第五章吗？"}
    after = await rpc.call("chat:submit", {"sessionId": sid, "message": "对"})
    assert after["context"]["lastAssistantQuestion"] == "你是想打开第五章吗？"
    en_sid = await session(rpc, en, "open chapter 5", "hmm that one")
    assert (await resolve(rpc, en_sid, intent="unsupported"))["reply"] == "Do you want to open chapter 5?"


async def test_unsupported_with_nothing_to_go_on_lists_what_is_supported(rpc: RpcClient) -> None:
    """No target anywhere: "not supported yet" with the supported intents, in the user's language."""
    sid = await session(rpc, None, "what's the weather like")
    result = await resolve(rpc, sid, intent="unsupported")
    assert result["outcome"] == "unsupported"
    assert result["reply"].startswith("That is not supported yet.")
    assert result["supportedIntents"] == ["open_project", "open_document", "search", "create_document"]
    zh_sid = await session(rpc, None, "今天天气怎么样")
    assert (await resolve(rpc, zh_sid, intent="unsupported"))["reply"].startswith("暂时还不支持")


async def test_projects_searches_new_documents_and_no_project(rpc: RpcClient, tmp_path: Path) -> None:
    """Projects resolve by name in both scripts; searches and new documents pass through; a
    document intent without a project says to open one first."""
    en = await opened(rpc, tmp_path / "Driftwood", EN_DOCS)
    zh = await opened(rpc, tmp_path / "雾港", ZH_DOCS)
    sid = await session(rpc, None, "open project Driftwood")
    project = await resolve(rpc, sid, intent="open_project", name="driftwood")
    assert (project["outcome"], project["projectId"]) == ("project", en.project_id)
    zh_project = await resolve(rpc, sid, intent="open_project", name="雾港")
    assert zh_project["projectId"] == zh.project_id
    no_project = await resolve(rpc, sid, intent="open_document", number=5)
    assert no_project["outcome"] == "no_project"
    with_project = await resolve(rpc, sid, intent="open_document", number=5, projectId=en.project_id)
    assert with_project["documentId"] == "ch05.md"
    search = await resolve(rpc, sid, intent="search", query="storm", projectId=en.project_id)
    assert search == {"outcome": "search", "projectId": en.project_id, "query": "storm"}
    create = await resolve(rpc, sid, intent="create_document", name="Dawn", extra="ignored")
    assert create == {"outcome": "create", "name": "Dawn"}


async def test_bad_resolve_input_has_stable_codes(rpc: RpcClient) -> None:
    """An unknown intent, an unknown session or project is refused with its code."""
    sid = await session(rpc, None, "hello")
    bad = await rpc_error(rpc, "chat:resolve", {"sessionId": sid, "intent": {"intent": "fly"}})
    assert bad["data"]["code"] == "INVALID_PARAMS"
    unknown = await rpc_error(rpc, "chat:resolve", {"sessionId": "nope", "intent": {"intent": "unsupported"}})
    assert unknown["data"]["code"] == "CHAT_SESSION_NOT_FOUND"
    missing = await rpc_error(rpc, "chat:resolve", {"sessionId": sid, "projectId": "p-none",
                                                     "intent": {"intent": "open_document", "number": 1}})
    assert missing["data"]["code"] == "PROJECT_NOT_FOUND"
