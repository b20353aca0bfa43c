"""Probe traffic: many host MACs sending paced frames to their vmacs; per-frame receive log.

Each probe frame carries (host index, per-host sequence number, phase). The sender and
the receiver are threads of the benchmark process; their AF_PACKET sockets are created
inside the host and gateway namespaces with setns(2) (a socket stays in the namespace it
was created in), so no helper processes are needed.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from collections.abc import Iterator

from supergw_proto.addresses import mac_to_bytes
from supergw_proto.bucket import bucket_of, vmac

ETHERTYPE_PROBE = 0x88B5  # IEEE 802 local experimental ethertype
_PAYLOAD = struct.Struct("!4sHIB")  # magic, host index, sequence, phase
_MAGIC = b"SGWB"
_CLONE_NEWNET = 0x40000000
_SO_RCVBUFFORCE = 33


@contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the body (in this thread) inside network namespace `name`."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(target, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name} failed")
        try:
            yield
        finally:
            if libc.setns(own, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the original namespace failed")
    finally:
        os.close(own)
        os.close(target)


def packet_socket(netns: str, ifname: str, rcvbuf: int = 8 << 20) -> socket.socket:
    with in_netns(netns):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE_PROBE))
        s.bind((ifname, ETHERTYPE_PROBE))
    s.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, rcvbuf)
    s.setblocking(False)
    return s


@dataclass(frozen=True)
class Host:
    index: int
    mac: str
    bucket: int
    dst: str  # its vmac
    head: bytes  # Ethernet header: dst vmac, src mac, probe ethertype

    def frame(self, seq: int, phase: int) -> bytes:
        return (self.head + _PAYLOAD.pack(_MAGIC, self.index, seq, phase)).ljust(60, b"\0")


def make_hosts(n: int, k: int, vmac_base: str) -> list[Host]:
    """n locally administered unicast MACs with pairwise distinct buckets."""
    hosts: list[Host] = []
    seen: set[int] = set()
    i = 0
    while len(hosts) < n:
        i += 1
        mac = f"02:5a:{(i >> 16) & 0xff:02x}:{(i >> 8) & 0xff:02x}:{i & 0xff:02x}:01"
        b = bucket_of(mac, k)
        if b in seen:
            continue
        seen.add(b)
        dst = vmac(vmac_base, b)
        head = bytes(mac_to_bytes(dst)) + bytes(mac_to_bytes(mac)) + struct.pack("!H", ETHERTYPE_PROBE)
        hosts.append(Host(len(hosts), mac, b, dst, head))
    return hosts


class Sender:
    """Every `tick` seconds sends one frame per host; counts frames per phase."""

    def __init__(self, sock: socket.socket, hosts: Sequence[Host], tick: float = 0.010) -> None:
        self.sock = sock
        self.hosts = list(hosts)
        self.tick = tick
        self.phase = 0
        self.sent: dict[int, int] = {}
        self.errors = 0
        self._seq = [0] * len(self.hosts)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe-sender", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        self.sock.setblocking(True)
        next_t = time.monotonic()
        while not self._halt.is_set():
            phase = self.phase
            n = 0
            for h in self.hosts:
                self._seq[h.index] += 1
                try:
                    self.sock.send(h.frame(self._seq[h.index], phase))
                    n += 1
                except OSError:
                    self.errors += 1
            self.sent[phase] = self.sent.get(phase, 0) + n
            next_t += self.tick
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1.0:  # fell far behind (CPU starved): do not burst to catch up
                next_t = time.monotonic()

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(timeout=2)


class Receiver:
    """Drains the gateway sockets; logs (time, gateway index, host, seq, phase) per frame."""

    def __init__(self, socks: Sequence[socket.socket]) -> None:
        self.socks = list(socks)
        self.log: list[tuple[float, int, int, int, int]] = []
        self.received: dict[int, int] = {}
        self.foreign = 0
        self.errors = 0
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe-receiver", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        poller = select.poll()
        fds = {s.fileno(): i for i, s in enumerate(self.socks)}
        for s in self.socks:
            poller.register(s, select.POLLIN)
        while not self._halt.is_set():
            for fd, _ in poller.poll(50):
                gw = fds[fd]
                sock = self.socks[gw]
                while True:
                    try:
                        data = sock.recv(128)
                    except BlockingIOError:
                        break
                    except OSError:  # e.g. ENETDOWN: the benchmark took this gateway's link down
                        self.errors += 1
                        break
                    now = time.monotonic()
                    if len(data) < 14 + _PAYLOAD.size or data[14:18] != _MAGIC:
                        self.foreign += 1
                        continue
                    _, host, seq, phase = _PAYLOAD.unpack_from(data, 14)
                    self.log.append((now, gw, host, seq, phase))
                    self.received[phase] = self.received.get(phase, 0) + 1

    def stop(self) -> None:
        self._halt.set()
        self._thread.join(timeout=2)
