"""Document ids: canonical ``/``-separated paths relative to the project folder.

This module only reads the id; whether it stays inside the folder once links
on disk are followed is checked by ``documents.resolve_document``. An id that
could name something outside the folder on any platform (``..``, absolute,
a drive, a backslash, NUL) is a scope violation; an id that merely is not a
document (hidden, wrong suffix, ``a//b``, ``./a``) is invalid input. Ids are
canonical so that one file has exactly one id.
"""

from __future__ import annotations

import re

from services.errors import ProjectScopeViolation
from services.projects.inputs import invalid

DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
MAX_DOCUMENT_ID = 1024
MAX_SEGMENT_BYTES = 255  # the usual file-name limit of file systems

# A Windows drive: joining "C:x.md" to a path starts over at drive C there.
_DRIVE = re.compile(r"^[A-Za-z]:")


def is_document_name(name: str) -> bool:
    """A visible file name with a document suffix (any case)."""
    return not name.startswith(".") and name.lower().endswith(DOCUMENT_SUFFIXES)


def document_segments(document_id: str) -> tuple[str, ...]:
    """The id's path segments, or ProjectScopeViolation / InvalidInput."""
    parts = document_id.split("/")
    if "\x00" in document_id or "\\" in document_id or document_id.startswith("/") \
            or any(part == ".." or _DRIVE.match(part) for part in parts):
        raise ProjectScopeViolation()
    if not document_id or len(document_id) > MAX_DOCUMENT_ID:
        raise invalid("document_id", f"must be 1 to {MAX_DOCUMENT_ID} characters")
    segments = tuple(parts)
    for segment in segments:
        check_segment(segment)
    if not is_document_name(segments[-1]):
        raise invalid("document_id", "must name a .md, .markdown or .txt file")
    return segments


def check_segment(segment: str) -> None:
    """One folder or file name of an id: present, visible, valid UTF-8, not too long."""
    if segment in ("", "."):
        raise invalid("document_id", "must be a canonical relative path (no empty or '.' parts)")
    if segment.startswith("."):
        raise invalid("document_id", "hidden files and folders are not documents")
    try:
        size = len(segment.encode("utf-8"))
    except UnicodeEncodeError:
        raise invalid("document_id", "must be valid Unicode text") from None
    if size > MAX_SEGMENT_BYTES:
        raise invalid("document_id", f"each part must be at most {MAX_SEGMENT_BYTES} bytes")
