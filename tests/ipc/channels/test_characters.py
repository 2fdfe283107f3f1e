"""chat:conversation:*, chat:message:* and chat:assemble through a dispatcher, over the app's
database and Chroma (with the words encoder) and a real context service: camelCase records, option
checks, message flags, importance marks and the assembled prompt."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from ipc.channels.characters import register_characters
from ipc.channels.context import AssembleResult
from ipc.dispatch import Dispatcher
from ipc.registry import Registry
from main.config import Config
from main.stores import Services
from services.characters.options import ConversationOptions
from services.characters.service import MAX_MESSAGE_CHARS
from tests.ipc.channels.conftest import Rpc, assert_documented
from tests.services.characters.support import Parts, character_chat

# The module shares one event loop with its services (see conftest.services).
pytestmark = pytest.mark.asyncio(loop_scope="module")

PREFIXES = ("chat:conversation:", "chat:message:", "chat:assemble")
METHODS = {"chat:conversation:create", "chat:conversation:get", "chat:conversation:list",
           "chat:conversation:delete", "chat:message:add", "chat:message:list", "chat:message:important",
           "chat:assemble"}
CONVERSATION_KEYS = {"conversationId", "projectId", "systemCharacterId", "userCharacterId", "templateName",
                     "options", "messageCount", "createdAt", "updatedAt"}
MESSAGE_KEYS = {"messageId", "conversationId", "seq", "role", "kind", "content", "displayContent",
                "hasThoughts", "hasReminder", "hasKeyframe", "important", "createdAt"}
OPTION_KEYS = {f.alias or name for name, f in ConversationOptions.model_fields.items()}
ASSEMBLE_KEYS = {f.alias or name for name, f in AssembleResult.model_fields.items()}
QUIET = {"remindEvery": 0, "keyframeEvery": 0, "extractMemories": False}
KEYFRAME_BLOCK = ('<mcp:context type="resource" uri="am7://keyframe/x" ephemeral="true">\n'
                  '{"schema":"urn:am7:narrative:keyframe"}\n</mcp:context>')


@dataclass(frozen=True)
class Pair:
    project_id: str
    su: int
    han: int


@pytest_asyncio.fixture(loop_scope="module")
async def chat(services: tuple[Config, Services]) -> AsyncIterator[Parts]:
    _config, opened = services
    parts = character_chat(opened.database, opened.vectors)
    try:
        yield parts
    finally:
        await parts.chat.aclose()


@pytest.fixture
def characters_registry(chat: Parts) -> Registry:
    registry = Registry()
    register_characters(registry, chat.chat)
    return registry


@pytest.fixture
def characters(characters_registry: Registry) -> Rpc:
    return Rpc(Dispatcher(characters_registry))


async def _character(rpc: Rpc, project_id: str, name: str, description: str = "") -> int:
    result = await rpc.call("kg:entity:upsert", {"projectId": project_id, "kind": "character", "name": name,
                                                 "description": description})
    entity_id: int = result["entity"]["id"]
    return entity_id


@pytest_asyncio.fixture(loop_scope="module")
async def pair(rpc: Rpc, chat: Parts, project_id: str) -> Pair:
    current = await chat.projects.get_settings(project_id)
    await chat.projects.update_settings(project_id, current.version, language="en")
    return Pair(project_id, await _character(rpc, project_id, "Su Wan", "A lighthouse keeper."),
                await _character(rpc, project_id, "Han Li", "A shipwright's son."))


async def _create(characters: Rpc, pair: Pair, **options: Any) -> dict[str, Any]:
    created: dict[str, Any] = await characters.call("chat:conversation:create", {
        "projectId": pair.project_id, "systemCharacterId": pair.su, "userCharacterId": pair.han,
        "options": {**QUIET, **options}})
    return created


async def _say(characters: Rpc, cid: str, role: str, content: str, **extra: Any) -> dict[str, Any]:
    added: dict[str, Any] = await characters.call("chat:message:add", {"conversationId": cid, "role": role,
                                                                       "content": content, **extra})
    return added


async def test_the_methods_and_their_errors_are_documented(characters_registry: Registry,
                                                           registry: Registry) -> None:
    """Every chat:conversation:*, chat:message:* and chat:assemble method, and every error each
    declares, has its row in docs/protocol.md; the app registers exactly these, too."""
    assert {m.name for m in characters_registry} == METHODS
    assert_documented(characters_registry, PREFIXES)
    assert {m.name for m in registry if m.name.startswith(PREFIXES)} == METHODS
    assert_documented(registry, PREFIXES)


async def test_create_get_list_delete(characters: Rpc, pair: Pair) -> None:
    """create answers the conversation in camelCase (the profile's name, every option by its
    camelCase name, no messages); get adds its background work; list has it, newest first and by
    character; delete answers it, and then it is CONVERSATION_NOT_FOUND."""
    created = await characters.call("chat:conversation:create", {
        "projectId": pair.project_id, "systemCharacterId": pair.su, "userCharacterId": pair.han,
        "templateName": "SMS Chat", "options": {"rating": "M", "keyframeEvery": 0}})
    assert set(created) == CONVERSATION_KEYS | {"ignoredOptions"}
    assert (created["projectId"], created["systemCharacterId"], created["userCharacterId"],
            created["templateName"], created["messageCount"], created["ignoredOptions"]) == (
        pair.project_id, pair.su, pair.han, "sms-chat", 0, [])
    assert set(created["options"]) == OPTION_KEYS
    assert (created["options"]["rating"], created["options"]["keyframeEvery"],
            created["options"]["tokenBudget"]) == ("M", 0, 8192)
    cid = created["conversationId"]
    conversation = {k: v for k, v in created.items() if k != "ignoredOptions"}
    got = await characters.call("chat:conversation:get", {"conversationId": cid})
    assert got == {**conversation, "background": [], "backgroundDone": {}}
    default = await characters.call("chat:conversation:create", {
        "projectId": pair.project_id, "systemCharacterId": pair.han, "userCharacterId": pair.su})
    assert default["templateName"] == "base-roleplay"
    listed = await characters.call("chat:conversation:list", {"projectId": pair.project_id})
    assert [c["conversationId"] for c in listed["conversations"]] == [default["conversationId"], cid]
    assert listed["conversations"][1] == conversation
    mine = await characters.call("chat:conversation:list", {"projectId": pair.project_id,
                                                            "systemCharacterId": pair.su})
    assert mine == {"conversations": [conversation]}
    assert await characters.call("chat:conversation:delete", {"conversationId": cid}) == conversation
    for method in ("chat:conversation:get", "chat:conversation:delete", "chat:message:list",
                   "chat:assemble"):
        error = await characters.error(method, {"conversationId": cid})
        assert (error["code"], error["data"]) == (-32080, {"code": "CONVERSATION_NOT_FOUND"}), method
    listed = await characters.call("chat:conversation:list", {"projectId": pair.project_id})
    assert [c["conversationId"] for c in listed["conversations"]] == [default["conversationId"]]


async def test_create_refuses_unknown_characters_and_templates(characters: Rpc, pair: Pair) -> None:
    """An id of no character of the project is CHARACTER_NOT_FOUND with that id; an unknown template
    PROFILE_NOT_FOUND; an unknown project PROJECT_NOT_FOUND."""
    base = {"projectId": pair.project_id, "systemCharacterId": pair.su}
    error = await characters.error("chat:conversation:create", {**base, "userCharacterId": 999_999})
    assert (error["code"], error["data"]) == (-32081, {"code": "CHARACTER_NOT_FOUND", "characterId": 999_999})
    error = await characters.error("chat:conversation:create", {**base, "userCharacterId": pair.han,
                                                                "templateName": "Nope"})
    assert (error["code"], error["data"]) == (-32050, {"code": "PROFILE_NOT_FOUND"})
    error = await characters.error("chat:conversation:create", {**base, "projectId": "0000000000000000",
                                                                "userCharacterId": pair.han})
    assert error["data"] == {"code": "PROJECT_NOT_FOUND"}


@pytest.mark.parametrize(("options", "loc"), [
    ({"rating": "X"}, ["options", "rating"]),
    ({"tokenBudget": 10}, ["options", "tokenBudget"]),
    ({"memoryFormat": "xml"}, ["options", "memoryFormat"]),
    ({"keyframeEvery": -1}, ["options", "keyframeEvery"]),
    ({"tokenBudget": 512, "outputReserve": 512}, ["options"]),
])
async def test_invalid_options_are_located_under_options(characters: Rpc, pair: Pair, options: dict[str, Any],
                                                         loc: list[str]) -> None:
    """A bad option is -32602 INVALID_PARAMS whose error is located under ``options`` (a rule
    across options at ``options`` itself), and no conversation is made."""
    before = await characters.call("chat:conversation:list", {"projectId": pair.project_id})
    error = await characters.error("chat:conversation:create", {
        "projectId": pair.project_id, "systemCharacterId": pair.su, "userCharacterId": pair.han,
        "options": options})
    assert (error["code"], error["data"]["code"]) == (-32602, "INVALID_PARAMS")
    assert [e["loc"] for e in error["data"]["errors"]] == [loc]
    assert await characters.call("chat:conversation:list", {"projectId": pair.project_id}) == before


async def test_ignored_options_name_the_seed_fields_no_prompt_uses(characters: Rpc, pair: Pair) -> None:
    """Fields of the seed's chat configuration that shape no prompt are accepted, left out of the
    stored options and named, sorted, in ignoredOptions."""
    created = await _create(characters, pair, model="llama3", stream=True, serverUrl="http://localhost:1",
                            messageTrim=5, rating="E")
    assert created["ignoredOptions"] == ["messageTrim", "model", "serverUrl", "stream"]
    assert set(created["options"]) == OPTION_KEYS
    assert created["options"]["rating"] == "E"


async def test_message_list_gives_display_text_and_flags(characters: Rpc, pair: Pair) -> None:
    """chat:message:add answers the message with its flags and what is due; chat:message:list gives
    the messages in order, raw content beside displayContent without thoughts, reminder and keyframe
    blocks, each flagged; afterSeq and limit page them."""
    cid = (await _create(characters, pair, remindEvery=2))["conversationId"]
    first = await _say(characters, cid, "assistant", "<think>She hides the letter.</think>Nothing happened.")
    assert set(first) == {"message", "keyframeDue", "extractionDue"}
    assert set(first["message"]) == MESSAGE_KEYS
    assert (first["message"]["seq"], first["message"]["role"], first["message"]["kind"],
            first["keyframeDue"], first["extractionDue"]) == (1, "assistant", "message", False, False)
    await _say(characters, cid, "assistant", "Hi.\n" + KEYFRAME_BLOCK)
    reminded = await _say(characters, cid, "user", "Plain words.")
    assert reminded["message"]["hasReminder"]
    await _say(characters, cid, "user", "Still here.")
    listed = (await characters.call("chat:message:list", {"conversationId": cid}))["messages"]
    assert listed[0] == first["message"]
    assert [(m["seq"], m["displayContent"], m["hasThoughts"], m["hasReminder"], m["hasKeyframe"])
            for m in listed] == [(1, "Nothing happened.", True, False, False),
                                 (2, "Hi.", False, False, True),
                                 (3, "Plain words.", False, True, False),
                                 (4, "Still here.", False, False, False)]
    assert listed[0]["content"].startswith("<think>")
    assert 'uri="am7://reminder/' in listed[2]["content"]
    page = await characters.call("chat:message:list", {"conversationId": cid, "afterSeq": 1, "limit": 2})
    assert [m["seq"] for m in page["messages"]] == [2, 3]
    error = await characters.error("chat:message:list", {"conversationId": cid, "limit": 0})
    assert error["data"]["code"] == "INVALID_PARAMS"


async def test_message_add_refuses_what_it_cannot_store(characters: Rpc, pair: Pair) -> None:
    """A message past the limit is CHAT_MESSAGE_TOO_LONG with its length and the limit; a blank
    one or an unknown role INVALID_PARAMS; an unknown conversation CONVERSATION_NOT_FOUND."""
    cid = (await _create(characters, pair))["conversationId"]
    long = await characters.error("chat:message:add", {"conversationId": cid, "role": "user",
                                                       "content": "x" * (MAX_MESSAGE_CHARS + 1)})
    assert (long["code"], long["data"]) == (-32071, {"code": "CHAT_MESSAGE_TOO_LONG",
                                                     "length": MAX_MESSAGE_CHARS + 1,
                                                     "limit": MAX_MESSAGE_CHARS})
    blank = await characters.error("chat:message:add", {"conversationId": cid, "role": "user",
                                                        "content": "  "})
    assert blank["data"]["code"] == "INVALID_PARAMS"
    role = await characters.error("chat:message:add", {"conversationId": cid, "role": "narrator",
                                                       "content": "Hi."})
    assert [e["loc"] for e in role["data"]["errors"]] == [["role"]]
    missing = await characters.error("chat:message:add", {"conversationId": "0123456789abcdef",
                                                          "role": "user", "content": "Hi."})
    assert missing["data"] == {"code": "CONVERSATION_NOT_FOUND"}
    assert (await characters.call("chat:message:list", {"conversationId": cid}))["messages"] == []


async def test_important_marks_and_unmarks_a_message(characters: Rpc, pair: Pair) -> None:
    """chat:message:important marks a message (and unmarks it), answering the message; a message id
    of another conversation, or of none, is RECORD_NOT_FOUND."""
    cid = (await _create(characters, pair))["conversationId"]
    other = (await _create(characters, pair))["conversationId"]
    said = (await _say(characters, cid, "user", "The key is under the third stone."))["message"]
    elsewhere = (await _say(characters, other, "user", "Elsewhere."))["message"]
    assert not said["important"]
    marked = await characters.call("chat:message:important", {"conversationId": cid,
                                                              "messageId": said["messageId"]})
    assert marked == {**said, "important": True}
    listed = (await characters.call("chat:message:list", {"conversationId": cid}))["messages"]
    assert listed == [marked]
    unmarked = await characters.call("chat:message:important", {"conversationId": cid,
                                                                "messageId": said["messageId"],
                                                                "important": False})
    assert unmarked == said
    added = await _say(characters, cid, "assistant", "I will remember.", important=True)
    assert added["message"]["important"]
    for message_id in (elsewhere["messageId"], 999_999):
        error = await characters.error("chat:message:important", {"conversationId": cid,
                                                                  "messageId": message_id})
        assert (error["code"], error["data"]) == (-32014, {"code": "RECORD_NOT_FOUND"})


async def test_assemble_answers_the_prompt_with_one_message_per_turn(characters: Rpc, chat: Parts,
                                                                     pair: Pair) -> None:
    """chat:assemble answers every field context:assemble does, plus conversationId, memory (the
    recalled memories' count, ids and tokens) and historyCandidates; its messages are the system
    message, the two introductions and one message per history turn in its role."""
    cid = (await _create(characters, pair))["conversationId"]
    memory = await chat.memories.add(pair.project_id, {
        "memory_type": "RELATIONSHIP", "importance": 9, "summary": "Su pulled Han out of the sea.",
        "system_character_id": pair.su, "user_character_id": pair.han})
    turns = [("user", "Did you see the ship?"), ("assistant", "I lit the lamp too late."),
             ("user", "It was not your fault."), ("assistant", "It was.")]
    for role, content in turns:
        await _say(characters, cid, role, content)
    result = await characters.call("chat:assemble", {"conversationId": cid, "variables": {"scene": "Dawn.",
                                                                                   "includeScene": "true"}})
    assert set(result) == ASSEMBLE_KEYS | {"conversationId", "memory", "historyCandidates"}
    assert (result["conversationId"], result["profileId"], result["historyCandidates"]) == (
        cid, "base-roleplay", 4)
    sections = {s["id"]: s for s in result["sections"]}
    assert result["memory"] == {"count": 1, "memoryIds": [memory.id], "tokens": sections["memory"]["tokens"]}
    assert result["memory"]["tokens"] > 0
    assert "Su pulled Han out of the sea." in result["prompt"]
    assert "Scene: Dawn." in result["prompt"]
    assert result["tokenCount"] <= result["budget"]["total"] == 8192 - 1024
    messages = result["messages"]
    assert [m["role"] for m in messages[:3]] == ["system", "user", "assistant"]
    assert "Su pulled Han out of the sea." in messages[0]["content"]
    assert messages[1]["content"].startswith("I am Han Li.")
    assert messages[2]["content"] == "I am Su Wan."
    assert [(m["role"], m["content"]) for m in messages[3:]] == turns
    assert "Han: Did you see the ship?\n\nSu: I lit the lamp too late." in result["prompt"]


async def test_get_reports_background_work(characters: Rpc, chat: Parts, pair: Pair) -> None:
    """After a keyframe written without a model, chat:conversation:get lists its event (fallback,
    one stored, SUMMARY_FALLBACK) and counts it; the next chat:assemble carries the warning once."""
    cid = (await _create(characters, pair, keyframeEvery=2))["conversationId"]
    await _say(characters, cid, "user", "The tide turned.")
    added = await _say(characters, cid, "assistant", "The lamp went dark.")
    assert added["keyframeDue"]
    await chat.chat.settled(cid)
    got = await characters.call("chat:conversation:get", {"conversationId": cid})
    warning = "SUMMARY_FALLBACK: keyframe written without a model (no_client)"
    assert got["background"] == [{"kind": "keyframe", "status": "fallback", "stored": 1, "warning": warning}]
    assert got["backgroundDone"] == {"keyframe": 1}
    assert got["messageCount"] == 3
    first = await characters.call("chat:assemble", {"conversationId": cid})
    assert warning in first["warnings"]
    assert warning not in (await characters.call("chat:assemble", {"conversationId": cid}))["warnings"]


async def test_a_rating_or_scene_for_one_call_brings_what_follows_from_it(characters: Rpc,
                                                                           pair: Pair) -> None:
    """chat:assemble's variables replace the options for one call ("a scene change, a rating"):
    what the options derive from them follows as it would from the options, the MPA equivalent of
    a rating (M is R) unless the call gives ratingMpa too, and the scene shown when one is given
    unless the call says includeScene; the stored options are untouched."""
    cid = (await _create(characters, pair))["conversationId"]
    await _say(characters, cid, "user", "Tell me about the storm.")
    once = await characters.call("chat:assemble", {"conversationId": cid, "variables": {"rating": "M"}})
    assert "Content rated M/R." in once["prompt"]
    both = await characters.call("chat:assemble", {"conversationId": cid,
                                                   "variables": {"rating": "M", "ratingMpa": "PG-13"}})
    assert "Content rated M/PG-13." in both["prompt"]
    scene = await characters.call("chat:assemble", {"conversationId": cid, "variables": {"scene": "Dawn."}})
    assert "Scene: Dawn." in scene["prompt"]
    hidden = await characters.call("chat:assemble", {"conversationId": cid,
                                                     "variables": {"scene": "Dawn.", "includeScene": ""}})
    assert "Dawn." not in hidden["prompt"]
    after = await characters.call("chat:assemble", {"conversationId": cid})
    assert "Content rated T/PG-13." in after["prompt"]
