"""Gateway liveness (docs/pipeline-contract.md, "Gateway liveness"): a gateway's liveness
frame is consumed by the switch and refreshes its port's timestamp; a host's frame whose
bucket's gateway has been silent longer than its gateway_backups entry's timeout goes to
that entry's backup, with the backup's MAC, counted in failover_frames; a gateway never
heard, or without an entry, is not judged.

The clock is the switch's own (BMv2: ingress_global_timestamp; eBPF: bpf_ktime_get_ns), so
staleness is made by waiting: TIMEOUT_US is long enough that a loaded machine cannot make a
fresh gateway stale between a liveness frame and the next frame of a case (one counter read
apart; PTF's own wait for "nothing else arrived" is 0.3 s), and WAIT_S is well past it.
Port 7 sends no liveness frame in this suite (the never-heard case relies on it: the
timestamp lives as long as the switch)."""

from __future__ import annotations

import time

from ptf.testutils import group
from supergw_proto.liveness import encode
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import FAILOVER_FRAMES, LIVENESS_FRAMES, DropReason, SupergwTest, gateway_mac

TIMEOUT_US = 1_000_000
WAIT_S = 1.5
HOST = "00:00:03:00:00:31"


def liveness_from(port: int, seq: int = 1) -> bytes:
    return encode(gateway_mac(port), f"gw{port}", seq, 5000)


class LivenessTest(SupergwTest):
    def host_frame(self, payload: bytes = b"to a gateway") -> bytes:
        return pk.ipv4_udp(eth_src=HOST, eth_dst=self.dispatch.vmac_of(HOST), payload=payload)

    def hear(self, port: int) -> None:
        """A liveness frame from `port`, counted for the port once the call returns (that
        it leaves nowhere, the next frame's "nothing else" check and LivenessFrameConsumed
        show)."""
        before = self.read_counter(LIVENESS_FRAMES, port)
        frame = liveness_from(port)
        self.send(port, frame)
        deadline = time.monotonic() + 2.0  # the switch takes the frame in its own time (BMv2: ms)
        while (delta := self.read_counter(LIVENESS_FRAMES, port) - before).packets == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        self.assertEqual((delta.packets, delta.bytes), (1, len(frame)), f"liveness_frames[{port}]")

    def setup_bucket(self, gateway: int) -> None:
        self.setup_switch()
        self.add_bucket(self.dispatch.bucket(HOST), gateway)


@group("liveness")
class LivenessFrameConsumed(LivenessTest):
    """From a gateway port the frame goes nowhere and is no drop; from a host port it is an
    ordinary frame (flooded to the other hosts)."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        gw = self.ports.gateways[0]
        drops = self.all_drop_counts()
        self.hear(gw)
        self.expect_nothing()
        self.assert_not_dropped(drops)
        host = self.ports.hosts[0]
        frame = pk.with_macs(liveness_from(gw), eth_src=HOST)
        self.send(host, frame)
        self.expect_on(frame, [h for h in self.ports.hosts if h != host])


@group("liveness")
class StaleGatewayGoesToBackup(LivenessTest):
    """Heard within its timeout: its own port. Silent longer: the backup's port with the
    backup's MAC, one failover_frames count per frame, the bucket's counter as before.
    Heard again: its own port again."""

    @autocleanup
    def runTest(self) -> None:
        gw, backup = self.ports.gateways[0], self.ports.gateways[1]
        self.setup_bucket(gw)
        self.insert(self.backup_entry(gw, backup, TIMEOUT_US))
        self.hear(gw)
        frame = self.host_frame()
        self.assert_dispatched(self.ports.hosts[0], frame, gw)
        time.sleep(WAIT_S)
        before = self.read_counter(FAILOVER_FRAMES, gw)
        bucket = self.read_direct_counter(self.bucket_entry(self.dispatch.bucket(HOST)))
        self.assert_dispatched(self.ports.hosts[0], frame, backup)
        self.assert_dispatched(self.ports.hosts[1], frame, backup)
        delta = self.read_counter(FAILOVER_FRAMES, gw) - before
        self.assertEqual((delta.packets, delta.bytes), (2, 2 * len(frame)), f"failover_frames[{gw}]")
        delta = self.read_direct_counter(self.bucket_entry(self.dispatch.bucket(HOST))) - bucket
        self.assertEqual(delta.packets, 2, "bucket_counter counts frames sent to the backup too")
        self.hear(gw)
        self.assert_dispatched(self.ports.hosts[0], frame, gw)


@group("liveness")
class NeverHeardIsNotJudged(LivenessTest):
    """A gateway the switch has never heard (port 7 sends no liveness frame in this suite)
    keeps its buckets whatever its entry's timeout."""

    @autocleanup
    def runTest(self) -> None:
        gw, backup = self.ports.gateways[2], self.ports.gateways[0]
        self.assertEqual(gw, 7, "the port map changed: pick a gateway port no test sends liveness from")
        self.setup_bucket(gw)
        self.insert(self.backup_entry(gw, backup, 1))
        time.sleep(0.01)
        self.assert_dispatched(self.ports.hosts[0], self.host_frame(), gw)


@group("liveness")
class StaleWithoutBackupStays(LivenessTest):
    """No gateway_backups entry (or a deleted one): a silent gateway keeps its buckets."""

    @autocleanup
    def runTest(self) -> None:
        gw, backup = self.ports.gateways[1], self.ports.gateways[0]
        self.setup_bucket(gw)
        self.hear(gw)
        time.sleep(WAIT_S)
        frame = self.host_frame()
        self.assert_dispatched(self.ports.hosts[0], frame, gw)
        self.insert(self.backup_entry(gw, backup, TIMEOUT_US))
        self.assert_dispatched(self.ports.hosts[0], frame, backup)
        self.delete(self.backup_entry(gw))
        self.assert_dispatched(self.ports.hosts[0], frame, gw)


@group("liveness")
class TimeoutIsTheEntrys(LivenessTest):
    """The same silence is stale for a short timeout and not for a long one (one MODIFY)."""

    @autocleanup
    def runTest(self) -> None:
        gw, backup = self.ports.gateways[0], self.ports.gateways[1]
        self.setup_bucket(gw)
        self.insert(self.backup_entry(gw, backup, 30_000_000))
        self.hear(gw)
        time.sleep(WAIT_S)
        frame = self.host_frame()
        self.assert_dispatched(self.ports.hosts[0], frame, gw)
        self.modify(self.backup_entry(gw, backup, TIMEOUT_US))
        self.assert_dispatched(self.ports.hosts[0], frame, backup)


@group("liveness")
class BackupOnIngressPortIsHairpin(LivenessTest):
    """A stale gateway whose backup is the sender's own port: HAIRPIN, as for any output."""

    @autocleanup
    def runTest(self) -> None:
        gw, host = self.ports.gateways[0], self.ports.hosts[0]
        self.setup_bucket(gw)
        self.insert(self.backup_entry(gw, host, TIMEOUT_US))
        self.hear(gw)
        time.sleep(WAIT_S)
        self.assert_dropped(DropReason.HAIRPIN, host, self.host_frame())
