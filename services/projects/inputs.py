"""Validating what callers hand to a service: pydantic rules, domain errors.

Services are called from channels (whose wire models already checked the
same bounds) and from other services and scripts (which did not), so each
service validates its own inputs. Problems are reported like the
dispatcher's ``INVALID_PARAMS``: location, type and message, never the value.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError
from pydantic.alias_generators import to_camel

from services.errors import InvalidInput

M = TypeVar("M", bound=BaseModel)

# Ids of AI skills (continue, rewrite, ...): short, ASCII, safe in logs.
SkillId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")]


class Input(BaseModel):
    """Base of service input models: unknown fields are mistakes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def invalid(field: str, msg: str, kind: str = "value_error") -> InvalidInput:
    """An InvalidInput naming one field, shaped like the dispatcher's errors."""
    return InvalidInput(errors=[{"loc": [to_camel(field)], "type": kind, "msg": msg}])


def validated(model: type[M], values: dict[str, Any]) -> M:
    """``values`` as ``model``, or InvalidInput listing what is wrong (without values)."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        errors = [
            {"loc": [to_camel(str(part)) for part in err["loc"]], "type": err["type"], "msg": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
        raise InvalidInput(errors=errors) from None
