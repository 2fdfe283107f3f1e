"""memory:typed:* through a dispatcher, over the app's database and Chroma: camelCase memories,
character and conversation checks, project isolation, errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ipc.channels.typed_memory import register_typed_memory
from ipc.dispatch import Dispatcher
from ipc.openrpc import openrpc_document
from ipc.registry import Registry
from main.config import Config
from main.stores import Services
from services.characters.memories import MemoryIndex, TypedMemoryStore
from services.errors import ConversationNotFound
from services.knowledge import KgService
from tests.ipc.channels.conftest import Rpc
from tests.services.characters.test_memories import WordsEmbedding
from tests.support.projects import make_folder

# The module shares one event loop with its services (see conftest.services).
pytestmark = pytest.mark.asyncio(loop_scope="module")

MEMORY_KEYS = {"id", "projectId", "memoryType", "importance", "summary", "content", "source",
               "systemCharacterId", "userCharacterId", "scope", "conversationId", "messageId",
               "characterId", "createdAt"}
UNKNOWN_PROJECT = "0000000000000000"
CONVERSATIONS: dict[tuple[str, str], tuple[int, int]] = {}  # (project, conversation) -> (system, user)
MESSAGES: dict[tuple[str, str], set[int]] = {}  # (project, conversation) -> its message ids


async def conversation_pair(project_id: str, conversation_id: str) -> tuple[int, int]:
    pair = CONVERSATIONS.get((project_id, conversation_id))
    if pair is None:
        raise ConversationNotFound()
    return pair


async def conversation_message(project_id: str, conversation_id: str, message_id: int) -> bool:
    await conversation_pair(project_id, conversation_id)
    return message_id in MESSAGES.get((project_id, conversation_id), set())


@pytest.fixture(scope="module")
def typed_registry(services: tuple[Config, Services]) -> Registry:
    _config, opened = services
    registry = Registry()
    store = TypedMemoryStore(opened.database, MemoryIndex(opened.vectors, WordsEmbedding()))
    register_typed_memory(registry, store, KgService(opened.database).list, conversation_pair,
                          conversation_message)
    return registry


@pytest.fixture
def typed(typed_registry: Registry) -> Rpc:
    return Rpc(Dispatcher(typed_registry))


async def _character(rpc: Rpc, project_id: str, name: str) -> int:
    result = await rpc.call("kg:entity:upsert", {"projectId": project_id, "kind": "character", "name": name})
    entity_id: int = result["entity"]["id"]
    return entity_id


async def _pair(rpc: Rpc, project_id: str) -> tuple[int, int]:
    return await _character(rpc, project_id, "Ann"), await _character(rpc, project_id, "Bo")


async def test_add_list_search_delete(rpc: Rpc, typed: Rpc, project_id: str) -> None:
    """add gives the memory in camelCase; list pages it with the total; search finds it by text with
    its similarity, whichever character speaks as the system; delete removes it."""
    ann, bo = await _pair(rpc, project_id)
    added = await typed.call("memory:typed:add", {
        "projectId": project_id, "memoryType": "RELATIONSHIP", "importance": 8,
        "summary": "They met at a coffee shop", "systemCharacterId": ann, "userCharacterId": bo,
        "characterId": bo})
    assert set(added) == MEMORY_KEYS
    assert (added["projectId"], added["memoryType"], added["importance"], added["content"], added["source"],
            added["scope"], added["conversationId"], added["messageId"], added["characterId"]) == (
        project_id, "RELATIONSHIP", 8, "", "user", "pair", None, None, bo)
    listed = await typed.call("memory:typed:list", {"projectId": project_id, "systemCharacterId": bo,
                                                    "userCharacterId": ann})
    assert listed == {"memories": [added], "total": 1}
    found = await typed.call("memory:typed:search", {"projectId": project_id, "systemCharacterId": bo,
                                                     "userCharacterId": ann, "query": "coffee shop"})
    [recalled] = found["memories"]
    assert {key: recalled[key] for key in MEMORY_KEYS} == added
    assert 0.2 <= recalled["similarity"] <= 1.0 + 1e-6
    assert await typed.call("memory:typed:delete", {"projectId": project_id,
                                                    "memoryId": added["id"]}) == {"deleted": True}
    gone = await typed.error("memory:typed:delete", {"projectId": project_id, "memoryId": added["id"]})
    assert (gone["code"], gone["data"]) == (-32082, {"code": "MEMORY_NOT_FOUND"})
    assert await typed.call("memory:typed:list", {"projectId": project_id}) == {"memories": [], "total": 0}


async def test_characters_must_be_entities_of_the_project(rpc: Rpc, typed: Rpc, project_id: str,
                                                          tmp_path: Path) -> None:
    """An id that names no kg entity of the project (absent, or another project's character) is
    CHARACTER_NOT_FOUND with that id, for add and for search."""
    ann, _bo = await _pair(rpc, project_id)
    other = (await rpc.call("project:open", {"path": str(make_folder(tmp_path / "other"))}))["project"]["id"]
    stranger = await _character(rpc, other, "Cy")
    for unknown in (stranger, 999_999):
        for method, extra in (("memory:typed:add", {"memoryType": "FACT", "summary": "x"}),
                              ("memory:typed:search", {})):
            error = await typed.error(method, {"projectId": project_id, "systemCharacterId": ann,
                                               "userCharacterId": unknown, **extra})
            assert (error["code"], error["data"]) == (-32081, {"code": "CHARACTER_NOT_FOUND",
                                                               "characterId": unknown})
    assert (await typed.call("memory:typed:list", {"projectId": project_id}))["total"] == 0


async def test_conversation_must_be_the_pairs(rpc: Rpc, typed: Rpc, project_id: str) -> None:
    """A conversationId must name a conversation of the project between these two characters (in
    either role); otherwise CONVERSATION_NOT_FOUND, for add, list and search. A messageId must be
    one of that conversation's messages; otherwise INVALID_PARAMS at messageId."""
    ann, bo = await _pair(rpc, project_id)
    cy = await _character(rpc, project_id, "Cy")
    CONVERSATIONS[(project_id, "c-ab")] = (bo, ann)
    CONVERSATIONS[(project_id, "c-ac")] = (ann, cy)
    MESSAGES[(project_id, "c-ab")] = {3}
    MESSAGES[(project_id, "c-ac")] = {4}
    base = {"projectId": project_id, "systemCharacterId": ann, "userCharacterId": bo}
    added = await typed.call("memory:typed:add", {**base, "memoryType": "EVENT", "summary": "a storm",
                                                  "scope": "exchange", "conversationId": "c-ab",
                                                  "messageId": 3})
    assert (added["scope"], added["conversationId"], added["messageId"]) == ("exchange", "c-ab", 3)
    for conversation in ("c-ac", "missing"):
        for method, extra in (("memory:typed:add", {"memoryType": "FACT", "summary": "x",
                                                    "conversationId": conversation}),
                              ("memory:typed:search", {"conversationId": conversation}),
                              ("memory:typed:list", {"conversationId": conversation})):
            error = await typed.error(method, {**base, **extra})
            assert (error["code"], error["data"]) == (-32080, {"code": "CONVERSATION_NOT_FOUND"})
    for message in (4, 987_654):  # another conversation's message, and none
        for scope in ("exchange", "conversation"):
            error = await typed.error("memory:typed:add", {**base, "memoryType": "FACT", "summary": "x",
                                                           "scope": scope, "conversationId": "c-ab",
                                                           "messageId": message})
            assert (error["data"]["code"], error["data"]["errors"][0]["loc"]) == ("INVALID_PARAMS",
                                                                                 ["messageId"])
    in_scope = await typed.call("memory:typed:search", {**base, "conversationId": "c-ab"})
    assert [m["id"] for m in in_scope["memories"]] == [added["id"]]
    assert (await typed.call("memory:typed:search", base))["memories"] == []  # exchange scope: c-ab only
    listed = await typed.call("memory:typed:list", {"projectId": project_id, "conversationId": "c-ab"})
    assert [m["id"] for m in listed["memories"]] == [added["id"]]


async def test_another_projects_memory_is_not_found(rpc: Rpc, typed: Rpc, project_id: str,
                                                    tmp_path: Path) -> None:
    """A memory id of another project cannot be deleted nor listed through this one."""
    ann, bo = await _pair(rpc, project_id)
    added = await typed.call("memory:typed:add", {"projectId": project_id, "memoryType": "FACT",
                                                  "summary": "mine", "systemCharacterId": ann,
                                                  "userCharacterId": bo})
    other = (await rpc.call("project:open", {"path": str(make_folder(tmp_path / "else"))}))["project"]["id"]
    error = await typed.error("memory:typed:delete", {"projectId": other, "memoryId": added["id"]})
    assert error["data"] == {"code": "MEMORY_NOT_FOUND"}
    assert await typed.call("memory:typed:list", {"projectId": other}) == {"memories": [], "total": 0}
    assert (await typed.call("memory:typed:list", {"projectId": project_id}))["memories"] == [added]


@pytest.mark.parametrize(("params", "loc"), [
    ({"importance": 11}, ["importance"]),
    ({"importance": "5"}, ["importance"]),
    ({"summary": " "}, ["summary"]),
    ({"memoryType": "GOSSIP"}, ["memoryType"]),
    ({"scope": "conversation"}, ["conversationId"]),
    ({"characterId": 123_456}, ["characterId"]),
])
async def test_invalid_memories_are_refused(rpc: Rpc, typed: Rpc, project_id: str, params: dict[str, Any],
                                            loc: list[str]) -> None:
    """A memory breaking a bound or a rule across fields is -32602 INVALID_PARAMS naming the field."""
    ann, bo = await _pair(rpc, project_id)
    error = await typed.error("memory:typed:add", {"projectId": project_id, "memoryType": "FACT",
                                                   "summary": "x", "systemCharacterId": ann,
                                                   "userCharacterId": bo, **params})
    assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    assert [e["loc"] for e in error["data"]["errors"]] == [loc]


async def test_list_and_search_bounds(typed: Rpc, project_id: str) -> None:
    """list takes a limit of 1 to 500, search 1 to 200 and a similarity of -1 to 1."""
    for method, params in (("memory:typed:list", {"limit": 0}), ("memory:typed:list", {"limit": 501}),
                           ("memory:typed:list", {"offset": -1}),
                           ("memory:typed:search", {"limit": 201}),
                           ("memory:typed:search", {"minSimilarity": 1.5})):
        error = await typed.error(method, {"projectId": project_id, "systemCharacterId": 1,
                                           "userCharacterId": 2, **params})
        assert error["data"]["code"] == "INVALID_PARAMS", (method, params)


@pytest.mark.parametrize(("method", "params"), [
    ("memory:typed:add", {"memoryType": "FACT", "summary": "x", "systemCharacterId": 1,
                          "userCharacterId": 2}),
    ("memory:typed:list", {}),
    ("memory:typed:search", {"systemCharacterId": 1, "userCharacterId": 2}),
    ("memory:typed:delete", {"memoryId": 1}),
])
async def test_unknown_project_is_project_not_found(typed: Rpc, method: str, params: dict[str, Any]) -> None:
    """Every memory:typed method answers -32010 PROJECT_NOT_FOUND for an unknown project."""
    error = await typed.error(method, {"projectId": UNKNOWN_PROJECT, **params})
    assert (error["code"], error["data"]) == (-32010, {"code": "PROJECT_NOT_FOUND"})


async def test_openrpc_describes_the_methods(typed_registry: Registry) -> None:
    """rpc.discover describes each method, its TypedMemory result and the errors it declares."""
    document = openrpc_document(typed_registry, title="strata", version="1")
    methods = {m["name"]: m for m in document["methods"]}
    assert set(methods) == {"memory:typed:add", "memory:typed:list", "memory:typed:search",
                            "memory:typed:delete"}
    assert methods["memory:typed:add"]["result"]["schema"] == {"$ref": "#/components/schemas/TypedMemory"}
    assert set(document["components"]["schemas"]["TypedMemory"]["properties"]) == MEMORY_KEYS
    declared = {m.name: {e.data_code for e in m.errors} for m in typed_registry}
    assert declared["memory:typed:add"] == {"PROJECT_NOT_FOUND", "CHARACTER_NOT_FOUND",
                                            "CONVERSATION_NOT_FOUND", "INVALID_PARAMS"}
    assert declared["memory:typed:delete"] == {"PROJECT_NOT_FOUND", "MEMORY_NOT_FOUND"}


async def test_a_conversations_memory_takes_its_pair_when_the_ids_are_left_out(rpc: Rpc, typed: Rpc,
                                                                              project_id: str) -> None:
    """memory:typed:add with a conversationId and no character ids is a memory of that
    conversation's pair; with neither, INVALID_PARAMS names what is missing."""
    ann, bo = await _pair(rpc, project_id)
    CONVERSATIONS[(project_id, "c-pair")] = (bo, ann)
    added = await typed.call("memory:typed:add", {"projectId": project_id, "memoryType": "FACT",
                                                  "summary": "the bell", "conversationId": "c-pair"})
    assert (added["systemCharacterId"], added["userCharacterId"]) == (bo, ann)
    error = await typed.error("memory:typed:add", {"projectId": project_id, "memoryType": "FACT",
                                                   "summary": "x"})
    assert error["data"] == {"code": "INVALID_PARAMS", "missing": ["systemCharacterId", "userCharacterId"]}
