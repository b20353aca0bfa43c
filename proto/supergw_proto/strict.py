"""The strict base model and YAML loading every supergw config and topology file shares.

A refusal names the key: `format_validation_error` turns pydantic's errors into one
``dotted.key[index]: message`` line each, and `load_yaml` adds the file name in front.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails


class StrictModel(BaseModel):
    """Unknown keys are errors, values are immutable, and inf/nan are refused: they would
    pass every ge/gt bound and blow up later (int(inf), a rebalance round)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


M = TypeVar("M", bound=BaseModel)


def error_location(loc: Iterable[int | str], mapping_keys: frozenset[str] = frozenset()) -> str:
    """``a.b[2].c``; an int right after a field in `mapping_keys` is a mapping key (``ports.11``)."""
    out = ""
    prev: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            out += f".{part}" if prev in mapping_keys else f"[{part}]"
        elif part.startswith("function-"):
            continue
        else:
            out += f".{part}" if out else str(part)
        prev = part
    return out


def error_message(err: ErrorDetails) -> str:
    msg = str(err["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required key is missing"
    return msg


def format_validation_error(
    exc: ValidationError,
    *,
    mapping_keys: frozenset[str] = frozenset(),
    located_prefixes: tuple[str, ...] = (),
) -> str:
    """One ``key: message`` line per error. A message starting with one of
    `located_prefixes` (a cross-field check that names its own key) is kept as it is."""
    lines: list[str] = []
    for err in exc.errors():
        loc = error_location(err["loc"], mapping_keys)
        for line in error_message(err).splitlines():
            lines.append(line if not loc or (located_prefixes and line.startswith(located_prefixes)) else f"{loc}: {line}")
    return "\n".join(lines) or str(exc)


def read_yaml_mapping(path: Path, what: str, error: type[Exception] = ValueError) -> dict[str, Any]:
    """The YAML mapping at `path`; `error` naming the file and the problem otherwise."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: the top level must be a mapping of keys ({what}), got {type(data).__name__}")
    return data


def validate(
    model: type[M],
    data: object,
    source: str,
    what: str,
    error: type[Exception] = ValueError,
    *,
    mapping_keys: frozenset[str] = frozenset(),
    located_prefixes: tuple[str, ...] = (),
) -> M:
    """`data` as `model`, or `error` with one line per refused key."""
    if not isinstance(data, dict):
        raise error(f"{source}: the top level must be a mapping of keys ({what}), got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        body = format_validation_error(exc, mapping_keys=mapping_keys, located_prefixes=located_prefixes)
        raise error(f"{source}: invalid {what}:\n  " + body.replace("\n", "\n  ")) from None
