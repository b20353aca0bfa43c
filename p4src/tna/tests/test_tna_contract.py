"""The TNA program offers the controller exactly the v1model program's P4Runtime API.

Compares the committed Tofino-shaped P4Info (generated from p4src/tna/supergw.p4 by
tofino_p4info.py, kept current by `make p4`) with the committed v1model P4Info, by name:
tables, keys, actions, parameters, scopes, default actions, sizes, idle timeout,
counters, the direct counter, registers, the digest and the controller headers. Only IDs and the
Tofino pipe prefix may differ; anything else is a drift between the two programs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from finsy.proto import p4i
from google.protobuf import text_format

P4SRC = Path(__file__).resolve().parents[2]
TOFINO = P4SRC / "tna" / "supergw.tofino-shape.p4info.txtpb"
V1MODEL = P4SRC / "v1model" / "supergw.p4info.txtpb"


def _load(path: Path) -> p4i.P4Info:
    info = p4i.P4Info()
    text_format.Parse(path.read_text(), info)
    return info


def _name(n: str) -> str:
    return n.removeprefix("pipe.")


def _api(info: p4i.P4Info) -> dict[str, Any]:
    """Everything the controller can see, keyed and cross-referenced by name."""
    actions = {a.preamble.id: a for a in info.actions}
    tables = {t.preamble.id: t for t in info.tables}

    def action(aid: int) -> str:
        return str(actions[aid].preamble.name)

    out: dict[str, Any] = {"tables": {}, "actions": {}, "counters": {}, "direct_counters": {}, "registers": {}, "digests": {}, "headers": {}}
    for t in info.tables:
        out["tables"][_name(t.preamble.name)] = {
            "keys": [(f.name, f.bitwidth, f.match_type) for f in t.match_fields],
            "actions": sorted((action(r.id), r.scope) for r in t.action_refs),
            "const_default": action(t.const_default_action_id) if t.const_default_action_id else None,
            "initial_default": (
                action(t.initial_default_action.action_id),
                [(a.param_id, a.value) for a in t.initial_default_action.arguments],
            ),
            "size": t.size,
            "idle": t.idle_timeout_behavior,
            "direct": sorted(_name(d.preamble.name) for d in info.direct_counters if d.preamble.id in t.direct_resource_ids),
        }
    for a in info.actions:
        out["actions"][a.preamble.name] = [(p.name, p.bitwidth) for p in a.params]
    for c in info.counters:
        out["counters"][_name(c.preamble.name)] = (c.spec.unit, c.size)
    for d in info.direct_counters:
        out["direct_counters"][_name(d.preamble.name)] = (d.spec.unit, _name(tables[d.direct_table_id].preamble.name))
    for r in info.registers:
        out["registers"][_name(r.preamble.name)] = (r.type_spec.bitstring.bit.bitwidth, r.size)
    for g in info.digests:
        struct = g.type_spec.struct.name
        members = [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in info.type_info.structs[struct].members]
        out["digests"][_name(g.preamble.name)] = (struct, members)
    for h in info.controller_packet_metadata:
        out["headers"][h.preamble.name] = (h.preamble.id, [(m.id, m.name, m.bitwidth) for m in h.metadata])
    return out


def test_tna_and_v1model_offer_the_same_api() -> None:
    tna, v1 = _api(_load(TOFINO)), _api(_load(V1MODEL))
    assert tna["tables"] and tna["actions"] and tna["digests"]
    for section in v1:
        assert tna[section] == v1[section], section


def test_only_ids_and_the_pipe_prefix_differ() -> None:
    tna, v1 = _load(TOFINO), _load(V1MODEL)
    v1_names = {o.preamble.name: o.preamble.id for k in ("tables", "actions", "counters", "direct_counters", "registers", "digests") for o in getattr(v1, k)}
    tna_names = {_name(o.preamble.name): o.preamble.id for k in ("tables", "actions", "counters", "direct_counters", "registers", "digests") for o in getattr(tna, k)}
    assert set(tna_names) == set(v1_names)
    assert all(tna_names[n] != v1_names[n] for n in v1_names), "TNA pins no IDs: every ID is p4c's own"
