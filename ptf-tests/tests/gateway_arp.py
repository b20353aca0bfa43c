"""Data path 4: a gateway's ARP. A request for a host IP in host_ips is answered by the
switch from the ingress port; a miss (also for IP_G) and every ARP reply from a gateway go
to the controller as packet-in with the ingress port; gateway ARP never reaches hosts."""

from __future__ import annotations

from ptf.testutils import group
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import PuntReason, SupergwTest, gateway_mac

GATEWAY_LAN_IP = "10.0.0.2"


class GatewayArpBase(SupergwTest):
    """Gateway ARP cases; punts are checked with SupergwTest.assert_punted."""


@group("gateway_arp")
class GatewayArpForKnownHostAnswered(GatewayArpBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host, host_ip = "00:00:03:00:00:1b", "10.0.0.20"
        self.add_host_ip(host_ip, host)
        self.add_l2(host, self.ports.hosts[0])
        for gw in self.ports.gateways:
            gmac = gateway_mac(gw)
            request = pk.arp(eth_src=gmac, spa=GATEWAY_LAN_IP, tpa=host_ip)
            self.send(gw, request)
            reply = pk.arp(eth_src=host, eth_dst=gmac, op=pk.ARP_REPLY, sha=host, spa=host_ip, tha=gmac, tpa=GATEWAY_LAN_IP)
            self.expect(reply, gw)
            self.expect_nothing()
        self.assert_no_packet_in()


@group("gateway_arp")
class GatewayArpMissPunted(GatewayArpBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        self.add_host_ip("10.0.0.20", "00:00:03:00:00:1b")
        gw = self.ports.gateways[1]
        request = pk.arp(eth_src=gateway_mac(gw), spa=GATEWAY_LAN_IP, tpa="10.0.0.21")
        self.assert_punted(request, gw, PuntReason.GATEWAY_ARP_MISS)


@group("gateway_arp")
class GatewayArpForGatewayIpPunted(GatewayArpBase):
    """Gateways never get an answer for IP_G from the switch: it is a miss like any other."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        gw = self.ports.gateways[0]
        request = pk.arp(eth_src=gateway_mac(gw), spa=GATEWAY_LAN_IP, tpa=self.dispatch.gateway_ip)
        self.assert_punted(request, gw, PuntReason.GATEWAY_ARP_MISS)


@group("gateway_arp")
class GatewayArpReplyPunted(GatewayArpBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        gw = self.ports.gateways[2]
        gmac = gateway_mac(gw)
        reply = pk.arp(
            eth_src=gmac, eth_dst="02:00:00:00:00:fe", op=pk.ARP_REPLY, spa=GATEWAY_LAN_IP, tha="02:00:00:00:00:fe", tpa="10.0.0.250"
        )
        self.assert_punted(reply, gw, PuntReason.GATEWAY_ARP_REPLY)


@group("gateway_arp")
class GatewayGratuitousArpReplyPunted(GatewayArpBase):
    """A broadcast (gratuitous) ARP reply from a gateway is punted, not flooded to hosts."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        gw = self.ports.gateways[0]
        gmac = gateway_mac(gw)
        reply = pk.arp(eth_src=gmac, op=pk.ARP_REPLY, spa=GATEWAY_LAN_IP, tha=pk.BROADCAST, tpa=GATEWAY_LAN_IP)
        self.assert_punted(reply, gw, PuntReason.GATEWAY_ARP_REPLY)
