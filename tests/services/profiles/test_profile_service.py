"""ProfileService: built-in and project profiles, versioned saves, extends across both, refusals
that keep every stored profile valid, and plans kept until the next write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.errors import (
    InvalidInput,
    ProfileConflict,
    ProfileInvalid,
    ProfileNotFound,
    ProfileReadOnly,
    ProjectNotFound,
)
from services.profiles.plans import BuiltInPlans, built_in_documents
from services.profiles.service import ProfileService
from services.projects import ProjectRecord
from services.store import Database

# The built-in profiles, the default first, as profile:list gives them.
BUILT_INS = built_in_documents()

UNKNOWN_PROJECT = "0000000000000000"


def doc(name: str, *, extends: str | None = None, sections: dict[str, Any] | None = None,
        **extra: Any) -> dict[str, Any]:
    """A profile document; by default one literal section."""
    document: dict[str, Any] = {"schema": "strata.profile/1", "name": name}
    if extends is not None:
        document["extends"] = extends
    document["sections"] = {"intro": {"order": 10, "content": ["Hello."]}} if sections is None else sections
    return {**document, **extra}


def tone_base(variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """A parent declaring the variable ``tone`` that its children use."""
    return doc("base", variables={"tone": {"default": "calm"}} if variables is None else variables,
               sections={"intro": {"order": 10, "content": ["Be brief."]}})


def tone_child(name: str, parent: str, order: int) -> dict[str, Any]:
    return doc(name, extends=parent, sections={f"s{order}": {"order": order, "content": ["Tone: ${tone}"]}})


@pytest.fixture
def service(database: Database) -> ProfileService:
    return ProfileService(database, BuiltInPlans())


async def test_list_gives_built_ins_first_then_own_by_name(service: ProfileService,
                                                           project: ProjectRecord) -> None:
    """Built-ins come first (builtIn, version 1), then the project's own sorted by name."""
    await service.put(project.id, "zeta", doc("zeta", description="last"))
    await service.put(project.id, "alpha", doc("alpha", extends="novel",
                                               sections={"notes": {"order": 50, "content": ["x"]}}))
    listed = await service.list(project.id)
    assert [(p.name, p.built_in, p.version, p.extends) for p in listed] == [
        *((name, True, 1, BUILT_INS[name].get("extends")) for name in BUILT_INS),
        ("alpha", False, 1, "novel"), ("zeta", False, 1, None)]
    assert [p.description for p in listed[len(BUILT_INS):]] == [None, "last"]
    assert "Spec 004" in str(listed[0].description)


async def test_put_creates_at_version_1_and_get_gives_raw_and_resolved(service: ProfileService,
                                                                       project: ProjectRecord) -> None:
    """A create stores the document as sent at version 1; get returns it and its flattened form."""
    document = doc("short", extends="novel", sections={"notes": {"order": 50, "content": ["Keep it short."]}})
    saved = await service.put(project.id, "short", document)
    got = await service.get(project.id, "short")
    assert (saved.version, got.version, got.built_in) == (1, 1, False)
    assert got.profile == document
    assert list(got.resolved["sections"]) == ["rules", "settings", "retrieved", "immediate", "notes"]
    assert "extends" not in got.resolved
    assert saved.resolved == got.resolved


async def test_get_of_a_built_in_is_read_only_at_version_1(service: ProfileService,
                                                           project: ProjectRecord) -> None:
    """get of novel answers its document, resolved, version 1, builtIn; changing the copy changes nothing."""
    got = await service.get(project.id, "novel")
    assert (got.version, got.built_in, got.profile["name"]) == (1, True, "novel")
    got.profile["sections"].clear()
    assert (await service.get(project.id, "novel")).profile["sections"]


async def test_versions_compare_and_set(service: ProfileService, project: ProjectRecord) -> None:
    """An update at the current version bumps it; a stale version or a second create is
    PROFILE_CONFLICT with currentVersion, and changes nothing."""
    await service.put(project.id, "a", doc("a"))
    updated = await service.put(project.id, "a", doc("a", description="two"), version=1)
    assert updated.version == 2
    with pytest.raises(ProfileConflict) as stale:
        await service.put(project.id, "a", doc("a", description="lost"), version=1)
    assert stale.value.fields == {"currentVersion": 2}
    with pytest.raises(ProfileConflict) as again:
        await service.put(project.id, "a", doc("a", description="lost"))
    assert again.value.fields == {"currentVersion": 2}
    got = await service.get(project.id, "a")
    assert (got.version, got.profile["description"]) == (2, "two")


async def test_concurrent_updates_at_one_version_exactly_one_wins(service: ProfileService,
                                                                  project: ProjectRecord) -> None:
    """Eight saves naming the same version race: one succeeds at version 2, seven conflict."""
    await service.put(project.id, "a", doc("a"))
    results = await asyncio.gather(
        *(service.put(project.id, "a", doc("a", description=str(n)), version=1) for n in range(8)),
        return_exceptions=True)
    assert sorted(type(r).__name__ for r in results) == ["ProfileConflict"] * 7 + ["ProfileView"]
    assert (await service.get(project.id, "a")).version == 2


async def test_update_of_a_missing_profile_is_not_found(service: ProfileService,
                                                        project: ProjectRecord) -> None:
    """A version names a profile that must exist: PROFILE_NOT_FOUND otherwise."""
    with pytest.raises(ProfileNotFound):
        await service.put(project.id, "ghost", doc("ghost"), version=1)


async def test_built_in_names_are_reserved(service: ProfileService, project: ProjectRecord) -> None:
    """put and delete of a built-in's name are PROFILE_READ_ONLY."""
    with pytest.raises(ProfileReadOnly):
        await service.put(project.id, "novel", doc("novel"))
    with pytest.raises(ProfileReadOnly):
        await service.delete(project.id, "novel")


async def test_invalid_documents_are_refused_with_pointers(service: ProfileService,
                                                           project: ProjectRecord) -> None:
    """A document with problems is PROFILE_INVALID with each problem's JSON pointer; the name it
    holds must be the name it is saved under."""
    with pytest.raises(ProfileInvalid) as renamed:
        await service.put(project.id, "a", doc("b"))
    assert [p["path"] for p in renamed.value.fields["problems"]] == ["/name"]
    bad = doc("a", sections={"x": {"order": 1, "source": "tarot"}, "y": {"order": 1, "content": ["${who}"]}})
    with pytest.raises(ProfileInvalid) as raised:
        await service.put(project.id, "a", bad)
    paths = {p["path"] for p in raised.value.fields["problems"]}
    assert {"/sections/x/source", "/sections/y/content/0", "/sections/y/order"} <= paths
    assert await service.list(project.id) == (await service.list(project.id))[:len(BUILT_INS)]


async def test_a_project_holds_at_most_64_profiles(service: ProfileService, project: ProjectRecord) -> None:
    """The 65th profile is INVALID_PARAMS naming the limit; replacing one still works."""
    for n in range(64):
        await service.put(project.id, f"p{n:02}", doc(f"p{n:02}"))
    with pytest.raises(InvalidInput) as full:
        await service.put(project.id, "one-more", doc("one-more"))
    assert full.value.fields == {"limit": 64}
    assert "64 profiles" in full.value.text
    assert (await service.put(project.id, "p00", doc("p00", description="new"), version=1)).version == 2


async def test_a_document_over_256_kib_is_refused(service: ProfileService, project: ProjectRecord) -> None:
    """A document of more than 256 KiB of JSON is INVALID_PARAMS with the limit, before any check."""
    big = doc("big", description="x" * 262_144)
    with pytest.raises(InvalidInput) as raised:
        await service.put(project.id, "big", big)
    assert raised.value.fields["limit"] == 262_144


async def test_extends_chains_across_built_in_and_own_profiles(service: ProfileService,
                                                               project: ProjectRecord) -> None:
    """A profile may extend a project profile that extends a built-in; its plan has all sections."""
    await service.put(project.id, "mid", doc("mid", extends="novel",
                                             sections={"notes": {"order": 50, "content": ["Mid."]}}))
    await service.put(project.id, "top", doc("top", extends="mid",
                                             sections={"coda": {"order": 60, "content": ["Top."]}}))
    plan = await service.plan(project.id, "top")
    assert [s.id for s in plan.sections] == ["rules", "settings", "retrieved", "immediate", "notes", "coda"]
    assert plan.lineage == ("top", "mid", "novel")


async def test_a_save_that_breaks_a_descendant_is_refused(service: ProfileService,
                                                          project: ProjectRecord) -> None:
    """Saving a parent re-resolves every profile extending it, directly or not; if one would
    break, nothing is saved and the problems name each such profile and why."""
    await service.put(project.id, "base", tone_base())
    await service.put(project.id, "child", tone_child("child", "base", 20))
    await service.put(project.id, "grandchild", tone_child("grandchild", "child", 30))
    with pytest.raises(ProfileInvalid) as raised:
        await service.put(project.id, "base", tone_base(variables={}), version=1)
    problems = raised.value.fields["problems"]
    assert sorted({p["profile"] for p in problems}) == ["child", "grandchild"]
    assert all(p["path"] == "" and "unknown variable" in p["message"] for p in problems)
    assert (await service.get(project.id, "base")).version == 1
    assert (await service.plan(project.id, "grandchild")).variables == {"tone": "calm"}


async def test_a_cycle_through_stored_profiles_is_refused(service: ProfileService,
                                                          project: ProjectRecord) -> None:
    """Making a parent extend its own child is an extends cycle at /extends."""
    await service.put(project.id, "a", doc("a"))
    await service.put(project.id, "b", doc("b", extends="a",
                                           sections={"more": {"order": 20, "content": ["b"]}}))
    with pytest.raises(ProfileInvalid) as raised:
        await service.put(project.id, "a", doc("a", extends="b"), version=1)
    assert raised.value.fields["problems"][0]["path"] == "/extends"
    assert "cycle" in raised.value.fields["problems"][0]["message"]


async def test_delete_is_refused_while_extended(service: ProfileService, project: ProjectRecord) -> None:
    """A profile another one extends cannot be deleted (PROFILE_INVALID naming it); once the
    child is gone it can, and a stale version or a missing name is refused."""
    await service.put(project.id, "base", tone_base())
    await service.put(project.id, "child", tone_child("child", "base", 20))
    with pytest.raises(ProfileInvalid) as raised:
        await service.delete(project.id, "base")
    assert [p["profile"] for p in raised.value.fields["problems"]] == ["child"]
    assert [p.name for p in await service.list(project.id)][len(BUILT_INS):] == ["base", "child"]
    await service.delete(project.id, "child")
    with pytest.raises(ProfileConflict) as stale:
        await service.delete(project.id, "base", version=2)
    assert stale.value.fields == {"currentVersion": 1}
    await service.delete(project.id, "base", version=1)
    with pytest.raises(ProfileNotFound):
        await service.delete(project.id, "base")
    assert [p.name for p in await service.list(project.id)] == list(BUILT_INS)


async def test_a_write_is_seen_by_the_next_plan(service: ProfileService, project: ProjectRecord) -> None:
    """A kept plan is dropped by a write: the next plan is the new version's; a delete makes it
    PROFILE_NOT_FOUND."""
    await service.put(project.id, "a", doc("a"))
    first = await service.plan(project.id, "a")
    assert await service.plan(project.id, "a") is first
    await service.put(project.id, "a", doc("a", sections={"intro": {"order": 10, "content": ["Bye."]}}),
                      version=1)
    second = await service.plan(project.id, "a")
    assert second.sections[0].parts[0].content[0].text == "Bye."
    await service.delete(project.id, "a")
    with pytest.raises(ProfileNotFound):
        await service.plan(project.id, "a")


async def test_a_warm_plan_reads_no_database(service: ProfileService, project: ProjectRecord,
                                             database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a project profile's plan was read, and for a built-in always, plan opens no session."""
    await service.put(project.id, "a", doc("a"))
    kept = await service.plan(project.id, "a")

    def no_session() -> None:
        raise AssertionError("the database was read")

    monkeypatch.setattr(database, "session", no_session)
    assert await service.plan(project.id, "a") is kept
    assert (await service.plan(project.id, "novel")).name == "novel"


async def test_writes_through_another_service_are_seen(service: ProfileService, project: ProjectRecord,
                                                       database: Database) -> None:
    """Two services on one database share its snapshots: a save by one is planned by the other."""
    await service.put(project.id, "a", doc("a"))
    await service.plan(project.id, "a")
    await ProfileService(database, BuiltInPlans()).put(
        project.id, "a", doc("a", sections={"intro": {"order": 10, "content": ["New."]}}), version=1)
    assert (await service.plan(project.id, "a")).sections[0].parts[0].content[0].text == "New."


async def test_profiles_belong_to_their_project(service: ProfileService, project: ProjectRecord,
                                                other_project: ProjectRecord) -> None:
    """Another project neither lists, reads, plans nor extends a project's profiles."""
    await service.put(project.id, "mine", doc("mine"))
    assert [p.name for p in await service.list(other_project.id)] == list(BUILT_INS)
    with pytest.raises(ProfileNotFound):
        await service.get(other_project.id, "mine")
    with pytest.raises(ProfileNotFound):
        await service.plan(other_project.id, "mine")
    with pytest.raises(ProfileInvalid) as raised:
        await service.put(other_project.id, "theirs", doc("theirs", extends="mine"))
    assert raised.value.fields["problems"][0]["path"] == "/extends"


async def test_an_unknown_project_is_project_not_found(service: ProfileService) -> None:
    """Every operation on an unknown project is PROJECT_NOT_FOUND (a project profile's plan too)."""
    calls = [service.list(UNKNOWN_PROJECT), service.get(UNKNOWN_PROJECT, "novel"),
             service.plan(UNKNOWN_PROJECT, "mine"), service.put(UNKNOWN_PROJECT, "a", doc("a")),
             service.delete(UNKNOWN_PROJECT, "a"), service.validate(doc("a"), UNKNOWN_PROJECT)]
    for call in calls:
        with pytest.raises(ProjectNotFound):
            await call


async def test_validate_never_raises_for_an_invalid_profile(service: ProfileService,
                                                            project: ProjectRecord) -> None:
    """validate answers valid with the resolved form, or the problems (a document too large or not
    storable is one at the root); with a project it resolves against the project's profiles and
    reports those a save would break."""
    ok = await service.validate(doc("x", extends="novel", sections={"n": {"order": 50, "content": ["n"]}}))
    assert (ok.valid, ok.problems) == (True, [])
    assert "rules" in (ok.resolved or {})["sections"]
    bad = await service.validate(doc("x", sections={"s": {"order": 1.5}}))
    assert (bad.valid, bad.resolved, bad.problems[0]["path"]) == (False, None, "/sections/s/order")
    for unstorable in (doc("x", description="x" * 262_144), doc("x", description="\ud800")):
        refused = await service.validate(unstorable)
        assert (refused.valid, refused.problems[0]["path"]) == (False, "")
    await service.put(project.id, "base", tone_base())
    await service.put(project.id, "child", tone_child("child", "base", 20))
    alone = await service.validate(tone_child("other", "base", 30))
    assert (alone.valid, alone.problems[0]["path"]) == (False, "/extends")
    assert (await service.validate(tone_child("other", "base", 30), project.id)).valid
    breaking = await service.validate(tone_base(variables={}), project.id)
    assert [p.get("profile") for p in breaking.problems] == ["child"]
    assert (await service.get(project.id, "base")).version == 1
