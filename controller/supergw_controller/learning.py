"""Host learning: digests become `learned_sources`, `mac_table` and `host_ips` entries.

`HostTable` is pure state: every method returns the P4Runtime updates that bring the
switch in line with it, and the Dispatcher writes them in one batch. Ageing comes from
the switch (idle-timeout notifications on `learned_sources`): an idle host loses all its
entries. Gateway ARP misses are answered by a packet-out ARP reply when the IP is known.

Learning a host takes an IPv4 source. The switch digests a (MAC, port) only while
`learned_sources` misses, so a host whose first frame carries no IPv4 source (IPv6, LLDP,
any non-IP frame: digest `src_ip` = 0) gets its `mac_table` entry at once, but its
`learned_sources` entry only with the first digest that carries an IP: until then its
frames keep producing digests (the switch sends at most one per (MAC, port) per 10 ms and
none while one is unacked). A host that stays IP-less for `ip_wait_s` is completed
without an IP (`sweep`), so a non-IP host costs digests for a bounded time only.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field

from finsy import P4TableAction, P4TableEntry

from supergw_proto import p4constants as pc
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.entities import Op, Update

log = logging.getLogger(__name__)

ETH_ARP = 0x0806
ARP_REQUEST = 1
ARP_REPLY = 2


@dataclass
class Host:
    mac: str
    port: int
    ips: set[str] = field(default_factory=set)
    seen: float = 0.0  # monotonic time it was learned or re-learned
    # learned_sources (mac, port) is installed. False while waiting for an IPv4 source:
    # then `waiting_since` is when the first IP-less digest (or the adoption) came.
    learned: bool = True
    waiting_since: float = 0.0


@dataclass(frozen=True)
class ArpPacket:
    op: int
    sender_mac: str
    sender_ip: str
    target_mac: str
    target_ip: str
    eth_src: str


class HostTable:
    def __init__(self, host_ports: set[int], gateway_ip: str, idle_timeout_ns: int, *, ip_wait_s: float) -> None:
        """`ip_wait_s`: how long a host without a known IP may keep sending IP-less digests
        before it is learned without an IP (0: at once, on its first digest)."""
        if ip_wait_s < 0:
            raise ValueError(f"ip_wait_s must be >= 0, got {ip_wait_s}")
        self._host_ports = host_ports
        self._gateway_ip = gateway_ip
        self._idle_ns = idle_timeout_ns
        self._ip_wait_s = ip_wait_s
        self._hosts: dict[str, Host] = {}
        self._ip_owner: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._hosts)

    def hosts(self) -> list[Host]:
        return sorted(self._hosts.values(), key=lambda h: h.mac)

    def get(self, mac: str) -> Host | None:
        return self._hosts.get(mac)

    def mac_of_ip(self, ip: str) -> str | None:
        return self._ip_owner.get(ip)

    def learn(self, mac: str, port: int, ip: str | None, now: float) -> list[Update]:
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
        out: list[Update] = []
        at = 0  # where learned_sources goes: after the delete of a moved host's old entry
        h = self._hosts.get(mac)
        if h is None:
            h = Host(mac=mac, port=port, seen=now, learned=False, waiting_since=now)
            self._hosts[mac] = h
            out.append(Update(Op.INSERT, ent.mac_entry(mac, port)))
        elif h.port != port:
            log.info("host %s moved from port %d to %d", mac, h.port, port)
            if h.learned:
                out.append(Update(Op.DELETE, ent.learned_key(mac, h.port)))
                at = 1
            out.append(Update(Op.MODIFY, ent.mac_entry(mac, port)))
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
        if h.learned or ip is not None or h.ips or now - h.waiting_since >= self._ip_wait_s:
            if not h.learned and ip is None and not h.ips and self._ip_wait_s > 0:
                log.info("host %s sent no IPv4 source for %.1fs: learned without an IP", mac, self._ip_wait_s)
            out.insert(at, Update(Op.INSERT, ent.learned(mac, port, self._idle_ns)))
            h.learned = True
        elif out:
            log.debug("host %s on port %d: forwarding, waiting for an IPv4 source", mac, port)
        return out

    def sweep(self, now: float) -> tuple[list[str], list[Update]]:
        """Learn the hosts that waited `ip_wait_s` for an IP without one (the silent ones
        too, so that they age out through the switch's idle timeout): their MACs and the
        updates to write."""
        macs: list[str] = []
        out: list[Update] = []
        for h in self.hosts():
            if not h.learned and now - h.waiting_since >= self._ip_wait_s:
                log.info("host %s sent no IPv4 source for %.1fs: learned without an IP", h.mac, self._ip_wait_s)
                out.append(Update(Op.INSERT, ent.learned(h.mac, h.port, self._idle_ns)))
                h.learned = True
                macs.append(h.mac)
        return macs, out

    def unlearn(self, macs: list[str]) -> None:
        """A sweep's write failed: these hosts wait again (the next sweep retries)."""
        for mac in macs:
            h = self._hosts.get(mac)
            if h is not None:
                h.learned = False

    def _set_ip(self, h: Host, ip: str) -> list[Update]:
        """`ip` is h's address from now on: it replaces the addresses h had."""
        out: list[Update] = []
        for old in sorted(h.ips - {ip}):
            h.ips.discard(old)
            if self._ip_owner.get(old) == h.mac:
                log.info("host %s changed IP from %s to %s", h.mac, old, ip)
                del self._ip_owner[old]
                out.append(Update(Op.DELETE, ent.host_ip_key(old)))
        return out + self._claim_ip(h, ip)

    def _claim_ip(self, h: Host, ip: str) -> list[Update]:
        owner = self._ip_owner.get(ip)
        if owner == h.mac:
            return []
        self._ip_owner[ip] = h.mac
        h.ips.add(ip)
        if owner is None:
            return [Update(Op.INSERT, ent.host_ip(ip, h.mac))]
        prev = self._hosts.get(owner)
        if prev is not None:
            prev.ips.discard(ip)
        log.info("IP %s moved from %s to %s", ip, owner, h.mac)
        return [Update(Op.MODIFY, ent.host_ip(ip, h.mac))]

    def expire(self, mac: str, port: int) -> list[Update]:
        """learned_sources (mac, port) went idle: forget the host and delete its entries."""
        mac = mac.lower()
        h = self._hosts.get(mac)
        if h is None or h.port != port:
            # Stale entry for a port the host has left: delete only that entry.
            return [Update(Op.DELETE, ent.learned_key(mac, port))]
        del self._hosts[mac]
        out = [Update(Op.DELETE, ent.learned_key(mac, port)), Update(Op.DELETE, ent.mac_key(mac))]
        for ip in sorted(h.ips):
            if self._ip_owner.get(ip) == mac:
                del self._ip_owner[ip]
                out.append(Update(Op.DELETE, ent.host_ip_key(ip)))
        return out

    def reinstall(self) -> list[Update]:
        """Every entry of every known host (for a switch that lost its tables)."""
        out: list[Update] = []
        for h in self.hosts():
            if h.learned:
                out.append(Update(Op.INSERT, ent.learned(h.mac, h.port, self._idle_ns)))
            out.append(Update(Op.INSERT, ent.mac_entry(h.mac, h.port)))
            out.extend(Update(Op.INSERT, ent.host_ip(ip, h.mac)) for ip in sorted(h.ips))
        return out

    def adopt(
        self,
        learned: list[P4TableEntry],
        macs: list[P4TableEntry],
        host_ips: list[P4TableEntry],
        now: float,
    ) -> list[Update]:
        """Rebuild the table from what the switch holds (controller restart).

        Hosts are kept as the switch has them; only inconsistent leftovers are repaired:
        a learned source without a mac_table entry gets one, and entries on ports that are
        no longer host ports are deleted.
        """
        self._hosts.clear()
        self._ip_owner.clear()
        out: list[Update] = []
        mac_port: dict[str, int] = {}
        for e in macs:
            m = dict(e.match or {})
            mac = ent.mac_str(int(m["dst_mac"]))
            args = e.action.args if isinstance(e.action, P4TableAction) else {}
            # An entry this controller would not write (role other than HOST) counts as
            # pointing nowhere, so it is rewritten or deleted below.
            host_role = int(args.get("role", -1)) == pc.PortRole.HOST
            mac_port[mac] = int(args.get("port", -1)) if host_role else -1
        for e in learned:
            m = dict(e.match or {})
            mac, port = ent.mac_str(int(m["src_mac"])), int(m["port"])
            if port not in self._host_ports:
                out.append(Update(Op.DELETE, ent.learned_key(mac, port)))
                continue
            self._hosts[mac] = Host(mac=mac, port=port, seen=now)
            if mac_port.get(mac) != port:
                out.append(Update(Op.MODIFY if mac in mac_port else Op.INSERT, ent.mac_entry(mac, port)))
        for mac, port in mac_port.items():
            if mac not in self._hosts and port not in self._host_ports:
                out.append(Update(Op.DELETE, ent.mac_key(mac)))
            elif mac not in self._hosts:
                # L2 entry without a learned source (a host waiting for its IP): keep
                # forwarding; its next digest or the sweep after ip_wait_s settles it.
                self._hosts[mac] = Host(mac=mac, port=port, seen=now, learned=False, waiting_since=now)
        for e in host_ips:
            m = dict(e.match or {})
            ip = ent.ip_str(int(m["target_ip"]))
            mac = ent.mac_str(int(e.action.args["host_mac"])) if e.action is not None else ""  # type: ignore[union-attr]
            self._ip_owner[ip] = mac
            if mac in self._hosts:
                self._hosts[mac].ips.add(ip)
        return out


# -- ARP on the wire (packet-ins and packet-outs carry plain Ethernet frames)


def _mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def _mac_text(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def _ip_text(raw: bytes) -> str:
    return ".".join(str(b) for b in raw)


def parse_arp(frame: bytes) -> ArpPacket | None:
    """An Ethernet/ARP (IPv4 over Ethernet) frame, or None if it is not one."""
    if len(frame) < 42 or struct.unpack_from("!H", frame, 12)[0] != ETH_ARP:
        return None
    htype, ptype, hlen, plen, op = struct.unpack_from("!HHBBH", frame, 14)
    if (htype, ptype, hlen, plen) != (1, 0x0800, 6, 4) or op not in (ARP_REQUEST, ARP_REPLY):
        return None
    return ArpPacket(
        op=op,
        sender_mac=_mac_text(frame[22:28]),
        sender_ip=_ip_text(frame[28:32]),
        target_mac=_mac_text(frame[32:38]),
        target_ip=_ip_text(frame[38:42]),
        eth_src=_mac_text(frame[6:12]),
    )


def arp_reply(request: ArpPacket, answer_mac: str) -> bytes:
    """The reply to `request` saying target_ip is at `answer_mac` (padded to 60 bytes)."""
    eth = _mac_bytes(request.sender_mac) + _mac_bytes(answer_mac) + struct.pack("!H", ETH_ARP)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, ARP_REPLY)
    arp += _mac_bytes(answer_mac) + bytes(map(int, request.target_ip.split(".")))
    arp += _mac_bytes(request.sender_mac) + bytes(map(int, request.sender_ip.split(".")))
    frame = eth + arp
    return frame + bytes(max(0, 60 - len(frame)))
