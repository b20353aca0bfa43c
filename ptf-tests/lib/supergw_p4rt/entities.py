"""P4Runtime entities built from P4Info names, with values encoded canonically and
checked against the P4Info bit widths (so a typo or an oversized value fails here, in
the client, with its name, not as an opaque server error)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from finsy.proto import p4i, p4r

from .errors import P4InfoLookupError
from .p4info import P4InfoIndex
from .values import Value, encode

Message = (
    p4r.TableEntry
    | p4r.CounterEntry
    | p4r.DirectCounterEntry
    | p4r.PacketReplicationEngineEntry
    | p4r.DigestEntry
    | p4r.RegisterEntry
)

_ENTITY_FIELD = {
    p4r.TableEntry: "table_entry",
    p4r.CounterEntry: "counter_entry",
    p4r.DirectCounterEntry: "direct_counter_entry",
    p4r.PacketReplicationEngineEntry: "packet_replication_engine_entry",
    p4r.DigestEntry: "digest_entry",
    p4r.RegisterEntry: "register_entry",
}

INSERT = p4r.Update.INSERT
MODIFY = p4r.Update.MODIFY
DELETE = p4r.Update.DELETE


def entity(msg: Message) -> p4r.Entity:
    """Wrap a table/counter/PRE/digest/register message into an Entity."""
    ent = p4r.Entity()
    getattr(ent, _ENTITY_FIELD[type(msg)]).CopyFrom(msg)
    return ent


def update(kind: p4r.Update.Type.ValueType, msg: Message) -> p4r.Update:
    return p4r.Update(type=kind, entity=entity(msg))


@dataclass(frozen=True)
class CounterValue:
    packets: int
    bytes: int

    def __sub__(self, other: CounterValue) -> CounterValue:
        return CounterValue(self.packets - other.packets, self.bytes - other.bytes)


def pipeline_config(info: p4i.P4Info, device_config: bytes = b"") -> p4r.ForwardingPipelineConfig:
    """The config to push, with a cookie derived from its content, so a client can tell
    from GetForwardingPipelineConfig(COOKIE_ONLY) whether the switch already runs it."""
    digest = hashlib.sha256(info.SerializeToString(deterministic=True) + device_config).digest()
    config = p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=device_config)
    config.cookie.cookie = int.from_bytes(digest[:8], "big")
    return config


class EntityBuilder:
    """Entities from P4Info names (full, or a unique dotted suffix)."""

    def __init__(self, info: p4i.P4Info | P4InfoIndex) -> None:
        self.names = info if isinstance(info, P4InfoIndex) else P4InfoIndex(info)

    def table_entry(
        self,
        table: str,
        match: Mapping[str, Value] | None = None,
        action: str | None = None,
        params: Mapping[str, Value] | None = None,
        *,
        default: bool = False,
        priority: int = 0,
    ) -> p4r.TableEntry:
        """An exact-match entry (or, with default=True, the default action) of `table`;
        without `action` only the key (for DELETE, reads and negative tests)."""
        t = self.names.table(table)
        te = p4r.TableEntry(table_id=t.preamble.id, is_default_action=default, priority=priority)
        for name, value in (match or {}).items():
            mf = self.names.match_field(table, name)
            te.match.add(field_id=mf.id).exact.value = encode(value, mf.bitwidth)
        if action is not None:
            act = self.action(action, params or {})
            if act.action_id not in {ref.id for ref in t.action_refs}:
                raise P4InfoLookupError(f"action {action!r} is not an action of table {table!r}")
            te.action.action.CopyFrom(act)
        return te

    def action(self, name: str, params: Mapping[str, Value]) -> p4r.Action:
        act = p4r.Action(action_id=self.names.id("actions", name))
        for pname, value in params.items():
            p = self.names.param(name, pname)
            act.params.add(param_id=p.id, value=encode(value, p.bitwidth))
        return act

    def multicast_group(
        self, group_id: int, ports: Sequence[int], *, legacy_port_field: bool = False
    ) -> p4r.PacketReplicationEngineEntry:
        """A multicast group, one replica (instance 0) per port. P4Runtime 1.4 names the
        replica's port with the bytes field `port`; older servers (PI as shipped with BMv2)
        only know the deprecated uint32 `egress_port`."""
        pre = p4r.PacketReplicationEngineEntry()
        pre.multicast_group_entry.multicast_group_id = group_id
        for port in ports:
            replica = pre.multicast_group_entry.replicas.add(instance=0)
            if legacy_port_field:
                replica.egress_port = port
            else:
                replica.port = encode(port, 32)
        return pre

    def digest_entry(self, name: str, max_list_size: int = 1, ack_timeout_ns: int = 1_000_000_000) -> p4r.DigestEntry:
        de = p4r.DigestEntry(digest_id=self.names.id("digests", name))
        de.config.max_timeout_ns = 0
        de.config.max_list_size = max_list_size
        de.config.ack_timeout_ns = ack_timeout_ns
        return de

    def counter_entry(self, counter: str, index: int) -> p4r.CounterEntry:
        ce = p4r.CounterEntry(counter_id=self.names.id("counters", counter))
        ce.index.index = index
        return ce

    def packet_metadata(self, header: str, values: Mapping[str, Value]) -> list[p4r.PacketMetadata]:
        """Metadata of a packet_out (or expected packet_in) by field name."""
        meta = self.names.metadata(header)
        out = []
        for name, value in values.items():
            if name not in meta:
                raise P4InfoLookupError(f"controller header {header!r} has no field {name!r}")
            out.append(p4r.PacketMetadata(metadata_id=meta[name].id, value=encode(value, meta[name].bitwidth)))
        return out
