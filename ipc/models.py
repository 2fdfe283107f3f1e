"""Base of every wire model: camelCase on the wire, unknown fields refused.

``populate_by_name`` lets Python build results by field name. Incoming params
never use it: the dispatcher validates them as JSON, strictly and by wire
(camelCase) name only (``ipc.dispatch.bind_params``), so ``project_id``,
``"3"`` for an integer or ``true`` for a number are refused.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
    )


class NoParams(WireModel):
    """A method that takes no parameters (``params`` absent, ``{}`` or ``[]``)."""


class Ack(WireModel):
    """Result of a call whose only news is that it succeeded."""

    ok: bool = True


class OmitNone(WireModel):
    """A result whose optional members are left out, not sent as null."""

    @model_serializer(mode="wrap")
    def _omit_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}
