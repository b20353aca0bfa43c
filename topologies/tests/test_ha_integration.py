"""`make run HA=1` for real: three controller replicas on a three-member etcd cluster.

Boots the one-site emulation with `up --replicas 3`, checks that exactly one replica leads
(every replica's /healthz and the etcd leader key agree), that traffic flows, that a
SIGKILLed leader is replaced by a backup while a ping runs through the super gateway
without loss, and that `down` removes the replicas, the etcd members and their namespaces.
Needs root, the built switch, strongSwan and etcd; about half a minute.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

from topologies import ha, processes
from topologies.model import load_topology
from topologies.network import existing_namespaces
from topologies.processes import RunState
from topologies.run import STATE
from topologies.tests.emulation import EMULATION_MARKS, run_topologies

pytestmark = [*EMULATION_MARKS, pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd not installed (etcd-server)")]

TOPO = ha.prepare(load_topology(), ha.HA_REPLICAS)


def etcd_leader_key() -> dict[str, object]:
    """The leader key read over etcd's JSON gateway (any member)."""
    import base64

    key = base64.b64encode(f"{ha.etcd_prefix(TOPO)}/leader".encode()).decode()
    req = urllib.request.Request(f"{ha.etcd_client_url(TOPO, 'c1')}/v3/kv/range", data=json.dumps({"key": key}).encode())
    with urllib.request.urlopen(req, timeout=3) as resp:
        kvs = json.loads(resp.read()).get("kvs", [])
    assert len(kvs) == 1, f"etcd holds {len(kvs)} leader keys"
    value: dict[str, object] = json.loads(base64.b64decode(kvs[0]["value"]))
    return value


def the_leader(names: list[str], timeout: float) -> str:
    """The one replica that leads, once every replica in `names` agrees on it."""
    deadline = time.monotonic() + timeout
    seen: dict[str, tuple[object, object]] = {}
    while time.monotonic() < deadline:
        for n in names:  # a replica busy for a moment is asked again, not failed
            h = ha.healthz(ha.api_url(TOPO, n))
            v = h.get("ha") if h else None
            seen[n] = (v.get("role"), v.get("leader")) if isinstance(v, dict) else ("no answer", h)
        leaders = [n for n, (role, _) in seen.items() if role == "leader"]
        if len(leaders) == 1 and all(leader == leaders[0] for _, leader in seen.values()):
            return leaders[0]
        time.sleep(0.1)
    pytest.fail(f"no single agreed leader within {timeout:.0f}s: (role, leader) per replica {seen}")


def test_ha_up_one_leader_takeover_down() -> None:
    if STATE.exists() or existing_namespaces(TOPO):
        pytest.skip("an emulation is already running here (make stop first)")
    src, dst = TOPO.ns(TOPO.hosts[0].name), str(TOPO.remote.hosts[0].ip)
    try:
        up = run_topologies("up", "--replicas", str(ha.HA_REPLICAS))
        assert up.returncode == 0, up.stdout + up.stderr
        for stage in ("switch", "controller", "agents", "end-to-end ping"):
            assert f"ok  {stage}:" in up.stdout, up.stdout
        assert re.search(r"replicas +c1 http://\S+ \((leader|backup)\)", up.stdout), up.stdout
        assert "etcd         members c1" in up.stdout and "who leads" in up.stdout

        again = run_topologies("up", "--replicas", str(ha.HA_REPLICAS))
        assert again.returncode == 0 and "already running" in again.stdout, again.stdout
        single = run_topologies("up")
        assert single.returncode == 1 and "it runs 3 controller replica(s), not 1" in single.stdout, single.stdout
        assert "replicas     c1" in single.stdout  # where to look describes what runs

        names = TOPO.controller.replica_names()
        leader = the_leader(names, 10)
        assert etcd_leader_key()["replica"] == leader

        state = RunState.load(STATE)
        assert state is not None
        recs = {p.name: p for p in state.processes}
        assert all(processes.alive(recs[f"etcd-{n}"]) for n in names)
        assert all(processes.alive(recs[f"controller-{n}"]) for n in names)

        ping = subprocess.Popen(["ip", "netns", "exec", src, "ping", "-n", "-q", "-i", "0.02", "-c", "250", "-W", "1", dst],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1)
        os.kill(recs[f"controller-{leader}"].pid, signal.SIGKILL)
        backups = [n for n in names if n != leader]
        successor = the_leader(backups, 15)
        assert etcd_leader_key()["replica"] == successor
        out, _ = ping.communicate(timeout=30)
        assert " 0% packet loss" in out, f"the data plane lost packets across the takeover:\n{out}"

        status = run_topologies("status")
        assert f"controller-{leader}" in status.stdout and "STOPPED" in status.stdout
    finally:
        down = run_topologies("down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert existing_namespaces(TOPO) == []
    assert not STATE.exists()
    assert not any(processes.alive(p) for p in state.processes if p.name.startswith(("etcd-", "controller-")))
