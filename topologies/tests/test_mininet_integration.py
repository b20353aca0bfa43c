"""The Mininet front end for real: boot without the CLI, ping end to end both ways, stop cleanly.

Needs root, Debian's `mininet`, the built switch (BMv2: `simple_switch_grpc` and `make p4`'s
JSON, else skipped with the reason) and strongSwan; about half a minute per switch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from topologies import bmv2
from topologies.components import SWITCH_BIN
from topologies.model import SWITCH_KINDS, SwitchKind, load_topology
from topologies.network import existing_namespaces
from topologies.run import STATE

REPO = Path(__file__).resolve().parents[2]


def _mininet_missing() -> str | None:
    try:
        import topologies.mininet_nodes  # noqa: F401, PLC0415 - raises MininetMissing (a RuntimeError)
    except RuntimeError as exc:
        return str(exc)
    return None


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and eBPF"),
    pytest.mark.skipif(not SWITCH_BIN.is_file(), reason="switch not built (make switch)"),
    pytest.mark.skipif(_mininet_missing() is not None, reason=_mininet_missing() or ""),
]


@pytest.mark.parametrize("switch", SWITCH_KINDS)
def test_mininet_boots_and_pings_end_to_end(switch: SwitchKind) -> None:
    if switch == "bmv2" and (why := bmv2.missing()) is not None:
        pytest.skip(why)
    topo = load_topology(switch=switch)
    if STATE.exists() or existing_namespaces(topo):
        pytest.skip("an emulation is already running here (make stop first)")
    r = subprocess.run([sys.executable, "-m", "topologies.mininet_run", "--switch", switch, "--no-cli"], cwd=REPO,
                       capture_output=True, text=True, timeout=600, check=False)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "ok  switch: Mininet node sw" in out, out
    for stage in ("gateways", "tunnels", "controller", "agents", "end-to-end ping"):
        assert f"ok  {stage}:" in out, out
    # Every veth network.py made is a Mininet link: host, gateway (LAN, WAN, mgmt), peer (WAN,
    # remote LAN), remote host, and the switch's management link.
    links = len(topo.hosts) + 5 * len(topo.gateways) + len(topo.remote.hosts) + 1
    nodes = len(topo.hosts) + 2 * len(topo.gateways) + len(topo.remote.hosts)
    assert f"mininet: {links} links, {nodes} hosts, 4 switches" in out, out
    h, rh = topo.hosts[0].name, topo.remote.hosts[0].name
    assert f"mininet: {h} ping {rh}: 3/3 answered" in out and f"mininet: {rh} ping {h}: 3/3 answered" in out, out
    # Everything stopped: namespaces, state, the Mininet nodes' shells.
    assert existing_namespaces(topo) == [] and not STATE.exists(), out
    shells = subprocess.run(["pgrep", "-f", f"mininet:{h}$"], capture_output=True, text=True, check=False)
    assert shells.stdout.strip() == "", shells.stdout


def test_refuses_to_start_over_a_running_emulation(tmp_path: Path) -> None:
    topo = load_topology()
    if STATE.exists() or existing_namespaces(topo):
        pytest.skip("an emulation is already running here (make stop first)")
    # A state file naming a live process (this test) stands for a running `make run`.
    from topologies.processes import ProcRecord, RunState, start_ticks

    me = os.getpid()
    RunState(topology="x", started_at=0.0, phase="up",
             processes=[ProcRecord("controller", me, start_ticks(me) or 0, [], "")]).save(STATE)
    try:
        r = subprocess.run([sys.executable, "-m", "topologies.mininet_run", "--no-cli"], cwd=REPO,
                           capture_output=True, text=True, timeout=60, check=False)
    finally:
        STATE.unlink()
    assert r.returncode == 1 and "already running" in r.stderr and "make stop" in r.stderr, r.stdout + r.stderr
