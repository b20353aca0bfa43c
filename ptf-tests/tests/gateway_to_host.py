"""Data path 3: gateway → host. src MAC := vmac(bucket(dst)), then L2: a known host
gets it on its port, an unknown one is flooded to host ports only."""

from __future__ import annotations

from ptf.testutils import group
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import Dispatch, SupergwTest, gateway_mac


def from_gateway(gw: int, dst: str) -> bytes:
    return pk.ipv4_udp(eth_src=gateway_mac(gw), eth_dst=dst, ip_src="192.0.2.1", ip_dst="10.0.0.10", payload=b"from-gw")


class GatewayToHostBase(SupergwTest):
    def check_known(self, k: int) -> None:
        self.setup_switch(Dispatch(k=k))
        before = self.all_drop_counts()
        for i, host_port in enumerate(self.ports.hosts):
            host = f"00:00:03:00:{i + 1:02x}:00"
            gw = self.ports.gateways[i % len(self.ports.gateways)]
            self.add_l2(host, host_port)
            frame = from_gateway(gw, host)
            self.send(gw, frame)
            self.expect(self.to_host(frame, host), host_port)
            self.expect_nothing()
        self.assert_not_dropped(before)


@group("gateway_to_host")
class GatewayToKnownHostK256(GatewayToHostBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_known(256)


@group("gateway_to_host")
class GatewayToKnownHostK4096(GatewayToHostBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_known(4096)


@group("gateway_to_host")
class GatewayToUnknownHostFloodsHostsOnly(GatewayToHostBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host = "00:00:03:00:19:00"
        gw = self.ports.gateways[0]
        frame = from_gateway(gw, host)
        self.send(gw, frame)
        self.expect_on(self.to_host(frame, host), self.ports.hosts)
