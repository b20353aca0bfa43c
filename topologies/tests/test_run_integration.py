"""`make run` for real: the whole emulated system comes up, a second `up` detects it, `down` cleans.

Needs root, the built switch and strongSwan; takes about half a minute.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from topologies.components import SWITCH_BIN
from topologies.model import load_topology
from topologies.network import existing_namespaces
from topologies.run import STATE

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and eBPF"),
    pytest.mark.skipif(not SWITCH_BIN.is_file(), reason="switch not built (make switch)"),
]


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "topologies.run", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_up_twice_then_down() -> None:
    topo = load_topology()
    if STATE.exists() or existing_namespaces(topo):
        pytest.skip("an emulation is already running here (make stop first)")
    try:
        up = _run("up")
        assert up.returncode == 0, up.stdout + up.stderr
        for stage in ("switch", "controller", "tunnels", "agents", "end-to-end ping"):
            assert f"ok  {stage}:" in up.stdout, up.stdout
        assert "http://" in up.stdout and "make stop" in up.stdout
        again = _run("up")
        assert again.returncode == 0 and "already running" in again.stdout
        status = _run("status")
        assert status.returncode == 0, status.stdout
        ping = subprocess.run(["ip", "netns", "exec", topo.ns(topo.hosts[-1].name), "ping", "-c", "2", "-W", "2",
                               str(topo.remote.hosts[-1].ip)], capture_output=True, text=True, check=False)
        assert ping.returncode == 0, ping.stdout
    finally:
        down = _run("down")
    assert down.returncode == 0
    assert existing_namespaces(topo) == []
    assert not STATE.exists()
    assert _run("down").returncode == 0  # idempotent
