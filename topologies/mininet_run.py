"""`python -m topologies.mininet_run [--topology FILE] [--switch ebpf|bmv2] [--no-cli]` — `make run` in Mininet.

Boots exactly what `make run` boots (same topology file, same engine: wiring by network.py,
configs, components, health stages), with every namespace a Mininet node and the switch a
`SupergwSwitch` started by Mininet, then opens the Mininet CLI (`mininet> h1 ping r1`).
Leaving the CLI stops everything (as `make stop`, which also cleans up after a crashed
session). `--no-cli` boots, pings h1 -> r1 and back from Mininet, stops; the exit status
says whether every stage and both pings worked. One site only.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from topologies import api_tls, components, processes
from topologies.bringup import Bringup
from topologies.components import ComponentError
from topologies.emulation import AlreadyRunning, Emulation, EmulationError, say
from topologies.model import DEFAULT_TOPOLOGY, SWITCH_KINDS, Topology, TopologyError
from topologies.site import Site
from topologies.switch import mount_lasting_pin_root, site_command
from topologies.where import where_lines


def build_net(topo: Topology, logs: Path, switch_options: tuple[str, ...] = ()) -> Any:
    """A Mininet network whose nodes are the namespaces network.build made (not started);
    `switch_options`: the switch's P4Runtime TLS flags (`api_tls.switch_options`)."""
    # Imported here: the module needs Mininet installed, and main() says so when it is not.
    from mininet.net import Mininet  # noqa: PLC0415

    from topologies.mininet_nodes import AdoptedLink, NetnsBridge, NetnsHost, SupergwSwitch, veth_pairs  # noqa: PLC0415

    net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False, autoStaticArp=False)
    net.built = True  # nothing for Mininet to build: the links exist, addresses are set
    if topo.switch.kind == "ebpf":
        mount_lasting_pin_root()
    net.addSwitch(
        "sw", cls=SupergwSwitch, netns=topo.switch_ns, argv=site_command(topo, logs, switch_options).argv(),
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


class MininetBringup(Bringup):
    """`make run`'s stages, with the switch started as a Mininet node."""

    net: Any = None

    def start_switch(self, site: Site) -> str:
        topo = site.topo
        if (why := components.switch_missing(topo)) is not None:
            raise ComponentError(f"switch: {why}")
        self.net = build_net(topo, site.paths.logs, api_tls.switch_options(topo, site.paths))
        for node in self.net.hosts + self.net.switches:
            # `make stop` ends the nodes' shells too, should this process die without net.stop().
            self.adopt(site, f"mininet-{node.name}", node.pid, [], node.netns)
        self.net.start()
        sw = self.net["sw"]
        rec = self.adopt(site, "switch", sw.proc.pid, sw.argv, topo.switch_ns, str(sw.log))
        components.wait_switch(topo, site.paths, rec)
        return f"Mininet node sw ({components.switch_detail(topo, rec.pid)})"

    def adopt(self, site: Site, name: str, pid: int, argv: list[str], netns: str, log: str = "") -> processes.ProcRecord:
        rec = processes.adopt(name, pid, argv, log, netns, site=site.prefix)
        if rec is None:
            raise ComponentError(f"{name} (pid {pid}) exited at once; see {log or site.paths.logs}")
        self.run.track(rec)
        return rec


class MininetEmulation:
    """The engine's emulation with the Mininet network its switch stage built."""

    def __init__(self, emu: Emulation) -> None:
        self.emu = emu
        self.bringup: MininetBringup | None = None

    def up(self) -> bool:
        def bringup(*args: Any) -> Bringup:
            self.bringup = MininetBringup(*args)
            return self.bringup

        self.emu.state.front_end = "mininet"
        return self.emu.up(bringup)

    @property
    def net(self) -> Any:
        return None if self.bringup is None else self.bringup.net

    def shutdown(self) -> None:
        if self.net is not None:
            self.net.stop()
        self.emu.down(quiet=True)


def ping_through(net: Any, src: str, dst: str, count: int = 3) -> tuple[int, int]:
    """(sent, received) of `src` pinging `dst` by Mininet node names."""
    out = net[src].cmd(f"ping -n -q -c {count} -i 0.2 -W 2 {net[dst].IP()}")
    for line in out.splitlines():
        if "packets transmitted" in line:
            fields = line.split()
            return int(fields[0]), int(fields[3])
    raise RuntimeError(f"ping {src} -> {dst}: output not understood: {out!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--topology", type=Path, default=DEFAULT_TOPOLOGY, help="topology file (default: %(default)s)")
    ap.add_argument("--switch", choices=SWITCH_KINDS, default=None, help="override the file's switch.kind")
    ap.add_argument("--no-cli", action="store_true", help="boot, ping the first host <-> the first remote host, stop")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("Mininet needs root (namespaces, veths, eBPF)", file=sys.stderr)
        return 1
    try:
        emu = Emulation.from_file(args.topology, switch=args.switch)
        topo = emu.spec.single
        import topologies.mininet_nodes  # noqa: F401, PLC0415 - loads Debian's Mininet, or says it is missing
    except (TopologyError, RuntimeError) as exc:
        print(exc, file=sys.stderr)
        return 1
    from mininet.cli import CLI  # noqa: PLC0415
    from mininet.log import setLogLevel  # noqa: PLC0415

    setLogLevel("info")
    mn = MininetEmulation(emu)
    try:
        ok = mn.up()
    except (AlreadyRunning, EmulationError) as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        if mn.net is None:
            say("FAIL: the Mininet network was not built (see the stages above)")
            return 1
        print()
        for line in where_lines(emu):
            print(line)
        h, r = topo.hosts[0].name, topo.remote.hosts[0].name
        if not ok:
            say("DEGRADED: some stages failed (above); the CLI still opens on what runs")
        if args.no_cli:
            say(f"mininet: {len(mn.net.links)} links, {len(mn.net.hosts)} hosts, {len(mn.net.switches)} switches")
            answered = True
            for src, dst in ((h, r), (r, h)):
                sent, got = ping_through(mn.net, src, dst)
                say(f"mininet: {src} ping {dst}: {got}/{sent} answered")
                answered = answered and got == sent
            return 0 if ok and answered else 1
        say(f"Mininet CLI: try `{h} ping {r}`, `net`, `{h} ip addr`; `exit` stops everything")
        CLI(mn.net)
        return 0 if ok else 1
    finally:
        mn.shutdown()


if __name__ == "__main__":
    sys.exit(main())
