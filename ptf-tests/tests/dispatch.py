"""Data path 2: host → gateway. dst is a vmac → buckets[dst & mask] rewrites dst to the
gateway's MAC and forwards to its port, counted by bucket_counter; moving a bucket is one
MODIFY; an unassigned bucket is dropped and counted."""

from __future__ import annotations

from ptf.testutils import group
from supergw_proto.addresses import int_to_mac, mac_to_int
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import Dispatch, DropReason, SupergwTest, bucket_vectors


def frame_to(src: str, dst: str, payload: bytes = b"to-gateway") -> bytes:
    return pk.ipv4_udp(eth_src=src, eth_dst=dst, payload=payload)


class HostToGatewayPerBucket(SupergwTest):
    """Hosts in distinct buckets, buckets spread over every gateway: each frame leaves on
    its bucket's gateway port with dst rewritten and nothing else changed, and the
    bucket's direct counter counts exactly that frame."""

    def check(self, k: int) -> None:
        self.setup_switch(Dispatch(k=k))
        gateways = self.ports.gateways
        chosen: dict[int, str] = {}
        for v in bucket_vectors():
            chosen.setdefault(v.bucket(k), v.mac)
        cases = list(chosen.items())[: 3 * len(gateways)]
        entries = {}
        for i, (bucket, _) in enumerate(cases):
            gw = gateways[i % len(gateways)]
            entries[bucket] = (gw, self.bucket_entry(bucket, gw))
            self.insert(entries[bucket][1])
        before = self.all_drop_counts()
        for i, (bucket, host) in enumerate(cases):
            gw, entry = entries[bucket]
            ingress = self.ports.hosts[i % len(self.ports.hosts)]
            counter_before = self.read_direct_counter(entry)
            frame = frame_to(host, self.dispatch.vmac(bucket), payload=f"bucket {bucket}".encode())
            self.assert_dispatched(ingress, frame, gw)
            delta = self.read_direct_counter(entry) - counter_before
            self.assertEqual((delta.packets, delta.bytes), (1, len(frame)), f"bucket_counter[{bucket}]")
        self.assert_not_dropped(before)


@group("dispatch")
class HostToGatewayPerBucketK256(HostToGatewayPerBucket):
    @autocleanup
    def runTest(self) -> None:
        self.check(256)


@group("dispatch")
class HostToGatewayPerBucketK4096(HostToGatewayPerBucket):
    @autocleanup
    def runTest(self) -> None:
        self.check(4096)


@group("dispatch")
class DispatchByDestinationBucket(SupergwTest):
    """The bucket comes from the destination vmac, not from the sender's MAC."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host = "00:00:03:00:00:18"  # bucket 0 for K=256
        other = (self.dispatch.bucket(host) + 7) & self.dispatch.mask
        gw = self.ports.gateways[1]
        self.add_bucket(other, gw)
        self.assert_dispatched(self.ports.hosts[0], frame_to(host, self.dispatch.vmac(other)), gw)


@group("dispatch")
class BucketModifyMovesTraffic(SupergwTest):
    """One MODIFY of one buckets entry moves the host to another gateway; the host keeps
    sending to the same vmac."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host = "00:00:03:00:00:1c"
        bucket = self.dispatch.bucket(host)
        first, second = self.ports.gateways[0], self.ports.gateways[1]
        self.add_bucket(bucket, first)
        frame = frame_to(host, self.dispatch.vmac(bucket))
        self.assert_dispatched(self.ports.hosts[0], frame, first)
        self.modify(self.bucket_entry(bucket, second))
        self.assert_dispatched(self.ports.hosts[0], frame, second)


@group("dispatch")
class BucketUnassignedDropped(SupergwTest):
    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host = "00:00:03:00:00:1d"
        bucket = self.dispatch.bucket(host)
        self.add_bucket((bucket + 1) & self.dispatch.mask, self.ports.gateways[0])
        frame = frame_to(host, self.dispatch.vmac(bucket))
        self.assert_dropped(DropReason.BUCKET_UNASSIGNED, self.ports.hosts[0], frame)


@group("dispatch")
class BucketDeleteStopsTraffic(SupergwTest):
    """After DELETE of a bucket its hosts' frames are dropped as unassigned."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        host = "00:00:03:00:00:1e"
        bucket = self.dispatch.bucket(host)
        gw = self.ports.gateways[2]
        self.add_bucket(bucket, gw)
        frame = frame_to(host, self.dispatch.vmac(bucket))
        self.assert_dispatched(self.ports.hosts[2], frame, gw)
        self.delete(self.bucket_entry(bucket))
        self.assert_dropped(DropReason.BUCKET_UNASSIGNED, self.ports.hosts[2], frame)


@group("dispatch")
class VmacAboveMaskIsNotDispatched(SupergwTest):
    """vmac_base | (mask + 1) is not a vmac for K=256: ordinary L2 (unknown unicast →
    flooded to the other host ports), even though a bucket with those low bits exists."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        low = self.dispatch.mask + 1
        self.add_bucket(low & self.dispatch.mask, self.ports.gateways[0])
        dst = int_to_mac(mac_to_int(self.dispatch.vmac_base) | low)
        ingress = self.ports.hosts[0]
        frame = frame_to("00:00:03:00:00:1f", dst)
        self.send(ingress, frame)
        self.expect_on(frame, [p for p in self.ports.hosts if p != ingress])
