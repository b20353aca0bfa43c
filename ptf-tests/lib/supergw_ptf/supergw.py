"""supergw helpers on top of the generic P4Runtime base test: port roles, dispatch
settings, buckets, host IPs, L2, the flood group, drop/bucket counters."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from finsy import P4MulticastGroupEntry, P4RuntimeVersion, P4TableAction, P4TableEntry, P4TableMatch
from ptf import testutils
from ptf.mask import Mask
from supergw_proto import p4constants as c
from supergw_proto.addresses import ipv4_to_int, mac_to_int
from supergw_proto.bucket import bucket_of, vmac
from supergw_proto.p4constants import BucketHash

from . import packets as pk
from .base_test import CounterValue, P4RuntimeTest
from .params import Target
from .portmap import DEFAULT_PORTS_FILE, PortMap, load

LOG = logging.getLogger("supergw_ptf")

# finsy writes a multicast replica's port as the deprecated uint32 `egress_port` when the
# schema's P4Runtime version is below 1.5, and as the bytes field `port` from 1.5 on. The
# eBPF target is tested with `port` (P4Runtime 1.4 added it); PI as shipped with BMv2 only
# knows `egress_port`.
REPLICA_PORT_FIELD: dict[Target, P4RuntimeVersion] = {
    "ebpf": P4RuntimeVersion(1, 5, 0, ""),
    "bmv2": P4RuntimeVersion(1, 3, 0, ""),
}

# P4 object names (full names, as finsy resolves them).
PORT_ROLES = c.TABLE_PORT_ROLES
SET_PORT_ROLE = c.ACTION_SET_PORT_ROLE
SETTINGS = c.TABLE_SETTINGS
SET_DISPATCH_CONFIG = c.ACTION_SET_DISPATCH_CONFIG
MARK_UNCONFIGURED = c.ACTION_MARK_UNCONFIGURED
HOST_IPS = c.TABLE_HOST_IPS
REPLY_WITH_HOST_MAC = c.ACTION_REPLY_WITH_HOST_MAC
PUNT_ARP_MISS = c.ACTION_PUNT_ARP_MISS
BUCKETS = c.TABLE_BUCKETS
SET_GATEWAY = c.ACTION_SET_GATEWAY
DROP_UNASSIGNED = c.ACTION_DROP_UNASSIGNED
MAC_TABLE = c.TABLE_MAC_TABLE
SET_OUTPUT_PORT = c.ACTION_SET_OUTPUT_PORT
FLOOD = c.ACTION_FLOOD
LEARNED_SOURCES = c.TABLE_LEARNED_SOURCES
MARK_KNOWN = c.ACTION_MARK_KNOWN
LEARN = c.ACTION_LEARN
DROP_COUNTER = c.COUNTER_DROP_COUNTER
GATEWAY_BACKUPS = c.TABLE_GATEWAY_BACKUPS
SET_BACKUP = c.ACTION_SET_BACKUP
LIVENESS_FRAMES = c.COUNTER_LIVENESS_FRAMES
FAILOVER_FRAMES = c.COUNTER_FAILOVER_FRAMES
LEARN_DIGEST = c.DIGEST_LEARN_DIGEST

ETHERTYPE_PACKET_OUT = c.ETHERTYPE_PACKET_OUT
PortRole = c.PortRole
DropReason = c.DropReason
PuntReason = c.PuntReason

VECTORS_DIR = Path(__file__).resolve().parents[3] / "p4src" / "vectors"
VECTORS_FILE = VECTORS_DIR / "bucket-crc32.json"
VECTOR_FILES = {BucketHash.CRC32: VECTORS_FILE, BucketHash.IDENTITY: VECTORS_DIR / "bucket-identity.json"}


@dataclass(frozen=True)
class BucketVector:
    """One MAC with the buckets real BMv2 computed for it."""

    mac: str
    bucket_k64: int
    bucket_k256: int
    bucket_k4096: int

    def bucket(self, k: int) -> int:
        return {64: self.bucket_k64, 256: self.bucket_k256, 4096: self.bucket_k4096}[k]


def bucket_vectors(bucket_hash: BucketHash = BucketHash.CRC32) -> list[BucketVector]:
    data = json.loads(VECTOR_FILES[bucket_hash].read_text(encoding="utf-8"))
    return [BucketVector(v["mac"], v["bucket_k64"], v["bucket_k256"], v["bucket_k4096"]) for v in data["vectors"]]


@dataclass(frozen=True)
class Dispatch:
    """The settings the tests configure: IP_G, vmac_base, K and the bucket hash."""

    gateway_ip: str = "10.0.0.1"
    vmac_base: str = "02:5e:00:00:00:00"
    k: int = 256
    hash: BucketHash = BucketHash.CRC32

    @property
    def mask(self) -> int:
        return self.k - 1

    def bucket(self, mac: str) -> int:
        return bucket_of(mac, self.k, self.hash)

    def vmac(self, bucket: int) -> str:
        return vmac(self.vmac_base, bucket)

    def vmac_of(self, mac: str) -> str:
        return self.vmac(self.bucket(mac))


def gateway_mac(port: int) -> str:
    """The real MAC of the gateway attached to `port` (test fixture)."""
    return f"00:00:0a:00:00:{port:02x}"


class SupergwTest(P4RuntimeTest):
    """Base of every supergw PTF test; each test starts from an empty, unconfigured switch."""

    ports: PortMap
    dispatch: Dispatch

    def setUp(self) -> None:
        super().setUp()
        self.ports = load(self.params.ports_file or DEFAULT_PORTS_FILE)
        self.dispatch = Dispatch()
        self.schema.set_p4runtime_version(REPLICA_PORT_FIELD[self.target])
        stale = self.clear_tables()
        if stale:
            LOG.warning("%s: deleted %d entries an earlier test left behind", self.id(), stale)
        self.drain_stream()

    @property
    def target(self) -> Target:
        return self.params.target

    # ---- entries: finsy's, by the generated names

    def port_role_entry(self, port: int, role: int | None = None) -> P4TableEntry:
        match = P4TableMatch({c.MATCH_PORT_ROLES_PORT: port})
        if role is None:
            return P4TableEntry(PORT_ROLES, match=match)
        return P4TableEntry(PORT_ROLES, match=match, action=P4TableAction(SET_PORT_ROLE, **{c.PARAM_SET_PORT_ROLE_ROLE: role}))

    def bucket_entry(self, bucket: int, port: int | None = None, mac: str | None = None) -> P4TableEntry:
        """A buckets entry; with `port`, set_gateway to that port and `mac` (default: the
        fixture MAC of the gateway on that port)."""
        match = P4TableMatch({c.MATCH_BUCKETS_BUCKET: bucket})
        if port is None:
            return P4TableEntry(BUCKETS, match=match)
        params = {c.PARAM_SET_GATEWAY_PORT: port, c.PARAM_SET_GATEWAY_GATEWAY_MAC: mac or gateway_mac(port)}
        return P4TableEntry(BUCKETS, match=match, action=P4TableAction(SET_GATEWAY, **params))

    def host_ip_entry(self, ip: str, mac: str | None = None) -> P4TableEntry:
        match = P4TableMatch({c.MATCH_HOST_IPS_TARGET_IP: ip})
        if mac is None:
            return P4TableEntry(HOST_IPS, match=match)
        action = P4TableAction(REPLY_WITH_HOST_MAC, **{c.PARAM_REPLY_WITH_HOST_MAC_HOST_MAC: mac})
        return P4TableEntry(HOST_IPS, match=match, action=action)

    def mac_entry(self, mac: str, port: int | None = None, role: int | None = None) -> P4TableEntry:
        """set_output_port(port, role); role defaults to the port map's role of port, as the
        controller writes it (UNKNOWN for a port without a port_roles entry)."""
        match = P4TableMatch({c.MATCH_MAC_TABLE_DST_MAC: mac})
        if port is None:
            return P4TableEntry(MAC_TABLE, match=match)
        role = int(self.port_role(port)) if role is None else role
        params = {c.PARAM_SET_OUTPUT_PORT_PORT: port, c.PARAM_SET_OUTPUT_PORT_ROLE: role}
        return P4TableEntry(MAC_TABLE, match=match, action=P4TableAction(SET_OUTPUT_PORT, **params))

    def backup_entry(self, gateway: int, backup: int | None = None, timeout_us: int = 0) -> P4TableEntry:
        """gateway_backups for the gateway on port `gateway`; with `backup`, set_backup to that
        port and its fixture MAC, stale after `timeout_us` microseconds of silence."""
        match = P4TableMatch({c.MATCH_GATEWAY_BACKUPS_PORT: gateway})
        if backup is None:
            return P4TableEntry(GATEWAY_BACKUPS, match=match)
        params = {
            c.PARAM_SET_BACKUP_PORT: backup,
            c.PARAM_SET_BACKUP_GATEWAY_MAC: gateway_mac(backup),
            c.PARAM_SET_BACKUP_TIMEOUT_US: timeout_us,
        }
        return P4TableEntry(GATEWAY_BACKUPS, match=match, action=P4TableAction(SET_BACKUP, **params))

    def port_role(self, port: int) -> c.PortRole:
        """The port map's role of port; UNKNOWN for a port not in the map."""
        roles = {p.port: p.role for p in self.ports.ports}
        return c.PortRole[roles.get(port, "UNKNOWN")]

    def learned_entry(self, mac: str, port: int | None) -> P4TableEntry:
        """mark_known for (mac, port); without `port` the entry lacks a key field (an invalid
        entry, for the negative tests)."""
        match = P4TableMatch({c.MATCH_LEARNED_SOURCES_SRC_MAC: mac})
        if port is not None:
            match[c.MATCH_LEARNED_SOURCES_PORT] = port
        return P4TableEntry(LEARNED_SOURCES, match=match, action=P4TableAction(MARK_KNOWN))

    # ---- configuration

    def port_role_entries(self) -> list[P4TableEntry]:
        """port_roles for every HOST/GATEWAY port of the port map (UNKNOWN ports get none)."""
        return [self.port_role_entry(p.port, int(c.PortRole[p.role])) for p in self.ports.ports if p.role != "UNKNOWN"]

    def set_port_roles(self) -> None:
        self.insert(*self.port_role_entries())

    def configure_dispatch(self, dispatch: Dispatch | None = None) -> None:
        self.dispatch = dispatch or self.dispatch
        d = self.dispatch
        params = {
            c.PARAM_SET_DISPATCH_CONFIG_GATEWAY_IP: d.gateway_ip,
            c.PARAM_SET_DISPATCH_CONFIG_VMAC_BASE: d.vmac_base,
            c.PARAM_SET_DISPATCH_CONFIG_BUCKET_MASK: d.mask,
            c.PARAM_SET_DISPATCH_CONFIG_BUCKET_HASH: int(d.hash),
        }
        self.set_default_action(SETTINGS, P4TableAction(SET_DISPATCH_CONFIG, **params), restore=P4TableAction(MARK_UNCONFIGURED))

    def set_flood_group(self) -> None:
        self.insert(P4MulticastGroupEntry(c.HOST_FLOOD_GROUP, replicas=tuple(self.ports.hosts)))

    def setup_switch(self, dispatch: Dispatch | None = None) -> None:
        """The common starting point: roles, dispatch settings and the host flood group."""
        self.set_port_roles()
        self.configure_dispatch(dispatch)
        self.set_flood_group()

    def add_bucket(self, bucket: int, port: int, mac: str | None = None) -> None:
        self.insert(self.bucket_entry(bucket, port, mac))

    def add_host_ip(self, ip: str, mac: str) -> None:
        self.insert(self.host_ip_entry(ip, mac))

    def add_l2(self, mac: str, port: int) -> None:
        self.insert(self.mac_entry(mac, port))

    def add_learned(self, mac: str, port: int) -> None:
        self.insert(self.learned_entry(mac, port))

    # ---- packet I/O and digests, keyed by the generated names

    def send_packet_out(self, frame: bytes, egress_port: int) -> None:
        self.packet_out(frame, **{c.CTRL_HDR_PACKET_OUT_EGRESS_PORT: egress_port})

    def packet_in_meta(self, ingress_port: int, reason: int) -> dict[str, int]:
        return {c.CTRL_HDR_PACKET_IN_INGRESS_PORT: ingress_port, c.CTRL_HDR_PACKET_IN_REASON: int(reason)}

    def learn_digest(self, mac: str, port: int, src_ip: str | None) -> dict[str, int]:
        return {
            c.DIGEST_LEARN_DIGEST_SRC_MAC: mac_to_int(mac),
            c.DIGEST_LEARN_DIGEST_PORT: port,
            c.DIGEST_LEARN_DIGEST_SRC_IP: ipv4_to_int(src_ip) if src_ip else 0,
        }

    def to_host(self, frame: bytes, host: str) -> bytes:
        """A gateway's `frame` as the switch forwards it to `host`: src := vmac(bucket(host))."""
        return pk.with_macs(frame, eth_src=self.dispatch.vmac_of(host))

    def gateway_ip_reply(self, host: str, host_ip: str, vmac: str | None = None) -> bytes:
        """The switch's ARP reply to `host` asking for IP_G: from vmac(bucket(host)), or `vmac`."""
        src = vmac or self.dispatch.vmac_of(host)
        return pk.arp(eth_src=src, eth_dst=host, op=pk.ARP_REPLY, sha=src, spa=self.dispatch.gateway_ip, tha=host, tpa=host_ip)

    # ---- counters

    def drop_count(self, reason: int) -> CounterValue:
        return self.read_counter(DROP_COUNTER, int(reason))

    def all_drop_counts(self) -> dict[DropReason, CounterValue]:
        reasons = list(DropReason)
        return dict(zip(reasons, self.read_counters(DROP_COUNTER, [int(r) for r in reasons]), strict=True))

    # ---- packet assertions

    def send(self, port: int, frame: bytes) -> None:
        testutils.send_packet(self, port, frame)

    def expect(self, frame: bytes, port: int) -> None:
        """`frame` on `port`, byte for byte and of exactly that length (ptf alone ignores
        trailing bytes after frames shorter than 60 bytes)."""
        testutils.verify_packet(self, Mask(frame), port)

    def expect_on(self, frame: bytes, ports: Sequence[int]) -> None:
        """`frame` exactly once on each of `ports`, nothing anywhere else."""
        testutils.verify_packets(self, Mask(frame), list(ports))

    def expect_nothing(self) -> None:
        testutils.verify_no_other_packets(self)

    def assert_dispatched(self, port: int, frame: bytes, gateway: int) -> None:
        """`frame` sent on host `port` leaves only on `gateway`'s port, dst rewritten to that
        gateway's MAC and nothing else changed."""
        self.send(port, frame)
        self.expect(pk.with_macs(frame, eth_dst=gateway_mac(gateway)), gateway)
        self.expect_nothing()

    def assert_dropped(
        self,
        reason: int,
        port: int,
        frame: bytes,
        send: Callable[[], None] | None = None,
        counted_bytes: int | None = None,
    ) -> None:
        """Send `frame` on `port` (or run `send`); nothing may come out, drop_counter[reason]
        grows by exactly one packet of len(frame) (or `counted_bytes`) bytes and no other
        drop reason moves."""
        nbytes = len(frame) if counted_bytes is None else counted_bytes
        before = self.all_drop_counts()
        if send is None:
            self.send(port, frame)
        else:
            send()
        self.expect_nothing()
        after = self.all_drop_counts()
        for r in DropReason:
            delta = after[r] - before[r]
            if r == reason:
                self.assertEqual(
                    (delta.packets, delta.bytes),
                    (1, nbytes),
                    f"drop_counter[{DropReason(reason).name}] must count 1 packet of {nbytes} bytes",
                )
            else:
                self.assertEqual(delta.packets, 0, f"drop_counter[{r.name}] moved, expected only {DropReason(reason).name}")

    def assert_punted(self, frame: bytes, port: int, reason: PuntReason) -> None:
        """`frame` on `port` goes to the controller only: packet-in (port, reason) with the
        frame as received, nothing out of any port, no drop counted."""
        before = self.all_drop_counts()
        self.send(port, frame)
        got = self.get_packet_in()
        self.assertIsNotNone(got, f"expected a packet-in {reason.name}")
        assert got is not None
        self.assertEqual(got.metadata, self.packet_in_meta(port, reason), "packet_in metadata")
        self.assertEqual(got.payload, frame, "packet-in payload must be the frame as received")
        self.expect_nothing()
        self.assert_no_packet_in()
        self.assert_not_dropped(before)

    def assert_not_dropped(self, before: dict[DropReason, CounterValue]) -> None:
        after = self.all_drop_counts()
        moved = {r.name: (after[r] - before[r]).packets for r in DropReason if after[r] != before[r]}
        self.assertEqual(moved, {}, "no drop reason may count a forwarded frame")
