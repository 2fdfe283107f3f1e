"""Profiles as a project sees them: the built-ins (read-only) and its own, stored and versioned.

:class:`ProfileService` is the assembly's :class:`~services.profiles.plans.PlanSource`
and the service behind the ``profile:*`` channels. A project's profile may
extend a built-in or another of its own; every write checks, in the same
transaction, that the saved profile and every profile extending it (directly
or not) still resolve, and commits only then. So a stored profile always
resolves and an assembly never meets an invalid one.

A built-in's plan needs no database. A project profile's plan is kept in the
database's :class:`~services.concurrency.snapshots.Snapshots` until the next
write to that project's profiles, so a warm assembly reads nothing.

Like every error, these carry nothing the client sent (it knows which name it
asked for); a problem points into the document with a JSON pointer instead.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from services.context.plan import Plan
from services.errors import InvalidInput, ProfileInvalid, ProfileNotFound, ProfileReadOnly
from services.profiles import store
from services.profiles.plans import BuiltInPlans
from services.profiles.resolve import MAX_DEPTH, Invalid, Lookup, Problem, Resolved, parse, resolve
from services.profiles.store import MAX_DOCUMENT_BYTES, MAX_PROFILES, StoredProfile
from services.projects.scope import require_project
from services.store import Database

_log = structlog.get_logger("profiles")
_TABLE = "profiles"
_ROWS = "rows"

Own = Mapping[str, StoredProfile]
Problems = list[Problem]  # an alias: inside the class, ``list`` is a method


@dataclass(frozen=True, slots=True)
class ProfileSummary:
    name: str
    description: str | None
    extends: str | None
    built_in: bool
    version: int


@dataclass(frozen=True, slots=True)
class ProfileView:
    """A profile as stored (``profile``) and with ``extends`` applied (``resolved``)."""

    name: str
    profile: dict[str, Any]
    resolved: dict[str, Any]
    version: int
    built_in: bool


@dataclass(frozen=True, slots=True)
class Validation:
    valid: bool
    problems: list[Problem] = field(default_factory=list)
    resolved: dict[str, Any] | None = None


class ProfileService:
    """List, read, save, delete and validate a project's profiles; plans for the assembly."""

    def __init__(self, database: Database, built_ins: BuiltInPlans, *, max_profiles: int = MAX_PROFILES,
                 max_bytes: int = MAX_DOCUMENT_BYTES) -> None:
        self._db = database
        self._snapshots = database.snapshots
        self._built_ins = built_ins
        self._max_profiles = max_profiles
        self._max_bytes = max_bytes

    # --- the assembly's PlanSource -------------------------------------------------------------

    async def plan(self, project_id: str, name: str) -> Plan:
        """The plan of ``name`` for the project: a built-in's, else the project's own, resolved."""
        built_in = self._built_ins.resolved.get(name)
        if built_in is not None:
            return built_in.plan
        return await self._snapshots.read(_TABLE, project_id, ("plan", name),
                                          lambda: self._load_plan(project_id, name))

    def _load_plan(self, project_id: str, name: str) -> Plan:
        # One read of every profile of the project, so that the plan and the parents it was
        # resolved from come from the same generation of the table.
        own = self._read(project_id)
        return self._resolve_own(own, name).plan

    # --- the channels' operations --------------------------------------------------------------

    async def list(self, project_id: str) -> list[ProfileSummary]:
        """The built-ins (the default first, then by name), then the project's own profiles by name."""
        own = await self._own(project_id)
        built = [ProfileSummary(name=name, description=document.get("description"),
                                extends=document.get("extends"), built_in=True, version=1)
                 for name, document in self._built_ins.documents.items()]
        return built + [ProfileSummary(name=p.name, description=p.description, extends=p.extends,
                                       built_in=False, version=p.version) for p in own.values()]

    async def get(self, project_id: str, name: str) -> ProfileView:
        """The profile as stored and resolved; PROFILE_NOT_FOUND if the project has none of this name."""
        own = await self._own(project_id)
        built_in = self._built_ins.resolved.get(name)
        if built_in is not None:
            return ProfileView(name=name, profile=copy.deepcopy(self._built_ins.documents[name]),
                               resolved=copy.deepcopy(built_in.document), version=1, built_in=True)
        found = own.get(name)
        if found is None:
            raise ProfileNotFound()
        resolved = await asyncio.to_thread(self._resolve_own, own, name)
        return ProfileView(name=name, profile=found.document(), resolved=resolved.document,
                           version=found.version, built_in=False)

    async def put(self, project_id: str, name: str, document: Mapping[str, Any],
                  version: int | None = None) -> ProfileView:
        """Save the project's profile ``name``: create it (``version`` None) or replace it if it is
        still at ``version``. Refused unless it and every profile extending it resolve."""
        self._writable(name)
        text, view = await asyncio.to_thread(self._save, project_id, name, document, version)
        _log.info("profile.saved", project_id=project_id, name=name, version=view.version, bytes=len(text))
        return view

    async def delete(self, project_id: str, name: str, version: int | None = None) -> None:
        """Delete the project's profile ``name`` (only at ``version``, if given); refused while
        another profile of the project extends it."""
        self._writable(name)
        await asyncio.to_thread(self._snapshots.write, _TABLE, project_id,
                                lambda: self._delete(project_id, name, version))
        _log.info("profile.deleted", project_id=project_id, name=name)

    async def validate(self, document: Mapping[str, Any], project_id: str | None = None) -> Validation:
        """Whether ``document`` would resolve (against the project's own profiles, if given, and
        without breaking those that extend it); never raises for an invalid profile."""
        own: Own = await self._own(project_id) if project_id is not None else {}
        try:
            text = store.encode(document, self._max_bytes)
        except InvalidInput as exc:
            return Validation(valid=False, problems=[{"path": "", "message": exc.text}])
        return await asyncio.to_thread(self._validate, own, document, text)

    # --- internals -----------------------------------------------------------------------------

    def _writable(self, name: str) -> None:
        if name in self._built_ins.documents:
            raise ProfileReadOnly()

    async def _own(self, project_id: str) -> Own:
        """The project's own profiles by name, kept until the next write (PROJECT_NOT_FOUND if none)."""
        return await self._snapshots.read(_TABLE, project_id, _ROWS, lambda: self._read(project_id))

    def _read(self, project_id: str) -> Own:
        with self._db.session() as session:
            require_project(session, project_id)
            return store.load(session, project_id)

    def _lookup(self, own: Own) -> Lookup:
        def lookup(name: str) -> Mapping[str, Any] | None:
            built_in = self._built_ins.documents.get(name)
            if built_in is not None:
                return built_in
            found = own.get(name)
            return None if found is None else found.document()
        return lookup

    def _resolve_own(self, own: Own, name: str) -> Resolved:
        found = own.get(name)
        if found is None:
            raise ProfileNotFound()
        try:
            return resolve(found.document(), self._lookup(own), self._built_ins.catalog)
        except Invalid as exc:  # stored before a change of the built-ins it extends
            raise ProfileInvalid(problems=exc.problems) from None

    def _check(self, own: Own, name: str) -> tuple[Resolved | None, Problems]:
        """``name`` resolved among ``own`` (which holds its new version), and the problems of it
        and of every profile that extends it."""
        lookup = self._lookup(own)
        try:
            resolved = resolve(own[name].document(), lookup, self._built_ins.catalog)
        except Invalid as exc:
            return None, exc.problems
        problems: Problems = []
        for child in _descendants(own, name):
            try:
                resolve(own[child].document(), lookup, self._built_ins.catalog)
            except Invalid as exc:
                problems += [{"path": "", "profile": child,
                              "message": f"profile {child!r} extends this one and would become invalid: "
                                         f"{p['path'] or '/'}: {p['message']}"} for p in exc.problems]
        return resolved, problems

    def _save(self, project_id: str, name: str, document: Mapping[str, Any],
              version: int | None) -> tuple[str, ProfileView]:
        # The checks of the document alone come first: they need no database.
        text = store.encode(document, self._max_bytes)
        problems = _own_problems(document, name)
        if problems:
            raise ProfileInvalid(problems=problems)
        view = self._snapshots.write(_TABLE, project_id, lambda: self._put(project_id, name, text, version))
        return text, view

    def _put(self, project_id: str, name: str, text: str, version: int | None) -> ProfileView:
        with self._db.session() as session:
            store.lock_project(session, project_id)
            # The write comes first: on SQLite it takes the write lock, so the profiles read
            # next are the latest and stay so until the commit.
            if version is None:
                if not store.insert_new(session, project_id, name, text, self._max_profiles):
                    store.explain_create(session, project_id, name, self._max_profiles)
            elif not store.update_at(session, project_id, name, text, version):
                store.explain_change(session, project_id, name, version)
            own = store.load(session, project_id)
            resolved, problems = self._check(own, name)
            if resolved is None or problems:
                raise ProfileInvalid(problems=problems)  # the session closes without a commit
            session.commit()
        saved = own[name]
        return ProfileView(name=name, profile=saved.document(), resolved=resolved.document,
                           version=saved.version, built_in=False)

    def _delete(self, project_id: str, name: str, version: int | None) -> None:
        with self._db.session() as session:
            store.lock_project(session, project_id)
            if not store.remove(session, project_id, name, version):
                store.explain_change(session, project_id, name, version)
            children = _children(store.load(session, project_id), name)
            if children:
                raise ProfileInvalid(problems=[
                    {"path": "", "profile": child,
                     "message": f"profile {child!r} extends it: change or delete that one first"}
                    for child in children])
            session.commit()

    def _validate(self, own: Own, document: Mapping[str, Any], text: str) -> Validation:
        name = document.get("name")
        problems = _own_problems(document, name if isinstance(name, str) else "")
        if problems:
            return Validation(valid=False, problems=problems)
        assert isinstance(name, str)  # parsed: the schema requires it
        if name in self._built_ins.documents:  # cannot be saved; checked as a document alone
            try:
                resolved = resolve(document, self._lookup(own), self._built_ins.catalog)
            except Invalid as exc:
                return Validation(valid=False, problems=exc.problems)
            return Validation(valid=True, resolved=resolved.document)
        version = own[name].version if name in own else 0
        checked, problems = self._check({**own, name: StoredProfile.of(name, text, version)}, name)
        if checked is None or problems:
            return Validation(valid=False, problems=problems)
        return Validation(valid=True, resolved=checked.document)


def _own_problems(document: Mapping[str, Any], name: str) -> list[Problem]:
    """What is wrong with the document on its own: its schema, and a name other than ``name``."""
    try:
        parse(document)
    except Invalid as exc:
        return exc.problems
    if document.get("name") != name:
        return [{"path": "/name",
                 "message": "the profile's name must be the name it is saved under"}]
    return []


def _children(own: Own, name: str) -> list[str]:
    return [p.name for p in own.values() if p.extends == name]


def _descendants(own: Own, name: str) -> list[str]:
    """The profiles whose ``extends`` chain reaches ``name``, by name."""
    found = []
    for profile in own.values():
        seen, parent = {profile.name}, profile.extends
        while parent is not None and parent not in seen and len(seen) <= MAX_DEPTH:
            if parent == name:
                found.append(profile.name)
                break
            seen.add(parent)
            parent = own[parent].extends if parent in own else None
    return found
