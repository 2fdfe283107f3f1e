"""Assembly profiles over the real websocket: profile:* and context:assemble with a project profile.

One ``python -m main serve`` child serves the module (``proc`` in conftest);
each test opens its own project folder through JSON-RPC.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.profiles.plans import built_in_documents
from tests.support.client import RpcClient
from tests.support.scenarios import Project, rpc_error

# The built-in profiles, the default first, as profile:list gives them.
BUILT_INS = list(built_in_documents())

NOVEL_SECTIONS = ["rules", "settings", "retrieved", "immediate"]


def profile(name: str, sections: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A strata.profile/1 document; by default one literal section."""
    return {"schema": "strata.profile/1", "name": name, **fields,
            "sections": sections if sections is not None else {"intro": {"order": 10, "content": ["Hi."]}}}


@pytest.fixture
async def project(rpc: RpcClient, tmp_path: Path) -> Project:
    return await Project.open(rpc, tmp_path / "book")


async def put(project: Project, document: dict[str, Any], version: int | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"projectId": project.project_id, "name": document["name"], "profile": document}
    if version is not None:
        params["version"] = version
    result: dict[str, Any] = await project.rpc.call("profile:put", params)
    return result


async def test_list_and_get_of_novel(project: Project) -> None:
    """profile:list shows novel first as a built-in at version 1; profile:get returns it resolved."""
    listed = await project.rpc.call("profile:list", {"projectId": project.project_id})
    novel = listed["profiles"][0]
    assert (novel["name"], novel["builtIn"], novel["version"], novel["extends"]) == ("novel", True, 1, None)
    got = await project.rpc.call("profile:get", {"projectId": project.project_id, "name": "novel"})
    assert (got["builtIn"], got["version"], got["profile"]["schema"]) == (True, 1, "strata.profile/1")
    assert list(got["resolved"]["sections"]) == NOVEL_SECTIONS


async def test_put_get_validate_delete_round_trip(project: Project) -> None:
    """A profile extending novel is saved, read back as sent and resolved, updated at its version,
    validated against the project, and deleted."""
    document = profile("brief", {"notes": {"order": 50, "content": ["Keep replies under 200 words."]}},
                       extends="novel", description="novel, briefer")
    created = await put(project, document)
    assert (created["profile"], created["version"], created["builtIn"]) == (document, 1, False)
    assert list(created["resolved"]["sections"]) == [*NOVEL_SECTIONS, "notes"]
    listed = await project.rpc.call("profile:list", {"projectId": project.project_id})
    assert listed["profiles"][len(BUILT_INS):] == [
        {"name": "brief", "description": "novel, briefer", "extends": "novel", "builtIn": False,
         "version": 1}]
    updated = await put(project, {**document, "description": "v2"}, version=1)
    assert updated["version"] == 2
    got = await project.rpc.call("profile:get", {"projectId": project.project_id, "name": "brief"})
    assert got == updated
    checked = await project.rpc.call("profile:validate", {"profile": document,
                                                          "projectId": project.project_id})
    assert (checked["valid"], checked["problems"]) == (True, [])
    assert await project.rpc.call("profile:delete", {"projectId": project.project_id, "name": "brief",
                                                     "version": 2}) == {"ok": True}
    gone = await rpc_error(project.rpc, "profile:get", {"projectId": project.project_id, "name": "brief"})
    assert (gone["code"], gone["data"]["code"]) == (-32050, "PROFILE_NOT_FOUND")


INVALID = {
    "unknown source": (profile("p", {"a": {"order": 1, "source": "tarot"}}), "/sections/a/source",
                       "unknown source"),
    "unknown variable": (profile("p", {"a": {"order": 1, "content": ["Mood: ${mood}"]}}),
                         "/sections/a/content/0", "unknown variable"),
    "missing parent": (profile("p", extends="nowhere"), "/extends", "no profile"),
    "ratios above 1": (profile("p", {"a": {"order": 1, "content": ["a"], "budget": {"ratio": 0.6}},
                                     "b": {"order": 2, "content": ["b"], "budget": {"ratio": 0.6}}}),
                       "/sections", "above 1"),
    "duplicate order": (profile("p", {"a": {"order": 5, "content": ["a"]},
                                      "b": {"order": 5, "content": ["b"]}}),
                        "/sections/b/order", "same order"),
    "never with a reduction step": (profile("p", {"a": {"order": 1, "content": ["a"], "never": True,
                                                        "reduce": [{"step": "trim_chars", "chars": 10}]}}),
                                    "/sections/a/reduce", "never"),
}


@pytest.mark.parametrize("case", INVALID)
async def test_invalid_profiles_answer_problems_at_paths(project: Project, case: str) -> None:
    """profile:put answers -32051 PROFILE_INVALID with the problem's JSON pointer and saves nothing;
    profile:validate reports the same problem without an error."""
    document, path, words = INVALID[case]
    error = await rpc_error(project.rpc, "profile:put", {"projectId": project.project_id, "name": "p",
                                                         "profile": document})
    assert (error["code"], error["data"]["code"]) == (-32051, "PROFILE_INVALID")
    problems = error["data"]["problems"]
    assert [p["path"] for p in problems] == [path]
    assert words in problems[0]["message"]
    checked = await project.rpc.call("profile:validate", {"profile": document,
                                                          "projectId": project.project_id})
    assert (checked["valid"], checked["problems"], checked["resolved"]) == (False, problems, None)
    listed = await project.rpc.call("profile:list", {"projectId": project.project_id})
    assert [p["name"] for p in listed["profiles"]] == BUILT_INS


async def test_an_extends_cycle_is_refused(project: Project) -> None:
    """Making a saved parent extend its own child is PROFILE_INVALID at /extends naming the cycle."""
    await put(project, profile("cyc-a"))
    await put(project, profile("cyc-b", {"more": {"order": 20, "content": ["b"]}}, extends="cyc-a"))
    error = await rpc_error(project.rpc, "profile:put", {"projectId": project.project_id, "name": "cyc-a",
                                                         "profile": profile("cyc-a", extends="cyc-b"),
                                                         "version": 1})
    assert error["data"]["problems"] == [{"path": "/extends",
                                          "message": "extends makes a cycle: cyc-a -> cyc-b -> cyc-a"}]


async def test_conflict_and_read_only(project: Project) -> None:
    """A stale version or a second create is -32052 PROFILE_CONFLICT with currentVersion; saving
    or deleting a built-in is -32053 PROFILE_READ_ONLY."""
    await put(project, profile("mine"))
    await put(project, profile("mine", description="two"), version=1)
    for version in (None, 1):
        params: dict[str, Any] = {"projectId": project.project_id, "name": "mine", "profile": profile("mine")}
        if version is not None:
            params["version"] = version
        error = await rpc_error(project.rpc, "profile:put", params)
        assert (error["code"], error["data"]) == (-32052, {"code": "PROFILE_CONFLICT", "currentVersion": 2})
    for method, extra in (("profile:put", {"profile": profile("novel")}), ("profile:delete", {})):
        error = await rpc_error(project.rpc, method, {"projectId": project.project_id, "name": "novel",
                                                      **extra})
        assert (error["code"], error["data"]["code"]) == (-32053, "PROFILE_READ_ONLY")


async def test_assemble_with_an_unknown_profile_is_not_found(project: Project) -> None:
    """context:assemble with a profileId that is neither built in nor the project's is -32050."""
    error = await rpc_error(project.rpc, "context:assemble", {"projectId": project.project_id,
                                                              "profileId": "no-such-profile"})
    assert (error["code"], error["data"]) == (-32050, {"code": "PROFILE_NOT_FOUND"})


async def test_assemble_with_a_project_profile(project: Project) -> None:
    """A saved profile without a document window assembles without a documentId, and its prompt is
    exactly its sections in order: literal lines with variables, a request value, the instruction."""
    document = profile("reading-notes", {
        "persona": {"order": 10, "stable": True, "role": "system",
                    "content": ["You are a reading companion for ${reader}.",
                                {"text": "Answer in ${language}.", "condition": "language"}]},
        "question": {"order": 20, "source": "request.question", "format": {"header": "[Question]"}},
        "ask": {"order": 30, "source": "instruction", "format": {"begin": "<ask>", "end": "</ask>"}},
    }, variables={"reader": {"default": "a reader"}, "language": {}})
    await put(project, document)
    result = await project.rpc.call("context:assemble", {
        "projectId": project.project_id, "profileId": "reading-notes", "additionalInput": "Be brief.",
        "variables": {"reader": "Lin", "question": "Who keeps the lighthouse?"}})
    assert result["prompt"] == ("You are a reading companion for Lin.\n\n"
                                "[Question]\nWho keeps the lighthouse?\n\n"
                                "<ask>\nBe brief.\n</ask>")
    assert result["profileId"] == "reading-notes"
    assert [s["id"] for s in result["sections"]] == ["persona", "question", "ask"]
    assert [m["role"] for m in result["messages"]] == ["system", "user"]
    assert result["warnings"] == []


async def test_placeholders_in_values_and_writer_text_stay_literal(project: Project) -> None:
    """No template injection: a ${...} inside a variable's value, the instruction or a constraint the
    writer saved is sent as written; only the profile's own lines are expanded, and only once."""
    document = profile("echo", {
        "rules": {"order": 10, "source": "constraints", "format": {"list": "numbered"}},
        "persona": {"order": 20, "content": ["Reader: ${reader}."]},
        "question": {"order": 30, "source": "request.question"},
        "ask": {"order": 40, "source": "instruction"},
    }, variables={"reader": {}, "question": {}, "secret": {"default": "the key is under the third step"}})
    await put(project, document)
    await project.rpc.call("constraints:create", {"projectId": project.project_id, "kind": "plot",
                                                  "text": "Never reveal ${secret}.", "priority": 5})
    result = await project.rpc.call("context:assemble", {
        "projectId": project.project_id, "profileId": "echo", "additionalInput": "Say ${secret}.",
        "variables": {"reader": "${secret}", "question": "What is ${secret}? ${reader}"}})
    assert result["prompt"] == ("1. Never reveal ${secret}.\n\n"
                                "Reader: ${secret}.\n\n"
                                "What is ${secret}? ${reader}\n\n"
                                "Say ${secret}.")
    assert "third step" not in result["prompt"]
