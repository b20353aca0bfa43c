"""Sockets opened inside a network namespace (setns on a short-lived thread)."""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


T = TypeVar("T")


def in_netns(netns: str, make: Callable[[], T]) -> T:
    """`make()` run inside `netns`; a socket it opens stays in that namespace.

    setns(CLONE_NEWNET) only affects the calling thread, so a short-lived thread does it.
    """
    out: list[T | BaseException] = []

    def work() -> None:
        try:
            with open(f"/run/netns/{netns}") as f:
                _setns(f.fileno())
            out.append(make())
        except BaseException as exc:  # handed to the caller's thread
            out.append(exc)

    t = threading.Thread(target=work, name=f"setns-{netns}")
    t.start()
    t.join()
    res = out[0]
    if isinstance(res, BaseException):
        if isinstance(res, FileNotFoundError) and not Path("/run/netns", netns).exists():
            raise OSError(f"network namespace {netns} does not exist")
        raise res
    return res


def connect_in_netns(netns: str, addr: tuple[str, int], timeout: float = 10.0) -> socket.socket:
    """A TCP socket connected from inside `netns`; the namespace sticks to the socket."""
    return in_netns(netns, lambda: socket.create_connection(addr, timeout=timeout))


def udp_in_netns(netns: str, local: tuple[str, int], remote: tuple[str, int]) -> socket.socket:
    """A UDP socket bound and connected inside `netns` (non-blocking, for asyncio)."""
    def make() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(local)
            s.connect(remote)
            s.setblocking(False)
        except BaseException:
            s.close()
            raise
        return s

    return in_netns(netns, make)
