"""DocumentStore: listing, reading and atomic writing strictly inside the project folder."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from services.errors import (
    DocumentNotFound,
    InvalidInput,
    ProjectNotFound,
    ProjectPathInvalid,
    ProjectScopeViolation,
)
from services.projects import DocumentStore, ProjectRecord
from services.projects.documents import resolve_document
from services.store import Database


@pytest.fixture
def store(database: Database) -> DocumentStore:
    return DocumentStore(database)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the project holding a file no document id may reach."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.md").write_text("outside secret")
    return path


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` (links not followed) with file contents, to compare before/after."""
    found: dict[str, bytes | None] = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder) / name
            is_file = path.is_file() and not path.is_symlink()
            found[str(path.relative_to(root))] = path.read_bytes() if is_file else None
    return found


async def test_list_is_recursive_sorted_and_skips_hidden_and_other_files(
        folder: Path, project: ProjectRecord, store: DocumentStore) -> None:
    """Only visible .md/.markdown/.txt files, ids with `/`, sorted; hidden folders are not entered."""
    for name in ("b.md", "a.txt", "Z.MARKDOWN", "第二章/1.md", "sub/deep/x.md", "notes.json",
                 ".hidden.md", ".git/HEAD.md", "sub/.cache/y.md"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")
    listing = await store.list(project.id)
    assert [d.document_id for d in listing.documents] == [
        "Z.MARKDOWN", "a.txt", "b.md", "sub/deep/x.md", "第二章/1.md"]
    assert listing.truncated is False
    assert listing.documents[0].size == 1


async def test_list_leaves_out_links_to_outside(folder: Path, outside: Path, project: ProjectRecord,
                                                store: DocumentStore) -> None:
    """A file link out is not listed and a linked folder is not walked; a link inside is listed."""
    (folder / "real.md").write_text("x")
    (folder / "out.md").symlink_to(outside / "secret.md")
    (folder / "out-dir").symlink_to(outside)
    (folder / "alias.md").symlink_to(folder / "real.md")
    listing = await store.list(project.id)
    assert [d.document_id for d in listing.documents] == ["alias.md", "real.md"]


async def test_heads_give_the_start_of_each_listed_document(
        folder: Path, project: ProjectRecord, store: DocumentStore) -> None:
    """heads() reads at most the bound from each listed document, decodes leniently, and skips
    what a listing skips."""
    (folder / "ch01.md").write_text("# 第一章 灯塔\n" + "字" * 5000, encoding="utf-8")
    (folder / "b.md").write_bytes(b"Chapter 2\n\xff\xfe tail")
    (folder / ".hidden.md").write_text("secret")
    heads = dict(await store.heads(project.id, 64))
    assert set(heads) == {"ch01.md", "b.md"}
    assert heads["ch01.md"].startswith("# 第一章 灯塔\n")
    assert len(heads["ch01.md"].encode()) <= 64
    assert heads["b.md"] == "Chapter 2\n tail"


async def test_list_is_bounded(folder: Path, project: ProjectRecord, database: Database) -> None:
    """Past the listing bound the first documents by id come back and `truncated` says so."""
    for i in range(5):
        (folder / f"{i}.md").write_text("x")
    listing = await DocumentStore(database, max_listed=3).list(project.id)
    assert ([d.document_id for d in listing.documents], listing.truncated) == (
        ["0.md", "1.md", "2.md"], True)


async def test_write_then_read_round_trips_exactly(folder: Path, project: ProjectRecord,
                                                   store: DocumentStore) -> None:
    """Text (BOM, CRLF, CJK) comes back byte for byte; parent folders are created inside."""
    text = "\ufeff第一章\r\n林远推开门。\n"
    info = await store.write(project.id, "卷一/第一章.md", text)
    assert (info.document_id, info.size) == ("卷一/第一章.md", len(text.encode()))
    assert (folder / "卷一" / "第一章.md").read_bytes() == text.encode()
    assert await store.read(project.id, "卷一/第一章.md") == text
    await store.write(project.id, "卷一/第一章.md", "v2")
    assert await store.read(project.id, "卷一/第一章.md") == "v2"


async def test_write_keeps_permissions_and_writes_through_inner_links(
        folder: Path, project: ProjectRecord, store: DocumentStore) -> None:
    """An existing file keeps its mode; writing via an in-folder link updates its target."""
    target = folder / "real.md"
    target.write_text("old")
    target.chmod(0o640)
    (folder / "alias.md").symlink_to(target)
    await store.write(project.id, "alias.md", "new")
    assert target.read_text() == "new"
    assert (folder / "alias.md").is_symlink()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


async def test_atomic_write_leaves_no_temp_files(folder: Path, project: ProjectRecord,
                                                 store: DocumentStore) -> None:
    """After many writes the folder holds only the documents: temp files are renamed away."""
    for i in range(20):
        await store.write(project.id, f"d/{i % 3}.md", f"version {i}")
    assert sorted(p.name for p in (folder / "d").iterdir()) == ["0.md", "1.md", "2.md"]


async def test_a_killed_writers_temp_files_are_cleared(folder: Path, project: ProjectRecord,
                                                    store: DocumentStore) -> None:
    """Temp files left by a process killed mid-write are removed by document:list and the next write there."""
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await child.wait()
    (folder / "sub").mkdir()
    for place in (folder, folder / "sub"):
        (place / f".strata-{child.pid}-0123456789abcdef.tmp").write_bytes(b"half a chap")
    await store.write(project.id, "sub/a.md", "text")
    assert names(folder / "sub") == ["a.md"]
    assert names(folder)[0].startswith(".strata-")
    assert [d.document_id for d in (await store.list(project.id)).documents] == ["sub/a.md"]
    assert names(folder) == ["sub"]


async def test_failed_write_keeps_the_old_text_and_no_temp_file(
        folder: Path, project: ProjectRecord, store: DocumentStore,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """If the rename fails, the document still has its old bytes and the temp file is removed."""
    (folder / "a.md").write_text("old")

    def fail(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        await store.write(project.id, "a.md", "new")
    assert names(folder) == ["a.md"]
    assert (folder / "a.md").read_text() == "old"


@pytest.mark.parametrize("case", ["dotdot", "absolute", "symlinked-parent", "symlinked-file",
                                  "dangling-link", "backslash", "nul"])
async def test_scope_violations_write_nothing(case: str, folder: Path, outside: Path,
                                              project: ProjectRecord, store: DocumentStore) -> None:
    """Ids escaping the folder by any route are PROJECT_SCOPE_VIOLATION and change no file anywhere."""
    (folder / "out-dir").symlink_to(outside)
    (folder / "out.md").symlink_to(outside / "secret.md")
    (folder / "dangling.md").symlink_to(outside / "new.md")
    document_id = {"dotdot": "../outside/secret.md", "absolute": str(outside / "secret.md"),
                   "symlinked-parent": "out-dir/secret.md", "symlinked-file": "out.md",
                   "dangling-link": "dangling.md", "backslash": "..\\outside\\secret.md",
                   "nul": "a.md\x00"}[case]
    before = (tree(folder), tree(outside))
    with pytest.raises(ProjectScopeViolation) as raised:
        await store.write(project.id, document_id, "overwritten")
    assert raised.value.fields == {}
    with pytest.raises(ProjectScopeViolation):
        await store.read(project.id, document_id)
    assert (tree(folder), tree(outside)) == before


async def test_symlinked_parent_deeper_in_the_tree(folder: Path, outside: Path,
                                                   project: ProjectRecord, store: DocumentStore) -> None:
    """A link out several folders down, with missing folders after it, still refuses and creates nothing."""
    (folder / "a" / "b").mkdir(parents=True)
    (folder / "a" / "b" / "c").symlink_to(outside)
    with pytest.raises(ProjectScopeViolation):
        await store.write(project.id, "a/b/c/new/deeper.md", "x")
    assert names(outside) == ["secret.md"]


async def test_read_errors(folder: Path, project: ProjectRecord, database: Database,
                           store: DocumentStore) -> None:
    """Missing files, folders and FIFOs are DOCUMENT_NOT_FOUND; non-UTF-8 or oversized are invalid."""
    (folder / "dir.md").mkdir()
    os.mkfifo(folder / "pipe.md")
    (folder / "latin1.txt").write_bytes("café".encode("latin-1"))
    (folder / "big.md").write_text("x" * 11)
    for missing in ("none.md", "dir.md", "pipe.md", "none/x.md"):
        with pytest.raises(DocumentNotFound):
            await store.read(project.id, missing)
    with pytest.raises(InvalidInput):
        await store.read(project.id, "latin1.txt")
    with pytest.raises(InvalidInput):
        await DocumentStore(database, max_bytes=10).read(project.id, "big.md")


async def test_write_refusals_leave_the_folder_alone(folder: Path, project: ProjectRecord,
                                                     database: Database, store: DocumentStore) -> None:
    """Wrong suffix, lone surrogates, oversize text or a file/folder in the way are INVALID_PARAMS."""
    (folder / "dir.md").mkdir()
    (folder / "file.md").write_text("x")
    before = tree(folder)
    for document_id, text in (("a.json", "x"), ("a.md", "\ud800"), ("dir.md", "x"),
                              ("file.md/child.md", "x")):
        with pytest.raises(InvalidInput):
            await store.write(project.id, document_id, text)
    with pytest.raises(InvalidInput):
        await DocumentStore(database, max_bytes=5).write(project.id, "a.md", "四五")
    assert tree(folder) == before


async def test_unknown_project_and_vanished_folder(folder: Path, tmp_path: Path, project: ProjectRecord,
                                                   store: DocumentStore) -> None:
    """An unknown project is PROJECT_NOT_FOUND; a folder gone or replaced by a link is PATH_INVALID."""
    with pytest.raises(ProjectNotFound):
        await store.list("0123456789abcdef")
    moved = tmp_path / "moved"
    os.rename(folder, moved)
    with pytest.raises(ProjectPathInvalid):
        await store.list(project.id)
    os.symlink(moved, folder)
    with pytest.raises(ProjectPathInvalid):
        await store.write(project.id, "a.md", "x")
    assert names(moved) == []


async def test_logs_hold_no_ids_paths_or_text(folder: Path, project: ProjectRecord,
                                              store: DocumentStore) -> None:
    """Reads and writes log the project id and byte counts, not the document id, path or text."""
    with capture_logs() as logs:
        await store.write(project.id, "林远的秘密.md", "他把钥匙藏在井里")
        await store.read(project.id, "林远的秘密.md")
    text = repr(logs)
    assert project.id in text
    assert "'bytes': 24" in text
    assert "林远" not in text
    assert "钥匙" not in text
    assert str(folder) not in text


# --- the property: every id resolves strictly inside the folder, or is refused -------------

@pytest.fixture(scope="module")
def maze(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder full of ways out: links to outside, a link loop, an inner link."""
    base = tmp_path_factory.mktemp("maze").resolve()
    root, away = base / "root", base / "away"
    (root / "dir").mkdir(parents=True)
    away.mkdir()
    (away / "secret.md").write_text("x")
    (root / "a.md").write_text("x")
    (root / "dir" / "b.md").write_text("x")
    (root / "link-out").symlink_to(away)
    (root / "file-out.md").symlink_to(away / "secret.md")
    (root / "link-in").symlink_to(root / "dir")
    (root / "loop").symlink_to(root / "loop")
    (root / "up").symlink_to(base)
    return root


NAMES = ["dir", "link-in", "link-out", "loop", "up", "root", "away", "new", "a.md", "file-out.md"]
DOCUMENTS = ["a.md", "b.md", "secret.md", "file-out.md", "new.md", "x.txt"]
TRICKS = ["..", ".", "", "C:", "x\\..", "..\\away", "a\x00.md", "~"]
# Mostly plausible paths through the maze's links (so that many ids do resolve), mixed
# with path tricks, leading slashes and arbitrary text.
PLAUSIBLE = st.builds(lambda parts, last: "/".join([*parts, last]),
                      st.lists(st.sampled_from(NAMES), max_size=4), st.sampled_from(DOCUMENTS))
TRICKY = st.builds(lambda lead, parts: lead + "/".join(parts),
                   st.sampled_from(["", "/", "//", "./", "../"]),
                   st.lists(st.one_of(st.sampled_from(NAMES + DOCUMENTS + TRICKS),
                                      st.text(alphabet=st.sampled_from("ab./\\:\x00é~ "), max_size=6)),
                            min_size=1, max_size=6))
DOCUMENT_IDS = st.one_of(PLAUSIBLE, TRICKY, st.text(max_size=40))


@settings(max_examples=400, deadline=None)
@given(document_id=DOCUMENT_IDS)
def test_any_id_resolves_strictly_inside_or_is_refused(maze: Path, document_id: str) -> None:
    """For any string, resolution lands on a path strictly inside the real folder, or is refused."""
    try:
        path = resolve_document(maze, document_id)
    except (ProjectScopeViolation, InvalidInput):
        return
    real = Path(os.path.realpath(path))
    assert real != maze
    assert maze in real.parents
    assert os.path.commonpath([maze, real]) == str(maze)
