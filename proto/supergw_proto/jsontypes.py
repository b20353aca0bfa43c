"""JSON value types that what agents send is validated with (`reports`, `replication`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError


def _json_integer(value: object) -> object:
    if isinstance(value, (bool, str)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


# A JSON integer: `3` or `3.0` (JSON Schema counts both as integers), never `true` or `"3"`,
# also inside a model validated with `strict=True`.
Int = Annotated[int, Field(strict=False), BeforeValidator(_json_integer)]
