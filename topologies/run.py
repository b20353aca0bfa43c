"""`python -m topologies.run up|down|status [--topology FILE] [--switch ebpf|bmv2] [--replicas N] [--tls]`

`up` boots the emulation a topology file describes (default.yaml: one site; two-site.yaml:
two super gateways facing each other), waits for each stage to be healthy, checks every
host pings through the super gateway(s), and prints where to look. `--switch` runs every
site on that switch, `--replicas N` gives every site N controller replicas on etcd
(`--replicas PREFIX=N` one site only), `--tls` serves every site's REST API over https and
runs P4Runtime over mutual TLS (certificates from `supergw-gateway pki`). `down` stops every process by pid and removes every
namespace; it is idempotent. `status` lists processes and stages. The engine is
topologies/emulation.py; this module only parses arguments and prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from topologies import components
from topologies.emulation import AlreadyRunning, Emulation, EmulationError, say
from topologies.model import DEFAULT_TOPOLOGY, SWITCH_KINDS, TopologyError
from topologies.network import existing_namespaces
from topologies.schema import load
from topologies.where import status_lines, where_lines


def print_lines(lines: list[str]) -> None:
    for line in lines:
        print(line, flush=True)


def already_running(running: Emulation, wanted: Emulation) -> int:
    """What runs, where to look at it; 0 when it is what was asked for, else 1."""
    st = running.state
    kinds = "/".join(sorted({s.topo.switch.kind for s in running.sites}))
    say(f"supergw emulation already running (phase {st.phase}, switch {kinds}, started "
        f"{time.ctime(st.started_at)})")
    if running.spec == wanted.spec:
        print_lines(where_lines(running))
        return 0
    if [s.prefix for s in running.sites] != [s.prefix for s in wanted.sites]:
        say(f"it runs {running.describe()} ({st.source}), not {wanted.describe()} ({wanted.state.source})")
    else:
        for have, want in zip(running.sites, wanted.sites):
            if have.topo.controller.replicas != want.topo.controller.replicas:
                say(f"it runs {have.topo.controller.replicas} controller replica(s)"
                    f"{f' at {have.prefix}' if running.spec.several else ''}, not {want.topo.controller.replicas}")
            if have.topo.controller.tls != want.topo.controller.tls:
                say(f"it runs REST and P4Runtime {'with' if have.topo.controller.tls else 'without'} TLS"
                    f"{f' at {have.prefix}' if running.spec.several else ''}")
    other_switch = {s.topo.switch.kind for s in running.sites} != {s.topo.switch.kind for s in wanted.sites}
    print_lines(where_lines(running))
    say(f"`make stop` first to start afresh{' on the other switch' if other_switch else ''}")
    return 1


def cmd_up(emu: Emulation) -> int:
    if os.geteuid() != 0:
        print("make run needs root (namespaces, veths, eBPF)", file=sys.stderr)
        return 1
    try:
        running = Emulation.attach(emu.layout)
    except ValueError:
        running = None  # unreadable: `up` says so and cleans up
    if running is not None and running.is_running():
        return already_running(running, emu)
    try:
        ok = emu.up()
    except AlreadyRunning as exc:
        return already_running(exc.running, emu)
    except EmulationError as exc:
        say(str(exc))
        return 1
    except KeyboardInterrupt:
        return 130
    print()
    print_lines(where_lines(emu))
    if not ok:
        failed = ", ".join(emu.state.failed_stages())
        say(f"DEGRADED: {failed} failed (details above and in {emu.layout.logs}); what did start keeps running")
        return 1
    say("supergw emulation is up")
    return 0


def cmd_down(topology: Path) -> int:
    try:
        emu = Emulation.attach()
    except ValueError as exc:
        say(f"{exc}; removing namespaces anyway (processes it listed cannot be stopped by pid)")
        emu = None
    if emu is None:
        try:
            emu = Emulation.from_file(topology)  # no state: remove what that file's plan builds
        except TopologyError as exc:
            print(exc, file=sys.stderr)
            return 2
    emu.down()
    return 0


def cmd_status(topology: Path) -> int:
    try:
        emu = Emulation.attach()
    except ValueError as exc:
        print(exc)
        return 1
    if emu is None:
        print("not running (no .run/state.json)")
        try:
            leftovers = existing_namespaces(load(topology))
        except TopologyError:
            leftovers = []
        if leftovers:
            print(f"leftover namespaces: {', '.join(leftovers)} (run `make stop`)")
        return 1
    print_lines(status_lines(emu))
    all_running = len(emu.state.running()) == len(emu.state.processes)
    return 0 if emu.state.phase == "up" and all_running else 1


def parse_replicas(values: list[str]) -> list[tuple[int, str | None]]:
    """`--replicas 3` (every site) or `--replicas sgw-a=3` (one site), each (count, site)."""
    out = []
    for v in values:
        site, _, count = v.rpartition("=")
        if not count.isdigit():
            raise ValueError(f"--replicas {v!r}: expected N or PREFIX=N")
        out.append((int(count), site or None))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topologies.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--topology", type=Path, default=DEFAULT_TOPOLOGY, help="topology YAML (default: %(default)s)")
    parser.add_argument("--switch", choices=SWITCH_KINDS, default=None,
                        help="up: the switch every site runs, overriding the file's switch.kind (default: ebpf)")
    parser.add_argument("--replicas", action="append", default=[], metavar="[PREFIX=]N",
                        help="up: N controller replicas on etcd at every site, or at site PREFIX (make run HA=1: 3)")
    parser.add_argument("--gateways", type=int, default=None, metavar="N",
                        help="up: N gateways (files with a `gateways` count: two-site, remote-access)")
    parser.add_argument("--clients", type=int, default=None, metavar="M",
                        help="up: M remote-access clients (remote-access.yaml; make run TOPO=remote-access CLIENTS=64)")
    parser.add_argument("--tls", action="store_true",
                        help="up: REST over https and P4Runtime over mutual TLS at every site (make run TLS=1)")
    args = parser.parse_args(argv)
    if args.command == "down":
        return cmd_down(args.topology)
    if args.command == "status":
        return cmd_status(args.topology)
    try:
        changes = {k: v for k, v in (("gateways", args.gateways), ("clients", args.clients)) if v is not None}
        emu = Emulation.from_file(args.topology, switch=args.switch, changes=changes, tls=args.tls)
        for count, prefix in parse_replicas(args.replicas):
            emu = Emulation(emu.spec.with_replicas(count, prefix), args.topology)
    except (TopologyError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    for site in emu.sites:
        if (why := components.switch_missing(site.topo)) is not None:
            # At once, before anything is built; never a silent fallback to the eBPF switch.
            name = "BMv2" if site.topo.switch.kind == "bmv2" else "the eBPF switch"
            print(f"cannot run the emulation on {name}: {why}", file=sys.stderr)
            return 2
    return cmd_up(emu)


if __name__ == "__main__":
    sys.exit(main())
