"""Document ids: canonical relative paths; escapes are scope violations, non-documents invalid."""

from __future__ import annotations

import pytest

from services.errors import InvalidInput, ProjectScopeViolation
from services.projects.document_ids import document_segments, is_document_name


@pytest.mark.parametrize(("document_id", "segments"), [
    ("a.md", ("a.md",)), ("第一章/开头.markdown", ("第一章", "开头.markdown")),
    ("notes/x.TXT", ("notes", "x.TXT")), ("a..b.md", ("a..b.md",)), ("..a.md/b.md", None),
    ("Chapter 1: Start.md", ("Chapter 1: Start.md",)),
])
def test_canonical_ids_split_into_segments(document_id: str, segments: tuple[str, ...] | None) -> None:
    """A canonical id is its segments; `..` inside a name is fine, a hidden folder is not."""
    if segments is None:
        with pytest.raises(InvalidInput):
            document_segments(document_id)
    else:
        assert document_segments(document_id) == segments


@pytest.mark.parametrize("document_id", [
    "../a.md", "a/../../b.md", "a/../b.md", "/etc/passwd.md", "//server/share.md", "a\\..\\b.md",
    "..\\a.md", "a\x00.md", "C:evil.md", "c:/evil.md", "a/D:b.md", "..",
])
def test_ids_that_could_leave_the_folder_are_scope_violations(document_id: str) -> None:
    """Parent steps, absolute paths, drives, backslashes and NUL are PROJECT_SCOPE_VIOLATION."""
    with pytest.raises(ProjectScopeViolation):
        document_segments(document_id)


@pytest.mark.parametrize("document_id", [
    "", "a.json", "a.md/", "a//b.md", "./a.md", "a/./b.md", ".hidden.md", ".git/x.md",
    "x" * 1025, ("x" * 256) + ".md", "\ud800.md", "folder",
])
def test_ids_that_are_not_documents_are_invalid(document_id: str) -> None:
    """Empty, non-canonical, hidden, wrong suffix, too long or unencodable ids are INVALID_PARAMS."""
    with pytest.raises(InvalidInput):
        document_segments(document_id)


def test_document_names() -> None:
    """Visible names ending in .md, .markdown or .txt (any case) are documents."""
    assert [is_document_name(n) for n in ("a.md", "B.MARKDOWN", "c.txt", ".d.md", "e.mdx", "md")] \
        == [True, True, True, False, False, False]
