"""Data path 1: a host's ARP request for IP_G is answered by the switch, from the
ingress port, with vmac(bucket(src)). The vmacs are checked against the BMv2-computed
vectors in p4src/vectors/bucket-crc32.json, so a pass proves the target's hash equals
BMv2's for K=64, K=256 and K=4096."""

from __future__ import annotations

from itertools import cycle

from ptf.testutils import group
from supergw_proto.bucket import bucket_of
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import Dispatch, SupergwTest, bucket_vectors

HOST_IP = "10.0.0.10"


class ArpForGatewayIpBase(SupergwTest):
    def check_vectors(self, k: int) -> None:
        self.setup_switch(Dispatch(k=k))
        before = self.all_drop_counts()
        hosts = cycle(self.ports.hosts)
        for vector in bucket_vectors():
            port = next(hosts)
            self.assertEqual(
                bucket_of(vector.mac, k), vector.bucket(k), f"supergw_proto.bucket disagrees with BMv2 for {vector.mac}"
            )
            request = pk.arp(eth_src=vector.mac, spa=HOST_IP, tpa=self.dispatch.gateway_ip)
            self.send(port, request)
            self.expect(self.gateway_ip_reply(vector.mac, HOST_IP, self.dispatch.vmac(vector.bucket(k))), port)
        # Once, not per vector: each wait costs a PTF timeout and there are 200 vectors.
        self.expect_nothing()
        self.assert_not_dropped(before)


@group("arp_gateway_ip")
class ArpForGatewayIpVectorsK64(ArpForGatewayIpBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_vectors(64)


@group("arp_gateway_ip")
class ArpForGatewayIpVectorsK256(ArpForGatewayIpBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_vectors(256)


@group("arp_gateway_ip")
class ArpForGatewayIpVectorsK4096(ArpForGatewayIpBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_vectors(4096)


@group("arp_gateway_ip")
class ArpForGatewayIpUnicastRefresh(ArpForGatewayIpBase):
    """A host refreshing its cache sends the request unicast to its vmac: still answered
    by the switch, never dispatched to a gateway."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host, port = "00:00:03:00:00:19", self.ports.hosts[1]
        vmac = self.dispatch.vmac_of(host)
        self.add_bucket(self.dispatch.bucket(host), self.ports.gateways[0])
        request = pk.arp(eth_src=host, eth_dst=vmac, spa=HOST_IP, tpa=self.dispatch.gateway_ip)
        self.send(port, request)
        self.expect(self.gateway_ip_reply(host, HOST_IP), port)
        self.expect_nothing()


@group("arp_gateway_ip")
class ArpForOtherIpNotAnswered(ArpForGatewayIpBase):
    """An ARP request for another host's IP is ordinary L2 broadcast: flooded to the other
    host ports, not answered, never sent to a gateway."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        ingress = self.ports.hosts[0]
        request = pk.arp(eth_src="00:00:03:00:00:1a", spa=HOST_IP, tpa="10.0.0.99")
        self.send(ingress, request)
        self.expect_on(request, [p for p in self.ports.hosts if p != ingress])


@group("arp_gateway_ip")
class ArpForGatewayIpFollowsBucketMask(ArpForGatewayIpBase):
    """bucket_mask comes from the settings at run time: one MODIFY from K=256 to K=4096
    changes the vmac in the reply, no other write needed."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch(Dispatch(k=256))
        vector = next(v for v in bucket_vectors() if v.bucket_k256 != v.bucket_k4096)
        port = self.ports.hosts[0]
        request = pk.arp(eth_src=vector.mac, spa=HOST_IP, tpa=self.dispatch.gateway_ip)
        for k in (256, 4096):
            self.configure_dispatch(Dispatch(k=k))
            self.send(port, request)
            self.expect(self.gateway_ip_reply(vector.mac, HOST_IP, self.dispatch.vmac(vector.bucket(k))), port)
            self.expect_nothing()
