"""Host learning on the switch: what the core does with digests, idle timeouts and punted ARP.

`HostLearning` drives `learning.HostTable` (pure state) from the switch's events and has
the southbound write what the table says: a digest becomes `learned_sources`, `mac_table`
and `host_ips` entries; an idle timeout deletes all of that host's entries; hosts that
waited `learning.ip_wait_s` for an IPv4 source are learned without one (`sweep`); a
gateway's ARP for an IP the controller knows is answered with a packet-out, and for one it
does not know the host is asked (`_solicit`) and the gateway answered once the owner is
learned (`pending_asks`); Neighbor Solicitations alike, without the asking.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from supergw_proto import p4constants as pc
from supergw_proto.bucket import bucket_of
from supergw_controller.config import Config, PortRoleName
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.learning import ARP_REQUEST, ArpPacket, HostTable, arp_probe, arp_reply, parse_arp
from supergw_controller.ndp import neighbor_advert_frame, parse_neighbor_solicitation
from supergw_controller.pending_asks import PendingAsks
from supergw_controller.southbound.domain import (
    HeldHosts,
    HostCapacity,
    HostIdle,
    HostSeen,
    HostWrite,
    Ip6Idle,
    Ip6Seen,
    PacketIn,
)

log = logging.getLogger(__name__)

# A gateway retries its ARP about every second while it has packets for the address: ask the
# hosts once per address and second at most.
SOLICIT_EVERY_S = 1.0


class HostSwitch(Protocol):
    """What host learning asks of the southbound."""

    async def write_hosts(self, writes: Sequence[HostWrite]) -> None: ...
    async def send_packet(self, frame: bytes, port: int) -> None: ...


class HostLearning:
    def __init__(
        self,
        config: Config,
        switch: HostSwitch,
        *,
        capacity: HostCapacity = HostCapacity(None, None),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`capacity`: what the switch's host tables hold; hosts beyond it are refused."""
        v6 = config.gateway_ip6
        k, how = config.buckets, config.dispatch.hash
        self._host_ports = sorted(config.ports_with_role(PortRoleName.HOST))
        self._not_hosts = {str(config.gateway_ip)}
        self._solicited: dict[str, float] = {}  # address -> when the hosts were last asked for it
        self.pending = PendingAsks()
        self.table = HostTable(
            set(config.ports_with_role(PortRoleName.HOST)),
            str(config.gateway_ip),
            ip_wait_s=config.learning.ip_wait_s,
            gateway_ip6s=frozenset() if v6 is None else frozenset(str(a) for a in (v6.link_local, v6.global_) if a),
            capacity=capacity,
            bucket_of=lambda mac: bucket_of(mac, k, how),
        )
        self._switch = switch
        self._clock = clock
        self.digests_total = 0
        self.packet_ins_total = 0
        self.arp_misses_unknown_total = 0
        self.arp_solicits_total = 0
        self.ip6_digests_total = 0
        self.nd_misses_unknown_total = 0
        self.asks_answered_late_total = 0  # ARP/NS answered once their address was learned

    async def seen(self, hosts: Sequence[HostSeen]) -> None:
        """One learn digest: learn its hosts; a failed write forgets them (the switch digests them again)."""
        self.digests_total += 1
        now = self._clock()
        writes: list[HostWrite] = []
        for h in hosts:
            writes += self.table.learn(h.mac, h.port, h.ip, now)
        try:
            await self._switch.write_hosts(writes)
        except SwitchUnavailable as exc:
            log.warning("learning write failed (host will be re-learned): %s", exc)
            for h in hosts:
                known = self.table.get(h.mac)
                if known is not None:
                    self.table.expire(h.mac, known.port)
            return
        if self.pending:
            await self._answer_pending([(h.ip, self.table.mac_of_ip(h.ip)) for h in hosts if h.ip is not None])

    async def idle(self, hosts: Sequence[HostIdle]) -> None:
        """`learned_sources` entries went idle: forget those hosts and delete their entries."""
        writes: list[HostWrite] = []
        for h in hosts:
            log.info("host %s idle on port %d: forgetting it", h.mac, h.port)
            writes += self.table.expire(h.mac, h.port)
        try:
            await self._switch.write_hosts(writes)
        except SwitchUnavailable as exc:
            log.warning("ageing write failed: %s", exc)

    async def ip6s_seen(self, seen: Sequence[Ip6Seen]) -> None:
        """One IPv6 learn digest: the addresses become their hosts'; a failed write forgets
        them (the switch digests them again)."""
        self.ip6_digests_total += 1
        now = self._clock()
        writes: list[HostWrite] = []
        for s in seen:
            writes += self.table.learn_ip6(s.mac, s.port, s.ip6, now)
        try:
            await self._switch.write_hosts(writes)
        except SwitchUnavailable as exc:
            log.warning("IPv6 learning write failed (addresses will be re-learned): %s", exc)
            for s in seen:
                self.table.forget_in_flight(s.mac)
                if self.table.mac_of_ip6(s.ip6) == s.mac:
                    self.table.expire_ip6(s.ip6, s.mac)
            return
        if self.pending:
            await self._answer_pending([(s.ip6, self.table.mac_of_ip6(s.ip6)) for s in seen])

    async def _answer_pending(self, learned: Sequence[tuple[str, str | None]]) -> None:
        """Answer the gateways that asked for these just-learned addresses (address, owner)
        before the controller knew them: they need not wait for their next retry."""
        now = self._clock()
        for address, mac in learned:
            if mac is None:
                continue  # not learned after all (refused: the tables are full, or another host has it)
            for ask in self.pending.take(address, now):
                try:
                    await self._switch.send_packet(ask.answer(mac), ask.port)
                except SwitchUnavailable as exc:
                    log.warning("answer to the gateway on port %d for %s failed (it asks again): %s", ask.port, address, exc)
                    continue
                self.asks_answered_late_total += 1
                log.debug("answered the gateway on port %d for %s (%s), learned after it asked", ask.port, address, mac)

    async def ip6s_idle(self, idle: Sequence[Ip6Idle]) -> None:
        """`learned_ip6s` entries went idle: those addresses are forgotten."""
        writes: list[HostWrite] = []
        for i in idle:
            log.info("IPv6 address %s of %s idle: forgetting it", i.ip6, i.mac)
            writes += self.table.expire_ip6(i.ip6, i.mac)
        try:
            await self._switch.write_hosts(writes)
        except SwitchUnavailable as exc:
            log.warning("IPv6 ageing write failed: %s", exc)

    async def packet_in(self, p: PacketIn) -> None:
        """A gateway's ARP or Neighbor Solicitation for a host address the switch did not
        know: answer it if we do."""
        self.packet_ins_total += 1
        if p.reason == pc.PuntReason.GATEWAY_ND_MISS:
            await self._nd_miss(p)
            return
        arp = parse_arp(p.payload)
        if p.reason != pc.PuntReason.GATEWAY_ARP_MISS or arp is None or arp.op != ARP_REQUEST:
            log.debug("packet-in reason %d from port %d ignored", p.reason, p.port)
            return
        mac = self.table.mac_of_ip(arp.target_ip)
        if mac is None:
            self.arp_misses_unknown_total += 1
            if arp.target_ip in self._not_hosts or arp.target_ip == arp.sender_ip:
                return  # IP_G is answered by nobody; a gateway's gratuitous ARP asks for nothing
            self.pending.add(arp.target_ip, p.port, functools.partial(arp_reply, arp), self._clock())
            await self._solicit(arp, p.port)
            return
        await self._switch.send_packet(arp_reply(arp, mac), p.port)
        log.debug("answered ARP for %s (%s) to port %d", arp.target_ip, mac, p.port)

    async def _solicit(self, arp: ArpPacket, port: int) -> None:
        """A gateway asks for an address nobody taught us: a host that has been silent longer
        than the ageing was forgotten (its entries idled out), and a gateway's ARP never reaches
        hosts, so nothing would ever reach it again until it spoke first. Ask the host ports
        with an RFC 5227 probe in the gateway's name (sender IP 0.0.0.0: no host caches
        anything from it, least of all the gateway's MAC for IP_G); the owner's answer comes in
        on its port, is learned like any frame (digest with its IP), and the gateway's next
        ARP is answered by the switch."""
        ip = arp.target_ip
        now = self._clock()
        last = self._solicited.get(ip)
        if last is not None and now - last < SOLICIT_EVERY_S:
            log.debug("gateway on port %d asks for unknown %s: asked the hosts %.2fs ago", port, ip, now - last)
            return
        self._solicited = {a: t for a, t in self._solicited.items() if now - t < SOLICIT_EVERY_S}
        self._solicited[ip] = now
        frame = arp_probe(arp.sender_mac, ip)
        for host_port in self._host_ports:
            await self._switch.send_packet(frame, host_port)
        self.arp_solicits_total += 1
        log.debug("gateway on port %d asks for unknown %s: asked %d host ports", port, ip, len(self._host_ports))

    async def _nd_miss(self, p: PacketIn) -> None:
        ns = parse_neighbor_solicitation(p.payload)
        if ns is None:
            log.debug("invalid Neighbor Solicitation from port %d ignored", p.port)
            return
        mac = self.table.mac_of_ip6(str(ns.target))
        if mac is None:
            self.nd_misses_unknown_total += 1
            self.pending.add(str(ns.target), p.port, functools.partial(neighbor_advert_frame, ns), self._clock())
            log.debug("gateway on port %d solicits unknown %s: answered if it is learned soon", p.port, ns.target)
            return
        await self._switch.send_packet(neighbor_advert_frame(ns, mac), p.port)
        log.debug("answered NS for %s (%s) to port %d", ns.target, mac, p.port)

    async def sweep(self) -> None:
        """Learn the hosts that waited `learning.ip_wait_s` for an IP without one."""
        macs, writes = self.table.sweep(self._clock())
        if not writes:
            return
        try:
            await self._switch.write_hosts(writes)
        except SwitchUnavailable:
            self.table.unlearn(macs)
            raise

    def reconcile(self, held: HeldHosts) -> list[HostWrite]:
        """What to write so the switch holds our hosts: a fresh switch gets every known host
        back; otherwise the switch's hosts are adopted (leftovers repaired)."""
        if not held.learned and not held.l2 and not held.ips and len(self.table):
            return self.table.reinstall()
        return self.table.adopt(held, self._clock())

    def mirror(self, held: HeldHosts) -> None:
        """A backup shows the hosts the switch holds (it writes nothing)."""
        self.table.adopt(held, self._clock())
