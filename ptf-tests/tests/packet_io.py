"""Packet-out: the frame leaves `egress_port` unchanged, with no other processing; an
egress_port without a port_roles entry is dropped and counted PACKET_OUT_BAD_PORT, and the
switch keeps working."""

from __future__ import annotations

from ptf.testutils import group
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import DropReason, SupergwTest, gateway_mac

# What drop_counter[PACKET_OUT_BAD_PORT] counts as bytes: the packet as it enters the
# pipeline from the CPU port, i.e. the 2-byte packet_out header followed by the frame
# (contract: "On the wire to/from the CPU port the header comes first").
PACKET_OUT_HEADER_BYTES = 2


class PacketOutBase(SupergwTest):
    def frames(self) -> list[tuple[int, bytes]]:
        """One frame per attached port with a role, each of a kind the pipeline would
        otherwise rewrite, punt or drop (so 'unchanged' is meaningful)."""
        vmac = self.dispatch.vmac(3)
        out = []
        for port in self.ports.hosts:
            out.append((port, pk.arp(eth_src=vmac, eth_dst="00:00:03:00:ff:01", op=pk.ARP_REPLY, spa=self.dispatch.gateway_ip, tha="00:00:03:00:ff:01", tpa="10.0.0.50")))
        for port in self.ports.gateways:
            out.append((port, pk.arp(eth_src="00:00:03:00:ff:02", spa="10.0.0.50", tpa="10.0.0.2")))
            out.append((port, pk.ipv4_udp(eth_src="00:00:03:00:ff:02", eth_dst=gateway_mac(port))))
        return out

    def assert_bad_port(self, egress_port: int) -> None:
        frame = pk.ipv4_udp(eth_src="00:00:03:00:ff:03", eth_dst=pk.BROADCAST)
        self.assert_dropped(
            DropReason.PACKET_OUT_BAD_PORT,
            0,
            frame,
            send=lambda: self.send_packet_out(frame, egress_port),
            counted_bytes=len(frame) + PACKET_OUT_HEADER_BYTES,
        )
        # The switch keeps working: packet-out and the data path.
        ok_port = self.ports.hosts[0]
        self.send_packet_out(frame, ok_port)
        self.expect(frame, ok_port)
        self.expect_nothing()
        ingress = self.ports.hosts[1]
        self.send(ingress, frame)
        self.expect_on(frame, [p for p in self.ports.hosts if p != ingress])


@group("packet_io")
class PacketOutToEveryPortUnchanged(PacketOutBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        before = self.all_drop_counts()
        for port, frame in self.frames():
            self.send_packet_out(frame, port)
            self.expect(frame, port)
            self.expect_nothing()
        self.assert_not_dropped(before)


@group("packet_io")
class PacketOutBeforeConfigured(PacketOutBase):
    """Packet-out comes before the settings check: it works on an unconfigured switch."""

    @autocleanup
    def runTest(self) -> None:
        self.set_port_roles()
        for port, frame in self.frames()[:2]:
            self.send_packet_out(frame, port)
            self.expect(frame, port)
            self.expect_nothing()


@group("packet_io")
class PacketOutToAbsentPortDropped(PacketOutBase):
    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        self.assert_bad_port(self.ports.absent_port)


@group("packet_io")
class PacketOutToPortWithoutRoleDropped(PacketOutBase):
    """The port exists (an interface is attached) but has no port_roles entry."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        self.assert_bad_port(self.ports.unknown[0])


@group("packet_io")
class PacketOutToCpuPortDropped(PacketOutBase):
    """The CPU port has no port_roles entry either."""

    @autocleanup
    def runTest(self) -> None:
        self.setup_switch()
        self.assert_bad_port(self.params.cpu_port)
