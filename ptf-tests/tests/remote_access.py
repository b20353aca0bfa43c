"""Remote access (docs/pipeline-contract.md, "Outside switch" and "Client pools"): the same
program on the gateways' outside answers ARP for the public address IP_P from the uplinks
only and sends each client's IKE and ESP to one gateway — IKE with a responder SPI by its
label, ESP and ESP-in-UDP by SPI range, everything else by the client's pin, else by the
bucket of the client's address — and gives the gateways' packets from IP_P the public MAC.
On the LAN, client_pools sends traffic for a gateway's address pool to that gateway ahead
of bucket dispatch. Every case checks the frames that come out (and that nothing else
does) and the counters: the entry's direct counter, or drop_counter[reason] alone."""

from __future__ import annotations

from ptf.testutils import group
from supergw_proto.bucket import client_bucket_of
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.remote_access import (
    PUBLIC_IP,
    PUBLIC_MAC,
    ROUTER_IP,
    OutsideTest,
    client_vectors,
    gateway_wan_ip,
    router_mac,
)
from supergw_ptf.supergw import DropReason, gateway_mac

CLIENT = "198.51.100.7"
PINNED = "198.51.100.8"
LABEL_SPI_1 = 1 << 56 | 0xABC
LABEL_SPI_2 = 2 << 56 | 0x5
SPI_RANGE_1 = 0xC1000005
SPI_RANGE_2 = 0xC2000007


# ---- ARP for IP_P


@group("remote_access")
class ArpForPublicIpAnsweredOnUplinks(OutsideTest):
    """The router behind each uplink asking for IP_P gets the public MAC, from the port it
    asked on; no gateway sees the request."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        before = self.all_drop_counts()
        for uplink in self.uplinks:
            rtr = router_mac(uplink)
            self.send(uplink, pk.arp(eth_src=rtr, spa=ROUTER_IP, tpa=PUBLIC_IP))
            reply = pk.arp(eth_src=PUBLIC_MAC, eth_dst=rtr, op=pk.ARP_REPLY, spa=PUBLIC_IP, tha=rtr, tpa=ROUTER_IP)
            self.expect(reply, uplink)
            self.expect_nothing()
        self.assert_not_dropped(before)


@group("remote_access")
class OutsideArpIsL2BetweenSides(OutsideTest):
    """ARP for a gateway's own WAN address floods to the gateways' outside ports only; a
    gateway's ARP for the router floods to the uplinks only; the switch answers neither."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        uplink, gw = self.uplinks[0], self.gateways_outside[0]
        to_gateways = pk.arp(eth_src=router_mac(uplink), spa=ROUTER_IP, tpa=gateway_wan_ip(gw))
        self.send(uplink, to_gateways)
        self.expect_on(to_gateways, self.gateways_outside)
        to_router = pk.arp(eth_src=gateway_mac(gw), spa=gateway_wan_ip(gw), tpa=ROUTER_IP)
        self.send(gw, to_router)
        self.expect_on(to_router, self.uplinks)


@group("remote_access")
class GatewayArpForPublicIpDropped(OutsideTest):
    """Every gateway holds IP_P but must never answer ARP for it: a request or gratuitous
    reply with sender IP_P from a gateway's outside port is ARP_SPOOF_PUBLIC_IP."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        gw = self.gateways_outside[1]
        request = pk.arp(eth_src=gateway_mac(gw), spa=PUBLIC_IP, tpa=ROUTER_IP)
        self.assert_dropped(DropReason.ARP_SPOOF_PUBLIC_IP, gw, request)
        reply = pk.arp(eth_src=gateway_mac(gw), op=pk.ARP_REPLY, spa=PUBLIC_IP, tha=pk.BROADCAST, tpa=PUBLIC_IP)
        self.assert_dropped(DropReason.ARP_SPOOF_PUBLIC_IP, gw, reply)


# ---- new clients: the bucket of the client's address


@group("remote_access")
class NewClientsByAddressHash(OutsideTest):
    """IKE_SA_INIT (responder SPI 0, UDP 500 and 4500 behind the marker) and NAT-T
    keepalives of unpinned clients go to the gateway of bucket(hash(client address)); the
    buckets come from real BMv2 (p4src/vectors/client-crc32.json), so a pass proves the
    target's client hash equals BMv2's."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        k = self.dispatch.k
        chosen: dict[int, str] = {}
        for v in client_vectors():
            self.assertEqual(client_bucket_of(v.ip, k), v.bucket(k), f"supergw_proto.bucket disagrees with BMv2 for {v.ip}")
            chosen.setdefault(v.bucket(k), v.ip)
        gws = self.gateways_outside
        cases = list(chosen.items())[: 2 * len(gws)]
        entries = {b: (gws[i % len(gws)], self.bucket_entry(b, gws[i % len(gws)])) for i, (b, _) in enumerate(cases)}
        self.insert(*[e for _, e in entries.values()])
        before = self.all_drop_counts()
        for i, (bucket, client) in enumerate(cases):
            gw, entry = entries[bucket]
            uplink = self.uplinks[i % len(self.uplinks)]
            for frame in (
                self.ike(client, 0x1000 + i, 0, uplink=uplink),
                self.ike(client, 0x2000 + i, 0, nat_t=True, uplink=uplink),
                self.to_public(client, pk.IP_PROTO_UDP, pk.udp_payload(4500, 4500, pk.NAT_T_KEEPALIVE), uplink),
            ):
                self.assert_to_gateway(uplink, frame, gw, entry)
        self.assert_not_dropped(before)


@group("remote_access")
class ClientBucketUnassignedDropped(OutsideTest):
    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        self.assert_dropped(DropReason.BUCKET_UNASSIGNED, self.uplinks[0], self.ike(CLIENT, 0x1111, 0))


# ---- established clients: pins


@group("remote_access")
class ClientPinOverridesHash(OutsideTest):
    """A pinned client's IKE_SA_INIT (a reauthentication) and its other unlabelled packets
    (ICMP) go to its pin, not its bucket; moving the buckets moves the unpinned client and
    not the pinned one; once the pin is deleted the client follows its bucket again."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        first, second, third = self.gateways_outside[:3]
        k = self.dispatch.k
        pinned_bucket, other_bucket = client_bucket_of(PINNED, k), client_bucket_of(CLIENT, k)
        self.assertNotEqual(pinned_bucket, other_bucket, "fixture: the two clients must hash apart")
        self.add_bucket(pinned_bucket, first)
        self.add_bucket(other_bucket, first)
        pin = self.pin_entry(PINNED, second)
        self.insert(pin)
        uplink = self.uplinks[0]
        init = self.ike(PINNED, 0x3333, 0)
        icmp = self.to_public(PINNED, pk.IP_PROTO_ICMP, b"\x08\x00\xf7\xff\x00\x00\x00\x00")
        self.assert_to_gateway(uplink, init, second, pin)
        self.assert_to_gateway(uplink, icmp, second, pin)
        self.assert_to_gateway(uplink, self.ike(CLIENT, 0x4444, 0), first, self.bucket_entry(other_bucket))

        self.modify(self.bucket_entry(pinned_bucket, third))
        self.modify(self.bucket_entry(other_bucket, third))
        self.assert_to_gateway(uplink, init, second, pin)
        self.assert_to_gateway(uplink, self.ike(CLIENT, 0x4444, 0), third, self.bucket_entry(other_bucket))

        self.modify(self.pin_entry(PINNED, first))
        self.assert_to_gateway(uplink, init, first, pin)
        self.delete(self.pin_entry(PINNED))
        self.assert_to_gateway(uplink, init, third, self.bucket_entry(pinned_bucket))


# ---- IKE of an established IKE SA: the SPI label


@group("remote_access")
class IkeBySpiLabel(OutsideTest):
    """IKE with a responder SPI goes to the gateway whose label the SPI carries (the
    responder's when flag I is set, the initiator's when the gateway initiated the IKE SA),
    on UDP 500 and on 4500 behind the non-ESP marker, even for a pinned client."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        first, second = self.gateways_outside[:2]
        label1, label2 = self.label_entry(1, first), self.label_entry(2, second)
        self.insert(label1, label2, self.pin_entry(PINNED, self.gateways_outside[2]))
        uplink = self.uplinks[1]
        before = self.all_drop_counts()
        self.assert_to_gateway(uplink, self.ike(CLIENT, 0x1111, LABEL_SPI_1, uplink=uplink), first, label1)
        self.assert_to_gateway(uplink, self.ike(CLIENT, 0x2222, LABEL_SPI_2, nat_t=True, uplink=uplink), second, label2)
        gateway_initiated = self.ike(CLIENT, LABEL_SPI_2, LABEL_SPI_1, nat_t=True, flags=0x20, uplink=uplink)
        self.assert_to_gateway(uplink, gateway_initiated, second, label2)
        self.assert_to_gateway(uplink, self.ike(PINNED, 0x5555, LABEL_SPI_1, uplink=uplink), first, label1)
        self.assert_not_dropped(before)


@group("remote_access")
class IkeUnknownLabelDropped(OutsideTest):
    """A responder SPI no gateway's label owns is stale or forged: IKE_SPI_UNKNOWN, not hashed."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        self.insert(self.label_entry(1, self.gateways_outside[0]))
        self.add_bucket(client_bucket_of(CLIENT, self.dispatch.k), self.gateways_outside[1])
        self.assert_dropped(DropReason.IKE_SPI_UNKNOWN, self.uplinks[0], self.ike(CLIENT, 0x1111, 3 << 56 | 1))


# ---- ESP: the SPI range


@group("remote_access")
class EspBySpiRange(OutsideTest):
    """ESP (IP protocol 50) and ESP in UDP 4500 (a non-zero first word) go to the gateway
    whose SPI range holds the SPI."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        first, second = self.gateways_outside[:2]
        range1, range2 = self.range_entry(0xC1, first), self.range_entry(0xC2, second)
        self.insert(range1, range2, self.pin_entry(CLIENT, self.gateways_outside[2]))
        uplink = self.uplinks[0]
        before = self.all_drop_counts()
        self.assert_to_gateway(uplink, self.esp(CLIENT, SPI_RANGE_1), first, range1)
        self.assert_to_gateway(uplink, self.esp(CLIENT, SPI_RANGE_2, nat_t=True), second, range2)
        self.assert_to_gateway(uplink, self.esp(CLIENT, SPI_RANGE_1, nat_t=True), first, range1)
        self.assert_not_dropped(before)


@group("remote_access")
class EspUnknownSpiDropped(OutsideTest):
    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        self.insert(self.range_entry(0xC1, self.gateways_outside[0]))
        self.add_bucket(client_bucket_of(CLIENT, self.dispatch.k), self.gateways_outside[1])
        self.assert_dropped(DropReason.ESP_SPI_UNKNOWN, self.uplinks[0], self.esp(CLIENT, 0xC3000001))
        self.assert_dropped(DropReason.ESP_SPI_UNKNOWN, self.uplinks[0], self.esp(CLIENT, 0xC3000001, nat_t=True))


@group("remote_access")
class EspRangeBackToUplinkIsHairpin(OutsideTest):
    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        uplink = self.uplinks[0]
        self.insert(self.range_entry(0xC1, uplink))
        self.assert_dropped(DropReason.HAIRPIN, uplink, self.esp(CLIENT, SPI_RANGE_1))


# ---- malformed IKE and ESP


@group("remote_access")
class MalformedIkeDropped(OutsideTest):
    """IKE shorter than its 28-byte header, on 500 and on 4500 behind the marker."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        header = pk.ike_header(1, LABEL_SPI_1)
        uplink = self.uplinks[0]
        short = self.to_public(CLIENT, pk.IP_PROTO_UDP, pk.udp_payload(500, 500, header[:27]))
        self.assert_dropped(DropReason.MALFORMED_IKE, uplink, short)
        short_nat_t = self.to_public(CLIENT, pk.IP_PROTO_UDP, pk.udp_payload(4500, 4500, pk.NON_ESP_MARKER + header[:20]))
        self.assert_dropped(DropReason.MALFORMED_IKE, uplink, short_nat_t)


@group("remote_access")
class MalformedEspDropped(OutsideTest):
    """ESP shorter than SPI and sequence number: by the IPv4 length, and in UDP 4500."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        uplink = self.uplinks[0]
        esp = pk.esp_header(SPI_RANGE_1, payload=b"")
        self.assert_dropped(DropReason.MALFORMED_ESP, uplink, self.to_public(CLIENT, pk.IP_PROTO_ESP, esp[:4]))
        in_udp = self.to_public(CLIENT, pk.IP_PROTO_UDP, pk.udp_payload(4500, 4500, esp[:6]))
        self.assert_dropped(DropReason.MALFORMED_ESP, uplink, in_udp)


@group("remote_access")
class RaNotConfiguredDropped(OutsideTest):
    """Before ra_settings, every frame from an outside port (uplink or gateway) is dropped."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside(ra=False)
        self.assert_dropped(DropReason.RA_NOT_CONFIGURED, self.uplinks[0], self.ike(CLIENT, 0x1111, 0))
        gw = self.gateways_outside[0]
        from_gw = pk.ipv4(
            eth_src=gateway_mac(gw), eth_dst=router_mac(self.uplinks[0]), ip_src=gateway_wan_ip(gw), ip_dst=CLIENT,
            proto=pk.IP_PROTO_UDP, payload=pk.udp_payload(500, 500, pk.ike_header(5, 6)),
        )
        self.assert_dropped(DropReason.RA_NOT_CONFIGURED, gw, from_gw)


# ---- gateway -> uplink, and outside L2


@group("remote_access")
class GatewayFromPublicIpGetsPublicMac(OutsideTest):
    """A gateway's packet from IP_P reaches the router with src := the public MAC (the router
    only ever sees that MAC for IP_P), to a known router on its uplink and to an unknown
    MAC flooded to the uplinks; a packet from the gateway's own WAN address keeps its MAC."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        gw = self.gateways_outside[1]
        uplink = self.uplinks[0]
        before = self.all_drop_counts()

        def from_gw(dst: str, src_ip: str) -> bytes:
            payload = pk.udp_payload(4500, 4500, pk.esp_header(0x11))
            return pk.ipv4(eth_src=gateway_mac(gw), eth_dst=dst, ip_src=src_ip, ip_dst=CLIENT, proto=pk.IP_PROTO_UDP, payload=payload)

        frame = from_gw(router_mac(uplink), PUBLIC_IP)
        self.send(gw, frame)
        self.expect(pk.with_macs(frame, eth_src=PUBLIC_MAC), uplink)
        self.expect_nothing()
        unknown = from_gw("02:99:00:00:00:01", PUBLIC_IP)
        self.send(gw, unknown)
        self.expect_on(pk.with_macs(unknown, eth_src=PUBLIC_MAC), self.uplinks)
        own = from_gw(router_mac(uplink), gateway_wan_ip(gw))
        self.send(gw, own)
        self.expect(own, uplink)
        self.expect_nothing()
        self.assert_not_dropped(before)


@group("remote_access")
class SiteToSiteOnTheOutsideIsL2(OutsideTest):
    """Traffic to a gateway's own WAN address and MAC (site-to-site IKE) is plain L2."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        gw = self.gateways_outside[2]
        uplink = self.uplinks[1]
        frame = pk.ipv4(
            eth_src=router_mac(uplink), eth_dst=gateway_mac(gw), ip_src="198.51.100.99", ip_dst=gateway_wan_ip(gw),
            proto=pk.IP_PROTO_UDP, payload=pk.udp_payload(500, 500, pk.ike_header(7, 0)),
        )
        self.send(uplink, frame)
        self.expect(frame, gw)
        self.expect_nothing()


@group("remote_access")
class UplinkToUplinkDropped(OutsideTest):
    """The switch is no transit between routers."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        first, second = self.uplinks
        frame = pk.ipv4_udp(eth_src=router_mac(first), eth_dst=router_mac(second), ip_src=CLIENT, ip_dst="192.0.2.99")
        self.assert_dropped(DropReason.UPLINK_TO_UPLINK, first, frame)


@group("remote_access")
class GatewayOutsideToGatewayDropped(OutsideTest):
    """A gateway's outside port reaches the uplinks only."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_outside()
        first, second = self.gateways_outside[:2]
        frame = pk.ipv4_udp(eth_src=gateway_mac(first), eth_dst=gateway_mac(second), ip_src=gateway_wan_ip(first), ip_dst=gateway_wan_ip(second))
        self.assert_dropped(DropReason.GATEWAY_TO_GATEWAY, first, frame)


# ---- LAN: client pools ahead of bucket dispatch


@group("remote_access")
class ClientPoolsBeforeBuckets(OutsideTest):
    """On the LAN, a host's frame to its vmac whose IPv4 destination lies in a client pool
    goes to that pool's gateway, whatever the host's bucket; the longest prefix wins; an
    address in no pool goes by bucket; after DELETE of the pool, by bucket again."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host = "00:00:03:00:aa:01"
        bucket = self.dispatch.bucket(host)
        by_bucket, pool_gw, wide_gw = self.ports.gateways[:3]
        bucket_entry = self.bucket_entry(bucket, by_bucket)
        self.insert(bucket_entry)
        pool, wide = self.pool_entry("10.90.1.0/24", pool_gw), self.pool_entry("10.90.0.0/16", wide_gw)
        self.insert(pool, wide)
        port = self.ports.hosts[0]
        vmac = self.dispatch.vmac(bucket)

        def to(ip: str) -> bytes:
            return pk.ipv4_udp(eth_src=host, eth_dst=vmac, ip_src="10.0.0.10", ip_dst=ip)

        before = self.all_drop_counts()
        self.assert_to_gateway(port, to("10.90.1.5"), pool_gw, pool)
        self.assert_to_gateway(port, to("10.90.2.5"), wide_gw, wide)
        self.assert_to_gateway(port, to("192.0.2.1"), by_bucket, bucket_entry)
        self.delete(self.pool_entry("10.90.1.0/24"))
        self.assert_to_gateway(port, to("10.90.1.5"), wide_gw, wide)
        self.assert_not_dropped(before)


@group("remote_access")
class ClientPoolBackToHostIsHairpin(OutsideTest):
    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host = "00:00:03:00:aa:02"
        port = self.ports.hosts[0]
        self.add_bucket(self.dispatch.bucket(host), self.ports.gateways[0])
        self.insert(self.pool_entry("10.90.1.0/24", port))
        frame = pk.ipv4_udp(eth_src=host, eth_dst=self.dispatch.vmac_of(host), ip_src="10.0.0.10", ip_dst="10.90.1.5")
        self.assert_dropped(DropReason.HAIRPIN, port, frame)
