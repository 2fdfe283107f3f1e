"""The writer's documents: Markdown and text files inside a project's folder.

Every id is resolved against the folder's real path with every link followed,
and refused unless the file it lands on is itself a valid document id inside
the folder: ``..``, absolute ids and links (of the file or of any parent) to
outside are all caught by that one rule. A link that stays inside works.

Between the check and the write another local process could swap a folder
for a link; such a process can already write anywhere the writer can, so
this is not a privilege boundary, and the check is repeated just before the
rename to make the window small.
"""

from __future__ import annotations

import asyncio
import builtins
import errno
import hashlib
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from services.errors import DocumentNotFound, ProjectPathInvalid, ProjectScopeViolation, StrataError
from services.projects.atomic import NotARegularFile, atomic_write, is_temp_name, remove_stale_temps
from services.projects.document_ids import document_segments, is_document_name
from services.projects.inputs import invalid
from services.projects.records import DocumentInfo, DocumentListing
from services.projects.scope import require_project
from services.store.database import Database

MAX_DOCUMENT_BYTES = 4 * 2**20  # a reply must fit the default 8 MiB frame with JSON escaping
MAX_LISTED_DOCUMENTS = 5000
# Projects whose folder path is kept (a project's id is the hash of its path, and a project row is
# never deleted, so the path of a project id never changes once read).
KEPT_PATHS = 256
# Texts kept from reads, for as long as their file stays exactly as read (see DocumentStore.read).
KEPT_TEXTS = 256  # documents, all projects together
KEPT_TEXT_CHARS = 4_000_000  # characters, all projects together
# A file whose status changed less than this long before it was read is not kept: a timestamp
# may be coarser than the time between two writes, so a second write could leave it the same.
SETTLED_NS = 2_000_000_000
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
    | getattr(os, "O_CLOEXEC", 0)

# What a document id naming a FIFO, socket or device is told, by document:read and document:write.
SPECIAL_FILE = "No document with this id in the project: it names a FIFO, socket or device, left as it is"

_log = structlog.get_logger("documents")


@dataclass(frozen=True, slots=True)
class _KeptText:
    path: Path
    stamp: tuple[int, int, int, int, int]
    text: str


def _stamp(info: os.stat_result) -> tuple[int, int, int, int, int]:
    """What a file's status says of its content: which file, its size, and when its content and
    its status last changed (a write changes the status time, which no program can set back)."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def document_ref(document_id: str) -> str:
    """What logs say instead of a document id, which is a path and may be telling."""
    return hashlib.sha256(document_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def project_root(stored_path: str) -> Path:
    """The project folder, if it is still a real folder where it was opened."""
    if not os.path.isdir(stored_path) or os.path.realpath(stored_path) != stored_path:
        raise ProjectPathInvalid()
    return Path(stored_path)


def resolve_document(root: Path, document_id: str) -> Path:
    """The real path ``document_id`` names, strictly inside ``root``, or a domain error."""
    segments = document_segments(document_id)
    real = Path(os.path.realpath(os.path.join(root, *segments)))
    try:
        landed = real.relative_to(root).parts
    except ValueError:
        raise ProjectScopeViolation() from None
    if landed != segments:  # an in-folder link: its target must be a document id too
        document_segments("/".join(landed))
    refuse_links(root, landed)
    return real


def refuse_links(root: Path, parts: tuple[str, ...]) -> None:
    """Refuse a path that still holds a link after resolving: a loop or a link swapped in."""
    current = root
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise ProjectScopeViolation()


def is_special(path: Path) -> bool:
    """Whether something other than a regular file, folder or link is at ``path`` (not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))


def describe(path: Path, document_id: str) -> DocumentInfo:
    info = os.stat(path)
    return DocumentInfo(document_id=document_id, size=info.st_size,
                        modified_at=datetime.fromtimestamp(info.st_mtime, UTC))


def encode_text(text: str, limit: int) -> bytes:
    """``text`` as UTF-8 within ``limit`` bytes, or InvalidInput."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid("text", "must be valid Unicode text (no lone surrogates)") from None
    if len(data) > limit:
        raise invalid("text", f"must be at most {limit} bytes of UTF-8")
    return data


class DocumentStore:
    """Lists, reads and atomically writes the documents of a project's folder."""

    def __init__(self, database: Database, *, max_bytes: int = MAX_DOCUMENT_BYTES,
                 max_listed: int = MAX_LISTED_DOCUMENTS,
                 on_write: Callable[[str, str], None] | None = None) -> None:
        self._db = database
        self._max_bytes = max_bytes
        self._max_listed = max_listed
        self.on_write = on_write  # told of every document written (e.g. so retrieval re-indexes it)
        self._paths: dict[str, str] = {}  # project id -> its stored folder path
        self._paths_lock = threading.Lock()
        self._texts: OrderedDict[tuple[str, str], _KeptText] = OrderedDict()  # (project, document)
        self._text_chars = 0
        self._texts_lock = threading.Lock()
        # Reads on their thread, by (project, document): reads that come meanwhile join them.
        self._reading: dict[tuple[str, str], asyncio.Future[str]] = {}

    async def list(self, project_id: str) -> DocumentListing:
        """Every document under the folder, sorted by id; hidden files and folders skipped."""
        return await asyncio.to_thread(self._list, project_id)

    async def read(self, project_id: str, document_id: str) -> str:
        """The document's text (UTF-8), or DocumentNotFound.

        Every assembly reads its document, mostly unchanged since the last one: a text read
        before is kept with its file's status and given again while one status call on the
        event loop finds the file exactly as it was read (the same file, size and times); else
        the file is resolved, checked and read on a thread. A document:write drops the kept text
        at once. Only text read through every check is ever kept, and a file changed since (or
        moved, or replaced by a link) is read and checked again.

        Reads of one document that come while it is being read share that read and its text (a
        burst of reads of a large document, too large to keep, holds it once); a read after a
        write never joins one that began before it.
        """
        kept = self._kept_text(project_id, document_id)
        if kept is not None:
            return kept
        key = (project_id, document_id)
        reading = self._reading.get(key)
        if reading is None:
            reading = asyncio.ensure_future(asyncio.to_thread(self._read, project_id, document_id))
            self._reading[key] = reading
            reading.add_done_callback(lambda done: self._read_done(key, done))
        # Shielded: a caller cancelled does not cancel the read that others wait for.
        return await asyncio.shield(reading)

    def _read_done(self, key: tuple[str, str], done: asyncio.Future[str]) -> None:
        if self._reading.get(key) is done:
            del self._reading[key]
        if not done.cancelled():
            done.exception()  # retrieved: a read nobody waits for any more fails quietly

    def _kept_text(self, project_id: str, document_id: str) -> str | None:
        with self._texts_lock:
            kept = self._texts.get((project_id, document_id))
        if kept is None:
            return None
        try:
            info = os.lstat(kept.path)  # a link put in the file's place is another file
        except (OSError, ValueError):
            return None
        if _stamp(info) != kept.stamp:
            return None
        with self._texts_lock:
            if (project_id, document_id) in self._texts:
                self._texts.move_to_end((project_id, document_id))
        return kept.text

    def _keep_text(self, project_id: str, document_id: str, entry: _KeptText | None) -> None:
        """Keep ``entry`` (None: forget the document's text), within the bounds."""
        key = (project_id, document_id)
        with self._texts_lock:
            old = self._texts.pop(key, None)
            if old is not None:
                self._text_chars -= len(old.text)
            if entry is None or len(entry.text) > KEPT_TEXT_CHARS // 4:
                return
            self._texts[key] = entry
            self._text_chars += len(entry.text)
            while len(self._texts) > KEPT_TEXTS or self._text_chars > KEPT_TEXT_CHARS:
                _, gone = self._texts.popitem(last=False)
                self._text_chars -= len(gone.text)

    async def heads(self, project_id: str, limit_bytes: int = 2048) -> builtins.list[tuple[str, str]]:
        """Every listed document's id and the start of its text (at most ``limit_bytes``, decoded
        leniently): enough to read its title without reading whole documents."""
        return await asyncio.to_thread(self._heads, project_id, limit_bytes)

    async def write(self, project_id: str, document_id: str, text: str) -> DocumentInfo:
        """Replace (or create) the document atomically, creating its folders in the project."""
        self._keep_text(project_id, document_id, None)
        self._reading.pop((project_id, document_id), None)  # reads from now on read anew
        try:
            info = await asyncio.to_thread(self._write, project_id, document_id, text)
        finally:
            self._keep_text(project_id, document_id, None)
            self._reading.pop((project_id, document_id), None)
        if self.on_write is not None:
            self.on_write(project_id, document_id)
        return info

    async def root(self, project_id: str) -> Path:
        """The project's folder, or a domain error when the project or its folder is gone."""
        return await asyncio.to_thread(self._root, project_id)

    def _root(self, project_id: str) -> Path:
        """The project's folder, checked on disk every time (it may have been moved or replaced);
        its stored path is read from the database once."""
        with self._paths_lock:
            path = self._paths.get(project_id)
        if path is None:
            with self._db.session() as session:
                path = require_project(session, project_id).path
            with self._paths_lock:
                if len(self._paths) >= KEPT_PATHS:
                    del self._paths[next(iter(self._paths))]
                self._paths[project_id] = path
        return project_root(path)

    def _list(self, project_id: str) -> DocumentListing:
        root = self._root(project_id)
        leftovers: list[tuple[Path, list[str]]] = []
        found = [info for document_id in walk_document_ids(root, leftovers)
                 if (info := self._listed(root, document_id)) is not None]
        removed = sum(remove_stale_temps(folder, names) for folder, names in leftovers)
        if removed:
            _log.info("documents.temp_removed", project_id=project_id, count=removed)
        found.sort(key=lambda info: info.document_id)
        _log.info("documents.listed", project_id=project_id, count=len(found))
        return DocumentListing(documents=found[:self._max_listed],
                               truncated=len(found) > self._max_listed)

    def _listed(self, root: Path, document_id: str) -> DocumentInfo | None:
        """The document's info if its id resolves like a read's would, else None (left out)."""
        try:
            path = resolve_document(root, document_id)
            return describe(path, document_id) if path.is_file() else None
        except (OSError, ValueError, StrataError):
            return None

    def _read(self, project_id: str, document_id: str) -> str:
        self._keep_text(project_id, document_id, None)
        path = resolve_document(self._root(project_id), document_id)
        data, info = self._read_bytes(path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise invalid("document_id", "the document is not UTF-8 text") from None
        if time.time_ns() - info.st_ctime_ns > SETTLED_NS:
            self._keep_text(project_id, document_id, _KeptText(path, _stamp(info), text))
        _log.info("document.read", project_id=project_id, document=document_ref(document_id),
                  bytes=len(data))
        return text

    def _heads(self, project_id: str, limit_bytes: int) -> builtins.list[tuple[str, str]]:
        root = self._root(project_id)
        found: builtins.list[tuple[str, str]] = []
        for info in self._list(project_id).documents:
            try:
                fd = os.open(resolve_document(root, info.document_id), _READ_FLAGS)
            except (OSError, ValueError, StrataError):
                continue
            try:
                head = read_at_most(fd, limit_bytes) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
            finally:
                os.close(fd)
            found.append((info.document_id, head.decode("utf-8", "ignore")))
        return found

    def _read_bytes(self, path: Path) -> tuple[bytes, os.stat_result]:
        """The file's bytes and its status as it was opened."""
        if is_special(path):
            raise DocumentNotFound(SPECIAL_FILE)
        # O_NONBLOCK: a FIFO put there since must not hang the thread in open().
        try:
            fd = os.open(path, _READ_FLAGS)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise DocumentNotFound() from None
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):  # a socket put there since
                raise DocumentNotFound(SPECIAL_FILE) from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise DocumentNotFound()  # a folder, FIFO or device named like a document
            data = read_at_most(fd, self._max_bytes + 1)
        finally:
            os.close(fd)
        if len(data) > self._max_bytes:
            raise invalid("document_id", f"the document is larger than {self._max_bytes} bytes")
        return data, info

    def _write(self, project_id: str, document_id: str, text: str) -> DocumentInfo:
        data = encode_text(text, self._max_bytes)
        root = self._root(project_id)
        path = resolve_document(root, document_id)
        if is_special(path):  # refused as document:read refuses it, and never opened
            raise DocumentNotFound(SPECIAL_FILE)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(resolve_document(root, document_id), data)
        except NotARegularFile:  # put there since the check above
            raise DocumentNotFound(SPECIAL_FILE) from None
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            raise invalid("document_id", "a file or folder is in the way") from None
        _log.info("document.written", project_id=project_id, document=document_ref(document_id),
                  bytes=len(data))
        removed = remove_stale_temps(path.parent)
        if removed:
            _log.info("documents.temp_removed", project_id=project_id, count=removed)
        return describe(path, document_id)


def read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd``: a file growing while read cannot exhaust memory."""
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0 and (chunk := os.read(fd, min(remaining, 1 << 20))):
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def walk_document_ids(root: Path, temps: list[tuple[Path, list[str]]] | None = None) -> list[str]:
    """Ids of the visible document files under ``root``; linked folders are not walked.

    With ``temps``, also appends each folder's atomic-write temp file names to it.
    """
    found: list[str] = []
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(".")]
        relative = Path(folder).relative_to(root).parts
        found.extend("/".join((*relative, name)) for name in files if is_document_name(name))
        if temps is not None and (names := [name for name in files if is_temp_name(name)]):
            temps.append((Path(folder), names))
    return found
