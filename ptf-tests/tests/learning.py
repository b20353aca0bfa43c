"""Data path 6: an unknown (src MAC, ingress port) on a host port emits learn_digest_t
(src_mac, port, src_ip) and the frame still goes on; once learned_sources holds the pair
no digest is sent."""

from __future__ import annotations

import time

from finsy import P4DigestEntry
from ptf.testutils import group
from supergw_proto import p4constants as c
from supergw_proto.addresses import mac_to_int
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import LEARN_DIGEST, SupergwTest, gateway_mac


class LearningBase(SupergwTest):
    """Digests are matched, not taken in order: a target may still hold a digest of an
    earlier test's frame (BMv2 batches samples for DigestEntry.max_timeout_ns and sends a
    list whenever its learn engine flushes), so stale ones are drained first and any
    sample of another host is ignored. A sample of this test's host that differs from
    the expected one still fails."""

    def setup_learning(self) -> None:
        self.setup_switch()
        self.insert(P4DigestEntry(LEARN_DIGEST, max_list_size=1, ack_timeout_ns=1_000_000_000))
        self.drain_digests()

    def drain_digests(self, quiet: float = 0.3) -> None:
        while self.get_digest(quiet) is not None:
            pass

    def expect_digest(self, mac: str, port: int, src_ip: str | None) -> None:
        want = self.learn_digest(mac, port, src_ip)
        others: list[dict[str, int]] = []
        deadline = time.monotonic() + self.default_timeout
        while (left := deadline - time.monotonic()) > 0:
            got = self.get_digest(left)
            if got is None:
                break
            for sample in got:
                if sample == want:
                    return
                if sample[c.DIGEST_LEARN_DIGEST_SRC_MAC] == want[c.DIGEST_LEARN_DIGEST_SRC_MAC]:
                    self.fail(f"learn digest for {mac} is {sample}, expected {want}")
                others.append(sample)
        self.fail(f"no learn digest {want} for ({mac}, {port}) within {self.default_timeout}s; other samples: {others}")

    def expect_no_digest(self, mac: str, port: int, timeout: float = 1.0) -> None:
        """No sample for this MAC nor from this port arrives within timeout."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            got = self.get_digest(left)
            if got is None:
                return
            for sample in got:
                if sample[c.DIGEST_LEARN_DIGEST_SRC_MAC] == mac_to_int(mac) or sample[c.DIGEST_LEARN_DIGEST_PORT] == port:
                    self.fail(f"unexpected learn digest {sample} for ({mac}, {port})")

    def flood_ports(self, ingress: int) -> list[int]:
        return [p for p in self.ports.hosts if p != ingress]

    def assert_learned_and_flooded(self, port: int, frame: bytes, mac: str, src_ip: str | None) -> None:
        """`frame` from `mac` on host `port` yields the learn digest (mac, port, src_ip) and is
        still flooded to the other host ports."""
        self.send(port, frame)
        self.expect_digest(mac, port, src_ip)
        self.expect_on(frame, self.flood_ports(port))


@group("learning")
class LearnDigestIpv4(LearningBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_learning()
        mac, port = "00:00:03:00:dd:01", self.ports.hosts[1]
        frame = pk.ipv4_udp(eth_src=mac, eth_dst=pk.BROADCAST, ip_src="10.0.0.30", ip_dst="10.0.0.255")
        self.assert_learned_and_flooded(port, frame, mac, "10.0.0.30")


@group("learning")
class LearnDigestArpSenderIp(LearningBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_learning()
        mac, port = "00:00:03:00:dd:02", self.ports.hosts[0]
        self.assert_learned_and_flooded(port, pk.arp(eth_src=mac, spa="10.0.0.31", tpa="10.0.0.99"), mac, "10.0.0.31")


@group("learning")
class LearnDigestOtherEthertypeZeroIp(LearningBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_learning()
        mac, port = "00:00:03:00:dd:03", self.ports.hosts[2]
        self.assert_learned_and_flooded(port, pk.ether(eth_src=mac, eth_dst=pk.BROADCAST, ethertype=0x88B5), mac, None)


@group("learning")
class LearnDigestOnArpForGatewayIp(LearningBase):
    """The first frame of a new host is usually its ARP for IP_G: learned and answered."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_learning()
        mac, port = "00:00:03:00:dd:04", self.ports.hosts[3]
        self.send(port, pk.arp(eth_src=mac, spa="10.0.0.32", tpa=self.dispatch.gateway_ip))
        self.expect_digest(mac, port, "10.0.0.32")
        self.expect(self.gateway_ip_reply(mac, "10.0.0.32"), port)
        self.expect_nothing()


@group("learning")
class NoDigestOnceLearned(LearningBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_learning()
        mac, port = "00:00:03:00:dd:05", self.ports.hosts[1]
        self.add_learned(mac, port)
        frame = pk.ipv4_udp(eth_src=mac, eth_dst=pk.BROADCAST, ip_src="10.0.0.33", ip_dst="10.0.0.255")
        self.send(port, frame)
        self.expect_on(frame, self.flood_ports(port))
        self.expect_no_digest(mac, port)


@group("learning")
class DigestWhenLearnedOnAnotherPort(LearningBase):
    """learned_sources is keyed by (MAC, port): a host that moved is reported again."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_learning()
        mac = "00:00:03:00:dd:06"
        old, new = self.ports.hosts[0], self.ports.hosts[2]
        self.add_learned(mac, old)
        frame = pk.ipv4_udp(eth_src=mac, eth_dst=pk.BROADCAST, ip_src="10.0.0.34", ip_dst="10.0.0.255")
        self.assert_learned_and_flooded(new, frame, mac, "10.0.0.34")


@group("learning")
class NoDigestFromGatewayPort(LearningBase):
    """Learning is for host ports only: a gateway's frame never produces a digest."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_learning()
        gw = self.ports.gateways[0]
        host = "00:00:03:00:dd:07"
        self.add_l2(host, self.ports.hosts[0])
        frame = pk.ipv4_udp(eth_src=gateway_mac(gw), eth_dst=host, ip_src="192.0.2.1", ip_dst="10.0.0.35")
        self.send(gw, frame)
        self.expect(self.to_host(frame, host), self.ports.hosts[0])
        self.expect_no_digest(gateway_mac(gw), gw)


@group("learning")
class LearnedSourceIdleTimeout(LearningBase):
    """learned_sources supports idle timeout (NOTIFY_CONTROL): an entry that is not hit
    for idle_timeout_ns is reported in an IdleTimeoutNotification; one that keeps being
    hit is not. Targets track hits coarsely (the eBPF target refreshes a hit time at most
    once per second), so the timeout is 3 s against hits every 250 ms."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        idle_mac, busy_mac = "00:00:03:00:dd:08", "00:00:03:00:dd:09"
        port = self.ports.hosts[0]
        for mac in (idle_mac, busy_mac):
            entry = self.learned_entry(mac, port)
            entry.idle_timeout_ns = 3_000_000_000
            self.insert(entry)
        frame = pk.ipv4_udp(eth_src=busy_mac, eth_dst=pk.BROADCAST, ip_src="10.0.0.36", ip_dst="10.0.0.255")
        idle, busy = mac_to_int(idle_mac), mac_to_int(busy_mac)
        reported: list[int] = []
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline and idle not in reported:
            self.send(port, frame)
            self.dataplane.flush()
            note = self.client.idle_timeout_notification(0.25)
            if note is not None:
                reported += [e[c.MATCH_LEARNED_SOURCES_SRC_MAC] for e in note.table_entry]
        self.assertIn(idle, reported, "no idle timeout notification for the idle entry")
        self.assertNotIn(busy, reported, "an entry hit every 250 ms must not time out")
