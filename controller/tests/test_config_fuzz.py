"""Property-based fuzzing of the controller's config schema (hypothesis).

From a valid config (`corekit.config_data`), each example changes one key: deletes it,
replaces its value with an arbitrary YAML-able value, or adds an unknown key beside it.
The config must then load or be refused with `ConfigError` whose message names the key
that was changed (its name or, for a list item, its list's name); any other exception is
a crash. Tallies what was tried for the chaos report (`supergw_proto.badinput`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supergw_controller.config import ConfigError, parse_config
from supergw_proto.badinput import Tally

import corekit

Key = str | int
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.one_of(st.text(max_size=8), st.integers(0, 70)), inner, max_size=3)
), max_leaves=8)


def key_paths(node: Any, prefix: tuple[Key, ...] = ()) -> list[tuple[Key, ...]]:
    """Every key and list index in the document, outermost first."""
    out: list[tuple[Key, ...]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for k, v in items:
        out.append(prefix + (k,))
        out += key_paths(v, prefix + (k,))
    return out


def named_keys(path: tuple[Key, ...]) -> list[str]:
    """What a message may call the changed key: each name on its path, innermost first (a
    mapping key such as a port number counts as a name)."""
    return [str(k) for k in reversed(path)]


def mutate(doc: dict[str, Any], path: tuple[Key, ...], how: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    parent: Any = out
    for k in path[:-1]:
        parent = parent[k]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "replace":
        parent[last] = value
    elif isinstance(parent, dict):
        parent[f"unknown_{len(parent)}"] = value
    else:
        parent.append(value)
    return out


BASE = corekit.config_data()
PATHS = key_paths(BASE)
EXAMPLES = 400


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    """What the property tried, written for the chaos report when the module is done."""
    t = Tally(interface="config-yaml", variant="controller", detail={"examples": f"hypothesis, {EXAMPLES} per run"})
    yield t
    t.write()


@settings(max_examples=EXAMPLES, deadline=None)
@given(path=st.sampled_from(PATHS), how=st.sampled_from(["delete", "replace", "add"]), value=VALUES)
def test_changed_config_loads_or_names_the_key(
    tmp_path_factory: pytest.TempPathFactory, tally: Tally, path: tuple[Key, ...], how: str, value: Any
) -> None:
    doc = mutate(BASE, path, how, value)
    try:
        parse_config(doc, tmp_path_factory.getbasetemp())
    except ConfigError as exc:
        message = str(exc)
        # an added key is refused as `unknown key` or by its parent's name (a list item)
        names = named_keys(path if how != "add" else path[:-1]) + (["unknown key"] if how == "add" else [])
        tally.count("refused")
        assert any(n in message for n in names), (how, path, value, message)
        return
    except Exception:
        tally.crashes += 1
        tally.count("crash")
        raise
    tally.count("accepted")

