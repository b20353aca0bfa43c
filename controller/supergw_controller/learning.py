"""Host learning: digests become `learned_sources`, `mac_table` and `host_ips` entries.

`HostTable` is pure state: every method returns the host-table writes (`HostWrite`, in the
core's words) that bring the switch in line with it; `hosts.HostLearning` has them
written in one batch. Ageing comes from
the switch (idle-timeout notifications on `learned_sources`): an idle host loses all its
entries. Gateway ARP misses are answered by a packet-out ARP reply when the IP is known.

Learning a host takes an IPv4 source. The switch digests a (MAC, port) only while
`learned_sources` misses, so a host whose first frame carries no IPv4 source (IPv6, LLDP,
any non-IP frame: digest `src_ip` = 0) gets its `mac_table` entry at once, but its
`learned_sources` entry only with the first digest that carries an IP: until then its
frames keep producing digests (the switch sends at most one per (MAC, port) per 10 ms and
none while one is unacked). A host that stays IP-less for `ip_wait_s` is completed
without an IP (`sweep`), so a non-IP host costs digests for a bounded time only.

The switch's tables bound what can be learned (`HostCapacity`, from the P4Info it runs): a
new host beyond them, or a new IPv6 address beyond theirs, is refused, counted
(`refused_hosts`, `refused_ip6s`) and logged, never written (the switch would refuse the
write, and the host would be retried at every digest). A refused host still reaches the
gateways (dispatch needs no entry); traffic to it floods the host ports.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from supergw_proto.addresses import mac_to_bytes, mac_to_str
from supergw_controller.refusals import RefusalLog
from supergw_controller.southbound.domain import (
    HeldHosts,
    HostCapacity,
    HostIp,
    HostIp6,
    HostWrite,
    L2Entry,
    LearnedIp6,
    LearnedSource,
    Op,
    ip6_text,
)

log = logging.getLogger(__name__)

ETH_ARP = 0x0806
ARP_REQUEST = 1
ARP_REPLY = 2


@dataclass(slots=True)
class Host:
    mac: str
    port: int
    ips: set[str] = field(default_factory=set)
    ip6s: set[str] = field(default_factory=set)  # its IPv6 addresses (link-local and global), each aged on its own
    seen: float = 0.0  # monotonic time it was learned or re-learned
    # learned_sources (mac, port) is installed. False while waiting for an IPv4 source:
    # then `waiting_since` is when the first IP-less digest (or the adoption) came.
    learned: bool = True
    waiting_since: float = 0.0
    bucket: int = -1  # its bucket (HostTable's `bucket_of`), fixed by its MAC
    # learned_sources was written for it by its IPv6 digest: the switch may have sent a learn
    # digest for it before that entry was in (a dual-stack host's first frames), and that one
    # digest says nothing is missing (see `learn`).
    digest_in_flight: bool = False


@dataclass(frozen=True)
class ArpPacket:
    op: int
    sender_mac: str
    sender_ip: str
    target_mac: str
    target_ip: str
    eth_src: str


class HostTable:
    def __init__(
        self,
        host_ports: set[int],
        gateway_ip: str,
        *,
        ip_wait_s: float,
        gateway_ip6s: frozenset[str] = frozenset(),
        capacity: HostCapacity = HostCapacity(None, None),
        bucket_of: Callable[[str], int] = lambda _mac: -1,
    ) -> None:
        """`ip_wait_s`: how long a host without a known IP may keep sending IP-less digests
        before it is learned without an IP (0: at once, on its first digest).
        `gateway_ip6s`: the gateway's IPv6 addresses, never a host's.
        `capacity`: what the switch's host tables hold (None: unbounded).
        `bucket_of`: a MAC's bucket, kept with each host for the views."""
        if ip_wait_s < 0:
            raise ValueError(f"ip_wait_s must be >= 0, got {ip_wait_s}")
        self._host_ports = host_ports
        self._gateway_ip = gateway_ip
        self._gateway_ip6s = gateway_ip6s
        self._ip_wait_s = ip_wait_s
        self.capacity = capacity
        self._bucket_of = bucket_of
        self._hosts: dict[str, Host] = {}
        self._ip_owner: dict[str, str] = {}
        self._ip6_owner: dict[str, str] = {}  # ip6 -> mac, for every address in host_ip6s
        self._waiting: set[str] = set()  # hosts not yet learned (no learned_sources entry): the sweep's
        self._order: list[Host] | None = None  # hosts by MAC, rebuilt after a host came or went
        advice = ("Its frames still reach the gateways (dispatch needs no entry) and traffic to it floods the "
                  "host ports. Age hosts out sooner (timing.ageing_s) or use a switch with larger tables "
                  "(docs/DESIGN.md, \"Sizing\").")
        self.refused_hosts = RefusalLog("host table (learned_sources, mac_table, host_ips)", advice)
        self.refused_ip6s = RefusalLog("IPv6 address table (learned_ip6s, host_ip6s)",
                                       "The gateways' Neighbor Solicitations for it go to the controller, "
                                       "unanswered. Age addresses out sooner or use larger tables.")

    def __len__(self) -> int:
        return len(self._hosts)

    @property
    def ip6_count(self) -> int:
        return len(self._ip6_owner)

    def hosts(self) -> list[Host]:
        """Every host, by MAC (sorted once per change of the host set, not per call)."""
        if self._order is None:
            self._order = sorted(self._hosts.values(), key=lambda h: h.mac)
        return self._order

    def _add(self, h: Host) -> None:
        self._hosts[h.mac] = h
        self._order = None
        self._mark(h)

    def _drop(self, mac: str) -> None:
        del self._hosts[mac]
        self._waiting.discard(mac)
        self._order = None

    def _mark(self, h: Host) -> None:
        """Keep the sweep's set of waiting hosts in step with `h.learned`."""
        if h.learned:
            self._waiting.discard(h.mac)
        else:
            self._waiting.add(h.mac)

    def get(self, mac: str) -> Host | None:
        return self._hosts.get(mac)

    def mac_of_ip(self, ip: str) -> str | None:
        return self._ip_owner.get(ip)

    def mac_of_ip6(self, ip6: str) -> str | None:
        return self._ip6_owner.get(ip6)

    def learn(self, mac: str, port: int, ip: str | None, now: float) -> list[HostWrite]:
        """A (src MAC, port[, IP]) seen on a host port; returns the updates to write."""
        mac = mac.lower()
        if port not in self._host_ports:
            log.debug("ignoring learn of %s on non-host port %d", mac, port)
            return []
        if int(mac.split(":")[0], 16) & 1:
            log.debug("ignoring learn of multicast source %s", mac)
            return []
        if ip in ("0.0.0.0", self._gateway_ip):
            ip = None
        out: list[HostWrite] = []
        at = 0  # where learned_sources goes: after the delete of a moved host's old entry
        h = self._hosts.get(mac)
        if h is None:
            full = self.capacity.hosts
            if full is not None and len(self._hosts) >= full:
                self.refused_hosts.refuse(f"host {mac} on port {port}", len(self._hosts), full, now)
                return []
            h = Host(mac=mac, port=port, seen=now, learned=False, waiting_since=now, bucket=self._bucket_of(mac))
            self._add(h)
            out.append(HostWrite(Op.INSERT, L2Entry(mac, port)))
        elif h.port != port:
            log.info("host %s moved from port %d to %d", mac, h.port, port)
            if h.learned:
                out.append(HostWrite(Op.DELETE, LearnedSource(mac, h.port)))
                at = 1
            out.append(HostWrite(Op.MODIFY, L2Entry(mac, port)))
            h.port = port
            h.seen = now
            if h.learned:
                h.learned, h.waiting_since = False, now
        else:
            # A learned host: the switch missed learned_sources for it (its entry aged out
            # while a digest was in flight, or the switch lost its state); written again
            # below. A waiting host: one more IP-less digest, or the one with its IP.
            h.seen = now
        if ip is not None:
            out.extend(self._set_ip(h, ip))
        if h.learned or ip is not None or h.ips or h.ip6s or now - h.waiting_since >= self._ip_wait_s:
            if not h.learned and ip is None and not h.ips and self._ip_wait_s > 0:
                log.info("host %s sent no IPv4 source for %.1fs: learned without an IP", mac, self._ip_wait_s)
            if not (h.learned and h.digest_in_flight):
                out.insert(at, HostWrite(Op.INSERT, LearnedSource(mac, port)))
            # else: the digest sent before its IPv6 digest wrote learned_sources; writing it
            # again would be an INSERT the switch refuses (ALREADY_EXISTS) and a second write
            h.learned = True
        h.digest_in_flight = False
        self._mark(h)
        if not h.learned and out:
            log.debug("host %s on port %d: forwarding, waiting for an IPv4 source", mac, port)
        return out

    def learn_ip6(self, mac: str, port: int, ip6: str, now: float) -> list[HostWrite]:
        """(IPv6 source, src MAC) seen on host port `port` (an IPv6 learn digest): the address
        becomes the host's (`learned_ip6s` with its own idle timeout, `host_ip6s`). A host still
        waiting for an IPv4 source is learned now: an IPv6 address is as good as an IPv4 one."""
        mac = mac.lower()
        if port not in self._host_ports:
            log.debug("ignoring IPv6 learn of %s on non-host port %d", mac, port)
            return []
        try:
            packed = socket.inet_pton(socket.AF_INET6, ip6)
        except OSError:  # not plain IPv6 text (a scope, a typo): ipaddress says which, or takes it
            packed = ipaddress.IPv6Address(ip6).packed
            text = str(ipaddress.IPv6Address(ip6))
        else:
            text = ip6_text(packed)
        multicast, unspecified = packed[0] == 0xFF, not any(packed)
        if int(mac.split(":")[0], 16) & 1 or multicast or unspecified or ip6 in self._gateway_ip6s:
            log.debug("ignoring IPv6 learn of %s for %s", ip6, mac)
            return []
        ip6 = text
        out: list[HostWrite] = []
        h = self._hosts.get(mac)
        was_learned = h is not None and h.port == port and h.learned
        if h is None or h.port != port:
            # Its MAC digest is on the way or lost: learn the MAC as well.
            out += self.learn(mac, port, None, now)
            got = self._hosts.get(mac)
            if got is None:
                return out  # refused: the host table is full
            h = got
        owner = self._ip6_owner.get(ip6)
        full = self.capacity.ip6s
        if owner is None and full is not None and len(self._ip6_owner) >= full:
            self.refused_ip6s.refuse(f"{ip6} of {mac}", len(self._ip6_owner), full, now)
            return out
        if owner == mac:
            # The switch missed learned_ip6s (it aged out while this digest was in flight).
            out.append(HostWrite(Op.INSERT, LearnedIp6(ip6, mac)))
        elif owner is None:
            out += [HostWrite(Op.INSERT, LearnedIp6(ip6, mac)), HostWrite(Op.INSERT, HostIp6(ip6, mac))]
        else:
            log.info("IPv6 address %s moved from %s to %s", ip6, owner, mac)
            prev = self._hosts.get(owner)
            if prev is not None:
                prev.ip6s.discard(ip6)
            out += [
                HostWrite(Op.DELETE, LearnedIp6(ip6, owner)),
                HostWrite(Op.MODIFY, HostIp6(ip6, mac)),
                HostWrite(Op.INSERT, LearnedIp6(ip6, mac)),
            ]
        self._ip6_owner[ip6] = mac
        h.ip6s.add(ip6)
        h.seen = now
        if not h.learned:
            log.info("host %s learned by its IPv6 address %s", mac, ip6)
            out.append(HostWrite(Op.INSERT, LearnedSource(mac, h.port)))
            h.learned = True
            self._mark(h)
        if not was_learned:
            h.digest_in_flight = True
        return out

    def forget_in_flight(self, mac: str) -> None:
        """The write of an IPv6 digest failed: the host's next learn digest writes learned_sources."""
        h = self._hosts.get(mac.lower())
        if h is not None:
            h.digest_in_flight = False

    def expire_ip6(self, ip6: str, mac: str) -> list[HostWrite]:
        """learned_ip6s (ip6, mac) went idle: the address is no longer the host's."""
        mac = mac.lower()
        out = [HostWrite(Op.DELETE, LearnedIp6(ip6, mac))]
        if self._ip6_owner.get(ip6) == mac:
            del self._ip6_owner[ip6]
            out.append(HostWrite(Op.DELETE, HostIp6(ip6, mac)))
        h = self._hosts.get(mac)
        if h is not None:
            h.ip6s.discard(ip6)
        return out

    def sweep(self, now: float) -> tuple[list[str], list[HostWrite]]:
        """Learn the hosts that waited `ip_wait_s` for an IP without one (the silent ones
        too, so that they age out through the switch's idle timeout): their MACs and the
        updates to write."""
        macs: list[str] = []
        out: list[HostWrite] = []
        for mac in sorted(self._waiting):
            h = self._hosts[mac]
            if now - h.waiting_since >= self._ip_wait_s:
                log.info("host %s sent no IPv4 source for %.1fs: learned without an IP", h.mac, self._ip_wait_s)
                out.append(HostWrite(Op.INSERT, LearnedSource(h.mac, h.port)))
                h.learned = True
                macs.append(h.mac)
        self._waiting.difference_update(macs)
        return macs, out

    def unlearn(self, macs: list[str]) -> None:
        """A sweep's write failed: these hosts wait again (the next sweep retries)."""
        for mac in macs:
            h = self._hosts.get(mac)
            if h is not None:
                h.learned = False
                self._mark(h)

    def _set_ip(self, h: Host, ip: str) -> list[HostWrite]:
        """`ip` is h's address from now on: it replaces the addresses h had."""
        out: list[HostWrite] = []
        for old in sorted(h.ips - {ip}):
            h.ips.discard(old)
            if self._ip_owner.get(old) == h.mac:
                log.info("host %s changed IP from %s to %s", h.mac, old, ip)
                del self._ip_owner[old]
                out.append(HostWrite(Op.DELETE, HostIp(old, h.mac)))
        return out + self._claim_ip(h, ip)

    def _claim_ip(self, h: Host, ip: str) -> list[HostWrite]:
        owner = self._ip_owner.get(ip)
        if owner == h.mac:
            return []
        self._ip_owner[ip] = h.mac
        h.ips.add(ip)
        if owner is None:
            return [HostWrite(Op.INSERT, HostIp(ip, h.mac))]
        prev = self._hosts.get(owner)
        if prev is not None:
            prev.ips.discard(ip)
        log.info("IP %s moved from %s to %s", ip, owner, h.mac)
        return [HostWrite(Op.MODIFY, HostIp(ip, h.mac))]

    def expire(self, mac: str, port: int) -> list[HostWrite]:
        """learned_sources (mac, port) went idle: forget the host and delete its entries."""
        mac = mac.lower()
        h = self._hosts.get(mac)
        if h is None or h.port != port:
            # Stale entry for a port the host has left: delete only that entry.
            return [HostWrite(Op.DELETE, LearnedSource(mac, port))]
        self._drop(mac)
        out = [HostWrite(Op.DELETE, LearnedSource(mac, port)), HostWrite(Op.DELETE, L2Entry(mac, h.port))]
        for ip in sorted(h.ips):
            if self._ip_owner.get(ip) == mac:
                del self._ip_owner[ip]
                out.append(HostWrite(Op.DELETE, HostIp(ip, mac)))
        for ip6 in sorted(h.ip6s):
            if self._ip6_owner.get(ip6) == mac:
                out += self.expire_ip6(ip6, mac)
        return out

    def reinstall(self) -> list[HostWrite]:
        """Every entry of every known host (for a switch that lost its tables)."""
        out: list[HostWrite] = []
        for h in self.hosts():
            if h.learned:
                out.append(HostWrite(Op.INSERT, LearnedSource(h.mac, h.port)))
            out.append(HostWrite(Op.INSERT, L2Entry(h.mac, h.port)))
            out.extend(HostWrite(Op.INSERT, HostIp(ip, h.mac)) for ip in sorted(h.ips))
            for ip6 in sorted(h.ip6s):
                out += [HostWrite(Op.INSERT, LearnedIp6(ip6, h.mac)), HostWrite(Op.INSERT, HostIp6(ip6, h.mac))]
        return out

    def adopt(self, held: HeldHosts, now: float) -> list[HostWrite]:
        """Rebuild the table from what the switch holds (controller restart, backup mirror).

        Hosts are kept as the switch has them; only inconsistent leftovers are repaired:
        a learned source without a mac_table entry gets one, and entries on ports that are
        no longer host ports (or that point nowhere) are rewritten or deleted.
        """
        self._hosts.clear()
        self._ip_owner.clear()
        self._waiting.clear()
        self._order = None
        out: list[HostWrite] = []
        mac_port = {mac: (-1 if port is None else port) for mac, port in held.l2.items()}
        for src in held.learned:
            mac, port = src.mac, src.port
            if port not in self._host_ports:
                out.append(HostWrite(Op.DELETE, LearnedSource(mac, port)))
                continue
            self._add(Host(mac=mac, port=port, seen=now, bucket=self._bucket_of(mac)))
            if mac_port.get(mac) != port:
                out.append(HostWrite(Op.MODIFY if mac in mac_port else Op.INSERT, L2Entry(mac, port)))
        for mac, port in mac_port.items():
            if mac not in self._hosts and port not in self._host_ports:
                out.append(HostWrite(Op.DELETE, L2Entry(mac, port)))
            elif mac not in self._hosts:
                # L2 entry without a learned source (a host waiting for its IP): keep
                # forwarding; its next digest or the sweep after ip_wait_s settles it.
                self._add(Host(mac=mac, port=port, seen=now, learned=False, waiting_since=now,
                               bucket=self._bucket_of(mac)))
        for ip, mac in held.ips.items():
            self._ip_owner[ip] = mac
            if mac in self._hosts:
                self._hosts[mac].ips.add(ip)
        return out + self._adopt_ip6s(held)

    def _adopt_ip6s(self, held: HeldHosts) -> list[HostWrite]:
        """IPv6 addresses as the switch holds them; an address of an unknown host, or one of
        the two tables without the other, is deleted (its next frame teaches it again)."""
        self._ip6_owner.clear()
        out: list[HostWrite] = []
        learned = {(e.ip6, e.mac) for e in held.learned_ip6s}
        for ip6, mac in sorted(held.ip6s.items()):
            if mac in self._hosts and (ip6, mac) in learned:
                self._ip6_owner[ip6] = mac
                self._hosts[mac].ip6s.add(ip6)
            else:
                out.append(HostWrite(Op.DELETE, HostIp6(ip6, mac)))
        out += [HostWrite(Op.DELETE, LearnedIp6(ip6, mac)) for ip6, mac in sorted(learned)
                if self._ip6_owner.get(ip6) != mac]
        return out


# -- ARP on the wire (packet-ins and packet-outs carry plain Ethernet frames)


def parse_arp(frame: bytes) -> ArpPacket | None:
    """An Ethernet/ARP (IPv4 over Ethernet) frame, or None if it is not one."""
    if len(frame) < 42 or struct.unpack_from("!H", frame, 12)[0] != ETH_ARP:
        return None
    htype, ptype, hlen, plen, op = struct.unpack_from("!HHBBH", frame, 14)
    if (htype, ptype, hlen, plen) != (1, 0x0800, 6, 4) or op not in (ARP_REQUEST, ARP_REPLY):
        return None
    return ArpPacket(
        op=op,
        sender_mac=mac_to_str(frame[22:28]),
        sender_ip=str(ipaddress.IPv4Address(frame[28:32])),
        target_mac=mac_to_str(frame[32:38]),
        target_ip=str(ipaddress.IPv4Address(frame[38:42])),
        eth_src=mac_to_str(frame[6:12]),
    )


def arp_probe(sender_mac: str, target_ip: str) -> bytes:
    """An RFC 5227 ARP probe for `target_ip` (sender IP 0.0.0.0, broadcast): its owner answers
    it, and no host takes anything from it into its ARP cache (padded to 60 bytes)."""
    eth = b"\xff" * 6 + mac_to_bytes(sender_mac) + struct.pack("!H", ETH_ARP)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, ARP_REQUEST)
    arp += mac_to_bytes(sender_mac) + bytes(4) + bytes(6) + ipaddress.IPv4Address(target_ip).packed
    frame = eth + arp
    return frame + bytes(max(0, 60 - len(frame)))


def arp_reply(request: ArpPacket, answer_mac: str) -> bytes:
    """The reply to `request` saying target_ip is at `answer_mac` (padded to 60 bytes)."""
    eth = mac_to_bytes(request.sender_mac) + mac_to_bytes(answer_mac) + struct.pack("!H", ETH_ARP)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, ARP_REPLY)
    arp += mac_to_bytes(answer_mac) + ipaddress.IPv4Address(request.target_ip).packed
    arp += mac_to_bytes(request.sender_mac) + ipaddress.IPv4Address(request.sender_ip).packed
    frame = eth + arp
    return frame + bytes(max(0, 60 - len(frame)))
