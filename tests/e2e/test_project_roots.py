"""Project roots over a real websocket: a project can only be a writer's folder.

The attack pass opened the server's own data dir (then ``document:write`` planted
``DATA/planted.md`` and ``DATA/logs/strata.log.md``), ``/etc`` (whose files went into the
retrieval index), ``/proc/<pid>`` and ``/sys/kernel``. Each is now ``PROJECT_PATH_FORBIDDEN``
with a reason word. The module's server runs with ``HOME`` in a fake folder of homes, so that
another user's home can be tried without touching the machine's /home. Also here: the server
refuses to run as root without ``--allow-root``, and a project id is no token.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from main.cli import ROOT_REFUSAL
from tests.support.client import RpcCallError, RpcClient, connected
from tests.support.handshake import handshake_status
from tests.support.process import REPO, ServerProcess, serving

FORBIDDEN = -32017


@dataclass(frozen=True)
class Place:
    """The module's folders: the data dir, a fake folder of homes, a writer's folder, a link."""

    base: Path
    data: Path
    home: Path
    other_home: Path
    novel: Path
    etc_link: Path


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    base = tmp_path_factory.mktemp("project_roots")
    home = base / "users" / "me"
    other_home = base / "users" / "bob"
    for folder in (home / "novel", other_home / "novel", base / "novel"):
        folder.mkdir(parents=True)
    (base / "etc-link").symlink_to("/etc")
    return Place(base=base, data=base / "data", home=home, other_home=other_home, novel=base / "novel",
                 etc_link=base / "etc-link")


@pytest.fixture(scope="module")
def proc(place: Place) -> Iterator[ServerProcess]:
    """The module's server; its user's home is ``users/me``, so ``users/bob`` is another user's."""
    with serving(place.data, env={"HOME": str(place.home)}) as running:
        yield running


@pytest.fixture
async def rpc(proc: ServerProcess) -> AsyncIterator[RpcClient]:
    async with connected(proc.url, proc.token) as client:
        yield client


async def refused(rpc: RpcClient, path: str) -> dict[str, object]:
    """The error of project:open on ``path``, which must be PROJECT_PATH_FORBIDDEN."""
    with pytest.raises(RpcCallError) as error:
        await rpc.call("project:open", {"path": path})
    assert error.value.code == FORBIDDEN, error.value.error
    assert path not in error.value.error["message"]
    assert path not in str(error.value.error["data"])
    data: dict[str, object] = error.value.error["data"]
    return data


@pytest.mark.parametrize(("where", "reason"), [
    ("{data}", "data_dir"),
    ("{data}/logs", "data_dir"),
    ("{base}", "data_dir"),
    ("/etc", "system"),
    ("/etc/no-such-folder", "system"),
    ("/proc/self", "system"),
    (f"/proc/{os.getpid()}", "system"),
    ("/sys/kernel", "system"),
    ("/usr/share", "system"),
    ("/", "root"),
    ("{etc_link}", "system"),
    ("{base}/novel/../../{base_name}/etc-link", "system"),
    ("{other_home}", "other_user"),
    ("{other_home}/novel", "other_user"),
    ("{base}/users", "other_user"),
])
async def test_places_that_are_no_writers_folder_are_forbidden(rpc: RpcClient, place: Place, where: str,
                                                               reason: str) -> None:
    """project:open of the data dir (itself, inside, holding it), /etc, /proc/self, /proc/<pid>,
    /sys/kernel, /usr, /, a link in tmp to /etc, and another user's home is PROJECT_PATH_FORBIDDEN
    with data.reason, never echoing the path; nothing is registered."""
    path = where.format(data=place.data, base=place.base, etc_link=place.etc_link, base_name=place.base.name,
                        other_home=place.other_home)
    assert await refused(rpc, path) == {"code": "PROJECT_PATH_FORBIDDEN", "reason": reason}
    listed = (await rpc.call("project:list"))["projects"]
    assert all(not project["path"].startswith(("/etc", "/proc", "/sys", "/usr", str(place.data)))
               for project in listed)


async def test_nothing_can_be_planted_in_the_data_dir(rpc: RpcClient, place: Place) -> None:
    """The finding itself: the data dir cannot be opened, so no document lands in it or its logs."""
    await refused(rpc, str(place.data))
    await refused(rpc, str(place.data / "logs"))
    assert not list(place.data.rglob("*.md"))


async def test_a_writers_folders_still_open(rpc: RpcClient, place: Place) -> None:
    """A folder in tmp and one in the user's own home open, and their documents are written and read."""
    for folder in (place.novel, place.home / "novel"):
        project = (await rpc.call("project:open", {"path": str(folder)}))["project"]
        assert project["path"] == str(folder)
        await rpc.call("document:write", {"projectId": project["id"], "documentId": "a.md", "text": "第一章"})
        read = await rpc.call("document:read", {"projectId": project["id"], "documentId": "a.md"})
        assert read["text"] == "第一章"


async def test_a_project_id_is_not_a_token(rpc: RpcClient, proc: ServerProcess, place: Place) -> None:
    """Project ids are derived from paths and listed to every token holder: no handshake accepts
    one in place of the token, in the header or the query."""
    project = (await rpc.call("project:open", {"path": str(place.novel)}))["project"]
    assert any(p["id"] == project["id"] for p in (await rpc.call("project:list"))["projects"])
    for token in (project["id"], project["projectId"]):
        assert await handshake_status(proc.port, headers={"Authorization": f"Bearer {token}"}) == 401
        assert await handshake_status(proc.port, path=f"/?token={token}") == 401


async def test_an_allow_list_admits_only_its_roots(tmp_path: Path) -> None:
    """With --project-root, a folder inside it opens; a tmp folder beside it is forbidden as
    not_allowed, and /etc stays forbidden as system even though the root is wide."""
    inside, beside = tmp_path / "allowed" / "novel", tmp_path / "beside"
    inside.mkdir(parents=True)
    beside.mkdir()
    with serving(tmp_path / "data", "--project-root", str(tmp_path / "allowed"),
                 "--project-root", "/") as server:
        async with connected(server.url, server.token) as rpc:
            assert (await rpc.call("project:open", {"path": str(inside)}))["project"]["path"] == str(inside)
            assert (await refused(rpc, "/etc"))["reason"] == "system"
    with serving(tmp_path / "data", "--project-root", str(tmp_path / "allowed")) as server:
        async with connected(server.url, server.token) as rpc:
            assert (await refused(rpc, str(beside)))["reason"] == "not_allowed"
            assert (await rpc.call("project:open", {"path": str(inside)}))["project"]["path"] == str(inside)


async def test_a_project_left_outside_the_rules_is_refused_but_kept(tmp_path: Path) -> None:
    """A project opened before the allow-list left it out: opening it again and every document
    method answer PROJECT_PATH_FORBIDDEN (not_allowed); it is still listed with its settings."""
    folder = tmp_path / "novel"
    folder.mkdir()
    with serving(tmp_path / "data") as server:
        async with connected(server.url, server.token) as rpc:
            project_id = (await rpc.call("project:open", {"path": str(folder)}))["project"]["id"]
            await rpc.call("document:write", {"projectId": project_id, "documentId": "a.md", "text": "一"})
    with serving(tmp_path / "data", "--project-root", str(tmp_path / "elsewhere")) as server:
        async with connected(server.url, server.token) as rpc:
            assert (await refused(rpc, str(folder)))["reason"] == "not_allowed"
            for method, params in (("document:list", {}), ("document:read", {"documentId": "a.md"}),
                                   ("document:write", {"documentId": "b.md", "text": "二"})):
                with pytest.raises(RpcCallError) as error:
                    await rpc.call(method, {"projectId": project_id, **params})
                assert error.value.error["data"] == {"code": "PROJECT_PATH_FORBIDDEN",
                                                     "reason": "not_allowed"}
            assert [p["id"] for p in (await rpc.call("project:list"))["projects"]] == [project_id]
            settings = await rpc.call("project:settings:get", {"projectId": project_id})
            assert settings["settings"]["version"] == 1
    assert sorted(p.name for p in folder.iterdir()) == ["a.md"]


@pytest.mark.skipif(getattr(os, "geteuid", lambda: -1)() != 0, reason="only root is refused")
def test_root_without_allow_root_is_refused(tmp_path: Path) -> None:
    """As root and without --allow-root (or STRATA_ALLOW_ROOT), the real process prints the one
    refusal to stderr, nothing to stdout, exits 1 and creates no data dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}
    done = subprocess.run(
        [sys.executable, "-m", "main", "serve", "--data-dir", str(tmp_path / "data"), "--port", "0"],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", ROOT_REFUSAL + "\n")
    assert not (tmp_path / "data").exists()
