"""The one place where a target's P4Info names meet the controller's names.

The controller looks every P4 object up by the names in `p4constants` (generated from
the v1model P4Info); IDs are whatever the target's P4Info says. Targets agree on the
names except for one thing: bf-p4c (Tofino) names tables, counters, direct counters and
digests after the pipeline instance too ("pipe.SupergwIngress.bucket_dispatch.buckets")
unless the program is compiled with `--p4runtime-force-std-externs`, which strips it.
`canonical_p4info` renames such objects to the controller's names (IDs untouched) and
checks that every object, key, parameter and field the controller uses is there, so a
wrong P4Info fails at start-up with the full list instead of at the first write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from finsy.proto import p4i

from supergw_proto import p4constants as pc
from supergw_controller.config import ConfigError

# p4constants prefix of an object kind -> P4Info repeated field holding that kind.
_KINDS = {
    "TABLE_": "tables",
    "ACTION_": "actions",
    "COUNTER_": "counters",
    "DIRECT_COUNTER_": "direct_counters",
    "DIGEST_": "digests",
    "CTRL_HDR_": "controller_packet_metadata",
}
# p4constants prefix of a member kind -> the object kind it belongs to.
_MEMBERS = {"MATCH_": "TABLE_", "PARAM_": "ACTION_", "DIGEST_": "DIGEST_", "CTRL_HDR_": "CTRL_HDR_"}


class P4InfoMismatch(ConfigError):
    """The P4Info lacks objects or members the controller uses."""


@dataclass(frozen=True)
class Required:
    """What the controller looks up: P4Info field -> object name -> member names."""

    objects: dict[str, dict[str, set[str]]] = field(default_factory=dict)


def required_names() -> Required:
    """Every name the controller uses, read from p4constants' naming scheme
    (TABLE_<T>, MATCH_<T>_<F>, ACTION_<A>, PARAM_<A>_<P>, DIGEST_<D>[_<F>], CTRL_HDR_<H>[_<F>])."""
    consts = {k: v for k, v in vars(pc).items() if isinstance(v, str) and k.isupper()}
    keys: dict[str, dict[str, str]] = {kind: {} for kind in _KINDS}  # kind -> suffix -> name
    for kind in _KINDS:
        for k, v in consts.items():
            if k.startswith(kind):
                keys[kind][k[len(kind) :]] = v
    # DIGEST_<D>_<F> and CTRL_HDR_<H>_<F> share their object's prefix: a suffix that
    # extends another object's suffix is a member of that object.
    for kind in ("DIGEST_", "CTRL_HDR_"):
        suffixes = sorted(keys[kind], key=len)
        for s in suffixes:
            if any(s.startswith(o + "_") for o in suffixes if o != s):
                del keys[kind][s]
    req = Required({_KINDS[kind]: {name: set() for name in names.values()} for kind, names in keys.items()})
    for mprefix, okind in _MEMBERS.items():
        owners = sorted(keys[okind].items(), key=lambda kv: len(kv[0]), reverse=True)
        for k, v in consts.items():
            if not k.startswith(mprefix):
                continue
            rest = k[len(mprefix) :]
            owner = next((name for suffix, name in owners if rest.startswith(suffix + "_")), None)
            if owner is not None:
                req.objects[_KINDS[okind]][owner].add(v)
    return req


def canonical_p4info(p4info: p4i.P4Info, required: Required | None = None) -> p4i.P4Info:
    """`p4info` with pipe-prefixed names renamed to the controller's (a copy; the same
    object when nothing changes). Raises P4InfoMismatch naming everything missing."""
    req = required or required_names()
    out = p4i.P4Info()
    out.CopyFrom(p4info)
    renamed = False
    ambiguous: list[str] = []
    for kind, wanted in req.objects.items():
        objs = list(getattr(out, kind))
        names = {o.preamble.name for o in objs}
        for w in sorted(wanted):
            if w in names:
                continue
            # "<pipe>.<name>": exactly one leading component more than the wanted name.
            cands = [
                o
                for o in objs
                if o.preamble.name.endswith("." + w) and o.preamble.name.count(".") == w.count(".") + 1
            ]
            if len(cands) == 1:
                cands[0].preamble.name = w
                renamed = True
            elif cands:
                ambiguous.append(f"{w} is ambiguous ({', '.join(sorted(o.preamble.name for o in cands))})")
    missing = ambiguous + _missing(out, req)
    if missing:
        hint = ""
        if len(p4info.externs):
            hint = (
                " — this P4Info describes counters/digests as Tofino-specific externs;"
                " compile with bf-p4c --p4runtime-force-std-externs (docs/deploy-tofino.md)"
            )
        raise P4InfoMismatch(
            f"P4Info (arch {p4info.pkg_info.arch or '?'}) lacks what the controller uses: "
            + "; ".join(missing)
            + hint
        )
    return out if renamed else p4info


def _missing(p4info: p4i.P4Info, req: Required) -> list[str]:
    out: list[str] = []
    for kind, wanted in req.objects.items():
        have = {o.preamble.name: o for o in getattr(p4info, kind)}
        for name, members in sorted(wanted.items()):
            obj = have.get(name)
            if obj is None:
                out.append(f"{kind[:-1] if kind.endswith('s') else kind} {name}")
                continue
            lacking = sorted(members - _members(p4info, kind, obj))
            if lacking:
                out.append(f"{name}: no {', '.join(lacking)}")
    return out


def _members(p4info: p4i.P4Info, kind: str, obj: object) -> set[str]:
    if kind == "tables":
        return {f.name for f in obj.match_fields}  # type: ignore[attr-defined]
    if kind == "actions":
        return {p.name for p in obj.params}  # type: ignore[attr-defined]
    if kind == "controller_packet_metadata":
        return {m.name for m in obj.metadata}  # type: ignore[attr-defined]
    if kind == "digests":
        struct = obj.type_spec.struct.name  # type: ignore[attr-defined]
        structs = p4info.type_info.structs
        return {m.name for m in structs[struct].members} if struct in structs else set()
    return set()
