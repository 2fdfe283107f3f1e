"""Service input validation: domain errors shaped like INVALID_PARAMS, never holding the value."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import StringConstraints

from services.errors import InvalidInput
from services.projects.inputs import Input, SkillId, invalid, validated


class Sample(Input):
    text_body: Annotated[str, StringConstraints(max_length=3)]
    skill_id: SkillId | None = None


def test_validated_returns_the_model() -> None:
    """Valid values come back as the model."""
    assert validated(Sample, {"text_body": "abc"}) == Sample(text_body="abc")


def test_problems_name_camel_case_fields_without_values() -> None:
    """Each problem has loc (camelCase), type and msg; the offending value is not in it."""
    with pytest.raises(InvalidInput) as raised:
        validated(Sample, {"text_body": "secret text", "skill_id": "no spaces", "extra": 1})
    errors = raised.value.fields["errors"]
    assert sorted(e["loc"][0] for e in errors) == ["extra", "skillId", "textBody"]
    assert all(set(e) == {"loc", "type", "msg"} for e in errors)
    assert "secret" not in repr(errors)
    assert "no spaces" not in repr(errors)


def test_invalid_names_one_field() -> None:
    """invalid() builds the same shape for a rule checked by hand."""
    err = invalid("document_id", "must name a document")
    assert err.data_code == "INVALID_PARAMS"
    assert err.fields == {"errors": [{"loc": ["documentId"], "type": "value_error",
                                      "msg": "must name a document"}]}
