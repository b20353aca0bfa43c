"""The committed P4Info is what p4c would emit for p4src/, and generated files are current.

p4c is not installable here, so this test reads the P4 sources (written in a regular
style on purpose: one `@id(...)` line right above each P4Runtime object) and checks every
fact p4c would derive from them: names, pinned IDs, key and parameter names and widths,
action scopes, default actions, sizes, direct resources, idle timeout, controller
headers and the digest (whose ID p4c derives from its name).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

ROOT = Path(__file__).resolve().parents[2]
P4SRC = ROOT / "p4src"
P4INFO = P4SRC / "v1model" / "supergw.p4info.txtpb"
TOP = P4SRC / "v1model" / "supergw.p4"
INGRESS = "SupergwIngress"


def _script(name: str, path: Path) -> ModuleType:
    """A p4src tool (a script, not a package), loaded by path."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


gen = _script("gen_constants", P4SRC / "gen_constants.py")
# p4c's default P4Runtime IDs (prefix byte + jenkins_one_at_a_time of the name) are
# computed in one place, the Tofino-shape P4Info generator.
p4c_ids = _script("supergw_tna_tofino_p4info", P4SRC / "tna" / "tofino_p4info.py")


# ------------------------------------------------------------------ P4 source model


@dataclass
class Source:
    texts: dict[Path, str]
    widths: dict[str, int]  # typedef name -> bit width
    structs: dict[str, list[tuple[str, str]]]  # struct/header -> [(type, field)]
    sizes: dict[str, int]

    def width(self, p4type: str) -> int:
        if m := re.fullmatch(r"bit<(\d+)>", p4type):
            return int(m.group(1))
        if p4type in self.widths:
            return self.widths[p4type]
        raise AssertionError(f"unknown P4 type {p4type}")

    def expr_width(self, expr: str) -> int:
        """Width of `meta.a.b` (local_metadata_t) or `hdr.h.f` (headers_t)."""
        root, *path = expr.split(".")
        typ = {"meta": "local_metadata_t", "hdr": "headers_t"}[root]
        for name in path:
            typ = dict((f, t) for t, f in self.structs[typ])[name]
        return self.width(typ)


def load_source() -> Source:
    # The v1model program only: p4src/tna/ has its own contract test (p4src/tna/tests/).
    sources = sorted(p for d in ("common", "v1model") for p in (P4SRC / d).rglob("*.p4"))
    texts = {p: re.sub(r"//[^\n]*", "", p.read_text()) for p in sources}
    everything = "\n".join(texts.values())
    widths = {m.group(2): int(m.group(1)) for m in re.finditer(r"typedef\s+bit<(\d+)>\s+(\w+)\s*;", everything)}
    structs: dict[str, list[tuple[str, str]]] = {}
    for m in re.finditer(r"\b(?:struct|header)\s+(\w+)\s*\{([^}]*)\}", everything):
        structs[m.group(1)] = re.findall(r"([\w<>]+)\s+(\w+)\s*;", m.group(2))
    defines = gen.parse_defines([P4SRC / "common" / "size.p4", P4SRC / "common" / "defines.p4"])
    sizes = {s.name: s.value for s in defines.scalars}
    return Source(texts, widths, structs, sizes)


@dataclass
class Decl:
    kind: str  # table, action, counter, direct_counter, header
    name: str  # P4Runtime name
    id: int
    body: str  # table body, action parameter list, header body, or constructor args


def _instances() -> dict[str, str]:
    """Control type -> instance name inside SupergwIngress (from supergw.p4)."""
    text = TOP.read_text()
    start = text.index(f"control {INGRESS}(")
    block = text[start : text.index("apply {", start)]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s*(\w+)\(\)\s+(\w+)\s*;", block, re.M)}


def _block(text: str, open_at: int) -> str:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    raise AssertionError("unbalanced braces")


def declarations(src: Source) -> Iterator[Decl]:
    instances = _instances()
    decl_re = re.compile(
        r"@id\((?P<id>0x[0-9a-fA-F]+|\d+)\)\s*(?:@\w+(?:\([^)]*\))?\s*)*"
        r"(?:(?P<table>table)\s+(?P<tname>\w+)\s*\{"
        r"|action\s+(?P<aname>\w+)\s*\((?P<params>[^)]*)\)"
        r"|(?P<ctr>direct_counter|counter)\s*\((?P<cargs>[^)]*)\)\s*(?P<cname>\w+)\s*;"
        r"|header\s+(?P<hname>\w+)\s*\{)"
    )
    for path, text in src.texts.items():
        controls = [(m.start(), m.group(1)) for m in re.finditer(r"\bcontrol\s+(\w+)\s*\(", text)]
        for m in decl_re.finditer(text):
            pid = int(m.group("id"), 0)
            if m.group("hname"):
                annot = re.search(r'@controller_header\("(\w+)"\)\s*@id\([^)]*\)\s*header\s+' + m.group("hname"), text)
                assert annot, f"{path}: header {m.group('hname')} has @id but no @controller_header"
                yield Decl("header", annot.group(1), pid, _block(text, m.end() - 1))
                continue
            enclosing = [name for pos, name in controls if pos < m.start()]
            assert enclosing, f"{path}: @id outside a control"
            control = enclosing[-1]
            prefix = INGRESS if control == INGRESS else f"{INGRESS}.{instances[control]}"
            if m.group("table"):
                yield Decl("table", f"{prefix}.{m.group('tname')}", pid, _block(text, m.end() - 1))
            elif m.group("aname"):
                yield Decl("action", f"{prefix}.{m.group('aname')}", pid, m.group("params"))
            else:
                yield Decl(m.group("ctr"), f"{prefix}.{m.group('cname')}", pid, m.group("cargs"))


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def info() -> p4i.P4Info:
    return text_format.Parse(P4INFO.read_text(), p4i.P4Info())


@pytest.fixture(scope="module")
def src() -> Source:
    return load_source()


@pytest.fixture(scope="module")
def decls(src: Source) -> dict[tuple[str, str], Decl]:
    found: dict[tuple[str, str], Decl] = {}
    for d in declarations(src):
        assert (d.kind, d.name) not in found, f"{d.kind} {d.name} declared twice"
        found[(d.kind, d.name)] = d
    return found


def _one(objs: dict[str, Decl], name: str) -> Decl:
    assert name in objs, f"{name} is in the P4Info but not declared with @id in p4src"
    return objs[name]


# ------------------------------------------------------------------ tests


def test_p4info_parses(info: p4i.P4Info) -> None:
    assert info.pkg_info.arch == "v1model"
    assert info.tables and info.actions


def test_ids_unique_and_prefixed(info: p4i.P4Info) -> None:
    prefixes = {
        0x01: [a.preamble for a in info.actions],
        0x02: [t.preamble for t in info.tables],
        0x04: [c.preamble for c in info.controller_packet_metadata],
        0x12: [c.preamble for c in info.counters],
        0x13: [c.preamble for c in info.direct_counters],
        0x17: [d.preamble for d in info.digests],
    }
    ids = [p.id for pres in prefixes.values() for p in pres]
    assert len(ids) == len(set(ids))
    for prefix, preambles in prefixes.items():
        for pre in preambles:
            assert pre.id >> 24 == prefix, f"{pre.name}: id {pre.id:#x} lacks prefix {prefix:#04x}"


def test_aliases_are_shortest_unique_suffixes(info: p4i.P4Info) -> None:
    names = [p.name for p in _preambles(info) if "." in p.name]
    last = [n.rsplit(".", 1)[1] for n in names]
    for pre in _preambles(info):
        expected = pre.name.rsplit(".", 1)[-1]
        assert last.count(expected) <= 1, f"alias {expected} is ambiguous; p4c would lengthen it"
        assert pre.alias == expected


def _preambles(info: p4i.P4Info) -> list[p4i.Preamble]:
    return [
        *(o.preamble for o in info.tables),
        *(o.preamble for o in info.actions),
        *(o.preamble for o in info.counters),
        *(o.preamble for o in info.direct_counters),
        *(o.preamble for o in info.digests),
        *(o.preamble for o in info.controller_packet_metadata),
    ]


def test_every_source_object_is_in_p4info(info: p4i.P4Info, decls: dict[tuple[str, str], Decl]) -> None:
    in_info = {
        *(("table", t.preamble.name) for t in info.tables),
        *(("action", a.preamble.name) for a in info.actions),
        *(("counter", c.preamble.name) for c in info.counters),
        *(("direct_counter", c.preamble.name) for c in info.direct_counters),
        *(("header", c.preamble.name) for c in info.controller_packet_metadata),
    }
    assert set(decls) == in_info


def test_actions(info: p4i.P4Info, src: Source, decls: dict[tuple[str, str], Decl]) -> None:
    actions = {n: d for (k, n), d in decls.items() if k == "action"}
    for action in info.actions:
        decl = _one(actions, action.preamble.name)
        assert action.preamble.id == decl.id, action.preamble.name
        params = [p.strip().rsplit(None, 1) for p in decl.body.split(",") if p.strip()]
        got = [(p.id, p.name, p.bitwidth) for p in action.params]
        assert got == [(i, name, src.width(typ)) for i, (typ, name) in enumerate(params, 1)], action.preamble.name


def _table_props(body: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for m in re.finditer(r"(const\s+default_action|default_action|size|counters|support_timeout)\s*=\s*([^;]+);", body):
        props[m.group(1).replace("  ", " ")] = m.group(2).strip()
    return props


def test_tables(info: p4i.P4Info, src: Source, decls: dict[tuple[str, str], Decl]) -> None:
    tables = {n: d for (k, n), d in decls.items() if k == "table"}
    action_ids = {a.preamble.name: a.preamble.id for a in info.actions}
    direct = {c.preamble.name: c for c in info.direct_counters}
    for table in info.tables:
        name = table.preamble.name
        decl = _one(tables, name)
        scope = name.rsplit(".", 1)[0]
        assert table.preamble.id == decl.id, name

        key_block = re.search(r"key\s*=\s*\{([^}]*)\}", decl.body)
        keys = re.findall(r"([\w.]+)\s*:\s*(\w+)\s*@name\(\"(\w+)\"\)\s*;", key_block.group(1) if key_block else "")
        assert [(m.id, m.name, m.bitwidth, p4i.MatchField.MatchType.Name(m.match_type)) for m in table.match_fields] == [
            (i, kname, src.expr_width(expr), kind.upper()) for i, (expr, kind, kname) in enumerate(keys, 1)
        ], name

        actions_block = re.search(r"actions\s*=\s*\{([^}]*)\}", decl.body)
        assert actions_block, name
        refs = re.findall(r"(@defaultonly\s+)?(\w+)\s*;", actions_block.group(1))
        expected_refs = [(action_ids[f"{scope}.{a}"], bool(d)) for d, a in refs]
        got_refs = [(r.id, r.scope == p4i.ActionRef.DEFAULT_ONLY) for r in table.action_refs]
        assert got_refs == expected_refs, name
        for r in table.action_refs:
            assert list(r.annotations) == (["@defaultonly"] if r.scope == p4i.ActionRef.DEFAULT_ONLY else []), name

        props = _table_props(decl.body)
        const_default = props.get("const default_action")
        default = const_default or props.get("default_action")
        assert default, f"{name}: give every table an explicit default action (else p4c adds NoAction)"
        default_action = re.match(r"(\w+)\s*\(([^)]*)\)", default)
        assert default_action, name
        default_id = action_ids[f"{scope}.{default_action.group(1)}"]
        assert table.const_default_action_id == (default_id if const_default else 0), name
        assert table.initial_default_action.action_id == default_id, name
        args = [a.strip() for a in default_action.group(2).split(",") if a.strip()]
        action = next(a for a in info.actions if a.preamble.id == default_id)
        want_args = [
            (p.id, src.sizes[arg].to_bytes((p.bitwidth + 7) // 8, "big") if arg in src.sizes else
             _p4_const(src, arg).to_bytes((p.bitwidth + 7) // 8, "big"))
            for p, arg in zip(action.params, args, strict=True)
        ]
        assert [(a.param_id, a.value) for a in table.initial_default_action.arguments] == want_args, name

        assert table.size == src.sizes[props["size"]], name
        if "counters" in props:
            counter = direct[f"{scope}.{props['counters']}"]
            assert list(table.direct_resource_ids) == [counter.preamble.id], name
            assert counter.direct_table_id == table.preamble.id
        else:
            assert not table.direct_resource_ids, name
        timeout = props.get("support_timeout") == "true"
        assert table.idle_timeout_behavior == (p4i.Table.NOTIFY_CONTROL if timeout else p4i.Table.NO_TIMEOUT), name


def _p4_const(src: Source, name: str) -> int:
    for text in src.texts.values():
        if m := re.search(rf"const\s+[\w<>]+\s+{name}\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;", text):
            return int(m.group(1), 0)
    raise AssertionError(f"constant {name} not found")


_UNITS = {"packets": p4i.CounterSpec.PACKETS, "bytes": p4i.CounterSpec.BYTES, "packets_and_bytes": p4i.CounterSpec.BOTH}


def test_counters(info: p4i.P4Info, src: Source, decls: dict[tuple[str, str], Decl]) -> None:
    counters = {n: d for (k, n), d in decls.items() if k == "counter"}
    for counter in info.counters:
        decl = _one(counters, counter.preamble.name)
        size, unit = (a.strip() for a in decl.body.split(","))
        assert counter.preamble.id == decl.id
        assert counter.size == src.sizes[size]
        assert counter.spec.unit == _UNITS[unit.removeprefix("CounterType.")]
    directs = {n: d for (k, n), d in decls.items() if k == "direct_counter"}
    for counter in info.direct_counters:
        decl = _one(directs, counter.preamble.name)
        assert counter.preamble.id == decl.id
        assert counter.spec.unit == _UNITS[decl.body.strip().removeprefix("CounterType.")]


def test_drop_counter_holds_every_reason(info: p4i.P4Info) -> None:
    from supergw_proto.p4constants import COUNTER_DROP_COUNTER, DropReason

    counter = next(c for c in info.counters if c.preamble.name == COUNTER_DROP_COUNTER)
    assert max(DropReason) < counter.size


def test_controller_headers(info: p4i.P4Info, src: Source, decls: dict[tuple[str, str], Decl]) -> None:
    headers = {n: d for (k, n), d in decls.items() if k == "header"}
    for hdr in info.controller_packet_metadata:
        decl = _one(headers, hdr.preamble.name)
        assert hdr.preamble.id == decl.id
        assert list(hdr.preamble.annotations) == [f'@controller_header("{hdr.preamble.name}")']
        fields = re.findall(r"([\w<>]+)\s+(\w+)\s*;", decl.body)
        assert [(m.id, m.name, m.bitwidth) for m in hdr.metadata] == [
            (i, f, src.width(t)) for i, (t, f) in enumerate(fields, 1)
        ]
        assert sum(m.bitwidth for m in hdr.metadata) % 8 == 0, "controller headers must be byte aligned"


def test_digest(info: p4i.P4Info, src: Source) -> None:
    calls = [m.group(1) for t in src.texts.values() for m in re.finditer(r"\bdigest<(\w+)>\s*\(", t)]
    assert sorted(d.preamble.name for d in info.digests) == sorted(set(calls))
    for digest in info.digests:
        name = digest.preamble.name
        # v1model's digest() is an extern function: p4c cannot take an @id for it.
        assert digest.preamble.id == p4c_ids.p4c_id("digest", name)
        assert digest.type_spec.struct.name == name
        members = info.type_info.structs[name].members
        assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
            (f, src.width(t)) for t, f in src.structs[name]
        ]


def test_jenkins_matches_p4c() -> None:
    # NoAction's well-known p4c ID.
    assert p4c_ids.p4c_id("action", "NoAction") == 21257015


def test_no_directly_called_actions(src: Source) -> None:
    # p4c puts every action of a control into the P4Info; only table actions may exist.
    for path, text in src.texts.items():
        for m in re.finditer(r"\baction\s+(\w+)\s*\(", text):
            assert re.search(rf"@id\([^)]*\)\s*action\s+{m.group(1)}\b", text), f"{path}: action {m.group(1)} has no @id"


def test_generated_files_are_current() -> None:
    diffs = gen.stale(ROOT, gen.outputs(ROOT))
    assert not diffs, "generated constants are stale; run `make constants`:\n" + "\n".join(diffs)
