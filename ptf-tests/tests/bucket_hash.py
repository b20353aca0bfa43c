"""The bucket hash is a run-time setting (`bucket_hash` of set_dispatch_config): with
IDENTITY a host's bucket is its MAC's low bits, mac & (K - 1), the clustering paper's
h(m) = base | (m % K). Every data path that hashes a host MAC follows it: the ARP answer
for IP_G carries vmac(mac & mask) (checked against the BMv2-computed vectors in
p4src/vectors/bucket-identity.json), a host's frames to that vmac reach the bucket's
gateway, and a gateway's frames to the host leave with that vmac as source. One MODIFY
switches between CRC-32 and identity; an undefined value is refused (eBPF) or leaves the
switch unconfigured (BMv2)."""

from __future__ import annotations

from finsy import P4TableAction
from finsy.proto import rpc_code
from ptf.testutils import group
from supergw_proto import p4constants as c
from supergw_proto.p4constants import BucketHash
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import (
    MARK_UNCONFIGURED,
    SET_DISPATCH_CONFIG,
    SETTINGS,
    Dispatch,
    DropReason,
    SupergwTest,
    bucket_of,
    bucket_vectors,
    gateway_mac,
)

HOST_IP = "10.0.0.10"
# Two of the paper's §4.3 hosts: they differ in bits 8..11 only, so identity with K = 4096
# puts them in buckets 0x800 and 0x900, and CRC-32 elsewhere.
PAPER_HOST = "00:00:03:00:18:00"
PAPER_HOST_2 = "00:00:03:00:19:00"
IDENTITY_4096 = Dispatch(k=4096, hash=BucketHash.IDENTITY)


class IdentityBase(SupergwTest):
    def expected_reply(self, requester: str, vmac: str) -> bytes:
        return pk.arp(
            eth_src=vmac, eth_dst=requester, op=pk.ARP_REPLY, sha=vmac, spa=self.dispatch.gateway_ip, tha=requester, tpa=HOST_IP
        )

    def ask_for_gateway_ip(self, port: int, host: str) -> bytes:
        request = pk.arp(eth_src=host, spa=HOST_IP, tpa=self.dispatch.gateway_ip)
        self.send(port, request)
        return request

    def check_vectors(self, k: int) -> None:
        self.setup_switch(Dispatch(k=k, hash=BucketHash.IDENTITY))
        before = self.all_drop_counts()
        hosts = self.ports.hosts
        for i, vector in enumerate(bucket_vectors(BucketHash.IDENTITY)):
            self.assertEqual(
                bucket_of(vector.mac, k, BucketHash.IDENTITY),
                vector.bucket(k),
                f"supergw_proto.bucket disagrees with BMv2's identity for {vector.mac}",
            )
            port = hosts[i % len(hosts)]
            self.ask_for_gateway_ip(port, vector.mac)
            self.expect(self.expected_reply(vector.mac, self.dispatch.vmac(vector.bucket(k))), port)
        self.expect_nothing()  # once: each wait costs a PTF timeout
        self.assert_not_dropped(before)


@group("bucket_hash")
class IdentityArpVectorsK64(IdentityBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_vectors(64)


@group("bucket_hash")
class IdentityArpVectorsK256(IdentityBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_vectors(256)


@group("bucket_hash")
class IdentityArpVectorsK4096(IdentityBase):
    @autocleanup
    def runTest(self) -> None:
        self.check_vectors(4096)


@group("bucket_hash")
class IdentityHostToGateway(IdentityBase):
    """A paper host learns vmac(mac & mask) from the ARP answer and sends to it: the frame
    reaches the gateway owning bucket mac & mask, dst rewritten, counted by that bucket."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch(IDENTITY_4096)
        bucket = 0x800
        self.assertEqual(self.dispatch.bucket(PAPER_HOST), bucket)
        gw = self.ports.gateways[1]
        entry = self.bucket_entry(bucket, gw)
        self.insert(entry)
        port = self.ports.hosts[0]
        vmac = self.dispatch.vmac(bucket)
        self.ask_for_gateway_ip(port, PAPER_HOST)
        self.expect(self.expected_reply(PAPER_HOST, vmac), port)
        before, counter_before = self.all_drop_counts(), self.read_direct_counter(entry)
        frame = pk.ipv4_udp(eth_src=PAPER_HOST, eth_dst=vmac, payload=b"paper host")
        self.send(port, frame)
        self.expect(pk.with_macs(frame, eth_dst=gateway_mac(gw)), gw)
        self.expect_nothing()
        delta = self.read_direct_counter(entry) - counter_before
        self.assertEqual((delta.packets, delta.bytes), (1, len(frame)), f"bucket_counter[{bucket:#x}]")
        self.assert_not_dropped(before)


@group("bucket_hash")
class IdentityGatewayToHost(IdentityBase):
    """A gateway's frame to a host leaves with src = vmac(dst & mask): the MAC the host
    learned for IP_G, so the host never sees the gateway's own MAC."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch(IDENTITY_4096)
        before = self.all_drop_counts()
        for i, (host, bucket) in enumerate(((PAPER_HOST, 0x800), (PAPER_HOST_2, 0x900))):
            host_port = self.ports.hosts[i % len(self.ports.hosts)]
            gw = self.ports.gateways[i % len(self.ports.gateways)]
            self.add_l2(host, host_port)
            frame = pk.ipv4_udp(eth_src=gateway_mac(gw), eth_dst=host, ip_src="192.0.2.1", ip_dst=HOST_IP, payload=b"from-gw")
            self.send(gw, frame)
            self.expect(pk.with_macs(frame, eth_src=self.dispatch.vmac(bucket)), host_port)
            self.expect_nothing()
        self.assert_not_dropped(before)


@group("bucket_hash")
class HashFollowsSettings(IdentityBase):
    """bucket_hash is read at run time: one MODIFY of the settings from CRC-32 to identity
    and back changes the vmac of the answer, no other write needed."""

    @autocleanup
    def runTest(self) -> None:
        port = self.ports.hosts[0]
        crc = Dispatch(k=4096)
        self.assertNotEqual(crc.bucket(PAPER_HOST), IDENTITY_4096.bucket(PAPER_HOST))
        self.setup_switch(crc)
        for dispatch in (IDENTITY_4096, crc):
            self.configure_dispatch(dispatch)
            self.ask_for_gateway_ip(port, PAPER_HOST)
            self.expect(self.expected_reply(PAPER_HOST, dispatch.vmac_of(PAPER_HOST)), port)
            self.expect_nothing()


@group("bucket_hash")
class UndefinedHashConfiguresNothing(IdentityBase):
    """bucket_hash 2 is undefined. The eBPF target refuses the write (INVALID_ARGUMENT) and
    keeps the settings it had; BMv2 cannot refuse it, and its pipeline then treats the switch
    as unconfigured: every frame is dropped NOT_CONFIGURED, none is dispatched by a guess."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch(IDENTITY_4096)
        port = self.ports.hosts[0]
        d = self.dispatch
        params = {
            c.PARAM_SET_DISPATCH_CONFIG_GATEWAY_IP: d.gateway_ip,
            c.PARAM_SET_DISPATCH_CONFIG_VMAC_BASE: d.vmac_base,
            c.PARAM_SET_DISPATCH_CONFIG_BUCKET_MASK: d.mask,
            c.PARAM_SET_DISPATCH_CONFIG_BUCKET_HASH: 2,
        }
        request = pk.arp(eth_src=PAPER_HOST, spa=HOST_IP, tpa=d.gateway_ip)
        if self.target == "bmv2":
            self.set_default_action(SETTINGS, P4TableAction(SET_DISPATCH_CONFIG, **params), restore=P4TableAction(MARK_UNCONFIGURED))
            self.assert_dropped(DropReason.NOT_CONFIGURED, port, request)
            return
        with self.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT, "bucket_hash 2"):
            self.set_default_action(SETTINGS, P4TableAction(SET_DISPATCH_CONFIG, **params))
        self.send(port, request)  # the identity settings are still in force
        self.expect(self.expected_reply(PAPER_HOST, d.vmac(0x800)), port)
        self.expect_nothing()
