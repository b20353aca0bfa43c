"""How each component of a site is started and checked: the switch, the controller(s), the
gateways (strongSwan through the gateway CLI) and their agents.

Each start function records its process with `track` before it waits for readiness, so
`down` finds it even when it never becomes ready; readiness checks return (ok, detail)
and never raise for "not ready yet".
"""

from __future__ import annotations

import functools
import json
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from supergw_proto.rest import ApiError, ControllerClient
from topologies import api_tls, bmv2, ha, processes
from topologies.configs import AGENT_PORT
from topologies.model import ControllerSlot, GatewaySpec, Topology
from topologies.paths import REPO, SWITCH_BIN, SitePaths
from topologies.poll import wait_until
from topologies.processes import ProcRecord
from topologies.switch import mount_lasting_pin_root, outside_command, site_command

VENV_BIN = Path(sys.executable).parent
CONTROLLER_BIN = VENV_BIN / "supergw-controller"
GATEWAY_BIN = VENV_BIN / "supergw-gateway"

Track = Callable[[ProcRecord], None]


class ComponentError(RuntimeError):
    """A component could not be started or never became ready."""


def probe_in_netns(netns: str, *args: str, timeout: float = 10.0) -> tuple[bool, str]:
    """`python -m topologies.probe ARGS` inside `netns` (a namespace's 127.0.0.1 is its own)."""
    proc = subprocess.run(
        ["ip", "netns", "exec", netns, sys.executable, "-m", "topologies.probe", *args],
        capture_output=True, text=True, cwd=REPO, timeout=timeout, check=False,
    )
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


# --- switch ---------------------------------------------------------------------------

def switch_missing(topo: Topology) -> str | None:
    """Why the site's switch cannot start here, with what to do; None when it can."""
    if topo.switch.kind == "bmv2":
        return bmv2.missing()
    return None if SWITCH_BIN.is_file() else f"{SWITCH_BIN.relative_to(REPO)} is missing (build it with `make switch`)"


def wait_switch(topo: Topology, paths: SitePaths, rec: ProcRecord) -> None:
    wait_until(lambda: probe_in_netns(topo.switch_ns, *api_tls.probe_options(topo, paths), "grpc", topo.p4runtime_addr),
               20, "switch gRPC" + (" over TLS" if topo.controller.tls else ""), rec)


def start_switch(topo: Topology, paths: SitePaths, track: Track) -> ProcRecord:
    """Starts the site's switch (P4Runtime over mutual TLS with `controller.tls`) and waits for its gRPC."""
    if (why := switch_missing(topo)) is not None:
        raise ComponentError(f"switch: {why}")
    logs = paths.logs
    if topo.switch.kind == "ebpf":
        mount_lasting_pin_root()
    argv = site_command(topo, logs, api_tls.switch_options(topo, paths)).argv()
    rec = processes.start("switch", argv, logs / "switch.log", netns=topo.switch_ns, cwd=REPO, site=topo.prefix)
    track(rec)
    wait_switch(topo, paths, rec)
    return rec


def start_outside_switch(topo: Topology, paths: SitePaths, track: Track) -> str:
    """The outside switch of a remote-access site (its own namespace, P4Runtime on its
    management address, over mutual TLS with `controller.tls`); waits for its gRPC. The
    controller configures it."""
    if (why := switch_missing(topo)) is not None:
        raise ComponentError(f"outside switch: {why}")
    logs = paths.logs
    mount_lasting_pin_root()
    argv = outside_command(topo, logs, api_tls.switch_options(topo, paths)).argv()
    rec = processes.start("outside-switch", argv, logs / "outside-switch.log",
                          netns=topo.outside_ns, cwd=REPO, site=topo.prefix)
    track(rec)
    tls = " over TLS" if topo.controller.tls else ""
    wait_until(lambda: probe_in_netns(topo.outside_ns, *api_tls.probe_options(topo, paths), "grpc",
                                      topo.outside_p4runtime_addr), 20, "outside switch gRPC" + tls, rec)
    return f"pid {rec.pid} in {topo.outside_ns}, P4Runtime{tls} on {topo.outside_p4runtime_addr}"


def switch_detail(topo: Topology, pid: int) -> str:
    what = "BMv2 simple_switch_grpc" if topo.switch.kind == "bmv2" else "eBPF supergw-switch"
    tls = " (mutual TLS)" if topo.controller.tls else ""
    return f"{what}, pid {pid} in {topo.switch_ns}, P4Runtime on {topo.p4runtime_addr}{tls}"


# --- controllers ----------------------------------------------------------------------

def start_controller(topo: Topology, slot: ControllerSlot, config: Path, logs: Path) -> ProcRecord:
    """One controller process in its namespace (by `up`, and again after a kill)."""
    if not CONTROLLER_BIN.is_file():
        raise ComponentError(f"controller: {CONTROLLER_BIN} is missing (pip install -e controller)")
    return processes.start(slot.process, [str(CONTROLLER_BIN), "--config", str(config)],
                           logs / f"{slot.process}.log", netns=slot.netns, cwd=REPO, site=topo.prefix)


def api_answers(url: str, verify: bool | ssl.SSLContext = True) -> tuple[bool, str]:
    """The controller's API serves (any HTTP answer counts, an auth error too); `verify`:
    the CA its https certificate must chain to (`api_tls.verify`)."""
    with ControllerClient(url, timeout=2, verify=verify) as api:
        try:
            health = api.health()
        except ApiError as exc:
            return exc.answered, str(exc)
    return True, f"status {health.status}"


def start_controllers(topo: Topology, paths: SitePaths, configs: dict[str, Path], track: Track) -> str:
    """The site's controller, or its etcd members and replicas; waits for every API, the
    pipeline on the switch and, with replicas, exactly one leader."""
    etcd = ""
    if topo.replicated:
        etcd = f"etcd {ha.start_etcd_cluster(topo, paths, track)}; "
    recs = []
    for slot in topo.controllers():
        rec = start_controller(topo, slot, configs[slot.process], paths.logs)
        track(rec)
        recs.append((slot, rec))
    verify = api_tls.verify(topo, paths)
    for slot, rec in recs:
        wait_until(functools.partial(api_answers, slot.api_url, verify), 30, f"{slot.process} API {slot.api_url}", rec)
    leader = recs[0][1] if not topo.replicated else None
    probe = [*api_tls.probe_options(topo, paths), "pipeline", topo.p4runtime_addr, str(topo.switch.device_id)]
    wait_until(lambda: probe_in_netns(topo.switch_ns, *probe), 30, "pipeline pushed by the controller", leader)
    if not topo.replicated:
        return f"pid {recs[0][1].pid}, API {topo.api_url()}"
    return f"{etcd}{len(recs)} replicas: {ha.wait_one_leader(topo, verify=verify)}"


def gateways_alive(url: str, token: str, names: set[str], verify: bool | ssl.SSLContext = True) -> tuple[bool, str]:
    """Whether the controller at `url` counts every gateway in `names` alive."""
    try:
        with ControllerClient(url, token, timeout=3, verify=verify) as api:
            views = api.gateways()
    except ApiError as exc:
        return False, str(exc)
    states = {v.name: v.state for v in views}
    missing = names - set(states)
    if missing:
        return False, f"controller does not list {sorted(missing)}"
    ok = all(states[n] == "alive" for n in names)
    return ok, ", ".join(f"{n} {states[n]}" for n in sorted(names))


# --- gateways -------------------------------------------------------------------------
# The gateway CLI (backends/): `up` starts the gateway's own charon in the background and
# loads (and, for members, initiates) the tunnel, then returns; `agent` runs in the
# foreground and reports to the controller; `status` prints JSON; `down` stops charon.

def gateway_cli(command: str, config: Path, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    if not GATEWAY_BIN.is_file():
        raise ComponentError(f"{GATEWAY_BIN} is missing (pip install -e backends)")
    return subprocess.run(
        [str(GATEWAY_BIN), command, "--config", str(config)],
        capture_output=True, text=True, cwd=REPO, timeout=timeout, check=False,
    )


def gateway_up(name: str, config: Path, logs: Path) -> str:
    """`supergw-gateway up`; its output is appended to the gateway's log."""
    try:
        proc = gateway_cli("up", config)
    except subprocess.TimeoutExpired:
        raise ComponentError(f"gateway {name}: `supergw-gateway up` took longer than 90s") from None
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"gateway-{name}.log", "a") as log:
        log.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise ComponentError(f"gateway {name}: `supergw-gateway up` failed ({proc.returncode}): "
                             f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return (proc.stdout.strip().splitlines() or ["up"])[-1]


def gateway_down(config: Path) -> str | None:
    """`supergw-gateway down` (stops its charon, removes its cgroup); what failed, or None."""
    try:
        proc = gateway_cli("down", config, timeout=30)
    except (ComponentError, OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if proc.returncode == 0 else proc.stderr.strip()[-200:]


def gateway_status(config: Path) -> dict[str, object]:
    proc = gateway_cli("status", config, timeout=20)
    if proc.returncode != 0:
        raise ComponentError(f"`supergw-gateway status` failed: {proc.stderr.strip()}")
    data = json.loads(proc.stdout)
    if not isinstance(data, dict):
        raise ComponentError(f"`supergw-gateway status` printed {type(data).__name__}, not an object")
    return data


def charon_pid(config: Path) -> int | None:
    pid = gateway_status(config).get("charon_pid")
    return pid if isinstance(pid, int) else None


def charon_record(topo: Topology, name: str, config: Path, logs: Path) -> ProcRecord | None:
    """A ProcRecord for the gateway's charon, so `down` can stop it by pid if the CLI cannot."""
    pid = charon_pid(config)
    if pid is None:
        return None
    return processes.adopt(f"charon-{name}", pid, ["charon-systemd"], str(logs / f"gateway-{name}.log"),
                           site=topo.prefix)


def tunnel_up(config: Path) -> tuple[bool, str]:
    """Ready when an IKE SA is ESTABLISHED with an INSTALLED CHILD SA."""
    try:
        st = gateway_status(config)
    except (ComponentError, ValueError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    raw_sas = st.get("sas")
    sas: list[dict[str, Any]] = raw_sas if isinstance(raw_sas, list) else []
    for sa in sas:
        children = sa.get("children") or []
        if sa.get("state") == "ESTABLISHED" and any(c.get("state") == "INSTALLED" for c in children):
            return True, f"{st.get('backend')} IKE {sa.get('local')} <-> {sa.get('remote')} ESTABLISHED, CHILD INSTALLED"
    return False, f"backend {st.get('backend')}, SAs {[(sa.get('name'), sa.get('state')) for sa in sas]}"


def start_agent(topo: Topology, g: GatewaySpec, config: Path, logs: Path) -> ProcRecord:
    """The load agent runs inside the gateway's namespace, reaching the controller over mgmt0."""
    return processes.start(
        f"agent-{g.name}",
        [str(GATEWAY_BIN), "agent", "--config", str(config), "--health", f"{g.mgmt_ip}:{AGENT_PORT}"],
        logs / f"agent-{g.name}.log",
        netns=topo.ns(g.name),
        cwd=REPO,
        site=topo.prefix,
    )


# --- end to end -----------------------------------------------------------------------

def ping(netns: str, dst: str, count: int = 1, wait_s: int = 1) -> tuple[bool, str]:
    proc = subprocess.run(
        ["ip", "netns", "exec", netns, "ping", "-n", "-c", str(count), "-W", str(wait_s), dst],
        capture_output=True, text=True, check=False,
    )
    summary = [line for line in proc.stdout.splitlines() if "packets transmitted" in line or "rtt" in line]
    return proc.returncode == 0, "; ".join(summary) or proc.stderr.strip()
