"""Data path 5: host ↔ host L2. Known unicast to its port; broadcast, multicast and
unknown unicast flooded to every host port except the ingress, never to gateways."""

from __future__ import annotations

from ptf.testutils import group
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import SupergwTest


@group("l2")
class HostToKnownHost(SupergwTest):
    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        hosts = self.ports.hosts
        macs = {p: f"00:00:03:00:aa:{p:02x}" for p in hosts}
        for port, mac in macs.items():
            self.add_l2(mac, port)
        before = self.all_drop_counts()
        for src_port in hosts:
            for dst_port in hosts:
                if src_port == dst_port:
                    continue
                frame = pk.ipv4_udp(eth_src=macs[src_port], eth_dst=macs[dst_port], payload=f"{src_port}>{dst_port}".encode())
                self.send(src_port, frame)
                self.expect(frame, dst_port)
                self.expect_nothing()
        self.assert_not_dropped(before)


class FloodBase(SupergwTest):
    def check_flood(self, dst: str) -> None:
        self.setup_switch()
        for ingress in self.ports.hosts:
            frame = pk.ipv4_udp(eth_src=f"00:00:03:00:bb:{ingress:02x}", eth_dst=dst, payload=b"flood")
            self.send(ingress, frame)
            self.expect_on(frame, [p for p in self.ports.hosts if p != ingress])


@group("l2")
class HostBroadcastFloodsHostsOnly(FloodBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_flood(pk.BROADCAST)


@group("l2")
class HostMulticastFloodsHostsOnly(FloodBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_flood("01:00:5e:00:00:fb")


@group("l2")
class HostUnknownUnicastFloodsHostsOnly(FloodBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_flood("00:00:03:00:cc:01")


@group("l2")
class HostToGatewayRealMacByL2(SupergwTest):
    """A host frame to a MAC that mac_table maps to a gateway port is plain L2 (the pipeline
    only dispatches vmacs); the contract's host path forwards any mac_table hit."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        gw = self.ports.gateways[0]
        dst = "00:00:0a:00:aa:01"
        self.add_l2(dst, gw)
        frame = pk.ipv4_udp(eth_src="00:00:03:00:bb:01", eth_dst=dst)
        self.send(self.ports.hosts[0], frame)
        self.expect(frame, gw)
        self.expect_nothing()
