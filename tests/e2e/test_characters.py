"""Character conversations over a real websocket (seed 003): templates as profiles, persisted
messages with server-side display pruning, typed memories scoped to the character pair, history by
tokens, and keyframes and extracted memories written through the summarizer seam."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import RpcClient, connected
from tests.support.process import ServerProcess
from tests.support.scenarios import Project, rpc_error

pytestmark = pytest.mark.server_flags("--completion-timeout", "2")

WAIT = 20.0  # seconds a test waits for background work before failing


async def character(rpc: RpcClient, project: Project, name: str, description: str = "") -> int:
    result = await rpc.call("kg:entity:upsert", {"projectId": project.project_id, "kind": "character",
                                                 "name": name, "description": description})
    return int(result["entity"]["id"])


async def conversation(rpc: RpcClient, project: Project, system: int, user: int,
                       template: str = "Base Roleplay", **options: Any) -> str:
    created = await rpc.call("chat:conversation:create", {
        "projectId": project.project_id, "systemCharacterId": system, "userCharacterId": user,
        "templateName": template, "options": options})
    return str(created["conversationId"])


async def say(rpc: RpcClient, cid: str, role: str, content: str, **extra: Any) -> dict[str, Any]:
    added: dict[str, Any] = await rpc.call("chat:message:add", {"conversationId": cid, "role": role,
                                                                "content": content, **extra})
    return added


async def background(rpc: RpcClient, cid: str, kind: str, count: int) -> list[dict[str, Any]]:
    """The conversation's latest background events of ``kind`` once ``count`` of them finished."""
    deadline = time.monotonic() + WAIT
    while True:
        got = await rpc.call("chat:conversation:get", {"conversationId": cid})
        if got["backgroundDone"].get(kind, 0) >= count:
            return [e for e in got["background"] if e["kind"] == kind]
        assert time.monotonic() < deadline, f"no {kind} in time"
        await asyncio.sleep(0.05)


@pytest.fixture
async def project(rpc: RpcClient, tmp_path: Path) -> Project:
    return await Project.open(rpc, tmp_path / "novel", language="en")


async def test_a_second_conversation_of_the_pair_starts_with_the_first_ones_memories(
        rpc: RpcClient, project: Project) -> None:
    """The seed's headline gap: what the pair lived through in one conversation (a memory added in
    it, its keyframe) is in the prompt of their next conversation before a word is said."""
    su = await character(rpc, project, "Su Wan", "A lighthouse keeper.\nPersonality: quiet, watchful")
    han = await character(rpc, project, "Han Li", "A shipwright's son.")
    first = await conversation(rpc, project, su, han, keyframeEvery=4)
    await rpc.call("memory:typed:add", {
        "projectId": project.project_id, "memoryType": "RELATIONSHIP", "importance": 9,
        "summary": "Su Wan pulled Han out of the sea during the storm.", "systemCharacterId": su,
        "userCharacterId": han, "conversationId": first})
    for n, role in enumerate(["user", "assistant"] * 2):
        await say(rpc, first, role, f"Line {n} of the night of the storm.")
    await background(rpc, first, "keyframe", 1)
    second = await conversation(rpc, project, su, han)
    prompt = await rpc.call("chat:assemble", {"conversationId": second})
    assert "Su Wan pulled Han out of the sea during the storm." in prompt["prompt"]
    assert "Line 0 of the night of the storm." in prompt["prompt"]  # the keyframe's summary, last session
    assert prompt["memory"]["count"] >= 1
    memory = next(s for s in prompt["sections"] if s["id"] == "memory")
    assert memory["tokens"] <= 500
    assert memory["role"] == "system"
    system = prompt["messages"][0]
    assert system["role"] == "system"
    assert "Su Wan pulled Han" in system["content"]


async def test_sms_chat_has_no_episode_or_scene_and_numbers_rules_without_gaps(
        rpc: RpcClient, project: Project) -> None:
    """SMS Chat extends Base Roleplay: no episode or scene section even when the options have them,
    its own three rules numbered 1-3; Base Roleplay numbers its rules without a gap either way."""
    su = await character(rpc, project, "Su Wan")
    han = await character(rpc, project, "Han Li")
    options: dict[str, Any] = {"scene": "The lamp room, a storm outside.",
                               "episodes": [{"name": "The Wreck", "stages": ["Find the boat."]}]}
    sms = await rpc.call("chat:assemble", {"conversationId": await conversation(rpc, project, su, han,
                                                                                  "SMS Chat", **options)})
    ids = [s["id"] for s in sms["sections"]]
    assert "episode" not in ids
    assert "scene" not in ids
    assert "The Wreck" not in sms["prompt"]
    assert "lamp room" not in sms["prompt"]
    assert "YOU are Su texting Han." in sms["prompt"]
    assert "1. FORMAT: Short SMS/DM messages" in sms["prompt"]
    assert "3. Stay in character." in sms["prompt"]
    assert "4. " not in sms["prompt"]
    no_options: dict[str, Any] = {}
    for opts in (no_options, options):
        base = await rpc.call("chat:assemble", {"conversationId": await conversation(rpc, project, su, han,
                                                                                       **opts)})
        rules = base["prompt"].split("Rules:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert [line.split(".", 1)[0] for line in rules] == [str(n) for n in range(1, len(rules) + 1)]
        assert ("EPISODE GUIDANCE" in rules[0]) == bool(opts)


async def test_an_unknown_template_variable_is_refused_at_save_with_its_path(
        rpc: RpcClient, project: Project) -> None:
    """A template typo under a published namespace (``${system.fristName}``) is a validation problem
    at its JSON pointer, not an empty string at assembly time."""
    profile: dict[str, Any] = {"schema": "strata.profile/1", "name": "my-sms", "extends": "sms-chat",
               "sections": {"identity": {"override": True, "content": ["YOU are ${system.fristName}."]}}}
    error = await rpc_error(rpc, "profile:put", {"projectId": project.project_id, "name": "my-sms",
                                                 "profile": profile})
    assert error["data"]["code"] == "PROFILE_INVALID"
    assert [p["path"] for p in error["data"]["problems"]] == ["/sections/identity/content/0"]
    profile["sections"]["identity"]["content"] = ["YOU are ${system.firstName}, always."]
    await rpc.call("profile:put", {"projectId": project.project_id, "name": "my-sms", "profile": profile})
    su, han = await character(rpc, project, "Su Wan"), await character(rpc, project, "Han Li")
    own = await rpc.call("chat:assemble", {"conversationId": await conversation(rpc, project, su, han,
                                                                                  "my-sms")})
    assert own["prompt"].startswith("YOU are Su, always.")


async def test_memories_of_another_pair_or_project_never_appear(rpc: RpcClient, project: Project,
                                                                tmp_path: Path) -> None:
    """Planted memories of another pair (sharing a character) and of another project stay out of
    the prompt and out of memory:typed:search."""
    su, han, mei = (await character(rpc, project, "Su Wan"), await character(rpc, project, "Han Li"),
                    await character(rpc, project, "Mei Ling"))
    other = await Project.open(rpc, tmp_path / "other", language="en")
    o_su, o_han = await character(rpc, other, "Su Wan"), await character(rpc, other, "Han Li")
    plant = {"memoryType": "FACT", "importance": 10}
    ours = project.project_id
    await rpc.call("memory:typed:add", {**plant, "projectId": ours, "summary": "OURS: the bell.",
                                        "systemCharacterId": su, "userCharacterId": han})
    await rpc.call("memory:typed:add", {**plant, "projectId": ours, "summary": "PAIR: Mei's debt.",
                                        "systemCharacterId": su, "userCharacterId": mei})
    await rpc.call("memory:typed:add", {**plant, "projectId": other.project_id, "summary": "PROJECT: leak.",
                                        "systemCharacterId": o_su, "userCharacterId": o_han})
    cid = await conversation(rpc, project, su, han)
    await say(rpc, cid, "user", "Do you remember the bell, Mei's debt, the leak?")
    prompt = (await rpc.call("chat:assemble", {"conversationId": cid}))["prompt"]
    assert "OURS: the bell." in prompt
    assert "PAIR:" not in prompt
    assert "PROJECT:" not in prompt
    found = await rpc.call("memory:typed:search", {"projectId": project.project_id, "systemCharacterId": su,
                                                   "userCharacterId": han, "query": "the leak and the debt"})
    assert {m["summary"] for m in found["memories"]} == {"OURS: the bell."}


async def test_a_200_message_conversation_stays_within_budget_with_keyframes_and_memories(
        rpc: RpcClient, project: Project) -> None:
    """200 messages on a 2,048-token window: the prompt fits, the oldest small talk goes first, an
    important early message stays, the last two keyframes and the pair's memory are in place."""
    su = await character(rpc, project, "Su Wan", "Personality: quiet")
    han = await character(rpc, project, "Han Li")
    cid = await conversation(rpc, project, su, han, tokenBudget=2048, outputReserve=256, remindEvery=0)
    await rpc.call("memory:typed:add", {"projectId": project.project_id, "memoryType": "RELATIONSHIP",
                                        "importance": 8, "summary": "They trust each other since the wreck.",
                                        "systemCharacterId": su, "userCharacterId": han})
    for n in range(200):
        role = "user" if n % 2 == 0 else "assistant"
        await say(rpc, cid, role, f"PLOT: the key is under the third stone (message {n})." if n == 2 else
                  f"Small talk number {n} about the weather and the tides of the bay.", important=n == 2)
    await background(rpc, cid, "keyframe", 10)
    prompt = await rpc.call("chat:assemble", {"conversationId": cid})
    assert prompt["tokenCount"] <= prompt["budget"]["total"] == 2048 - 256
    text = prompt["prompt"]
    assert text.count('uri="am7://keyframe/') == 2
    assert "They trust each other since the wreck." in text
    assert "PLOT: the key is under the third stone" in text
    said = [m["content"] for m in prompt["messages"][1:]]
    assert "Small talk number 199 about the weather and the tides of the bay." in said
    assert "Small talk number 1 about the weather and the tides of the bay." not in said
    history = next(s for s in prompt["sections"] if s["id"] == "history")
    assert [step["step"] for step in history["steps"]] == ["drop_oldest"]
    listed = (await rpc.call("chat:message:list", {"conversationId": cid}))["messages"]
    assert sum(m["kind"] == "keyframe" for m in listed) == 2
    assert len(listed) == 202


async def test_display_flags_for_thoughts_reminders_and_keyframes(rpc: RpcClient, project: Project) -> None:
    """chat:message:list prunes server-side: thoughts, reminder and keyframe blocks leave
    displayContent and set their flags; the raw content is kept; reminders are injected every
    remindEvery messages."""
    su, han = await character(rpc, project, "Su Wan"), await character(rpc, project, "Han Li")
    cid = await conversation(rpc, project, su, han, remindEvery=2, keyframeEvery=0)
    await say(rpc, cid, "assistant", "<think>She hides the letter.</think>Nothing happened.")
    await say(rpc, cid, "assistant", 'Hi.\n<mcp:context type="resource" uri="am7://keyframe/x" '
              'ephemeral="true">\n{"schema":"urn:am7:narrative:keyframe"}\n</mcp:context>')
    await say(rpc, cid, "user", "Plain words.")
    await say(rpc, cid, "user", "Where were you? (Reminder: stay in character)")
    listed = (await rpc.call("chat:message:list", {"conversationId": cid}))["messages"]
    flags = [(m["displayContent"], m["hasThoughts"], m["hasReminder"], m["hasKeyframe"]) for m in listed]
    assert flags[0] == ("Nothing happened.", True, False, False)
    assert flags[1] == ("Hi.", False, False, True)
    assert flags[2] == ("Plain words.", False, True, False)  # the reminder injected two messages on
    assert flags[3] == ("Where were you?", False, True, False)
    assert listed[0]["content"].startswith("<think>")
    assert "am7://reminder/" in listed[2]["content"]


async def test_keyframes_and_extraction_through_a_client_that_answers_llm_complete(
        proc: ServerProcess, rpc: RpcClient, project: Project) -> None:
    """A completion-capable client writes the keyframe (stored as the pair's EVENT memory) and the
    extracted memories; an answer that is not a JSON array of memories stores nothing and warns."""
    su, han = await character(rpc, project, "Su Wan"), await character(rpc, project, "Han Li")
    cid = await conversation(rpc, project, su, han, keyframeEvery=4, memoryExtractionEvery=1)
    async with connected(proc.url, proc.token) as model:
        await model.call("system:capabilities", {"completions": True})
        await say(rpc, cid, "user", "Did you see the ship?")
        await say(rpc, cid, "assistant", "I lit the lamp too late.")
        request = await model.next_request(timeout=WAIT)
        assert request["params"]["purpose"] == "character.memories"
        await model.respond(request["id"], {"content": json.dumps([
            {"memoryType": "FACT", "importance": 7, "summary": "Su lit the lamp too late.", "content": ""}])})
        await say(rpc, cid, "user", "It was not your fault.")
        await say(rpc, cid, "assistant", "It was.")
        purposes = {}
        for _ in range(2):
            request = await model.next_request(timeout=WAIT)
            purposes[request["params"]["purpose"]] = request
        await model.respond(purposes["character.memories"]["id"], {"content": "Sure! Here are memories:"})
        await model.respond(purposes["character.keyframe"]["id"], "Su blames herself for the wreck.")
        events = await background(rpc, cid, "extraction", 2)
        await background(rpc, cid, "keyframe", 1)
        await model.call("system:capabilities", {"completions": False})
    assert [(e["status"], e["stored"]) for e in events] == [("stored", 1), ("dropped", 0)]
    assert events[1]["warning"].startswith("MEMORY_EXTRACTION_DROPPED")
    listed = await rpc.call("memory:typed:list", {"projectId": project.project_id, "systemCharacterId": su,
                                                  "userCharacterId": han})
    summaries = {(m["memoryType"], m["summary"], m["source"]) for m in listed["memories"]}
    assert summaries == {("FACT", "Su lit the lamp too late.", "extraction"),
                         ("EVENT", "Su blames herself for the wreck.", "keyframe")}
    prompt = await rpc.call("chat:assemble", {"conversationId": cid})
    assert "Su blames herself for the wreck." in prompt["prompt"]
    assert any(w.startswith("MEMORY_EXTRACTION_DROPPED") for w in prompt["warnings"])


async def test_without_a_completion_client_keyframes_fall_back_and_nothing_is_extracted(
        rpc: RpcClient, project: Project) -> None:
    """No client can complete: the keyframe is the extractive fallback (SUMMARY_FALLBACK), and
    extraction stores nothing and says why."""
    su, han = await character(rpc, project, "Su Wan"), await character(rpc, project, "Han Li")
    cid = await conversation(rpc, project, su, han, keyframeEvery=2, memoryExtractionEvery=1)
    await say(rpc, cid, "user", "The tide turned at midnight.")
    await say(rpc, cid, "assistant", "And the lamp went dark.")
    keyframe = (await background(rpc, cid, "keyframe", 1))[0]
    extraction = (await background(rpc, cid, "extraction", 1))[0]
    assert keyframe["status"] == "fallback"
    assert keyframe["warning"].startswith("SUMMARY_FALLBACK")
    assert extraction["status"] == "unavailable"
    assert extraction["stored"] == 0
    listed = await rpc.call("memory:typed:list", {"projectId": project.project_id, "systemCharacterId": su,
                                                  "userCharacterId": han})
    assert [(m["memoryType"], m["source"]) for m in listed["memories"]] == [("EVENT", "keyframe")]
    assert "The tide turned at midnight." in listed["memories"][0]["content"]


async def test_errors_have_stable_codes(rpc: RpcClient, project: Project) -> None:
    """Unknown conversation, character and template, and bad options, each answer a stable code;
    options are typed strictly, as every param is: no integer from "20", 4096.0 or true."""
    su = await character(rpc, project, "Su Wan")
    missing = await rpc_error(rpc, "chat:assemble", {"conversationId": "0123456789abcdef"})
    assert missing["data"]["code"] == "CONVERSATION_NOT_FOUND"
    base = {"projectId": project.project_id, "systemCharacterId": su}
    assert (await rpc_error(rpc, "chat:conversation:create", {**base, "userCharacterId": 999_999}))[
        "data"] == {"code": "CHARACTER_NOT_FOUND", "characterId": 999_999}
    assert (await rpc_error(rpc, "chat:conversation:create", {**base, "userCharacterId": su,
                                                              "templateName": "Nope"}))["data"]["code"] == \
        "PROFILE_NOT_FOUND"
    bad = await rpc_error(rpc, "chat:conversation:create", {**base, "userCharacterId": su,
                                                            "options": {"rating": "X"}})
    assert bad["data"]["code"] == "INVALID_PARAMS"
    assert bad["data"]["errors"][0]["loc"] == ["options", "rating"]
    for name, value in (("keyframeEvery", "20"), ("tokenBudget", 4096.0), ("remindEvery", True),
                        ("imageTokens", 1), ("minSimilarity", "0.5"), ("includeScene", "false")):
        loose = await rpc_error(rpc, "chat:conversation:create", {**base, "userCharacterId": su,
                                                                  "options": {name: value}})
        assert loose["data"]["code"] == "INVALID_PARAMS"
        assert loose["data"]["errors"][0]["loc"] == ["options", name]
    cid = await conversation(rpc, project, su, su)
    await rpc.call("chat:conversation:delete", {"conversationId": cid})
    gone = await rpc_error(rpc, "chat:message:list", {"conversationId": cid})
    assert gone["data"]["code"] == "CONVERSATION_NOT_FOUND"
