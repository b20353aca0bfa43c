"""The Mininet front end for real: boot without the CLI, ping end to end both ways, stop cleanly.

Needs root, Debian's `mininet`, the built switch (BMv2: `simple_switch_grpc` and `make p4`'s
JSON, else skipped with the reason) and strongSwan; about half a minute per switch.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from topologies import bmv2
from topologies.emulation import Emulation
from topologies.model import SWITCH_KINDS, SwitchKind
from topologies.paths import REPO
from topologies.processes import ProcRecord, start_ticks
from topologies.tests.emulation import EMULATION_MARKS, assert_gone, skip_if_running


def _mininet_missing() -> str | None:
    try:
        import topologies.mininet_nodes  # noqa: F401, PLC0415 - raises MininetMissing (a RuntimeError)
    except RuntimeError as exc:
        return str(exc)
    return None


pytestmark = [*EMULATION_MARKS, pytest.mark.skipif(_mininet_missing() is not None, reason=_mininet_missing() or "")]


@pytest.mark.parametrize("switch", SWITCH_KINDS)
def test_mininet_boots_and_pings_end_to_end(switch: SwitchKind) -> None:
    if switch == "bmv2" and (why := bmv2.missing()) is not None:
        pytest.skip(why)
    emu = Emulation.from_file(switch=switch)
    topo = emu.spec.single
    skip_if_running(emu)
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
    assert_gone(emu)
    shells = subprocess.run(["pgrep", "-f", f"mininet:{h}$"], capture_output=True, text=True, check=False)
    assert shells.stdout.strip() == "", shells.stdout


def test_refuses_to_start_over_a_running_emulation() -> None:
    running = Emulation.from_file()
    skip_if_running(running)
    # A state file naming a live process (this test) stands for a running `make run`.
    me = os.getpid()
    running.run.track(ProcRecord("controller", me, start_ticks(me) or 0, [], ""))
    try:
        r = subprocess.run([sys.executable, "-m", "topologies.mininet_run", "--no-cli"], cwd=REPO,
                           capture_output=True, text=True, timeout=60, check=False)
    finally:
        running.layout.state.unlink()
    assert r.returncode == 1 and "already running" in r.stderr and "make stop" in r.stderr, r.stdout + r.stderr
