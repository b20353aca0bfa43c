#!/usr/bin/env python3
"""Write a P4Info with the shape bf-p4c gives the TNA program, from p4test's view of it.

No Tofino compiler is installable here and p4c's own P4Runtime serializer only knows
v1model/PSA/PNA externs, so this reads the TNA program as p4c's front and mid end see it
(`p4test --toJSON`, the IR after the mid end) and serializes the control-plane objects
the way bf-p4c does before `--p4runtime-force-std-externs` strips the pipe name:

- tables, counters, direct counters, registers and digests are named `<pipe>.<control path>` (the
  pipeline instance is `pipe`), actions and controller headers are not;
- IDs are p4c's: an `@id` where the program has one (only the controller headers, shared
  with v1model), else the object type's prefix byte and the low 24 bits of
  jenkins_one_at_a_time(name). The TNA program pins no IDs, so they all differ from the
  v1model P4Info's;
- everything else (keys, widths, scopes, defaults, sizes, idle timeout, counter units,
  digest fields, controller headers) is read from the program.

The output is committed as p4src/tna/supergw.tofino-shape.p4info.txtpb; `make p4`
(p4src/tna/check.sh) regenerates it and fails when it is stale, and
controller/tests/test_tofino_p4info.py drives the controller's lookups through it.

    tofino_p4info.py --p4test P4TEST --include DIR [--target 1|2] OUT.txtpb
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from finsy.proto import p4i as p4info_pb2

PROGRAM = Path(__file__).resolve().parent / "supergw.p4"
PIPE = "pipe"
CONTROLS = ("SupergwIngress", "SupergwIngressDeparser")

# p4c's P4Ids::Prefix values (p4runtime p4info.proto).
PREFIX = {"action": 0x01, "table": 0x02, "ctrl_hdr": 0x04, "counter": 0x12, "direct_counter": 0x13, "register": 0x16, "digest": 0x17}
# CounterSpec.Unit of p4info.proto.
COUNTER_UNIT = {"BYTES": 1, "PACKETS": 2, "PACKETS_AND_BYTES": 3}
# MatchField.MatchType of p4info.proto, by P4 match kind.
MATCH_TYPE = {"exact": 2, "lpm": 3, "ternary": 4, "range": 5, "optional": 6}

Node = dict[str, Any]


class IrError(RuntimeError):
    """The IR does not look like what this tool understands."""


def jenkins_one_at_a_time(name: str) -> int:
    h = 0
    for byte in name.encode():
        h = (h + byte) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    return (h + (h << 15)) & 0xFFFFFFFF


def p4c_id(kind: str, name: str) -> int:
    return (PREFIX[kind] << 24) | (jenkins_one_at_a_time(name) & 0xFFFFFF)


def object_id(ir: "Ir", n: "Node", kind: str, name: str) -> int:
    """The @id when the program pins one (p4c honours it), else p4c's default."""
    pinned = ir.annotations(n).get("id")
    return int(str(pinned[0]), 0) if pinned else p4c_id(kind, name)


class Ir:
    """The mid-end IR of p4test --toJSON; repeated nodes appear once, then by Node_ID."""

    def __init__(self, root: Node) -> None:
        self.nodes: dict[int, Node] = {}
        self._index(root)
        self.objects = {o.get("name"): o for o in root["objects"]["vec"]}

    def _index(self, n: Any) -> None:
        if isinstance(n, dict):
            if "Node_Type" in n:
                self.nodes.setdefault(n["Node_ID"], n)
            for v in n.values():
                self._index(v)
        elif isinstance(n, list):
            for v in n:
                self._index(v)

    def full(self, n: Node) -> Node:
        return n if "Node_Type" in n else self.nodes[n["Node_ID"]]

    def vec(self, n: Node | None) -> list[Node]:
        return [self.full(x) for x in self.full(n)["vec"]] if n else []

    def annotations(self, n: Node) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for a in self.vec(n.get("annotations")):
            body = a.get("body", {}).get("value")
            items = self.vec(body) if isinstance(body, dict) else []
            # Parsed bodies hold expressions (`value`), unparsed ones tokens (`text`).
            out[a["name"]] = [e["value"] if "value" in e else e.get("text") for e in items]
        return out

    def width(self, type_node: Node) -> int:
        t = self.full(type_node)
        if t["Node_Type"] == "Type_Bits":
            return int(t["size"])
        if t["Node_Type"] == "Type_Boolean":
            return 1
        raise IrError(f"unsupported type {t['Node_Type']} (expected bit<N> or bool)")

    def control(self, name: str) -> Node:
        c: Node | None = self.objects.get(name)
        if c is None or c["Node_Type"] != "P4Control":
            raise IrError(f"control {name} not found in the mid-end IR")
        return c

    def locals(self, control: Node) -> Iterator[Node]:
        yield from self.vec(control["controlLocals"])


def control_plane_name(ir: Ir, n: Node) -> str:
    names = ir.annotations(n).get("name")
    if not names:
        raise IrError(f"{n.get('name')} has no @name after the mid end")
    return str(names[0]).lstrip(".")


def property_value(ir: Ir, table: Node, prop: str) -> tuple[Node, bool] | None:
    for p in ir.vec(ir.full(table["properties"])["properties"]):
        if p["name"] == prop:
            return ir.full(p["value"]), bool(p.get("isConstant"))
    return None


def expression_value(ir: Ir, value: Node) -> Node:
    return ir.full(value["expression"]) if value["Node_Type"] == "ExpressionValue" else value


def path_name(ir: Ir, expr: Node) -> str:
    expr = ir.full(expr)
    if expr["Node_Type"] == "MethodCallExpression":
        expr = ir.full(expr["method"])
    if expr["Node_Type"] != "PathExpression":
        raise IrError(f"expected a name, got {expr['Node_Type']}")
    return str(ir.full(expr["path"])["name"])


def constant_int(ir: Ir, expr: Node) -> int:
    expr = ir.full(expr)
    if expr["Node_Type"] == "Cast":
        return constant_int(ir, expr["expr"])
    if expr["Node_Type"] != "Constant":
        raise IrError(f"expected a constant, got {expr['Node_Type']}")
    return int(expr["value"])


def encode_value(value: int, width: int) -> bytes:
    # P4Runtime canonical form: big endian, shortest length (at least one byte).
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big") if width else b""


def build(ir: Ir, arch: str) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = arch
    actions: dict[str, p4info_pb2.Action] = {}
    action_nodes: dict[str, Node] = {}
    counters: dict[str, Node] = {}
    registers: list[Node] = []
    ingress = ir.control(CONTROLS[0])

    for n in ir.locals(ingress):
        if n["Node_Type"] == "P4Action" and "hidden" not in ir.annotations(n):
            name = control_plane_name(ir, n)
            action = p4info_pb2.Action()
            action.preamble.id = object_id(ir, n, "action", name)
            action.preamble.name = name
            action.preamble.alias = name.rsplit(".", 1)[-1]
            for i, p in enumerate(ir.vec(ir.full(n["parameters"])["parameters"]), start=1):
                param = action.params.add()
                param.id = i
                param.name = str(ir.annotations(p).get("name", [p["name"]])[0])
                param.bitwidth = ir.width(p["type"])
            actions[n["name"]] = action
            action_nodes[n["name"]] = n
        elif n["Node_Type"] == "Declaration_Instance":
            extern = path_name_of_type(ir, n["type"])
            if extern in ("Counter", "DirectCounter"):
                counters[n["name"]] = n
            elif extern == "Register":
                registers.append(n)

    used_actions: set[str] = set()
    direct: dict[str, int] = {}  # counter local name -> table id
    for n in ir.locals(ingress):
        if n["Node_Type"] != "P4Table" or "hidden" in ir.annotations(n):
            continue
        name = f"{PIPE}.{control_plane_name(ir, n)}"
        table = info.tables.add()
        table.preamble.id = object_id(ir, n, "table", name)
        table.preamble.name = name
        table.preamble.alias = name.rsplit(".", 1)[-1]
        key = property_value(ir, n, "key")
        for i, k in enumerate(ir.vec(ir.full(key[0]["keyElements"])) if key else [], start=1):
            field = table.match_fields.add()
            field.id = i
            field.name = str(ir.annotations(k)["name"][0])
            field.bitwidth = ir.width(ir.full(k["expression"])["type"])
            field.match_type = MATCH_TYPE[str(ir.full(ir.full(k["matchType"])["path"])["name"])]
        acts = property_value(ir, n, "actions")
        assert acts is not None
        for el in ir.vec(ir.full(acts[0]["actionList"])):
            local = path_name(ir, el["expression"])
            used_actions.add(local)
            ref = table.action_refs.add()
            ref.id = actions[local].preamble.id
            scopes = ir.annotations(el)
            if "defaultonly" in scopes:
                ref.annotations.append("@defaultonly")
                ref.scope = p4info_pb2.ActionRef.DEFAULT_ONLY
            elif "tableonly" in scopes:
                ref.annotations.append("@tableonly")
                ref.scope = p4info_pb2.ActionRef.TABLE_ONLY
        default = property_value(ir, n, "default_action")
        if default is not None:
            call = expression_value(ir, default[0])
            local = path_name(ir, call)
            if default[1]:
                table.const_default_action_id = actions[local].preamble.id
            initial = table.initial_default_action
            initial.action_id = actions[local].preamble.id
            args = ir.vec(call.get("arguments")) if call["Node_Type"] == "MethodCallExpression" else []
            for param, arg in zip(actions[local].params, args):
                a = initial.arguments.add()
                a.param_id = param.id
                a.value = encode_value(constant_int(ir, ir.full(arg["expression"])), param.bitwidth)
        size = property_value(ir, n, "size")
        table.size = constant_int(ir, expression_value(ir, size[0])) if size else 512
        idle = property_value(ir, n, "idle_timeout")
        if idle is not None and ir.full(expression_value(ir, idle[0])).get("value") is True:
            table.idle_timeout_behavior = p4info_pb2.Table.NOTIFY_CONTROL
        cnt = property_value(ir, n, "counters")
        if cnt is not None:
            direct[path_name(ir, expression_value(ir, cnt[0]))] = table.preamble.id

    for local in sorted(used_actions, key=lambda a: actions[a].preamble.name):
        info.actions.add().CopyFrom(actions[local])

    for local, n in counters.items():
        name = f"{PIPE}.{control_plane_name(ir, n)}"
        unit = COUNTER_UNIT[enum_member(ir, ir.vec(n["arguments"])[-1]["expression"])]
        if path_name_of_type(ir, n["type"]) == "DirectCounter":
            dc = info.direct_counters.add()
            dc.preamble.id = object_id(ir, n, "direct_counter", name)
            dc.preamble.name = name
            dc.preamble.alias = name.rsplit(".", 1)[-1]
            dc.spec.unit = unit
            if local not in direct:
                raise IrError(f"direct counter {name} is attached to no table")
            dc.direct_table_id = direct[local]
            for t in info.tables:
                if t.preamble.id == direct[local]:
                    t.direct_resource_ids.append(dc.preamble.id)
        else:
            c = info.counters.add()
            c.preamble.id = object_id(ir, n, "counter", name)
            c.preamble.name = name
            c.preamble.alias = name.rsplit(".", 1)[-1]
            c.spec.unit = unit
            c.size = constant_int(ir, ir.full(ir.vec(n["arguments"])[0]["expression"]))

    for n in registers:
        name = f"{PIPE}.{control_plane_name(ir, n)}"
        r = info.registers.add()
        r.preamble.id = object_id(ir, n, "register", name)
        r.preamble.name = name
        r.preamble.alias = name.rsplit(".", 1)[-1]
        r.type_spec.bitstring.bit.bitwidth = ir.width(ir.vec(ir.full(n["type"])["arguments"])[0])
        r.size = constant_int(ir, ir.full(ir.vec(n["arguments"])[0]["expression"]))

    add_digests(ir, info)
    add_controller_headers(ir, info)
    return info


def path_name_of_type(ir: Ir, type_node: Node) -> str:
    t = ir.full(type_node)
    if t["Node_Type"] in ("Type_Specialized", "Type_SpecializedCanonical"):
        t = ir.full(t["baseType"])
    if t["Node_Type"] == "Type_Name":
        return str(ir.full(t["path"])["name"])
    return str(t.get("name", ""))


def enum_member(ir: Ir, expr: Node) -> str:
    expr = ir.full(expr)
    if expr["Node_Type"] != "Member":
        raise IrError(f"expected an enum member, got {expr['Node_Type']}")
    return str(expr["member"])


def add_digests(ir: Ir, info: p4info_pb2.P4Info) -> None:
    for n in ir.locals(ir.control(CONTROLS[1])):
        if n["Node_Type"] != "Declaration_Instance" or path_name_of_type(ir, n["type"]) != "Digest":
            continue
        name = f"{PIPE}.{control_plane_name(ir, n)}"
        struct = path_name_of_type(ir, ir.vec(ir.full(n["type"])["arguments"])[0])
        d = info.digests.add()
        d.preamble.id = object_id(ir, n, "digest", name)
        d.preamble.name = name
        d.preamble.alias = name.rsplit(".", 1)[-1]
        d.type_spec.struct.name = struct
        spec = info.type_info.structs[struct]
        for f in ir.vec(ir.full(ir.objects[struct]["fields"])):
            member = spec.members.add()
            member.name = f["name"]
            member.type_spec.bitstring.bit.bitwidth = ir.width(f["type"])


def add_controller_headers(ir: Ir, info: p4info_pb2.P4Info) -> None:
    for o in ir.objects.values():
        if o is None or o["Node_Type"] != "Type_Header":
            continue
        notes = ir.annotations(o)
        if "controller_header" not in notes:
            continue
        name = str(notes["controller_header"][0])
        m = info.controller_packet_metadata.add()
        m.preamble.id = object_id(ir, o, "ctrl_hdr", name)
        m.preamble.name = name
        m.preamble.alias = name
        m.preamble.annotations.append(f'@controller_header("{name}")')
        for i, f in enumerate(ir.vec(ir.full(o["fields"])), start=1):
            md = m.metadata.add()
            md.id = i
            md.name = f["name"]
            md.bitwidth = ir.width(f["type"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p4test", required=True, help="path of p4c's p4test")
    ap.add_argument("--include", required=True, help="directory holding tna.p4 / t2na.p4")
    ap.add_argument("--target", choices=("1", "2"), default="1", help="__TARGET_TOFINO__ (default 1)")
    ap.add_argument("out", type=Path, help="P4Info text file to write")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ir_path = Path(tmp) / "ir.json"
        run = subprocess.run(
            [args.p4test, f"-D__TARGET_TOFINO__={args.target}", "-I", args.include,
             "--toJSON", str(ir_path), str(PROGRAM)],
            capture_output=True, text=True, check=False,
        )
        if run.returncode != 0 or not ir_path.is_file():
            sys.stderr.write(run.stderr)
            print(f"tofino_p4info: p4test failed on {PROGRAM} (exit {run.returncode})", file=sys.stderr)
            return 1
        ir = Ir(json.loads(ir_path.read_text()))
    try:
        info = build(ir, "tna" if args.target == "1" else "t2na")
    except (IrError, KeyError) as exc:
        print(f"tofino_p4info: cannot read the program's control-plane objects: {exc}", file=sys.stderr)
        return 1
    header = (
        "# Tofino-shaped P4Info of p4src/tna/supergw.p4, generated by p4src/tna/tofino_p4info.py\n"
        "# (bf-p4c's naming before --p4runtime-force-std-externs; p4c default IDs). Do not edit.\n"
    )
    args.out.write_text(header + text_format.MessageToString(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
