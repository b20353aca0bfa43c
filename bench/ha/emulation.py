"""The replicated-controller emulation (`make run HA=1`) as bench/ha drives it.

Who leads and each replica's write windows come from every replica's `/healthz` (the typed
REST client); the replicas' processes, restarting a replica, cutting one from etcd and
failing a gateway from the emulation engine's `Site`. Only the few pure pieces (picking a
probe, reading a log time, counting rewritten buckets) live in `analysis.py`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from bench.ha.analysis import log_time
from bench.probes import BenchError
from supergw_controller.ha import view as ha_view
from supergw_proto.api import GatewayView, HostView
from supergw_proto.rest import ControllerClient
from topologies.emulation import Emulation
from topologies.ha_load import MoveWriter
from topologies.poll import Timeout
from topologies.site import Site


class HaEmulation:
    def __init__(self, emu: Emulation) -> None:
        self.site: Site = emu.site()
        self.topo = self.site.topo
        if not self.topo.replicated:
            raise BenchError("the running emulation has one controller: `make stop`, then `make run HA=1`")
        self.names = self.topo.controller.replica_names()
        self.current = self.names[0]  # the replica the gateway views are read from (the leader, once known)

    # --- replicas ---------------------------------------------------------------------
    def api(self, name: str) -> ControllerClient:
        return self.site.api(name)

    def use(self, name: str) -> None:
        """Read the gateway views from `name` (the leader) from now on."""
        self.current = name

    def views(self, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Replica -> its `/healthz` `ha` object plus `switch_role` (empty when it does not answer)."""
        return {n: {**h.ha.model_dump(), "switch_role": h.role} if h is not None else {}
                for n, h in self.site.replica_health(names or self.names).items()}

    def term(self, name: str) -> int:
        return int(self.views([name])[name].get("term", 0))

    def settled_leader(self, timeout: float = 60.0) -> str:
        """The one leader, primary on the switch, once every other replica follows it as a backup."""
        try:
            return self.site.agreed_leader(timeout=timeout, primary=True)
        except Timeout as exc:
            raise BenchError(f"no settled leader in {timeout:.0f}s: {exc}") from None

    def stable_leader(self, hold: float = 3.0, timeout: float = 90.0) -> str:
        """A settled leader that keeps its term for `hold` s: after a heal, etcd and the
        replicas may change leaders more than once before they are quiet again."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.settled_leader(max(1.0, deadline - time.monotonic()))
            term, since = self.term(leader), time.monotonic()
            while time.monotonic() - since < hold:
                v = self.views([leader])[leader]
                if v.get("role") != "leader" or int(v.get("term", 0)) != term:
                    break
                time.sleep(0.1)
            else:
                return leader
        raise BenchError(f"the leadership did not stay put for {hold:.0f}s within {timeout:.0f}s")

    def new_leader(self, old: str, timeout: float = 30.0) -> str:
        """The replica other than `old` that leads and is primary (two at once is an error)."""
        others = [n for n in self.names if n != old]
        deadline = time.monotonic() + timeout
        seen: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            seen = self.views(others)
            found = [n for n, v in seen.items() if v.get("role") == "leader" and v.get("switch_role") == "primary"]
            if len(found) > 1:
                raise BenchError(f"two leaders at once: {found}")
            if found:
                return found[0]
            time.sleep(0.02)
        raise BenchError(f"no replica but {old} took over in {timeout:.0f}s: {seen}")

    def wait_backup(self, name: str, leader: str, timeout: float = 60.0) -> float:
        """Seconds until `name` is a backup following `leader`."""
        t0 = time.monotonic()
        v: dict[str, Any] = {}
        while time.monotonic() - t0 < timeout:
            v = self.views([name])[name]
            if v.get("role") == "backup" and v.get("leader") == leader and v.get("switch_role") == "backup":
                return time.monotonic() - t0
            time.sleep(0.05)
        raise BenchError(f"{name} is not a backup of {leader} after {timeout:.0f}s: {v}")

    def kill(self, name: str) -> None:
        self.site.kill_controller(name)

    def restart(self, name: str) -> None:
        """Start a killed replica again as `up` does; it joins as a backup."""
        self.site.restart_controller(name, wait=False)

    def log_time(self, name: str, needle: str, after: float) -> float | None:
        path = self.site.paths.logs / f"controller-{name}.log"
        return log_time(path.read_text(errors="replace"), needle, after) if path.exists() else None

    def wait_log(self, name: str, needle: str, after: float, timeout: float = 15.0) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (t := self.log_time(name, needle, after)) is not None:
                return t
            time.sleep(0.05)
        return None

    def windows(self) -> dict[int, tuple[str, Mapping[str, Any]]]:
        """term -> (replica, its accepted-write window) from every replica's `/healthz`."""
        try:
            return ha_view.write_windows(self.views())
        except ValueError as exc:
            raise BenchError(str(exc)) from exc

    def move_writer(self, bucket: int) -> MoveWriter:
        """Operator moves of `bucket` between the first two gateways, against every replica."""
        return MoveWriter({n: self.api(n) for n in self.names}, bucket, [g.name for g in self.topo.gateways[:2]])

    # --- gateways, as the replica in use sees them ------------------------------------
    def gateways(self) -> dict[str, GatewayView]:
        return self.site.gateways(self.current)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        try:
            self.site.wait_gateways(lambda gws: all(g.state == "alive" and g.tunnel_up is not False
                                                    for g in gws.values()), "gateways all alive", timeout, self.current)
        except Timeout as exc:
            raise BenchError(str(exc)) from None

    def share(self, gateway: str) -> int:
        return self.site.share(gateway, self.current)

    # --- the switch as the leader sees it --------------------------------------------
    def buckets(self, name: str) -> dict[int, str | None]:
        return {b.bucket: b.gateway for b in self.api(name).buckets()}

    def hosts(self, name: str) -> list[HostView]:
        """The LAN hosts replica `name` has learned, with their bucket and its gateway."""
        return self.api(name).hosts()

    def served(self, name: str) -> dict[str, str]:
        """LAN host ip -> the gateway its bucket points at."""
        return {h.ip: h.gateway for h in self.api(name).hosts() if h.gateway and h.ip}

    def failover_ts(self, name: str, gateway: str, after: float, timeout: float = 15.0) -> float | None:
        """When `name` first moved a bucket off `gateway` for failover after `after` (its event log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ts = [e.ts for e in self.api(name).events(limit=1000)
                  if e.kind == "move" and e.reason == "failover" and e.src == gateway and e.ts >= after]
            if ts:
                return min(ts)
            time.sleep(0.05)
        return None

    # --- partitions -------------------------------------------------------------------
    def cut(self, name: str) -> None:
        self.site.cut_etcd(name)

    def heal(self, name: str) -> None:
        self.site.heal_etcd(name)
