"""One booted scale site as bench/scale drives it: its simulated hosts of the moment, the
controller stopped and started around a cleared host table, and the processes whose cost is
measured. Everything goes through the emulation engine (`topologies.site.Site`) or, for the
host tables, P4Runtime."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.probes import BenchError
from bench.scale import plan
from bench.scale.switchtables import clear_host_tables
from supergw_proto.api import StatusView
from supergw_proto.rest import ApiError, ControllerClient
from topologies import network, processes
from topologies.emulation import Emulation
from topologies.hostsim_client import HostsimClient, HostsimProcess
from topologies.paths import P4INFO
from topologies.poll import Timeout, wait_until
from topologies.processes import ProcRecord
from topologies.site import Site

Say = Callable[[str], None]


@dataclass
class Hosts:
    """The simulated hosts of one point, started by the benchmark in the site's hostsim namespace."""

    rec: ProcRecord
    client: HostsimClient
    count: int
    first_mac: str
    started: float  # monotonic, just before the program started


class ScaleSite:
    def __init__(self, emu: Emulation, say: Say) -> None:
        self.emu, self.say = emu, say
        self.site: Site = emu.site()
        self.topo = self.site.topo
        self.api: ControllerClient = self.site.api()
        self.hosts: Hosts | None = None

    @property
    def gateways(self) -> list[str]:
        return [g.name for g in self.topo.gateways]

    def pid(self, name: str) -> int:
        return self.site.running(name).pid

    def controller_pid(self) -> int:
        return self.pid("controller")

    def switch_pid(self) -> int:
        return self.pid("switch")

    # --- simulated hosts ----------------------------------------------------------------

    def stop_hosts(self) -> None:
        """Stops whichever hostsim runs (the engine's one-host set, or a point's)."""
        if (rec := self.site.process("hostsim")) is not None:
            processes.stop(rec)
        self.emu.run.replace(self.site.prefix, "hostsim", None)
        self.hosts = None

    def start_hosts(self, count: int, index: int) -> Hosts:
        """`count` dual-stack hosts with the MACs of set `index` (plan.sim_first_mac); they ARP
        for IP_G and solicit the gateway at once: their first frames."""
        self.stop_hosts()
        sock = self.site.paths.hostsim_socket
        sock.unlink(missing_ok=True)
        first_mac = plan.sim_first_mac(index)
        argv = HostsimProcess.argv(network.SIM_IF, sock, str(self.topo.lan.gateway_ip), str(plan.SIM_FIRST_IP),
                                   first_mac, count, self.topo.lan.subnet.prefixlen,
                                   dual_stack=(str(self.topo.lan.gateway_ll), plan.sim_first_ip6()))
        started = time.monotonic()
        rec = processes.start("hostsim", argv, self.site.paths.logs / "hostsim.log", netns=self.topo.ns("hsim"),
                              site=self.site.prefix)
        self.emu.run.replace(self.site.prefix, "hostsim", rec)
        try:
            wait_until(lambda: (sock.exists(), f"{sock} not there yet"), 10, "hostsim control socket", rec)
        except Timeout as exc:
            raise BenchError(str(exc)) from None
        self.hosts = Hosts(rec, HostsimClient(sock, timeout=60), count, first_mac, started)
        return self.hosts

    # --- the controller -------------------------------------------------------------------

    def status(self) -> StatusView:
        return self.api.status()

    def fresh_controller(self, timeout: float = 120.0) -> dict[str, int]:
        """Stop the controller, delete every host entry from the switch, start it again: the
        point starts with no host anywhere. Returns what the host tables held."""
        if (rec := self.site.process("controller")) is not None:
            processes.stop(rec, timeout=20)
        held = clear_host_tables(plan.p4runtime_addr(), plan.DEVICE_ID, P4INFO)
        self.site.restart_controller()
        self.wait_serving(timeout)
        return held

    def wait_serving(self, timeout: float, hosts: int = 0) -> float:
        """Until the controller is primary, knows `hosts` hosts and every gateway is alive with
        its tunnel up; seconds waited."""
        start = time.monotonic()

        def ready() -> tuple[bool, str]:
            try:
                st = self.api.status()
                gws = self.api.gateways()
            except ApiError as exc:
                return False, str(exc)
            down = [g.name for g in gws if g.state != "alive" or g.tunnel_up is False]
            ok = st.reconciled and st.hosts >= hosts and not down
            return ok, f"role {st.role}, {st.hosts} hosts, not alive: {down[:5]}"

        try:
            wait_until(ready, timeout, "controller primary with every gateway alive")
        except Timeout as exc:
            raise BenchError(str(exc)) from None
        return time.monotonic() - start

    def logs(self) -> Path:
        return self.site.paths.logs
