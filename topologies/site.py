"""One running site of the emulation, as programs drive it: its controller's REST API (a
typed client per controller or replica), its gateways (configs, charon and agent pids,
restart after a kill, link down/up, LAN counters), its controllers (restart, etcd
partitions) and waiting for the gateways' state.

`Emulation.sites` hands these out; every process change is recorded in the state file, so
`make stop` stops what a benchmark restarted."""

from __future__ import annotations

import os
import signal
import ssl
import time
from collections.abc import Callable
from pathlib import Path

from supergw_proto.api import GatewayView, ReplicaHealth
from supergw_proto.rest import ApiError, ControllerClient, read_token
from topologies import api_tls, components, ha, iproute, processes
from topologies.model import ControllerSlot, GatewaySpec, Topology
from topologies.paths import SitePaths
from topologies.poll import Timeout, wait_until
from topologies.processes import ProcRecord
from topologies.state import StateFile

UP_ATTEMPTS = 3  # `up` of a restarted remote-access gateway (see restart_gateway)

Gateways = dict[str, GatewayView]


class SiteError(RuntimeError):
    """The site cannot do what was asked (a process is not running, a name is unknown)."""


def brief(gws: Gateways) -> dict[str, tuple[str, int, bool | None, bool | None, str | None]]:
    """(state, buckets, tunnel_up, partner_up, unhealthy) per gateway: what a wait shows when it runs out."""
    return {n: (g.state, g.buckets, g.tunnel_up, g.partner_up, g.unhealthy) for n, g in gws.items()}


class Site:
    def __init__(self, topo: Topology, paths: SitePaths, run: StateFile) -> None:
        self.topo, self.paths, self.run = topo, paths, run
        self._clients: dict[str, ControllerClient] = {}

    @property
    def prefix(self) -> str:
        return self.topo.prefix

    def __repr__(self) -> str:
        return f"Site({self.prefix!r})"

    # --- the REST API -----------------------------------------------------------------

    @property
    def token(self) -> str:
        """The operator (admin) token `up` wrote."""
        return read_token(self.paths.token_file)

    @property
    def verify(self) -> bool | ssl.SSLContext:
        """What the site's REST clients check the controllers' https certificates against."""
        return api_tls.verify(self.topo, self.paths)

    def api(self, replica: str | None = None) -> ControllerClient:
        """The typed client of the site's controller (of replica `replica`; None: the first)."""
        url = self.topo.api_url(replica)
        if url not in self._clients:
            self._clients[url] = ControllerClient(url, self.token, verify=self.verify)
        return self._clients[url]

    def apis(self) -> dict[str, ControllerClient]:
        """Every controller's client by replica name ("" for the one controller)."""
        return {slot.replica or "": self.api(slot.replica) for slot in self.topo.controllers()}

    def gateways(self, replica: str | None = None) -> Gateways:
        return {g.name: g for g in self.api(replica).gateways()}

    def wait_gateways(self, cond: Callable[[Gateways], bool], what: str, timeout: float,
                      replica: str | None = None) -> Gateways:
        """Polls the controller's gateway view until `cond` holds; Timeout naming `what` and the
        last view (state, buckets, tunnel_up, partner_up, unhealthy) otherwise."""
        seen: Gateways = {}

        def check() -> tuple[bool, str]:
            nonlocal seen
            try:
                seen = self.gateways(replica)
            except ApiError as exc:
                return False, str(exc)
            return cond(seen), str(brief(seen))

        wait_until(check, timeout, f"{self.prefix}: {what}", interval=0.2)
        return seen

    def share(self, gateway: str, replica: str | None = None) -> int:
        """The buckets `gateway` holds when the site is balanced: floor(K x weight / total weight)."""
        gws = self.gateways(replica)
        total = sum(g.weight for g in gws.values())
        return int(self.topo.lan.buckets * gws[gateway].weight // total)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    # --- processes --------------------------------------------------------------------

    def process(self, name: str) -> ProcRecord | None:
        """The site's live process `name` ("switch", "controller-c1", "agent-gw2", ...), or None."""
        return self.run.state.process(self.prefix, name)

    def running(self, name: str) -> ProcRecord:
        rec = self.process(name)
        if rec is None:
            raise SiteError(f"{self.prefix}: {name} is not running (python -m topologies.run status)")
        return rec

    def _track(self, rec: ProcRecord | None, name: str) -> None:
        self.run.replace(self.prefix, name, rec)

    # --- gateways ---------------------------------------------------------------------

    def member(self, name: str) -> GatewaySpec:
        for g in self.topo.gateways:
            if g.name == name:
                return g
        raise SiteError(f"{self.prefix} has no gateway {name!r}")

    def gateway_config(self, name: str) -> Path:
        return self.paths.gateway_config(name)

    def charon_pid(self, gateway: str) -> int:
        pid = components.charon_pid(self.gateway_config(gateway))
        if pid is None:
            raise SiteError(f"{gateway}: no charon running")
        return pid

    def gateway_pids(self, gateway: str) -> list[int]:
        """Its charon's and its agent's pids (what a freeze or a kill signals)."""
        return [self.charon_pid(gateway), self.running(f"agent-{gateway}").pid]

    def signal_gateway(self, pids: list[int], sig: signal.Signals) -> None:
        for pid in pids:
            os.kill(pid, sig)

    def restart_gateway(self, gateway: str) -> None:
        """After a kill: `supergw-gateway up` again (charon, the tunnel) and a new agent. With
        remote access the agent goes first: a gateway whose SAs were taken over is fenced, and
        its tunnel (through the outside switch) comes up only once its new agent has reported
        that it holds nothing and the controller lifted the fence."""
        g, config = self.member(gateway), self.gateway_config(gateway)
        if self.topo.remote_access is not None:
            self._track(components.start_agent(self.topo, g, config, self.paths.logs), f"agent-{gateway}")
        # A taken-over gateway is fenced until its new agent, through its new charon, has ended
        # every remote-access SA; `up` gives its tunnel 15 s, and charon's IKE_SA_INIT
        # retransmits (4 s, then 11 s later) may all fall before the lift. A packaged gateway's
        # unit runs `up` again (Restart=on-failure); so does this.
        for attempt in range(1, UP_ATTEMPTS + 1):
            try:
                components.gateway_up(gateway, config, self.paths.logs)
                break
            except components.ComponentError:
                if self.topo.remote_access is None or attempt == UP_ATTEMPTS:
                    raise
        self._track(components.charon_record(self.topo, gateway, config, self.paths.logs), f"charon-{gateway}")
        if self.topo.remote_access is None:
            self._track(components.start_agent(self.topo, g, config, self.paths.logs), f"agent-{gateway}")

    def restart_charon(self, gateway: str) -> None:
        """SIGKILL of the gateway's charon only, then `supergw-gateway up` again (charon and
        its tunnel); the agent keeps running and sees the tunnel go and come back."""
        os.kill(self.charon_pid(gateway), signal.SIGKILL)
        config = self.gateway_config(gateway)
        wait_until(lambda: (components.charon_pid(config) is None, "charon still running"), 10, f"{gateway} charon gone")
        components.gateway_up(gateway, config, self.paths.logs)
        self._track(components.charon_record(self.topo, gateway, config, self.paths.logs), f"charon-{gateway}")

    def kill_agent(self, gateway: str) -> None:
        """SIGKILL of the gateway's agent only (charon keeps forwarding)."""
        rec = self.running(f"agent-{gateway}")
        os.kill(rec.pid, signal.SIGKILL)
        processes.stop(rec, timeout=2)

    def start_agent(self, gateway: str) -> None:
        """A new agent for the gateway, as `up` starts it (after `kill_agent`)."""
        g, config = self.member(gateway), self.gateway_config(gateway)
        self._track(components.start_agent(self.topo, g, config, self.paths.logs), f"agent-{gateway}")

    def set_link(self, gateway: str, up: bool) -> None:
        """The gateway's LAN interface (its switch port's peer) up or down: an unplugged cable."""
        self.member(gateway)
        iproute.run(["ip", "link", "set", "lan0", "up" if up else "down"], self.topo.ns(gateway))

    def lan_rx(self, gateway: str) -> int:
        """Frames the gateway's LAN interface received from its switch."""
        return iproute.rx_packets(self.topo.ns(gateway), "lan0")

    # --- controllers ------------------------------------------------------------------

    def slot(self, replica: str | None = None) -> ControllerSlot:
        for s in self.topo.controllers():
            if s.replica == replica:
                return s
        raise SiteError(f"{self.prefix} has no controller {replica or ''!r}")

    def controller_config(self, replica: str | None = None) -> Path:
        return self.paths.controller_config(replica)

    def restart_controller(self, replica: str | None = None, wait: bool = True) -> ProcRecord:
        """Stops the controller (replica `replica`) if it runs and starts it again from its
        config, as `up` did; a replica rejoins as a backup. Returns once its API answers
        (`wait`), or at once."""
        slot = self.slot(replica)
        if (old := self.process(slot.process)) is not None:
            processes.stop(old)
        rec = components.start_controller(self.topo, slot, self.controller_config(replica), self.paths.logs)
        self._track(rec, slot.process)
        if not wait:
            return rec
        try:
            wait_until(lambda: components.api_answers(slot.api_url, self.verify), 30, f"{slot.process} API {slot.api_url}", rec)
        except Timeout as exc:
            raise SiteError(str(exc)) from None
        return rec

    def kill_controller(self, replica: str | None = None) -> float:
        """SIGKILL of the controller (replica `replica`); returns when it was sent (UNIX time)."""
        rec = self.running(self.slot(replica).process)
        os.kill(rec.pid, signal.SIGKILL)
        return time.time()

    def restart_switch(self) -> ProcRecord:
        """SIGKILL of the switch (a crash) and a new one from the same command line, as `up`
        starts it; returns once its gRPC answers (the controller then pushes the pipeline)."""
        old = self.running("switch")
        os.kill(old.pid, signal.SIGKILL)
        processes.stop(old, timeout=5)
        # The killed leader thread turns zombie before the process's other threads have exited and
        # closed its listening socket: a new switch started at once fails with "address already in
        # use" (bench/chaos seed 5). Wait for the port to be free, as a supervisor's retry would.
        port = self.topo.p4runtime_addr.rsplit(":", 1)[1]

        def port_free() -> tuple[bool, str]:
            out = iproute.run(["ss", "-Hltn", f"sport = :{port}"], self.topo.switch_ns, check=False).stdout
            return not out.strip(), f"still listening: {out.strip()}"

        wait_until(port_free, 10, f"{self.prefix} switch port {port} free")
        return components.start_switch(self.topo, self.paths, lambda rec: self._track(rec, "switch"))

    def kill_etcd(self, member: str) -> None:
        """SIGKILL of etcd member `member` (a replicated site's)."""
        rec = self.running(f"etcd-{member}")
        os.kill(rec.pid, signal.SIGKILL)
        processes.stop(rec, timeout=2)

    def start_etcd(self, member: str) -> None:
        """Member `member` again, from its data directory (after `kill_etcd`)."""
        self.slot(member)
        self._track(ha.start_etcd_member(self.topo, self.paths, member), f"etcd-{member}")

    # --- replicas: who leads --------------------------------------------------------

    def replica_health(self, names: list[str] | None = None) -> dict[str, ReplicaHealth | None]:
        """Each replica's `/healthz` (None when it does not answer, or answers without `ha`)."""
        out: dict[str, ReplicaHealth | None] = {}
        for name in names or self.topo.controller.replica_names():
            try:
                health = self.api(name).health(timeout=2)
            except ApiError:
                health = None
            out[name] = health if isinstance(health, ReplicaHealth) else None
        return out

    def agreed_leader(self, names: list[str] | None = None, timeout: float = 10.0, primary: bool = False) -> str:
        """The one replica of `names` (None: all) that leads while every other one of them
        names it as leader; with `primary`, also primary on the switch while the others are
        backups. Timeout with each replica's (role, leader, term, switch role) otherwise."""
        leader: str | None = None

        def check() -> tuple[bool, str]:
            nonlocal leader
            seen = self.replica_health(names)
            leader = ha.agreed_leader(seen, primary)
            brief = {n: (h.ha.role, h.ha.leader, h.ha.term, h.role) if h else "no answer" for n, h in seen.items()}
            return leader is not None, f"(role, leader, term, switch role) per replica {brief}"

        wait_until(check, timeout, f"{self.prefix}: one agreed leader", interval=0.05)
        assert leader is not None
        return leader

    def cut_etcd(self, replica: str) -> None:
        """Partition `replica` from etcd (ha.cut_etcd) while its P4Runtime stream and API stay up."""
        ha.cut_etcd(self.topo, self.slot(replica).replica or replica)

    def heal_etcd(self, replica: str) -> None:
        ha.heal_etcd(self.topo, self.slot(replica).replica or replica)
