"""Remote-access helpers: the outside switch (ports re-roled UPLINK / GATEWAY_OUTSIDE),
ra_settings, the outside dispatch tables, the LAN's client pools, and the client-address
vectors real BMv2 computed (p4src/vectors/client-*.json).

The PTF port map has HOST and GATEWAY ports only; port roles are data, so an outside test
writes its own port_roles: the first two host ports become uplinks (a router behind each),
the gateway ports the gateways' outside ports. The remaining host ports get no role."""

from __future__ import annotations

import json
from dataclasses import dataclass

from finsy import P4MulticastGroupEntry, P4TableAction, P4TableEntry, P4TableMatch
from supergw_proto import p4constants as c
from supergw_proto.p4constants import BucketHash

from . import packets as pk
from .supergw import VECTORS_DIR, PortRole, SupergwTest, gateway_mac

PUBLIC_IP = "203.0.113.1"
PUBLIC_MAC = "02:50:00:00:00:01"
ROUTER_IP = "203.0.113.254"
CLIENT_VECTOR_FILES = {
    BucketHash.CRC32: VECTORS_DIR / "client-crc32.json",
    BucketHash.IDENTITY: VECTORS_DIR / "client-identity.json",
}


def router_mac(port: int) -> str:
    """The MAC of the router behind uplink `port` (test fixture)."""
    return f"02:ee:00:00:00:{port:02x}"


def gateway_wan_ip(port: int) -> str:
    """The gateway's own outside (WAN) address, next to IP_P (test fixture)."""
    return f"192.0.2.{port}"


@dataclass(frozen=True)
class ClientVector:
    """One client address with the buckets real BMv2 computed for it."""

    ip: str
    bucket_k64: int
    bucket_k256: int
    bucket_k4096: int

    def bucket(self, k: int) -> int:
        return {64: self.bucket_k64, 256: self.bucket_k256, 4096: self.bucket_k4096}[k]


def client_vectors(bucket_hash: BucketHash = BucketHash.CRC32) -> list[ClientVector]:
    data = json.loads(CLIENT_VECTOR_FILES[bucket_hash].read_text(encoding="utf-8"))
    return [ClientVector(v["ip"], v["bucket_k64"], v["bucket_k256"], v["bucket_k4096"]) for v in data["vectors"]]


# Every dispatch action has buckets' set_gateway shape: (port, gateway_mac).
GATEWAY_PARAMS = {
    c.ACTION_SET_PIN_GATEWAY: (c.PARAM_SET_PIN_GATEWAY_PORT, c.PARAM_SET_PIN_GATEWAY_GATEWAY_MAC),
    c.ACTION_SET_IKE_GATEWAY: (c.PARAM_SET_IKE_GATEWAY_PORT, c.PARAM_SET_IKE_GATEWAY_GATEWAY_MAC),
    c.ACTION_SET_ESP_GATEWAY: (c.PARAM_SET_ESP_GATEWAY_PORT, c.PARAM_SET_ESP_GATEWAY_GATEWAY_MAC),
    c.ACTION_SET_POOL_GATEWAY: (c.PARAM_SET_POOL_GATEWAY_PORT, c.PARAM_SET_POOL_GATEWAY_GATEWAY_MAC),
}


def spi_label(label: int) -> str:
    """The ike_spi_labels ternary match of a gateway's label: the SPI's top byte."""
    return f"{label << 56:#018x}/&0xff00000000000000"


def spi_range(prefix: int) -> str:
    """The esp_spi_ranges ternary match of a gateway's range: the SPI's top byte."""
    return f"{prefix << 24:#010x}/&0xff000000"


class OutsideTest(SupergwTest):
    """A PTF case on the outside switch."""

    @property
    def uplinks(self) -> list[int]:
        return self.ports.hosts[:2]

    @property
    def gateways_outside(self) -> list[int]:
        return self.ports.gateways

    # ---- entries

    def gateway_action(self, action: str, port: int) -> P4TableAction:
        """A dispatch action (set_pin/ike/esp/pool_gateway: all `port`, `gateway_mac`)."""
        port_param, mac_param = GATEWAY_PARAMS[action]
        return P4TableAction(action, **{port_param: port, mac_param: gateway_mac(port)})

    def pin_entry(self, client_ip: str, port: int | None = None) -> P4TableEntry:
        match = P4TableMatch({c.MATCH_CLIENT_PINS_CLIENT_IP: client_ip})
        action = None if port is None else self.gateway_action(c.ACTION_SET_PIN_GATEWAY, port)
        return P4TableEntry(c.TABLE_CLIENT_PINS, match=match, action=action)

    def label_entry(self, label: int, port: int | None = None, priority: int = 10) -> P4TableEntry:
        match = P4TableMatch({c.MATCH_IKE_SPI_LABELS_IKE_SPI: spi_label(label)})
        action = None if port is None else self.gateway_action(c.ACTION_SET_IKE_GATEWAY, port)
        return P4TableEntry(c.TABLE_IKE_SPI_LABELS, match=match, action=action, priority=priority)

    def range_entry(self, prefix: int, port: int | None = None, priority: int = 10) -> P4TableEntry:
        match = P4TableMatch({c.MATCH_ESP_SPI_RANGES_ESP_SPI: spi_range(prefix)})
        action = None if port is None else self.gateway_action(c.ACTION_SET_ESP_GATEWAY, port)
        return P4TableEntry(c.TABLE_ESP_SPI_RANGES, match=match, action=action, priority=priority)

    def pool_entry(self, prefix: str, port: int | None = None) -> P4TableEntry:
        match = P4TableMatch({c.MATCH_CLIENT_POOLS_DST_IP: prefix})
        action = None if port is None else self.gateway_action(c.ACTION_SET_POOL_GATEWAY, port)
        return P4TableEntry(c.TABLE_CLIENT_POOLS, match=match, action=action)

    # ---- configuration

    def configure_ra(self) -> None:
        params = {c.PARAM_SET_RA_CONFIG_PUBLIC_IP: PUBLIC_IP, c.PARAM_SET_RA_CONFIG_PUBLIC_MAC: PUBLIC_MAC}
        self.set_default_action(
            c.TABLE_RA_SETTINGS,
            P4TableAction(c.ACTION_SET_RA_CONFIG, **params),
            restore=P4TableAction(c.ACTION_MARK_RA_UNCONFIGURED),
        )

    def setup_outside(self, *, ra: bool = True) -> None:
        """Roles of the outside switch, dispatch settings (K and hash for the client
        buckets), ra_settings (unless `ra` is False), both outside flood groups, and L2 for
        the routers and the gateways' outside ports."""
        roles = [(p, PortRole.UPLINK) for p in self.uplinks] + [(p, PortRole.GATEWAY_OUTSIDE) for p in self.gateways_outside]
        self.insert(*[self.port_role_entry(p, int(r)) for p, r in roles])
        self.configure_dispatch()
        if ra:
            self.configure_ra()
        self.insert(
            P4MulticastGroupEntry(c.GATEWAY_OUTSIDE_FLOOD_GROUP, replicas=tuple(self.gateways_outside)),
            P4MulticastGroupEntry(c.UPLINK_FLOOD_GROUP, replicas=tuple(self.uplinks)),
        )
        self.insert(*[self.mac_entry(router_mac(p), p, int(PortRole.UPLINK)) for p in self.uplinks])
        self.insert(*[self.mac_entry(gateway_mac(p), p, int(PortRole.GATEWAY_OUTSIDE)) for p in self.gateways_outside])

    # ---- frames

    def to_public(self, client_ip: str, proto: int, payload: bytes, uplink: int | None = None) -> bytes:
        """A client's packet to IP_P as the router behind `uplink` delivers it."""
        port = self.uplinks[0] if uplink is None else uplink
        return pk.ipv4(eth_src=router_mac(port), eth_dst=PUBLIC_MAC, ip_src=client_ip, ip_dst=PUBLIC_IP, proto=proto, payload=payload)

    def ike(
        self,
        client_ip: str,
        spi_i: int,
        spi_r: int,
        *,
        nat_t: bool = False,
        flags: int = pk.IKE_FLAG_INITIATOR,
        uplink: int | None = None,
    ) -> bytes:
        """IKE on UDP 500, or on 4500 behind the non-ESP marker (`nat_t`), via `uplink`."""
        exchange = pk.IKE_SA_INIT if spi_r == 0 else pk.IKE_AUTH
        header = pk.ike_header(spi_i, spi_r, flags=flags, exchange=exchange)
        udp = pk.udp_payload(4500, 4500, pk.NON_ESP_MARKER + header) if nat_t else pk.udp_payload(500, 500, header)
        return self.to_public(client_ip, pk.IP_PROTO_UDP, udp, uplink)

    def esp(self, client_ip: str, spi: int, *, nat_t: bool = False) -> bytes:
        """ESP as IP protocol 50, or in UDP 4500 (`nat_t`, RFC 3948)."""
        if nat_t:
            return self.to_public(client_ip, pk.IP_PROTO_UDP, pk.udp_payload(4500, 4500, pk.esp_header(spi)))
        return self.to_public(client_ip, pk.IP_PROTO_ESP, pk.esp_header(spi))

    def assert_to_gateway(self, uplink: int, frame: bytes, gateway: int, entry: P4TableEntry | None = None) -> None:
        """`frame` from `uplink` leaves only on `gateway`'s outside port with dst := its MAC;
        `entry`'s direct counter (a pin, label, range or bucket) counts exactly it."""
        before = None if entry is None else self.read_direct_counter(entry)
        self.assert_dispatched(uplink, frame, gateway)
        if entry is not None and before is not None:
            delta = self.read_direct_counter(entry) - before
            self.assertEqual((delta.packets, delta.bytes), (1, len(frame)), f"direct counter of {entry.table_id}")
