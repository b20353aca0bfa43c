"""Replicated controllers for the integration tests and bench/ha: etcd, replicas, partitions.

`EtcdLink` is a TCP relay between one replica and etcd that the test can cut: `cut()`
blackholes it (connections stay open, every byte is dropped, as in a network partition:
the replica's etcd calls time out, its switch stream is untouched); `heal()` closes the
broken connections and relays new ones again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from sgwctl_harness import Controller, Setup
from supergw_controller.ha import view as ha_view
from supergw_proto.api import Health, ReplicaHealth
from supergw_proto.rest import ApiError
from topologies.ha_load import MoveWriter


class EtcdLink:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listen = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listen.getsockname()[1])
        self._cut = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listen, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"etcd-link-{self.port}")
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        self._cut.set()

    def heal(self) -> None:
        with self._lock:
            for s in list(self._pairs):
                self._close(s)
            self._cut.clear()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            for s in list(self._pairs):
                self._close(s)
        self._listen.close()

    def _close(self, s: socket.socket) -> None:
        peer = self._pairs.pop(s, None)
        for x in (s, peer):
            if x is None:
                continue
            self._pairs.pop(x, None)
            with contextlib.suppress(Exception):
                self._sel.unregister(x)
            x.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(0.1):
                s: Any = key.fileobj
                with self._lock:
                    if s is self._listen:
                        conn, _ = self._listen.accept()
                        try:
                            up = socket.create_connection(self.target, timeout=2)
                        except OSError:
                            conn.close()
                            continue
                        self._pairs[conn], self._pairs[up] = up, conn
                        self._sel.register(conn, selectors.EVENT_READ)
                        self._sel.register(up, selectors.EVENT_READ)
                        continue
                    if s not in self._pairs:
                        continue
                    try:
                        data = s.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        self._close(s)
                    elif not self._cut.is_set():
                        with contextlib.suppress(OSError):
                            self._pairs[s].sendall(data)


@dataclass
class Replica:
    controller: Controller
    link: EtcdLink

    @property
    def name(self) -> str:
        return self.controller.name

    def health(self) -> Health | None:
        try:
            return self.controller.client.health(timeout=1.0)
        except ApiError:
            return None

    def ha(self) -> dict[str, Any]:
        """Its `/healthz` `ha` object ({} when it does not answer or has none)."""
        h = self.health()
        return h.ha.model_dump() if isinstance(h, ReplicaHealth) else {}


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free on 127.0.0.1 now (all bound at once, then released): a fixed
    port once collided with a listener nobody could name (test_ctl_ha, a landing CI run)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def make_replicas(
    setup: Setup, etcd_endpoint: str, names: list[str], prefix: str = "/sgw-ha-test", **over: Any
) -> list[Replica]:
    host, _, port = etcd_endpoint.rpartition(":")
    out = []
    for name, api_port in zip(names, free_ports(len(names))):
        link = EtcdLink((host, int(port)))
        c = setup.controller(
            name,
            api_port=api_port,
            store={"backend": "etcd", "etcd": {"endpoints": [link.endpoint], "prefix": prefix}},
            ha={"replica": name},
            **over,
        )
        out.append(Replica(c, link))
    return out


def leaders(replicas: list[Replica]) -> list[Replica]:
    """The replicas that say they lead and are primary on the switch."""
    out = []
    for r in replicas:
        h = r.health()
        if isinstance(h, ReplicaHealth) and h.role == "primary" and h.ha.role == "leader":
            out.append(r)
    return out


def wait_one_leader(replicas: list[Replica], timeout: float, *, not_: Replica | None = None) -> Replica:
    """The one replica that leads and is primary; fails after `timeout` s naming what each says."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [r for r in leaders(replicas) if r is not not_]
        if len(found) == 1:
            return found[0]
        assert len(found) <= 1, f"two leaders at once: {[r.name for r in found]}"
        time.sleep(0.05)
    said = {r.name: r.health() for r in replicas}
    raise TimeoutError(f"no single leader after {timeout}s: {said}")


def write_windows(replicas: list[Replica]) -> dict[int, tuple[str, Mapping[str, Any]]]:
    """term -> (replica, its accepted-write window) from every replica's /healthz."""
    return ha_view.write_windows({r.name: r.ha() for r in replicas})


def move_writer(replicas: list[Replica], bucket: int, gateways: tuple[str, ...] = ("g1", "g2")) -> MoveWriter:
    """Operator moves of `bucket` against every replica at once (see topologies.ha_load)."""
    return MoveWriter({r.name: r.controller.client for r in replicas}, bucket, gateways)
