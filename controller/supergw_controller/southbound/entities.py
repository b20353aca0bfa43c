"""Builders for every P4Runtime entity the controller writes, named from the P4Info.

All names come from `supergw_proto.p4constants` (generated from the P4Info); finsy
resolves them to IDs through the switch's P4Schema, so no ID appears here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from finsy import (
    P4DigestEntry,
    P4DirectCounterEntry,
    P4MulticastGroupEntry,
    P4PacketOut,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)
from finsy import p4values
from finsy.p4schema import P4Schema
from finsy.proto import p4r

from supergw_proto import p4constants as pc


class Op(IntEnum):
    """P4Runtime Update.Type values."""

    INSERT = 1
    MODIFY = 2
    DELETE = 3


@dataclass(frozen=True)
class Update:
    op: Op
    entity: Any  # a finsy writable entity (table entry, multicast group, digest entry)

    def describe(self) -> str:
        return f"{self.op.name} {self.entity!r}"


def mac_int(mac: str | int) -> int:
    return mac if isinstance(mac, int) else int(mac.replace(":", "").replace("-", ""), 16)


def mac_str(mac: int) -> str:
    raw = f"{mac:012x}"
    return ":".join(raw[i : i + 2] for i in range(0, 12, 2))


def ip_int(ip: str | int | ipaddress.IPv4Address) -> int:
    return ip if isinstance(ip, int) else int(ipaddress.IPv4Address(ip))


def ip_str(ip: int) -> str:
    return str(ipaddress.IPv4Address(ip))


def port_role(port: int, role: int) -> P4TableEntry:
    return P4TableEntry(
        pc.TABLE_PORT_ROLES,
        match=P4TableMatch(port=port),
        action=P4TableAction(pc.ACTION_SET_PORT_ROLE, role=int(role)),
    )


def settings(
    gateway_ip: str | int, vmac_base: str | int, bucket_mask: int, bucket_hash: pc.BucketHash
) -> P4TableEntry:
    return P4TableEntry(
        pc.TABLE_SETTINGS,
        is_default_action=True,
        action=P4TableAction(
            pc.ACTION_SET_DISPATCH_CONFIG,
            gateway_ip=ip_int(gateway_ip),
            vmac_base=mac_int(vmac_base),
            bucket_mask=bucket_mask,
            bucket_hash=int(bucket_hash),
        ),
    )


def bucket(index: int, port: int, gateway_mac: str | int) -> P4TableEntry:
    return P4TableEntry(
        pc.TABLE_BUCKETS,
        match=P4TableMatch(bucket=index),
        action=P4TableAction(pc.ACTION_SET_GATEWAY, port=port, gateway_mac=mac_int(gateway_mac)),
    )


class BucketEncoder:
    """Encodes `buckets` entry updates (entries as built by `bucket()`) to `p4r.Update`, fast.

    finsy's generic encoder spends ~25 us per entry (name lookups, value parsing, nested
    message copies) and a failover rewrites thousands. The table and match field are
    looked up BY NAME in `schema` once here; each gateway's update is encoded once by
    finsy itself (so the wire format is finsy's) and kept as a template, and per bucket
    only the template is copied and its match value set. Anything else is left to finsy
    (`update` returns None).
    """

    def __init__(self, schema: P4Schema) -> None:
        field = schema.tables[pc.TABLE_BUCKETS].match_fields[pc.MATCH_BUCKETS_BUCKET]
        self.schema = schema
        self._bitwidth = field.bitwidth
        self._templates: dict[tuple[Any, Any], p4r.Update] = {}
        self._keys: dict[int, bytes] = {}

    def update(self, op: Op, e: Any) -> p4r.Update | None:
        if not isinstance(e, P4TableEntry) or e.table_id != pc.TABLE_BUCKETS:
            return None
        a, match = e.action, e.match
        if (
            not isinstance(a, P4TableAction)
            or a.name != pc.ACTION_SET_GATEWAY
            or match is None
            or len(match) != 1
            or e.priority
            or e.is_default_action
            or e.metadata
            or e.idle_timeout_ns
        ):
            return None
        index = match.get(pc.MATCH_BUCKETS_BUCKET)
        args = a.args or {}
        if not isinstance(index, int) or len(args) != 2:
            return None
        port, mac = args.get(pc.PARAM_SET_GATEWAY_PORT), args.get(pc.PARAM_SET_GATEWAY_GATEWAY_MAC)
        template = self._templates.get((port, mac))
        if template is None:
            template = self._templates[(port, mac)] = p4r.Update(entity=e.encode(self.schema))
        key = self._keys.get(index)
        if key is None:
            key = self._keys[index] = p4values.encode_exact(index, self._bitwidth)
        u = p4r.Update()
        u.CopyFrom(template)
        u.type = int(op)  # type: ignore[assignment]
        u.entity.table_entry.match[0].exact.value = key
        return u


def bucket_key(index: int) -> P4TableEntry:
    return P4TableEntry(pc.TABLE_BUCKETS, match=P4TableMatch(bucket=index))


def mac_entry(mac: str | int, port: int) -> P4TableEntry:
    """mac -> host port. Hosts are learned on host ports only, so the entry's `role` (which
    lets a gateway's frame out only when it is HOST) is always HOST."""
    return P4TableEntry(
        pc.TABLE_MAC_TABLE,
        match=P4TableMatch(dst_mac=mac_int(mac)),
        action=P4TableAction(pc.ACTION_SET_OUTPUT_PORT, port=port, role=int(pc.PortRole.HOST)),
    )


def mac_key(mac: str | int) -> P4TableEntry:
    return P4TableEntry(pc.TABLE_MAC_TABLE, match=P4TableMatch(dst_mac=mac_int(mac)))


def host_ip(ip: str | int, mac: str | int) -> P4TableEntry:
    return P4TableEntry(
        pc.TABLE_HOST_IPS,
        match=P4TableMatch(target_ip=ip_int(ip)),
        action=P4TableAction(pc.ACTION_REPLY_WITH_HOST_MAC, host_mac=mac_int(mac)),
    )


def host_ip_key(ip: str | int) -> P4TableEntry:
    return P4TableEntry(pc.TABLE_HOST_IPS, match=P4TableMatch(target_ip=ip_int(ip)))


def learned(mac: str | int, port: int, idle_timeout_ns: int) -> P4TableEntry:
    return P4TableEntry(
        pc.TABLE_LEARNED_SOURCES,
        match=P4TableMatch(src_mac=mac_int(mac), port=port),
        action=P4TableAction(pc.ACTION_MARK_KNOWN),
        idle_timeout_ns=idle_timeout_ns,
    )


def learned_key(mac: str | int, port: int) -> P4TableEntry:
    return P4TableEntry(pc.TABLE_LEARNED_SOURCES, match=P4TableMatch(src_mac=mac_int(mac), port=port))


def flood_group(ports: Iterable[int]) -> P4MulticastGroupEntry:
    return P4MulticastGroupEntry(pc.HOST_FLOOD_GROUP, replicas=tuple((p, 0) for p in sorted(ports)))


def learn_digest(ack_timeout_ns: int = 500_000_000) -> P4DigestEntry:
    # One digest per message and no batching delay: learning latency matters more than
    # message count at LAN host counts.
    return P4DigestEntry(pc.DIGEST_LEARN_DIGEST, max_list_size=1, max_timeout_ns=0, ack_timeout_ns=ack_timeout_ns)


def bucket_counters() -> P4DirectCounterEntry:
    """Wildcard read of the direct counter of every `buckets` entry."""
    return P4DirectCounterEntry(pc.DIRECT_COUNTER_BUCKET_COUNTER, table_entry=P4TableEntry(pc.TABLE_BUCKETS))


def packet_out(frame: bytes, egress_port: int) -> P4PacketOut:
    return P4PacketOut(frame, **{pc.CTRL_HDR_PACKET_OUT_EGRESS_PORT: egress_port})


# -- comparing what the switch holds with what we want


def table_id(schema: P4Schema, name: str) -> int:
    return schema.tables[name].id


def entry_key(schema: P4Schema, e: P4TableEntry) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Identity of a table entry: table id and its match fields (values as ints)."""
    match = dict(e.match or {})
    return table_id(schema, e.table_id), tuple(sorted((k, _as_int(v)) for k, v in match.items()))


def action_sig(schema: P4Schema, e: P4TableEntry) -> tuple[int, tuple[tuple[str, int], ...]] | None:
    """Action id and argument values as ints, for deciding whether a MODIFY is needed."""
    a = e.action
    if a is None:
        return None
    assert isinstance(a, P4TableAction)
    return schema.actions[a.name].id, tuple(sorted((k, _as_int(v)) for k, v in a.args.items()))


def _as_int(v: Any) -> int:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        if v.count(":") == 5:
            return mac_int(v)
        if v.count(".") == 3:
            return ip_int(v)
        return int(v, 0)
    if isinstance(v, ipaddress.IPv4Address):
        return int(v)
    raise TypeError(f"cannot compare match/param value {v!r}")
