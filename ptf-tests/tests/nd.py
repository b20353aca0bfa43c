"""IPv6 Neighbor Discovery on the LAN (docs/pipeline-contract.md, "IPv6 Neighbor
Discovery on the LAN"): every ND path and ND drop reason, checked by the frames that come
out (byte-exact, scapy's own checksums) and by the drop counter.

Hosts: an NS for the gateway's link-local or global address, multicast or unicast to the
vmac, with or without a source link-layer option, or a DAD probe, is answered from the
ingress port with vmac(bucket(host)); spoofed ND and unanswerable NS are dropped; RS goes
to the controller; IPv6 sources are learned per address. Gateways: RS/RA/Redirect
dropped, NS for a gateway address dropped, NS for a host answered from host_ip6s or
punted, NA punted; gateway ND never reaches a host."""

from __future__ import annotations

from ptf.testutils import group
from supergw_proto.bucket import vmac
from supergw_ptf import nd_frames as nf
from supergw_ptf.base_test import autocleanup
from supergw_ptf.nd import GATEWAY_GUA, GATEWAY_LL, NdTest, host_gua, host_ll
from supergw_ptf.supergw import Dispatch, DropReason, PuntReason, bucket_vectors, gateway_mac

GATEWAY_ADDRESSES = (GATEWAY_LL, GATEWAY_GUA)


class HostNdBase(NdTest):
    def assert_answered(self, port: int, host: str, request: bytes) -> None:
        """`request` from `host` on `port` is answered by the switch on `port` only; no
        drop, no packet-in, and it reaches no gateway."""
        before = self.all_drop_counts()
        self.send(port, request)
        self.expect(self.gateway_na(request, host), port)
        self.expect_nothing()
        self.assert_not_dropped(before)


@group("nd")
class NsMulticastForGatewayAnswered(HostNdBase):
    """Solicited-node NS with a source link-layer option, for both gateway addresses, from
    hosts in many buckets: the NA carries each host's own vmac, R|S|O, hop limit 255."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        for i, v in enumerate(bucket_vectors()[:12]):
            port = self.ports.hosts[i % len(self.ports.hosts)]
            for target in GATEWAY_ADDRESSES:
                request = nf.ns(eth_src=v.mac, ip_src=host_ll(v.mac), target=target, tc=0x20, fl=0x12345)
                self.assert_answered(port, v.mac, request)
        self.assert_no_packet_in()


@group("nd")
class NsWithoutSourceLinkLayerOptionAnswered(HostNdBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host, port = "00:00:03:00:00:21", self.ports.hosts[1]
        for target in GATEWAY_ADDRESSES:
            request = nf.ns(eth_src=host, ip_src=host_gua(host), target=target, sllao=False)
            self.assertEqual(len(request), 14 + 40 + 24)
            self.assert_answered(port, host, request)


@group("nd")
class UnicastNudToVmacAnsweredNotDispatched(HostNdBase):
    """RFC 4861 7.3: a host re-checks the router with a unicast NS to the cached vmac. The
    switch answers it even though the vmac's bucket has a gateway: a gateway would answer
    with its own MAC. The bucket's counter does not move."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host, port = "00:00:03:00:00:22", self.ports.hosts[0]
        bucket = self.dispatch.bucket(host)
        self.add_bucket(bucket, self.ports.gateways[0])
        before = self.read_direct_counter(self.bucket_entry(bucket))
        for target in GATEWAY_ADDRESSES:
            for sllao in (True, False):
                request = nf.ns(
                    eth_src=host, eth_dst=self.dispatch.vmac_of(host), ip_src=host_ll(host), ip_dst=target, target=target, sllao=sllao
                )
                self.assert_answered(port, host, request)
        after = self.read_direct_counter(self.bucket_entry(bucket))
        self.assertEqual((after - before).packets, 0, "an NS for the gateway must not be dispatched")


@group("nd")
class DadForGatewayAddressDefended(HostNdBase):
    """A DAD probe (source ::) for a gateway address, with the RFC 7527 nonce Linux sends
    and without any option: answered to all-nodes (ff02::1, 33:33:00:00:00:01) from the
    ingress port, flags R|O (S clear, RFC 4861 7.2.4), so the prober sees the address
    defended (RFC 4862 5.4.3)."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host, port = "00:00:03:00:00:23", self.ports.hosts[2]
        for target in GATEWAY_ADDRESSES:
            for options in (nf.nonce_option(), b""):
                request = nf.ns(eth_src=host, ip_src=nf.UNSPECIFIED, target=target, options=options)
                answer = self.gateway_na(request, host)
                self.assertEqual(answer[:6], bytes.fromhex("333300000001"))
                self.assert_answered(port, host, request)


@group("nd")
class NsForOtherAddressIsL2(HostNdBase):
    """Host-to-host ND is not the switch's: flooded to the other host ports, unchanged."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host, other = "00:00:03:00:00:24", "00:00:03:00:00:25"
        port = self.ports.hosts[0]
        request = nf.ns(eth_src=host, ip_src=host_ll(host), target=host_ll(other))
        self.send(port, request)
        self.expect_on(request, [p for p in self.ports.hosts if p != port])
        self.assert_no_packet_in()


@group("nd")
class NdUnconfiguredAndUnsetAddresses(HostNdBase):
    """Without nd_settings no address is the gateway's: an NS for fe80::1 is plain L2 and
    nothing is dropped. After the MODIFY it is answered; an address set to :: matches
    nothing (here the global one)."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host, port = "00:00:03:00:00:26", self.ports.hosts[1]
        flood = [p for p in self.ports.hosts if p != port]
        request_ll = nf.ns(eth_src=host, ip_src=host_ll(host), target=GATEWAY_LL)
        request_gua = nf.ns(eth_src=host, ip_src=host_ll(host), target=GATEWAY_GUA)
        before = self.all_drop_counts()
        self.send(port, request_ll)
        self.expect_on(request_ll, flood)
        self.assert_not_dropped(before)

        self.configure_nd(GATEWAY_LL, nf.UNSPECIFIED)
        self.assert_answered(port, host, request_ll)
        self.send(port, request_gua)
        self.expect_on(request_gua, flood)


@group("nd")
class HostNaForGatewayAddressDropped(NdTest):
    """ND_SPOOF_GATEWAY_IP: a host's NA for a gateway address, unsolicited to all-nodes or
    unicast to a vmac, and whatever its hop limit."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        spoofer, port = "00:00:03:00:00:27", self.ports.hosts[3]
        self.add_bucket(self.dispatch.bucket(spoofer), self.ports.gateways[0])
        for target in GATEWAY_ADDRESSES:
            unsolicited = nf.na(
                eth_src=spoofer, eth_dst=nf.ALL_NODES_MAC, ip_src=target, ip_dst=nf.ALL_NODES,
                target=target, router=True, solicited=False, tllao=spoofer,
            )
            self.assert_dropped(DropReason.ND_SPOOF_GATEWAY_IP, port, unsolicited)
            unicast = nf.na(
                eth_src=spoofer, eth_dst=self.dispatch.vmac_of(spoofer), ip_src=host_ll(spoofer), ip_dst=GATEWAY_LL,
                target=target, router=False, solicited=True, tllao=spoofer, hlim=64,
            )
            self.assert_dropped(DropReason.ND_SPOOF_GATEWAY_IP, port, unicast)


@group("nd")
class HostNsFromGatewayAddressDropped(NdTest):
    """ND_SPOOF_GATEWAY_IP: a host's NS with a gateway address as its source (it would
    update every receiver's entry for that address to the spoofer's MAC)."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        spoofer, port = "00:00:03:00:00:28", self.ports.hosts[0]
        for source in GATEWAY_ADDRESSES:
            request = nf.ns(eth_src=spoofer, ip_src=source, target=host_ll("00:00:03:00:00:29"))
            self.assert_dropped(DropReason.ND_SPOOF_GATEWAY_IP, port, request)


@group("nd")
class UnanswerableNsForGatewayDropped(NdTest):
    """ND_UNSUPPORTED: an NS for a gateway address the switch cannot answer exactly: hop
    limit not 255, code not 0, two options (40 bytes). Counted, never forwarded (a
    gateway would answer it with its own MAC)."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host, port = "00:00:03:00:00:2a", self.ports.hosts[2]
        self.add_bucket(self.dispatch.bucket(host), self.ports.gateways[1])
        cases = {
            "hop limit 64": nf.ns(eth_src=host, ip_src=host_ll(host), target=GATEWAY_LL, hlim=64),
            "code 1": nf.ns(eth_src=host, ip_src=host_ll(host), target=GATEWAY_GUA, code=1),
            "two options": nf.ns(eth_src=host, ip_src=host_ll(host), target=GATEWAY_LL, options=nf.nonce_option()),
            "unicast, hop limit 1": nf.ns(
                eth_src=host, eth_dst=self.dispatch.vmac_of(host), ip_src=host_ll(host), ip_dst=GATEWAY_LL, target=GATEWAY_LL, hlim=1
            ),
        }
        for name, request in cases.items():
            with self.subTest(name):
                self.assert_dropped(DropReason.ND_UNSUPPORTED, port, request)


@group("nd")
class HostRouterSolicitationPunted(NdTest):
    """A host's RS goes to the controller (which sends the RAs), not to the other hosts."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host, port = "00:00:03:00:00:2b", self.ports.hosts[1]
        self.assert_punted(nf.rs(eth_src=host, ip_src=host_ll(host)), port, PuntReason.ROUTER_SOLICITATION)
        self.assert_punted(nf.rs(eth_src=host, ip_src=nf.UNSPECIFIED), port, PuntReason.ROUTER_SOLICITATION)


@group("nd")
class GatewayRouterNdDropped(NdTest):
    """GATEWAY_ROUTER_ND: a gateway's RA (multicast or unicast to a host), RS and Redirect
    never reach the LAN or another gateway."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host = "00:00:03:00:00:2c"
        self.add_l2(host, self.ports.hosts[0])
        gw = self.ports.gateways[0]
        gmac = gateway_mac(gw)
        cases = {
            "RA to all-nodes": nf.ra(eth_src=gmac, ip_src=GATEWAY_LL),
            "RA unicast": nf.ra(eth_src=gmac, ip_src=GATEWAY_LL, eth_dst=host, ip_dst=host_ll(host)),
            "RS": nf.rs(eth_src=gmac, ip_src=GATEWAY_LL),
            "Redirect": nf.redirect(
                eth_src=gmac, eth_dst=host, ip_src=GATEWAY_LL, ip_dst=host_gua(host), target=GATEWAY_LL, dst="2001:db8:9::1"
            ),
        }
        for name, frame in cases.items():
            with self.subTest(name):
                self.assert_dropped(DropReason.GATEWAY_ROUTER_ND, gw, frame)


@group("nd")
class GatewayNsForGatewayAddressDropped(NdTest):
    """GATEWAY_ND_GATEWAY_IP: a gateway's DAD probe for the shared address, and a gateway
    resolving a gateway address, reach neither the other gateways nor the hosts, and get
    no answer: their DAD must not fire."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        for gw in self.ports.gateways:
            gmac = gateway_mac(gw)
            for target in GATEWAY_ADDRESSES:
                dad = nf.ns(eth_src=gmac, ip_src=nf.UNSPECIFIED, target=target, options=nf.nonce_option())
                self.assert_dropped(DropReason.GATEWAY_ND_GATEWAY_IP, gw, dad)
                resolve = nf.ns(eth_src=gmac, ip_src=GATEWAY_LL, target=target)
                self.assert_dropped(DropReason.GATEWAY_ND_GATEWAY_IP, gw, resolve)


@group("nd")
class GatewayNsForKnownHostAnswered(NdTest):
    """A gateway's NS for a host address in host_ip6s, multicast or unicast (NUD), with or
    without a source link-layer option: answered by the switch from the ingress port with
    the host's MAC, S|O (no R); nothing reaches a host."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host = "00:00:03:00:00:2d"
        self.add_l2(host, self.ports.hosts[0])
        self.insert(self.host_ip6_entry(host_gua(host), host), self.host_ip6_entry(host_ll(host), host))
        for gw in self.ports.gateways:
            gmac = gateway_mac(gw)
            for target in (host_gua(host), host_ll(host)):
                requests = [
                    nf.ns(eth_src=gmac, ip_src=GATEWAY_LL, target=target),
                    nf.ns(eth_src=gmac, ip_src=GATEWAY_GUA, target=target, sllao=False),
                    nf.ns(eth_src=gmac, eth_dst=host, ip_src=GATEWAY_GUA, ip_dst=target, target=target),
                ]
                for request in requests:
                    before = self.all_drop_counts()
                    self.send(gw, request)
                    self.expect(self.na_for(request, host, router=False), gw)
                    self.expect_nothing()
                    self.assert_not_dropped(before)
        self.assert_no_packet_in()


@group("nd")
class GatewayNsMissPunted(NdTest):
    """A gateway's NS for an address not in host_ip6s goes to the controller
    (GATEWAY_ND_MISS), multicast or unicast, never to the hosts."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host = "00:00:03:00:00:2e"
        self.add_l2(host, self.ports.hosts[1])
        self.insert(self.host_ip6_entry(host_gua("00:00:03:00:00:2f"), "00:00:03:00:00:2f"))
        gw = self.ports.gateways[1]
        gmac = gateway_mac(gw)
        self.assert_punted(nf.ns(eth_src=gmac, ip_src=GATEWAY_LL, target=host_gua(host)), gw, PuntReason.GATEWAY_ND_MISS)
        unicast = nf.ns(eth_src=gmac, eth_dst=host, ip_src=GATEWAY_GUA, ip_dst=host_gua(host), target=host_gua(host))
        self.assert_punted(unicast, gw, PuntReason.GATEWAY_ND_MISS)


@group("nd")
class GatewayUnanswerableNsDropped(NdTest):
    """ND_UNSUPPORTED from a gateway port: an NS for a host address that is not answerable
    (hop limit 64) is dropped even when host_ip6s knows the host."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host = "00:00:03:00:00:30"
        self.insert(self.host_ip6_entry(host_gua(host), host))
        gw = self.ports.gateways[2]
        request = nf.ns(eth_src=gateway_mac(gw), ip_src=GATEWAY_LL, target=host_gua(host), hlim=64)
        self.assert_dropped(DropReason.ND_UNSUPPORTED, gw, request)


@group("nd")
class GatewayNaPunted(NdTest):
    """A gateway's NA (unicast to a host, or unsolicited to all-nodes) goes to the
    controller (GATEWAY_NA): it would carry the gateway's own MAC."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host = "00:00:03:00:00:31"
        self.add_l2(host, self.ports.hosts[2])
        gw = self.ports.gateways[0]
        gmac = gateway_mac(gw)
        unicast = nf.na(
            eth_src=gmac, eth_dst=host, ip_src=GATEWAY_LL, ip_dst=host_ll(host), target=GATEWAY_LL,
            router=True, solicited=True, tllao=gmac,
        )
        self.assert_punted(unicast, gw, PuntReason.GATEWAY_NA)
        unsolicited = nf.na(
            eth_src=gmac, eth_dst=nf.ALL_NODES_MAC, ip_src=GATEWAY_GUA, ip_dst=nf.ALL_NODES, target=GATEWAY_GUA,
            router=True, solicited=False, tllao=gmac,
        )
        self.assert_punted(unsolicited, gw, PuntReason.GATEWAY_NA)


@group("nd")
class Ipv6DataDualStack(NdTest):
    """IPv6 beside ND is what any non-IPv4 frame is: a host's IPv6 to its vmac goes to the
    bucket's gateway (dst rewritten), a gateway's IPv6 to a host leaves from the host's
    vmac, a gateway's non-ND IPv6 multicast (e.g. MLD) is GATEWAY_BROADCAST."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        host, port = "00:00:03:00:00:32", self.ports.hosts[3]
        gw = self.ports.gateways[2]
        self.add_bucket(self.dispatch.bucket(host), gw)
        self.add_l2(host, port)
        up = nf.ipv6_udp(eth_src=host, eth_dst=self.dispatch.vmac_of(host), ip_src=host_gua(host), ip_dst="2001:db8:9::1")
        self.assert_dispatched(port, up, gw)
        down = nf.ipv6_udp(eth_src=gateway_mac(gw), eth_dst=host, ip_src="2001:db8:9::1", ip_dst=host_gua(host))
        self.send(gw, down)
        self.expect(self.to_host(down, host), port)
        self.expect_nothing()
        mld = nf.ipv6_udp(eth_src=gateway_mac(gw), eth_dst=nf.multicast_mac("ff02::16"), ip_src=GATEWAY_LL, ip_dst="ff02::16")
        self.assert_dropped(DropReason.GATEWAY_BROADCAST, gw, mld)


@group("nd")
class LearnIp6PerAddress(NdTest):
    """A host's IPv6 source is reported per address (learn_ip6_digest_t: mac, port,
    address): its link-local and its global address each once; none once learned_ip6s
    holds the pair; none for :: (DAD) or a gateway address as source."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_nd()
        self.enable_ip6_digests()
        host, port = "00:00:03:00:00:33", self.ports.hosts[2]
        flood = [p for p in self.ports.hosts if p != port]
        for src in (host_ll(host), host_gua(host)):
            frame = nf.ipv6_udp(eth_src=host, eth_dst=nf.ALL_NODES_MAC, ip_src=src, ip_dst=nf.ALL_NODES)
            self.send(port, frame)
            self.expect_ip6_digest(host, port, src)
            self.expect_on(frame, flood)

        self.insert(self.learned_ip6_entry(host_gua(host), host))
        known = nf.ipv6_udp(eth_src=host, eth_dst=nf.ALL_NODES_MAC, ip_src=host_gua(host), ip_dst=nf.ALL_NODES)
        self.send(port, known)
        self.expect_on(known, flood)
        dad = nf.ns(eth_src=host, ip_src=nf.UNSPECIFIED, target=host_gua(host))
        self.send(port, dad)
        self.expect_on(dad, flood)
        from_gateway_address = nf.ipv6_udp(eth_src=host, eth_dst=nf.ALL_NODES_MAC, ip_src=GATEWAY_LL, ip_dst=nf.ALL_NODES)
        self.send(port, from_gateway_address)
        self.expect_on(from_gateway_address, flood)
        self.expect_no_ip6_digest(host)


@group("nd")
class MoreBucketVectorsAnswered(HostNdBase):
    """The vmac in the NA equals BMv2's bucket for every vector at K = 4096 (as the ARP
    group checks at K = 256 and 4096), so the targets' hash agrees on the IPv6 path too."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch(Dispatch(k=4096))
        self.configure_nd()
        port = self.ports.hosts[0]
        for v in bucket_vectors():
            request = nf.ns(eth_src=v.mac, ip_src=host_ll(v.mac), target=GATEWAY_LL)
            self.assertEqual(self.dispatch.vmac_of(v.mac), vmac(self.dispatch.vmac_base, v.bucket(4096)))
            self.send(port, request)
            self.expect(self.gateway_na(request, v.mac), port)
        self.expect_nothing()
