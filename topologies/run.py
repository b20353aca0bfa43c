"""`python -m topologies.run up|down|status [--topology FILE]` — the emulated supergw.

`up` builds the namespaces, starts the switch (the eBPF target, or BMv2 with
`--switch bmv2` / `switch.kind: bmv2`), the controller and the gateways,
waits for each to be healthy, checks a LAN host pings a remote host through the super
gateway, and prints where to look. `down` stops every process by pid and removes every
namespace; it is idempotent. State lives in `.run/` at the repository root.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from topologies import bmv2, components, ha, network, processes
from topologies.components import ComponentError
from topologies.configs import BMV2_JSON, REPO, GeneratedConfigs, Secrets, controller_url, validate_with_owners, write_all
from topologies.model import DEFAULT_TOPOLOGY, SWITCH_KINDS, SwitchKind, Topology, TopologyError, load_topology
from topologies.processes import RunState

RUN_DIR = REPO / ".run"
STATE = RUN_DIR / "state.json"
LOGS = RUN_DIR / "logs"
AGENT_PORT = 8780


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Bringup:
    """One `up`: each stage records ok/failed so the summary says exactly what works."""

    def __init__(self, topo: Topology, topo_path: Path) -> None:
        self.topo = topo
        info = {"switch": topo.switch.kind, "replicas": str(topo.controller.replicas)}
        self.state = RunState(topology=str(topo_path), started_at=time.time(), info=info)
        self.results: list[tuple[str, bool, str]] = []
        self.replica_configs: dict[str, Path] = {}  # controller replica -> its config (topologies/ha.py)

    def record(self, stage: str, ok: bool, detail: str) -> None:
        self.results.append((stage, ok, detail))
        say(f"{'ok ' if ok else 'FAIL'} {stage}: {detail}")
        first_line = detail.splitlines()[0] if detail else ""
        self.state.info[f"stage.{stage}"] = ("ok: " if ok else "failed: ") + first_line
        self.state.save(STATE)

    def add(self, rec: processes.ProcRecord) -> None:
        self.state.processes.append(rec)
        self.state.save(STATE)

    def run(self) -> bool:
        topo = self.topo
        self.state.save(STATE)
        say(f"building topology {topo.prefix}: {len(topo.hosts)} hosts, {len(topo.gateways)} gateways")
        network.build(topo, say)
        gen = write_all(topo, RUN_DIR, Secrets.fresh(topo.controller.psk_bytes))
        if ha.enabled(topo):
            ha.build_network(topo, say)
            gen, self.replica_configs = ha.write_configs(topo, gen)
        self.state.info.update({"controller_config": str(gen.controller), "token_file": str(gen.token_file)})
        problems = list(dict.fromkeys(validate_with_owners(gen) + ha.validate(self.replica_configs)))
        self.record("configs", not problems, "; ".join(problems) or f"written to {gen.controller.parent}")
        if problems:
            return False  # never start components on configs their owners reject

        # Gateways and their agents come up before the controller, so its first view already
        # has every gateway heartbeating and the initial bucket map spreads over all of them.
        switch_ok = self._stage("switch", self._switch)
        gateways_ok = self._stage("gateways", lambda: self._gateways(gen))
        if gateways_ok:
            gateways_ok = self._stage("tunnels", lambda: self._tunnels(gen))
        controller_ok = switch_ok and self._stage("controller", lambda: self._controller(gen))
        if not switch_ok:
            self.record("controller", False, "skipped: the switch is not running")
        if gateways_ok and controller_ok:
            self._stage("agents", lambda: self._agents(gen))
        else:
            self.record("agents", False, "skipped: needs the controller and the gateways")
        if controller_ok and gateways_ok:
            self._stage("end-to-end ping", self._ping)
        else:
            self.record("end-to-end ping", False, "skipped: needs the controller and the gateways")
        self.state.phase = "up" if all(ok for _, ok, _ in self.results) else "degraded"
        self.state.save(STATE)
        return self.state.phase == "up"

    def _stage(self, name: str, fn: Callable[[], str]) -> bool:
        try:
            detail = fn()
        except (ComponentError, network.NetworkError, OSError, subprocess.SubprocessError, ValueError, RuntimeError) as exc:
            self.record(name, False, str(exc) or type(exc).__name__)
            return False
        self.record(name, True, str(detail))
        return True

    def _switch(self) -> str:
        rec = components.start_switch(self.topo, LOGS, self.add)
        what = "BMv2 simple_switch_grpc" if self.topo.switch.kind == "bmv2" else "eBPF supergw-switch"
        return f"{what}, pid {rec.pid} in {self.topo.switch_ns}, P4Runtime on {self.topo.switch.grpc_addr}"

    def _controller(self, gen: GeneratedConfigs) -> str:
        if ha.enabled(self.topo):
            etcd = ha.start_etcd_cluster(self.topo, RUN_DIR, LOGS, self.add)
            return f"etcd {etcd}; " + ha.start_replicas(self.topo, self.replica_configs, LOGS, self.add)
        rec = components.start_controller(self.topo, gen, LOGS, self.add)
        return f"pid {rec.pid}, API {controller_url(self.topo)}"

    def _gateways(self, gen: GeneratedConfigs) -> str:
        """Peers (responders) first, so each member can initiate straight away."""
        out = []
        order = [(g.peer.name, None) for g in self.topo.gateways] + [(g.name, g) for g in self.topo.gateways]
        for name, member in order:
            say(f"     gateway {name}: starting charon{' (initiating the tunnel)' if member else ''} ...")
            detail = components.gateway_up(name, gen.gateways[name], LOGS).split(" (")[0]
            if (charon := components.charon_record(name, gen.gateways[name], LOGS)) is not None:
                self.add(charon)
            if member is not None:
                health = f"{member.mgmt_ip}:{AGENT_PORT}"
                self.add(components.start_agent(name, self.topo.ns(name), gen.gateways[name], health, LOGS))
            out.append(detail)
        return "; ".join(out)

    def _tunnels(self, gen: GeneratedConfigs) -> str:
        details = []
        for g in self.topo.gateways:
            detail = components.wait_until(
                functools.partial(components.tunnel_up, gen.gateways[g.name]), 45, f"tunnel {g.name} <-> {g.peer.name}"
            )
            details.append(f"{g.name}: {detail}")
        return "; ".join(details)

    def _agents(self, gen: GeneratedConfigs) -> str:
        """Every member's agent runs and the controller counts the gateway alive."""
        token = gen.secrets.api_token
        url = f"{controller_url(self.topo)}/api/v1/gateways"
        agents = [p for p in self.state.processes if p.name.startswith("agent-")]
        names = {g.name for g in self.topo.gateways}

        def check() -> tuple[bool, str]:
            dead = [p.name for p in agents if not processes.alive(p)]
            if dead:
                raise ComponentError(f"{', '.join(dead)} exited; see {LOGS}/agent-*.log:\n"
                                     + components.log_tail(Path(agents[0].log), 6))
            if ha.enabled(self.topo):
                return ha.gateways_alive_everywhere(self.topo, token, names)
            return components.gateways_alive(url, token, names)

        return components.wait_until(check, 20, "gateways reporting to the controller")

    def _ping(self) -> str:
        """Every LAN host reaches a remote host through the super gateway."""
        out = []
        remotes = self.topo.remote.hosts
        for i, src in enumerate(self.topo.hosts):
            dst = remotes[i % len(remotes)]
            detail = components.wait_until(
                lambda: components.ping(self.topo.ns(src.name), str(dst.ip)), 30, f"ping {src.name} -> {dst.name} ({dst.ip})"
            )
            rtt = detail.split("=")[-1].split("/")[1] if "rtt" in detail else "?"
            out.append(f"{src.name}->{dst.name} {rtt} ms")
        return ", ".join(out)


def _running(state: RunState | None) -> list[processes.ProcRecord]:
    return [p for p in state.processes if processes.alive(p)] if state else []


def cmd_up(topo: Topology, topo_path: Path) -> int:
    if os.geteuid() != 0:
        print("make run needs root (namespaces, veths, eBPF)", file=sys.stderr)
        return 1
    try:
        state = RunState.load(STATE)
    except ValueError as exc:
        say(f"{exc}: treating it as a crashed run")
        STATE.unlink()
        state = None
    if state is not None and state.phase in ("up", "degraded") and _running(state):
        if state.info.get("kind") == "two-site":
            say(f"a two-site emulation is running ({state.topology}): `make stop` first")
            return 1
        running = state.info.get("switch", "ebpf")
        say(f"supergw emulation already running (phase {state.phase}, switch {running}, "
            f"started {time.ctime(state.started_at)})")
        other = running != topo.switch.kind
        if other:
            topo = topo.model_copy(update={"switch": topo.switch.model_copy(update={"kind": running})})
        replicas = int(state.info.get("replicas", "1"))
        other_replicas = replicas != topo.controller.replicas
        if other_replicas:
            say(f"it runs {replicas} controller replica(s), not {topo.controller.replicas}")
            topo = ha.prepare(topo, replicas)
        print_where_to_look(topo, state)
        say(f"`make stop` first to start afresh{' on the other switch' if other else ''}")
        return 1 if other or other_replicas else 0
    if state is not None or network.existing_namespaces(topo):
        say("leftovers of an earlier run found: cleaning up first")
        cmd_down(topo, quiet=True)
    # A fresh run starts with no operator intent left from the last one (drains, pins).
    for leftover in RUN_DIR.glob("controller-state.sqlite3*"):
        leftover.unlink()
    if LOGS.exists():
        previous = RUN_DIR / "logs.previous"
        shutil.rmtree(previous, ignore_errors=True)
        LOGS.rename(previous)
    bringup = Bringup(topo, topo_path)
    try:
        ok = bringup.run()
    except (network.NetworkError, OSError, subprocess.SubprocessError) as exc:
        say(f"FAIL building the topology: {exc}")
        cmd_down(topo, quiet=True)
        return 1
    except KeyboardInterrupt:
        say("interrupted: stopping what was started")
        cmd_down(topo, quiet=True)
        return 130
    print()
    print_where_to_look(topo, bringup.state)
    if not ok:
        failed = [f"{stage}" for stage, good, _ in bringup.results if not good]
        say(f"DEGRADED: {', '.join(failed)} failed (details above and in {LOGS}); what did start keeps running")
        return 1
    say("supergw emulation is up")
    return 0


def print_where_to_look(topo: Topology, state: RunState) -> None:
    url = ha.api_url(topo, topo.controller.replica_names()[0]) if ha.enabled(topo) else controller_url(topo)
    token_file = state.info.get("token_file", str(RUN_DIR / "config" / "api-token"))
    h, r = topo.hosts[0], topo.remote.hosts[0]
    lines = [
        "Where to look:",
        f"  REST API     {url}/api/v1   (OpenAPI docs: {url}/docs)",
        f"  API token    {token_file}",
        f"               curl -H \"Authorization: Bearer $(cat {token_file})\" {url}/api/v1/gateways",
        f"  metrics      {url}/metrics",
        f"  dashboard    {url}/dashboard/",
        f"  logs         {LOGS}/",
        f"  configs      {RUN_DIR / 'config'}/",
        f"  host shell   ip netns exec {topo.ns(h.name)} bash     (try: ping {r.ip})",
        f"  namespaces   {', '.join(topo.namespaces())}",
        f"  switch       P4Runtime {topo.switch.grpc_addr} inside {topo.switch_ns} (device id {topo.switch.device_id})",
        *switch_lines(topo),
        *(ha.where_lines(topo, LOGS) if ha.enabled(topo) else []),
        "  stop         make stop",
    ]
    for line in lines:
        print(line)


def switch_lines(topo: Topology) -> list[str]:
    if topo.switch.kind == "bmv2":
        return [
            f"               BMv2 simple_switch_grpc, program {BMV2_JSON.relative_to(REPO)} pushed by the controller",
            f"               per-packet log: tail -f {bmv2.log_file(LOGS)}   (process output: {LOGS}/switch.log)",
            "               a gateway's link: ip netns exec <gw> ip link set lan0 down; setting the switch's own",
            "               port down stalls every BMv2 port until restart (controller/README.md)",
        ]
    return [f"               eBPF supergw-switch, log {LOGS}/switch.log"]


def cmd_down(topo: Topology, quiet: bool = False) -> int:
    try:
        state = RunState.load(STATE)
    except ValueError as exc:
        say(f"{exc}; removing namespaces anyway (processes it listed cannot be stopped by pid)")
        state = None
    for rec in reversed(state.processes if state else []):
        outcome = processes.stop(rec)
        if not quiet or outcome != "not running":
            say(f"{rec.name} (pid {rec.pid}): {outcome}")
    # then whatever the gateway CLI still knows of (charon it started, cgroups)
    for config in sorted((RUN_DIR / "config").glob("gateway-*.yaml")):
        try:
            proc = components.gateway_cli("down", config, timeout=30)
            if proc.returncode != 0 and not quiet:
                say(f"{config.stem}: `supergw-gateway down` failed: {proc.stderr.strip()[-200:]}")
        except (ComponentError, OSError, subprocess.TimeoutExpired) as exc:
            if not quiet:
                say(f"{config.stem}: `supergw-gateway down` failed: {exc}")
    removed = network.teardown(topo) + ha.teardown_leftovers(topo)
    pins = components.pin_dir(topo)
    if pins.exists():
        shutil.rmtree(pins, ignore_errors=True)
        removed.append(str(pins))
    if removed and not quiet:
        say(f"removed {len(removed)} namespaces/links")
    STATE.unlink(missing_ok=True)
    if not quiet:
        say("supergw emulation stopped")
    return 0


def cmd_status(topo: Topology) -> int:
    try:
        state = RunState.load(STATE)
    except ValueError as exc:
        print(exc)
        return 1
    if state is None:
        print("not running (no .run/state.json)")
        leftovers = network.existing_namespaces(topo)
        if leftovers:
            print(f"leftover namespaces: {', '.join(leftovers)} (run `make stop`)")
        return 1
    print(f"phase {state.phase}, started {time.ctime(state.started_at)}")
    for rec in state.processes:
        print(f"  {rec.name:<16} pid {rec.pid:<8} {'running' if processes.alive(rec) else 'STOPPED'}   log {rec.log}")
    for key, value in state.info.items():
        if key.startswith("stage."):
            print(f"  {key[6:]:<16} {value}")
    for line in ha.where_lines(topo, LOGS) if ha.enabled(topo) else []:
        print(line)
    print(json.dumps({"namespaces": network.existing_namespaces(topo)}))
    return 0 if state.phase == "up" and all(processes.alive(p) for p in state.processes) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topologies.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--topology", type=Path, default=DEFAULT_TOPOLOGY, help="topology YAML (default: %(default)s)")
    parser.add_argument("--switch", choices=SWITCH_KINDS, default=None,
                        help="up: the switch to run, overriding the topology's switch.kind (default: ebpf)")
    parser.add_argument("--replicas", type=int, default=None, metavar="N",
                        help="up: N controller replicas on etcd, overriding controller.replicas (make run HA=1: 3)")
    args = parser.parse_args(argv)
    kind: SwitchKind | None = args.switch
    topo_path = args.topology
    replicas: int | None = args.replicas if args.command == "up" else None
    if args.command != "up" and topo_path == DEFAULT_TOPOLOGY:
        try:
            state = RunState.load(STATE)
        except ValueError:
            state = None
        if state is not None and Path(state.topology).is_file():
            topo_path = Path(state.topology)
        if state is not None and state.info.get("replicas", "1").isdigit():
            replicas = int(state.info["replicas"])
    from topologies import twosite  # imports this module: loaded only when needed

    if twosite.is_two_site(topo_path):
        if args.replicas is not None:
            print("--replicas (make run HA=1) is for the one-site topology only", file=sys.stderr)
            return 2
        return twosite.main(args.command, topo_path, kind)
    try:
        topo = ha.prepare(load_topology(topo_path, kind if args.command == "up" else None), replicas)
    except TopologyError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.command == "up":
        if topo.switch.kind == "bmv2" and (why := bmv2.missing()) is not None:
            # At once, before anything is built; never a silent fallback to the eBPF switch.
            print(f"cannot run the emulation on BMv2: {why}", file=sys.stderr)
            return 2
        return cmd_up(topo, topo_path)
    if args.command == "down":
        return cmd_down(topo)
    return cmd_status(topo)


if __name__ == "__main__":
    sys.exit(main())
