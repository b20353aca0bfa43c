"""Failure detection: the heartbeat watchdog and the port monitor.

P4Runtime has no port status and the eBPF target has no gNMI, so when the controller
runs on the switch host it watches the Linux interfaces behind the switch ports
(`ports.<n>.interface` in the config) over netlink, optionally inside the switch's
network namespace (`port_monitor.netns`). A port whose interface is not running (admin
down, no carrier, or deleted) counts as down. Elsewhere, heartbeats alone detect death.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import socket
import struct
import threading
from collections.abc import Awaitable, Callable, Mapping

log = logging.getLogger(__name__)

PortCallback = Callable[[int, bool], Awaitable[None]]

_IFF_UP = 0x1
_IFF_RUNNING = 0x40
_RTM_NEWLINK, _RTM_DELLINK, _RTM_GETLINK = 16, 17, 18
_RTMGRP_LINK = 0x1
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_DONE = 3
_IFLA_IFNAME = 3
_CLONE_NEWNET = 0x40000000


async def watchdog(
    interval_s: float,
    tick: Callable[[], Awaitable[None]],
    stall_s: float | None = None,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Call `tick` every `interval_s` until cancelled (a failing tick is logged, not fatal).

    A tick that runs more than `stall_s` (default: `interval_s`) after its planned time means this event loop
    was stalled (by our own failover write, a big read, or a busy machine): heartbeats
    may be waiting unread in socket buffers or in tasks that have not run yet, and
    judging now would declare live gateways dead. Such a tick gives no verdict; the next
    tick that runs on time does, after the loop has handled what queued up meanwhile.
    The planned times advance by `interval_s` whatever `tick` costs, so a long tick (the
    failover write itself) counts as a stall too.
    """
    now_fn = clock if clock is not None else asyncio.get_running_loop().time
    stall_s = interval_s if stall_s is None else stall_s
    planned = now_fn() + interval_s
    stalled_since: float | None = None
    while True:
        await sleep(max(0.0, planned - now_fn()))
        now = now_fn()
        late = now - planned
        if late > stall_s:
            if stalled_since is None:
                stalled_since = planned
            log.debug("event loop stalled %.3fs: liveness verdict deferred", late)
            planned = now + interval_s
            continue
        if stalled_since is not None:
            log.debug("event loop on time again after %.3fs of stalls", now - stalled_since)
            stalled_since = None
        planned += interval_s
        try:
            await tick()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("watchdog tick failed")


def netlink_socket(netns: str | None) -> socket.socket:
    """A NETLINK_ROUTE socket subscribed to link events, created inside `netns`.

    The socket is made in a short-lived thread that enters the namespace with setns(2):
    a socket stays in the namespace it was created in, and no other thread of the
    controller ever changes namespace (forking, as pyroute2 does for netns, is unsafe
    next to gRPC's threads).
    """

    def make() -> socket.socket:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        sock.bind((0, _RTMGRP_LINK))
        return sock

    if netns is None:
        return make()
    result: list[socket.socket | BaseException] = []

    def in_namespace() -> None:
        try:
            target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        except OSError as exc:
            result.append(OSError(exc.errno, f"network namespace {netns!r}: {exc.strerror}"))
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(target, _CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns into {netns}: {os.strerror(err)}")
            result.append(make())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            result.append(exc)
        finally:
            os.close(target)

    t = threading.Thread(target=in_namespace, name=f"netns-{netns}")
    t.start()
    t.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def parse_links(data: bytes) -> tuple[list[tuple[int, str, int]], bool]:
    """(msg type, ifname, flags) of each link message in a netlink datagram, and DONE."""
    out: list[tuple[int, str, int]] = []
    done = False
    off = 0
    while off + 16 <= len(data):
        length, mtype = struct.unpack_from("=IH", data, off)
        if length < 16:
            break
        if mtype == _NLMSG_DONE:
            done = True
        elif mtype in (_RTM_NEWLINK, _RTM_DELLINK) and length >= 32:
            (flags,) = struct.unpack_from("=I", data, off + 16 + 8)
            name = ""
            a = off + 32
            while a + 4 <= off + length:
                alen, atype = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if atype == _IFLA_IFNAME:
                    name = data[a + 4 : a + alen].split(b"\0", 1)[0].decode(errors="replace")
                a += (alen + 3) & ~3
            out.append((mtype, name, flags))
        off += (length + 3) & ~3
    return out, done


def _link_up(flags: int) -> bool:
    return bool(flags & _IFF_UP) and bool(flags & _IFF_RUNNING)


class PortMonitor:
    """Reports port up/down for the interfaces in `interfaces` (port -> ifname)."""

    def __init__(self, interfaces: Mapping[int, str], netns: str | None, on_change: PortCallback) -> None:
        self._ports_by_name = {name: port for port, name in interfaces.items()}
        self._netns = netns
        self._on_change = on_change
        self._state: dict[int, bool] = {}

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        sock = await asyncio.to_thread(netlink_socket, self._netns)
        sock.setblocking(False)
        try:
            # Initial state: dump every link on the subscribed socket; events that race
            # with the dump are simply applied after it.
            req = struct.pack("=IHHII", 16 + 16, _RTM_GETLINK, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)
            req += struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0)
            await loop.sock_sendall(sock, req)
            seen: set[str] = set()
            dumping = True
            while True:
                data = await loop.sock_recv(sock, 65536)
                links, done = parse_links(data)
                for mtype, name, flags in links:
                    port = self._ports_by_name.get(name)
                    if port is None:
                        continue
                    seen.add(name)
                    await self._set(port, mtype == _RTM_NEWLINK and _link_up(flags))
                if dumping and done:
                    dumping = False
                    for name, port in self._ports_by_name.items():
                        if name not in seen:
                            log.warning("port %d: interface %s not found: counted as down", port, name)
                            await self._set(port, False)
        finally:
            sock.close()

    async def _set(self, port: int, up: bool) -> None:
        if self._state.get(port) == up:
            return
        self._state[port] = up
        log.info("port %d is %s", port, "up" if up else "down")
        await self._on_change(port, up)
