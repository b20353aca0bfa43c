"""Host learning: digests become `learned_sources`, `mac_table` and `host_ips` entries.

`HostTable` is pure state: every method returns the P4Runtime updates that bring the
switch in line with it, and the Dispatcher writes them in one batch. Ageing comes from
the switch (idle-timeout notifications on `learned_sources`): an idle host loses all its
entries. Gateway ARP misses are answered by a packet-out ARP reply when the IP is known.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field

from finsy import P4TableEntry

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


@dataclass(frozen=True)
class ArpPacket:
    op: int
    sender_mac: str
    sender_ip: str
    target_mac: str
    target_ip: str
    eth_src: str


class HostTable:
    def __init__(self, host_ports: set[int], gateway_ip: str, idle_timeout_ns: int) -> None:
        self._host_ports = host_ports
        self._gateway_ip = gateway_ip
        self._idle_ns = idle_timeout_ns
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
        out: list[Update] = []
        h = self._hosts.get(mac)
        if h is None:
            h = Host(mac=mac, port=port, seen=now)
            self._hosts[mac] = h
            out.append(Update(Op.INSERT, ent.learned(mac, port, self._idle_ns)))
            out.append(Update(Op.INSERT, ent.mac_entry(mac, port)))
        elif h.port != port:
            log.info("host %s moved from port %d to %d", mac, h.port, port)
            out.append(Update(Op.DELETE, ent.learned_key(mac, h.port)))
            out.append(Update(Op.INSERT, ent.learned(mac, port, self._idle_ns)))
            out.append(Update(Op.MODIFY, ent.mac_entry(mac, port)))
            h.port = port
            h.seen = now
        else:
            # The switch missed learned_sources for a host we know: its entry aged out
            # while a digest was in flight, or the switch lost its state. Write it again.
            out.append(Update(Op.INSERT, ent.learned(mac, port, self._idle_ns)))
            h.seen = now
        if ip and ip != "0.0.0.0" and ip != self._gateway_ip:
            out.extend(self._claim_ip(h, ip))
        return out

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
            port = int(e.action.args["port"]) if e.action is not None else -1  # type: ignore[union-attr]
            mac_port[mac] = port
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
                # L2 entry without a learned source: keep forwarding; the next digest or
                # an idle timeout settles it.
                self._hosts[mac] = Host(mac=mac, port=port, seen=now)
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
