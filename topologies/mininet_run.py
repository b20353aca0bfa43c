"""`python -m topologies.mininet_run [--topology FILE] [--switch ebpf|bmv2] [--no-cli]` — `make run` in Mininet.

Boots exactly what `make run` boots (same topology file, same wiring by network.py, same
configs and components, same health stages), with every namespace a Mininet node and the
switch a `SupergwSwitch` started by Mininet, then opens the Mininet CLI
(`mininet> h1 ping r1`). Leaving the CLI stops everything (as `make stop`, which also
cleans up after a crashed session). `--no-cli` boots, pings h1 -> r1 and back from Mininet,
stops; the exit status says whether every stage and both pings worked.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from topologies import bmv2, components, processes, run
from topologies.components import SWITCH_BIN, ComponentError
from topologies.model import DEFAULT_TOPOLOGY, SWITCH_KINDS, Topology, TopologyError, load_topology


def build_net(topo: Topology, logs: Path) -> Any:
    """A Mininet network whose nodes are the namespaces network.build made (not started)."""
    # Imported here: the module needs Mininet installed, and main() says so when it is not.
    from mininet.net import Mininet  # noqa: PLC0415

    from topologies.mininet_nodes import AdoptedLink, NetnsBridge, NetnsHost, SupergwSwitch, veth_pairs  # noqa: PLC0415

    net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False, autoStaticArp=False)
    net.built = True  # nothing for Mininet to build: the links exist, addresses are set
    net.addSwitch(
        "sw", cls=SupergwSwitch, netns=topo.switch_ns, argv=components.switch_argv(topo, logs),
        log=logs / "switch.log", kind=topo.switch.kind, dpid="1",
    )
    for i, name in enumerate(("wan", "rlan", "mgmt"), start=2):
        net.addSwitch(name, cls=NetnsBridge, netns=topo.ns(name), dpid=str(i))
    names = [h.name for h in topo.hosts]
    for g in topo.gateways:
        names += [g.name, g.peer.name]
    names += [r.name for r in topo.remote.hosts]
    for name in names:
        net.addHost(name, cls=NetnsHost, netns=topo.ns(name))
    nodes = {node.netns: node for node in net.switches + net.hosts}
    for (ns1, if1), (ns2, if2) in veth_pairs(list(nodes)):
        net.addLink(nodes[ns1], nodes[ns2], intfName1=if1, intfName2=if2, addr1=None, addr2=None, cls=AdoptedLink)
    for node in nodes.values():
        node.adopt_interfaces()  # the rest: bridges, the management link to this machine
    return net


class MininetBringup(run.Bringup):
    """`make run`'s stages, with the switch started as a Mininet node."""

    net: Any = None

    def _switch(self) -> str:
        topo = self.topo
        if topo.switch.kind == "bmv2":
            if (why := bmv2.missing()) is not None:
                raise ComponentError(f"switch: {why}")
        elif not SWITCH_BIN.is_file():
            raise ComponentError(f"switch: {SWITCH_BIN} is missing (build it with `make switch`)")
        self.net = build_net(topo, run.LOGS)
        for node in self.net.hosts + self.net.switches:
            # `make stop` ends the nodes' shells too, should this process die without net.stop().
            self._track(f"mininet-{node.name}", node.pid, [], node.netns)
        self.net.start()
        sw = self.net["sw"]
        rec = self._track("switch", sw.proc.pid, sw.argv, topo.switch_ns, str(sw.log))
        components.wait_until(
            lambda: components.probe_in_netns(topo.switch_ns, "grpc", topo.switch.grpc_addr), 20, "switch gRPC", rec
        )
        what = "BMv2 simple_switch_grpc" if topo.switch.kind == "bmv2" else "eBPF supergw-switch"
        return f"Mininet node sw ({what}), pid {rec.pid} in {topo.switch_ns}, P4Runtime on {topo.switch.grpc_addr}"

    def _track(self, name: str, pid: int, argv: list[str], netns: str, log: str = "") -> processes.ProcRecord:
        ticks = processes.start_ticks(pid)
        if ticks is None:
            raise ComponentError(f"{name} (pid {pid}) exited at once; see {log or run.LOGS}")
        rec = processes.ProcRecord(name=name, pid=pid, start_ticks=ticks, argv=argv, log=log, netns=netns)
        self.add(rec)
        return rec


def ping_through(net: Any, src: str, dst: str, count: int = 3) -> tuple[int, int]:
    """(sent, received) of `src` pinging `dst` by Mininet node names."""
    out = net[src].cmd(f"ping -n -q -c {count} -i 0.2 -W 2 {net[dst].IP()}")
    for line in out.splitlines():
        if "packets transmitted" in line:
            fields = line.split()
            return int(fields[0]), int(fields[3])
    raise RuntimeError(f"ping {src} -> {dst}: output not understood: {out!r}")


class AlreadyRunning(RuntimeError):
    """An emulation (`make run` or this script) is running already."""


def boot(topo: Topology, topo_path: Path) -> tuple[MininetBringup, bool]:
    """Clean up a crashed run's leftovers, then bring everything up. The caller must call `shutdown`."""
    try:
        state = processes.RunState.load(run.STATE)
    except ValueError:
        state = None  # unreadable: a crashed run, cleaned up below
    if state is not None and any(processes.alive(p) for p in state.processes):
        raise AlreadyRunning(f"a supergw emulation is already running (phase {state.phase}): `make stop` first")
    run.cmd_down(topo, quiet=True)
    for leftover in run.RUN_DIR.glob("controller-state.sqlite3*"):
        leftover.unlink()
    bringup = MininetBringup(topo, topo_path)
    return bringup, bringup.run()


def shutdown(bringup: MininetBringup) -> None:
    if bringup.net is not None:
        bringup.net.stop()
    run.cmd_down(bringup.topo, quiet=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", type=Path, default=DEFAULT_TOPOLOGY, help="topology file (default: %(default)s)")
    ap.add_argument("--switch", choices=SWITCH_KINDS, default=None, help="override the file's switch.kind")
    ap.add_argument("--no-cli", action="store_true", help="boot, ping the first host <-> the first remote host, stop")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("Mininet needs root (namespaces, veths, eBPF)", file=sys.stderr)
        return 1
    try:
        topo = load_topology(args.topology, args.switch)
        import topologies.mininet_nodes  # noqa: F401, PLC0415 - loads Debian's Mininet, or says it is missing
    except (TopologyError, RuntimeError) as exc:
        print(exc, file=sys.stderr)
        return 1
    from mininet.cli import CLI  # noqa: PLC0415
    from mininet.log import setLogLevel  # noqa: PLC0415

    setLogLevel("info")
    try:
        bringup, ok = boot(topo, args.topology)
    except AlreadyRunning as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        if bringup.net is None:
            run.say("FAIL: the Mininet network was not built (see the stages above)")
            return 1
        print()
        run.print_where_to_look(topo, bringup.state)
        h, r = topo.hosts[0].name, topo.remote.hosts[0].name
        if not ok:
            run.say("DEGRADED: some stages failed (above); the CLI still opens on what runs")
        if args.no_cli:
            run.say(f"mininet: {len(bringup.net.links)} links, {len(bringup.net.hosts)} hosts, {len(bringup.net.switches)} switches")
            answered = True
            for src, dst in ((h, r), (r, h)):
                sent, got = ping_through(bringup.net, src, dst)
                run.say(f"mininet: {src} ping {dst}: {got}/{sent} answered")
                answered = answered and got == sent
            return 0 if ok and answered else 1
        run.say(f"Mininet CLI: try `{h} ping {r}`, `net`, `{h} ip addr`; `exit` stops everything")
        CLI(bringup.net)
        return 0 if ok else 1
    finally:
        shutdown(bringup)


if __name__ == "__main__":
    sys.exit(main())
