"""How each component of the emulation is started and checked.

One function per component returns the `ProcRecord`s it started; readiness checks
return (ok, detail) and never raise for "not ready yet".
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any
from collections.abc import Callable
from pathlib import Path

from topologies import bmv2, processes
from topologies.configs import REPO, GeneratedConfigs, controller_url
from topologies.model import Topology
from topologies.network import switch_interfaces
from topologies.processes import ProcRecord

SWITCH_BIN = REPO / "targets" / "ebpf" / "bin" / "supergw-switch"
VENV_BIN = Path(sys.executable).parent
CONTROLLER_BIN = VENV_BIN / "supergw-controller"
GATEWAY_BIN = VENV_BIN / "supergw-gateway"


class ComponentError(RuntimeError):
    """A component could not be started or never became ready."""


def wait_until(check: Callable[[], tuple[bool, str]], timeout: float, what: str, proc: ProcRecord | None = None) -> str:
    """Poll `check` until ok; raise ComponentError with the last detail (and log tail) on timeout."""
    deadline = time.monotonic() + timeout
    detail = "not checked"
    while time.monotonic() < deadline:
        ok, detail = check()
        if ok:
            return detail
        if proc is not None and not processes.alive(proc):
            raise ComponentError(f"{what}: process exited; last lines of {proc.log}:\n{log_tail(Path(proc.log))}")
        time.sleep(0.3)
    tail = f"\nlast lines of {proc.log}:\n{log_tail(Path(proc.log))}" if proc else ""
    raise ComponentError(f"{what}: not ready after {timeout:.0f}s ({detail}){tail}")


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join("    " + line for line in path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "    (no log)"


def probe_in_netns(netns: str, *args: str, timeout: float = 10.0) -> tuple[bool, str]:
    proc = subprocess.run(
        ["ip", "netns", "exec", netns, sys.executable, "-m", "topologies.probe", *args],
        capture_output=True, text=True, cwd=REPO, timeout=timeout, check=False,
    )
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


# --- switch ---------------------------------------------------------------------------

def pin_dir(topo: Topology) -> Path:
    return Path("/sys/fs/bpf") / topo.prefix


def switch_argv(topo: Topology, logs: Path) -> list[str]:
    if topo.switch.kind == "bmv2":
        return bmv2.argv(topo, logs)
    argv = [
        str(SWITCH_BIN),
        "--device-id", str(topo.switch.device_id),
        "--grpc-server-addr", topo.switch.grpc_addr,
        "--cpu-port", str(topo.switch.cpu_port),
        "--pin-dir", str(pin_dir(topo)),
        "--log-level", "info",
    ]
    for port, ifname in switch_interfaces(topo).items():
        argv += ["-i", f"{port}@{ifname}"]
    return argv


def start_switch(topo: Topology, logs: Path, track: Callable[[ProcRecord], None]) -> ProcRecord:
    """Starts the switch and waits for its gRPC; `track` records the process before the wait,
    so `make stop` finds it even when it never becomes ready."""
    if topo.switch.kind == "bmv2":
        if (why := bmv2.missing()) is not None:
            raise ComponentError(f"switch: {why}")
    elif not SWITCH_BIN.is_file():
        raise ComponentError(f"switch: {SWITCH_BIN.relative_to(REPO)} is missing (build it with `make switch`)")
    rec = processes.start("switch", switch_argv(topo, logs), logs / "switch.log", netns=topo.switch_ns, cwd=REPO)
    track(rec)
    wait_until(lambda: probe_in_netns(topo.switch_ns, "grpc", topo.switch.grpc_addr), 20, "switch gRPC", rec)
    return rec


# --- controller -----------------------------------------------------------------------

def start_controller(
    topo: Topology, gen: GeneratedConfigs, logs: Path, track: Callable[[ProcRecord], None]
) -> ProcRecord:
    """Starts the controller and waits for its API and pipeline; `track` as in start_switch."""
    if not CONTROLLER_BIN.is_file():
        raise ComponentError(f"controller: {CONTROLLER_BIN} is missing (pip install -e controller)")
    rec = processes.start(
        "controller",
        [str(CONTROLLER_BIN), "--config", str(gen.controller)],
        logs / "controller.log",
        netns=topo.switch_ns,
        cwd=REPO,
    )
    track(rec)
    url = controller_url(topo)
    wait_until(lambda: http_answers(f"{url}/metrics"), 30, f"controller API {url}", rec)
    wait_until(
        lambda: probe_in_netns(topo.switch_ns, "pipeline", topo.switch.grpc_addr, str(topo.switch.device_id)),
        20, "pipeline pushed by the controller", rec,
    )
    return rec


def http_answers(url: str) -> tuple[bool, str]:
    """The server is up when it answers at all (an auth error is an answer)."""
    ok, detail = http_ok(url)
    return ok or detail.startswith("HTTP 4"), detail


def gateways_alive(url: str, token: str, names: set[str]) -> tuple[bool, str]:
    """GET the controller's gateway list; ok when every gateway in `names` is alive."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=3) as resp:
            views = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, f"{url}: {getattr(exc, 'reason', exc)}"
    states = {v.get("name"): v.get("state") for v in views if isinstance(v, dict)}
    missing = names - set(states)
    if missing:
        return False, f"controller does not list {sorted(missing)}"
    ok = all(states[n] == "alive" for n in names)
    return ok, ", ".join(f"{n} {states[n]}" for n in sorted(names))


def http_ok(url: str, token: str | None = None, timeout: float = 2.0) -> tuple[bool, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return 200 <= resp.status < 300, f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return False, str(getattr(exc, "reason", exc))


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
    with open(logs / f"gateway-{name}.log", "a") as log:
        log.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise ComponentError(f"gateway {name}: `supergw-gateway up` failed ({proc.returncode}): "
                             f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return (proc.stdout.strip().splitlines() or ["up"])[-1]


def gateway_status(config: Path) -> dict[str, object]:
    proc = gateway_cli("status", config, timeout=20)
    if proc.returncode != 0:
        raise ComponentError(f"`supergw-gateway status` failed: {proc.stderr.strip()}")
    data = json.loads(proc.stdout)
    if not isinstance(data, dict):
        raise ComponentError(f"`supergw-gateway status` printed {type(data).__name__}, not an object")
    return data


def charon_record(name: str, config: Path, logs: Path) -> ProcRecord | None:
    """A ProcRecord for the gateway's charon, so `down` can stop it by pid if the CLI cannot."""
    pid = gateway_status(config).get("charon_pid")
    if not isinstance(pid, int):
        return None
    ticks = processes.start_ticks(pid)
    if ticks is None:
        return None
    return ProcRecord(name=f"charon-{name}", pid=pid, start_ticks=ticks, argv=["charon-systemd"],
                      log=str(logs / f"gateway-{name}.log"))


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


def start_agent(name: str, netns: str, config: Path, health: str, logs: Path) -> ProcRecord:
    """The load agent runs inside the gateway's namespace, reaching the controller over mgmt0."""
    return processes.start(
        f"agent-{name}",
        [str(GATEWAY_BIN), "agent", "--config", str(config), "--health", health],
        logs / f"agent-{name}.log",
        netns=netns,
        cwd=REPO,
    )


# --- end to end -----------------------------------------------------------------------

def ping(netns: str, dst: str, count: int = 1, wait_s: int = 1) -> tuple[bool, str]:
    proc = subprocess.run(
        ["ip", "netns", "exec", netns, "ping", "-n", "-c", str(count), "-W", str(wait_s), dst],
        capture_output=True, text=True, check=False,
    )
    summary = [line for line in proc.stdout.splitlines() if "packets transmitted" in line or "rtt" in line]
    return proc.returncode == 0, "; ".join(summary) or proc.stderr.strip()
