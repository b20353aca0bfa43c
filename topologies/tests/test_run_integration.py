"""`make run` for real: the whole emulated system comes up, a second `up` detects it, `down` cleans.

Once with the eBPF switch and once with BMv2 (`make run SWITCH=bmv2`; skipped with the reason
when BMv2 or `make p4`'s JSON is missing). Needs root, the built switch and strongSwan; takes
about half a minute per switch.
"""

from __future__ import annotations

import subprocess

import pytest

from topologies import bmv2
from topologies.emulation import Emulation
from topologies.model import SWITCH_KINDS, SwitchKind
from topologies.tests.emulation import EMULATION_MARKS, assert_gone, run_topologies, skip_if_running

pytestmark = EMULATION_MARKS


@pytest.mark.parametrize("switch", SWITCH_KINDS)
def test_up_twice_then_down(switch: SwitchKind) -> None:
    if switch == "bmv2" and (why := bmv2.missing()) is not None:
        pytest.skip(why)
    emu = Emulation.from_file(switch=switch)
    topo = emu.spec.single
    skip_if_running(emu)
    other = next(k for k in SWITCH_KINDS if k != switch)
    try:
        up = run_topologies("up", "--switch", switch)
        assert up.returncode == 0, up.stdout + up.stderr
        for stage in ("switch", "controller", "tunnels", "agents", "end-to-end ping"):
            assert f"ok  {stage}:" in up.stdout, up.stdout
        assert "http://" in up.stdout and "make stop" in up.stdout
        again = run_topologies("up", "--switch", switch)
        assert again.returncode == 0 and "already running" in again.stdout
        mixed = run_topologies("up", "--switch", other)
        assert mixed.returncode == 1 and f"switch {switch}" in mixed.stdout and "on the other switch" in mixed.stdout
        status = run_topologies("status")
        assert status.returncode == 0, status.stdout
        ping = subprocess.run(["ip", "netns", "exec", topo.ns(topo.hosts[-1].name), "ping", "-c", "2", "-W", "2",
                               str(topo.remote.hosts[-1].ip)], capture_output=True, text=True, check=False)
        assert ping.returncode == 0, ping.stdout
        if switch == "bmv2":
            log = bmv2.log_file(emu.site().paths.logs)
            assert "BMv2 simple_switch_grpc" in up.stdout and str(log) in up.stdout
            # The pings went through BMv2's pipeline, not around it (a build without logging
            # macros writes no packet log).
            if log.is_file() and log.stat().st_size:
                assert "Processing packet received on port" in log.read_text(errors="replace")
    finally:
        down = run_topologies("down")
    assert down.returncode == 0
    assert_gone(emu)
    assert run_topologies("down").returncode == 0  # idempotent
