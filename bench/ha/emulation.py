"""The replicated-controller emulation (`make run HA=1`) as bench/ha drives it.

Who leads and each replica's write windows come from every replica's `/healthz`; the
replicas' processes from the run state (`.run/state.json`); starting a replica and cutting
one from etcd from topologies/ha.py; the gateways (freezing one, its pids) from the failover
bench's `Emulation`. Only the few pure pieces (picking a probe, reading a log time,
counting rewritten buckets) live in `analysis.py`.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from bench.failover.__main__ import Api, BenchError, Emulation
from bench.ha.analysis import log_time
from supergw_controller.ha import view as ha_view
from topologies import ha
from topologies.ha_load import MoveWriter
from topologies.model import Topology
from topologies.processes import ProcRecord, RunState
from topologies.run import LOGS


class HaEmulation:
    def __init__(self, topo: Topology, state: RunState) -> None:
        if not ha.enabled(topo):
            raise BenchError("the running emulation has one controller: `make stop`, then `make run HA=1`")
        self.topo, self.state = topo, state
        self.names = topo.controller.replica_names()
        self.token = Path(state.info["token_file"]).read_text().strip()
        self.generated = Path(state.info["controller_config"])
        self.gws = Emulation(topo, state)  # gateways: freeze/restore, pids, health, shares

    # --- replicas ---------------------------------------------------------------------
    def api(self, name: str) -> Api:
        return Api(ha.api_url(self.topo, name), self.token)

    def use(self, name: str) -> None:
        """Ask `name` (the leader) from now on when the failover bench's helpers read the API."""
        self.gws.api = self.api(name)

    def views(self, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Replica -> its `/healthz` `ha` object plus `switch_role` (empty when it does not answer)."""
        out: dict[str, dict[str, Any]] = {}
        for n in names or self.names:
            h = ha.healthz(ha.api_url(self.topo, n))
            v = h.get("ha") if h else None
            out[n] = {**v, "switch_role": h.get("role")} if h and isinstance(v, dict) else {}
        return out

    def term(self, name: str) -> int:
        return int(self.views([name])[name].get("term", 0))

    def settled_leader(self, timeout: float = 60.0) -> str:
        """The one leader, primary on the switch, once every other replica follows it as a backup."""
        deadline = time.monotonic() + timeout
        seen: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            seen = self.views()
            leaders = [n for n, v in seen.items() if v.get("role") == "leader" and v.get("switch_role") == "primary"]
            if len(leaders) == 1 and all(
                v.get("role") == "backup" and v.get("leader") == leaders[0] for n, v in seen.items() if n != leaders[0]
            ):
                return leaders[0]
            time.sleep(0.05)
        brief = {n: (v.get("role"), v.get("switch_role"), v.get("leader"), v.get("term")) for n, v in seen.items()}
        raise BenchError(f"no settled leader in {timeout:.0f}s: (role, switch role, leader, term) {brief}")

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

    def controller(self, name: str) -> ProcRecord:
        rec = self.gws.record(f"controller-{name}")
        if rec is None:
            raise BenchError(f"replica {name}'s controller is not running (python -m topologies.run status)")
        return rec

    def kill(self, name: str) -> None:
        os.kill(self.controller(name).pid, signal.SIGKILL)

    def restart(self, name: str) -> None:
        """Start a killed replica again as `up` does; it joins as a backup."""
        rec = ha.start_replica(self.topo, name, ha.config_path(self.generated, name), LOGS)
        self.gws.replace_record(f"controller-{name}", rec)

    def log_time(self, name: str, needle: str, after: float) -> float | None:
        path = LOGS / f"controller-{name}.log"
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
        return MoveWriter({n: ha.api_url(self.topo, n) for n in self.names}, self.token, bucket,
                          [g.name for g in self.topo.gateways[:2]])

    # --- the switch as the leader sees it --------------------------------------------
    def buckets(self, name: str) -> dict[int, str | None]:
        return {int(b["bucket"]): b["gateway"] for b in self.api(name).get("/buckets")}

    def served(self, name: str) -> dict[str, str]:
        """LAN host ip -> the gateway its bucket points at."""
        return {h["ip"]: h["gateway"] for h in self.api(name).get("/hosts") if h.get("gateway") and h.get("ip")}

    def failover_ts(self, name: str, gateway: str, after: float, timeout: float = 15.0) -> float | None:
        """When `name` first moved a bucket off `gateway` for failover after `after` (its event log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ts = [float(e["ts"]) for e in self.api(name).get("/events?limit=1000")
                  if e.get("kind") == "move" and e.get("reason") == "failover" and e.get("src") == gateway
                  and float(e["ts"]) >= after]
            if ts:
                return min(ts)
            time.sleep(0.05)
        return None

    # --- partitions -------------------------------------------------------------------
    def cut(self, name: str) -> None:
        ha.cut_etcd(self.topo, name)

    def heal(self, name: str) -> None:
        ha.heal_etcd(self.topo, name)
