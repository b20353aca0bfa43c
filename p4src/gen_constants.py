#!/usr/bin/env python3
"""Generate the supergw constants for Python, Go and C from the P4 sources.

Inputs (the single sources of truth):
  p4src/common/defines.p4, p4src/common/size.p4  -- `const` and `#define` values
  p4src/v1model/supergw.p4info.txtpb             -- P4Runtime names and IDs
Outputs (committed, never edited by hand):
  proto/supergw_proto/p4constants.py
  targets/ebpf/internal/p4constants/p4constants.go
  targets/ebpf/bpf/p4constants.h
  targets/ebpf/internal/pipeline/supergw.p4info.txtpb  (copy for go:embed)

Usage: gen_constants.py [--check] [--root DIR]
  --check  write nothing; exit 1 with a diff if any output is missing or stale.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from finsy.proto import p4i
from google.protobuf import text_format

DEFINES = Path("p4src/common/defines.p4")
SIZES = Path("p4src/common/size.p4")
P4INFO = Path("p4src/v1model/supergw.p4info.txtpb")
OUT_PY = Path("proto/supergw_proto/p4constants.py")
OUT_GO = Path("targets/ebpf/internal/p4constants/p4constants.go")
OUT_C = Path("targets/ebpf/bpf/p4constants.h")
OUT_P4INFO = Path("targets/ebpf/internal/pipeline/supergw.p4info.txtpb")

# P4 const-name prefix -> enum type name. Members keep the rest of the name.
ENUMS: dict[str, str] = {
    "PORT_ROLE_": "PortRole",
    "DROP_REASON_": "DropReason",
    "PUNT_REASON_": "PuntReason",
    "BUCKET_HASH_": "BucketHash",
}

_CONST_RE = re.compile(r"^\s*const\s+(bit<\d+>|\w+)\s+([A-Z][A-Z0-9_]*)\s*=\s*(0[xX][0-9a-fA-F]+|\d+)\s*;")
_DEFINE_RE = re.compile(r"^\s*#define\s+([A-Z][A-Z0-9_]*)\s+(0[xX][0-9a-fA-F]+|\d+)\s*(?://.*)?$")
_TYPEDEF_RE = re.compile(r"^\s*typedef\s+bit<(\d+)>\s+(\w+)\s*;")
_GO_INITIALISMS = {"CPU": "CPU", "ARP": "ARP", "IKE": "IKE", "ESP": "ESP", "SPI": "SPI", "RA": "RA", "UDP": "UDP", "NAT": "NAT", "IHL": "IHL", "CRC32": "CRC32", "IP": "IP", "IPS": "IPs", "IPV4": "IPv4", "IPV6": "IPv6", "IP6": "IP6", "IP6S": "IP6s", "ICMPV6": "ICMPv6", "ND": "ND", "NA": "NA", "NS": "NS", "RS": "RS", "LL": "LL", "MAC": "MAC", "ID": "ID"}


class GenError(Exception):
    """Bad input: the message says which file and what is wrong."""


@dataclass(frozen=True)
class Scalar:
    name: str
    value: int
    literal: str  # as written in the source (keeps hex readable)
    width: int | None  # bit width of its P4 type, None for #define


@dataclass(frozen=True)
class Enum:
    name: str
    width: int
    members: tuple[tuple[str, int], ...]


@dataclass
class Defines:
    scalars: list[Scalar] = field(default_factory=list)
    enums: list[Enum] = field(default_factory=list)


@dataclass(frozen=True)
class Named:
    """A P4Info object as the generators need it: a constant stem, its name and ID."""

    kind: str  # TABLE, ACTION, COUNTER, DIRECT_COUNTER, DIGEST, CTRL_HDR
    stem: str  # upper snake, unique per kind (from the alias)
    name: str
    id: int
    # (kind of child, upper snake stem, P4Runtime name) for keys, params, fields.
    children: tuple[tuple[str, str, str], ...] = ()


def parse_defines(paths: Iterable[Path]) -> Defines:
    widths: dict[str, int] = {}
    raw: list[Scalar] = []
    seen: set[str] = set()
    for path in paths:
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if m := _TYPEDEF_RE.match(line):
                widths[m.group(2)] = int(m.group(1))
                continue
            if m := _CONST_RE.match(line):
                ptype, name, lit = m.groups()
                width = int(ptype[4:-1]) if ptype.startswith("bit<") else widths.get(ptype)
                if width is None:
                    raise GenError(f"{path}:{lineno}: const {name} has type {ptype}, which is not bit<N> or a bit typedef")
            elif m := _DEFINE_RE.match(line):
                name, lit = m.groups()
                width = None
            else:
                if re.match(r"^\s*const\s", line):
                    raise GenError(f"{path}:{lineno}: cannot parse const (want `const <type> NAME = <int>;`): {line.strip()}")
                continue
            if name in seen:
                raise GenError(f"{path}:{lineno}: {name} defined twice")
            seen.add(name)
            value = int(lit, 0)
            if width is not None and value >= 1 << width:
                raise GenError(f"{path}:{lineno}: {name} = {lit} does not fit in {width} bits")
            raw.append(Scalar(name, value, lit, width))

    defines = Defines()
    for prefix, enum_name in ENUMS.items():
        members = [s for s in raw if s.name.startswith(prefix)]
        if not members:
            raise GenError(f"no {prefix}* constants found for enum {enum_name}")
        enum_widths = {s.width for s in members}
        if len(enum_widths) != 1 or None in enum_widths:
            raise GenError(f"{enum_name}: members must share one P4 type, got widths {enum_widths}")
        values = [s.value for s in members]
        if len(set(values)) != len(values):
            raise GenError(f"{enum_name}: duplicate values {values}")
        width = members[0].width
        assert width is not None
        defines.enums.append(Enum(enum_name, width, tuple((s.name[len(prefix):], s.value) for s in members)))
    defines.scalars = [s for s in raw if not any(s.name.startswith(p) for p in ENUMS)]
    return defines


def _upper(alias: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", alias).strip("_").upper()


def load_p4info(path: Path) -> p4i.P4Info:
    info = p4i.P4Info()
    try:
        text_format.Parse(path.read_text(), info)
    except text_format.ParseError as exc:
        raise GenError(f"{path}: not a valid P4Info text proto: {exc}") from exc
    return info


def p4info_objects(info: p4i.P4Info) -> list[Named]:
    objs: list[Named] = []
    for t in info.tables:
        stem = _upper(t.preamble.alias)
        keys = tuple(("MATCH", f"{stem}_{_upper(m.name)}", m.name) for m in t.match_fields)
        objs.append(Named("TABLE", stem, t.preamble.name, t.preamble.id, keys))
    for a in info.actions:
        stem = _upper(a.preamble.alias)
        params = tuple(("PARAM", f"{stem}_{_upper(p.name)}", p.name) for p in a.params)
        objs.append(Named("ACTION", stem, a.preamble.name, a.preamble.id, params))
    for c in info.counters:
        objs.append(Named("COUNTER", _upper(c.preamble.alias), c.preamble.name, c.preamble.id))
    for c in info.direct_counters:
        objs.append(Named("DIRECT_COUNTER", _upper(c.preamble.alias), c.preamble.name, c.preamble.id))
    for d in info.digests:
        stem = _upper(re.sub(r"_t$", "", d.preamble.alias))
        struct = d.type_spec.struct.name
        if struct not in info.type_info.structs:
            raise GenError(f"digest {d.preamble.name}: struct {struct!r} missing from type_info")
        members = tuple(
            ("DIGEST", f"{stem}_{_upper(m.name)}", m.name) for m in info.type_info.structs[struct].members
        )
        objs.append(Named("DIGEST", stem, d.preamble.name, d.preamble.id, members))
    for h in info.controller_packet_metadata:
        stem = _upper(h.preamble.name)
        fields = tuple(("CTRL_HDR", f"{stem}_{_upper(m.name)}", m.name) for m in h.metadata)
        objs.append(Named("CTRL_HDR", stem, h.preamble.name, h.preamble.id, fields))
    seen: set[str] = set()
    for o in objs:
        for const in [f"{o.kind}_{o.stem}", *(f"{k}_{s}" for k, s, _ in o.children)]:
            if const in seen:
                raise GenError(f"two P4Info objects map to the constant {const}; give them distinct aliases")
            seen.add(const)
    return objs


# ---------------------------------------------------------------- Python

_HEADER_NOTE = "generated by p4src/gen_constants.py from p4src/common/{defines,size}.p4 and p4src/v1model/supergw.p4info.txtpb"


def render_python(d: Defines, objs: list[Named]) -> str:
    out = [
        f'"""supergw P4 constants ({_HEADER_NOTE}).',
        "",
        "DO NOT EDIT: run `make constants`. P4 objects are looked up by these names (not IDs:",
        "Tofino's compiler renumbers IDs), e.g. with finsy `P4TableEntry(TABLE_BUCKETS, ...)`.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from enum import IntEnum",
        "from typing import Final",
        "",
    ]
    for e in d.enums:
        out += ["", f"class {e.name}(IntEnum):"]
        out += [f"    {n} = {v}" for n, v in e.members]
        out.append("")
    out.append("")
    out += [f"{s.name}: Final = {s.literal}" for s in d.scalars]
    for o in objs:
        out += ["", f'{o.kind}_{o.stem}: Final = "{o.name}"']
        out += [f'{kind}_{stem}: Final = "{name}"' for kind, stem, name in o.children]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- Go


def _go_name(upper: str) -> str:
    return "".join(_GO_INITIALISMS.get(w, w.capitalize()) for w in upper.split("_") if w)


def _go_uint(width: int) -> str:
    for size in (8, 16, 32, 64):
        if width <= size:
            return f"uint{size}"
    raise GenError(f"no Go integer holds {width} bits")


def _go_const_block(rows: list[tuple[str, str, str]]) -> list[str]:
    """A gofmt-formatted `const ( ... )` block of (name, type or "", value) rows.

    Blocks are homogeneous (all typed or all untyped), which keeps gofmt's column
    alignment to one rule: pad the names (and types) to the longest one.
    """
    name_w = max(len(n) for n, _, _ in rows)
    type_w = max(len(t) for _, t, _ in rows)
    lines = ["const ("]
    for name, typ, value in rows:
        middle = f" {typ.ljust(type_w)}" if type_w else ""
        lines.append(f"\t{name.ljust(name_w)}{middle} = {value}")
    return [*lines, ")"]


def render_go(d: Defines, objs: list[Named]) -> str:
    out = [
        "// Code generated by p4src/gen_constants.py; DO NOT EDIT.",
        "",
        "// Package p4constants holds the supergw P4 constants and P4Runtime names and IDs,",
        f"// {_HEADER_NOTE.replace('generated by p4src/gen_constants.py from ', 'taken from ')}.",
        "// IDs are those of the committed P4Info, which this target serves as is.",
        "package p4constants",
        "",
        'import "fmt"',
    ]
    for e in d.enums:
        gotype = _go_uint(e.width)
        out += ["", f"// {e.name} mirrors the P4 {_enum_prefix(e.name)}* constants.", f"type {e.name} {gotype}", ""]
        out += _go_const_block([(f"{e.name}{_go_name(n)}", e.name, str(v)) for n, v in e.members])
        out += ["", f"func (v {e.name}) String() string {{", "\tswitch v {"]
        for n, _ in e.members:
            out += [f"\tcase {e.name}{_go_name(n)}:", f'\t\treturn "{n}"']
        out += ["\t}", f'\treturn fmt.Sprintf("{e.name}(%d)", {gotype}(v))', "}"]
    out += ["", "// Scalar constants of defines.p4 and size.p4."]
    out += _go_const_block([(_go_name(s.name), "", s.literal) for s in d.scalars])
    prefixes = {
        "TABLE": "Table",
        "ACTION": "Action",
        "COUNTER": "Counter",
        "DIRECT_COUNTER": "DirectCounter",
        "DIGEST": "Digest",
        "CTRL_HDR": "CtrlHdr",
    }
    child_prefixes = {"MATCH": "Match", "PARAM": "Param", "DIGEST": "Digest", "CTRL_HDR": "CtrlHdr"}
    for o in objs:
        base = prefixes[o.kind] + _go_name(o.stem)
        rows = [(base, "", f'"{o.name}"')]
        rows += [(f"{child_prefixes[k]}{_go_name(s)}", "", f'"{n}"') for k, s, n in o.children]
        out += ["", f"// {o.name}", *_go_const_block(rows)]
    out += ["", "// P4Runtime IDs of the committed P4Info."]
    out += _go_const_block([(f"{prefixes[o.kind]}{_go_name(o.stem)}ID", "uint32", f"{o.id:#010x}") for o in objs])
    return "\n".join(out) + "\n"


def _enum_prefix(enum_name: str) -> str:
    return next(p for p, n in ENUMS.items() if n == enum_name)


# ---------------------------------------------------------------- C


def render_c(d: Defines, objs: list[Named]) -> str:
    out = [
        f"/* supergw P4 constants, {_HEADER_NOTE}.",
        " * DO NOT EDIT: run `make constants`. Names are the P4 names. */",
        "#ifndef SUPERGW_P4CONSTANTS_H",
        "#define SUPERGW_P4CONSTANTS_H",
    ]
    for e in d.enums:
        prefix = _enum_prefix(e.name)
        out += ["", f"/* {e.name} ({e.width} bits) */"]
        out += [f"#define {prefix}{n} {v}" for n, v in e.members]
    out += [""]
    out += [f"#define {s.name} {s.literal}" for s in d.scalars]
    out += ["", "/* P4Runtime IDs of the committed P4Info. */"]
    for o in objs:
        out.append(f"#define P4_ID_{o.kind}_{o.stem} {o.id:#010x}u")
    out += ["", "#endif /* SUPERGW_P4CONSTANTS_H */"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- driver


def outputs(root: Path) -> dict[Path, str]:
    for p in (DEFINES, SIZES, P4INFO):
        if not (root / p).is_file():
            raise GenError(f"missing input {root / p}")
    defines = parse_defines([root / SIZES, root / DEFINES])
    info_text = (root / P4INFO).read_text()
    objs = p4info_objects(load_p4info(root / P4INFO))
    renderers: dict[Path, Callable[[], str]] = {
        OUT_PY: lambda: render_python(defines, objs),
        OUT_GO: lambda: render_go(defines, objs),
        OUT_C: lambda: render_c(defines, objs),
        OUT_P4INFO: lambda: info_text,
    }
    return {path: render() for path, render in renderers.items()}


def stale(root: Path, generated: dict[Path, str]) -> list[str]:
    """Unified diffs (current -> generated) of every output that differs."""
    diffs: list[str] = []
    for rel, text in generated.items():
        path = root / rel
        current = path.read_text() if path.is_file() else ""
        if current != text:
            label = str(rel) if path.is_file() else f"{rel} (missing)"
            diff = difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True), f"{label} (committed)", f"{rel} (generated)"
            )
            diffs.append("".join(diff))
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if a generated file is missing or stale")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="repository root")
    args = ap.parse_args(argv)
    try:
        generated = outputs(args.root)
    except GenError as exc:
        print(f"gen_constants: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        diffs = stale(args.root, generated)
        if diffs:
            print("gen_constants: generated constants are stale; run `make constants` and commit the result:", file=sys.stderr)
            for d in diffs:
                print(d[:4000] + ("\n[... diff truncated]\n" if len(d) > 4000 else ""), file=sys.stderr)
            return 1
        print(f"gen_constants: {len(generated)} generated files are current")
        return 0
    for rel, text in generated.items():
        path = args.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            print(f"gen_constants: wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
