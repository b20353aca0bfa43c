"""Property-based fuzzing of the three YAML schemas (hypothesis): the controller's config,
a gateway's config and a topology file (two-site, which derives both sites).

From a valid document (`corekit.config_data`, the example site's gw1.yaml, topologies/
two-site.yaml), each example changes one key: deletes it, replaces its value with an
arbitrary YAML-able value, or adds an unknown key beside it. The document must then load or
be refused with the schema's error (`ConfigError`, `TopologyError`) whose message names the
key that was changed (its name or, for a list item, its list's name); any other exception is
a crash. Tallies what was tried for the chaos report (`supergw_proto.badinput`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import yaml

from supergw_controller.config import ConfigError, parse_config
from supergw_gateway.config import parse_config as parse_gateway_config
from supergw_gateway.errors import ConfigError as GatewayConfigError
from supergw_proto.badinput import Tally
from topologies.schema import parse as parse_topology
from topologies.model import TopologyError

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


ROOT = Path(__file__).resolve().parents[2]


def gateway_doc() -> dict[str, Any]:
    """The example site's gw1.yaml with its secrets inline and without its CA file (no files,
    no environment)."""
    doc: dict[str, Any] = yaml.safe_load((ROOT / "packaging/example-site/gw1.yaml").read_text())
    doc["auth"]["psk"] = "0123456789abcdef-unit"
    doc["controller"].pop("token_file")
    doc["controller"].pop("ca_file")
    doc["controller"]["token"] = "agent-gw1-unit-token-0123456789"
    return doc


Parser = Callable[[dict[str, Any]], object]
# kind -> (a valid document, its parser, the error a refusal must be)
SCHEMAS: dict[str, tuple[dict[str, Any], Parser, type[Exception]]] = {
    "controller": (corekit.config_data(), lambda d: parse_config(d, ROOT), ConfigError),
    "gateway": (gateway_doc(), lambda d: parse_gateway_config(d, "gw1.yaml"), GatewayConfigError),
    "topology": (yaml.safe_load((ROOT / "topologies/two-site.yaml").read_text()),
                 lambda d: parse_topology(d, "two-site.yaml"), TopologyError),
}
EXAMPLES = 300


@pytest.fixture(scope="module")
def tallies() -> Iterator[dict[str, Tally]]:
    """What the property tried, per schema, written for the chaos report when the module is done."""
    out = {kind: Tally(interface="config-yaml", variant=kind, detail={"examples": f"hypothesis, {EXAMPLES} per run"})
           for kind in SCHEMAS}
    yield out
    for t in out.values():
        t.write()


def test_the_base_documents_are_valid() -> None:
    for doc, parse, _ in SCHEMAS.values():
        parse(copy.deepcopy(doc))


@pytest.mark.parametrize("kind", list(SCHEMAS))
@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.data(), how=st.sampled_from(["delete", "replace", "add"]), value=VALUES)
def test_changed_document_loads_or_names_the_key(
    tallies: dict[str, Tally], kind: str, data: st.DataObject, how: str, value: Any
) -> None:
    base, parse, error = SCHEMAS[kind]
    tally = tallies[kind]
    path = data.draw(st.sampled_from(key_paths(base)), label="path")
    doc = mutate(base, path, how, value)
    try:
        parse(doc)
    except error as exc:
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



def test_a_two_site_file_without_kind_is_refused_naming_kind() -> None:
    """Found by the fuzzer: it was refused with a dozen `unknown key` lines, none about `kind`."""
    doc = copy.deepcopy(SCHEMAS["topology"][0])
    del doc["kind"]
    with pytest.raises(TopologyError, match=r"two-site.yaml: kind: missing, and the file has `sites`"):
        parse_topology(doc, "two-site.yaml")
