"""`make run HA=1` for real: three controller replicas on a three-member etcd cluster.

Boots the one-site emulation with `up --replicas 3`, checks that exactly one replica leads
(every replica's /healthz and the etcd leader key agree), that traffic flows, that a
SIGKILLed leader is replaced by a backup while a ping runs through the super gateway
without loss, and that `down` removes the replicas, the etcd members and their namespaces.
Then two sites with replicas at site A only, through the engine. Needs root, the built
switch, strongSwan and etcd; about a minute and a half.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest

from topologies import ha, processes
from topologies.emulation import Emulation
from topologies.etcd_auth import USER, EtcdPki, etcdctl
from topologies.schema import TWO_SITE_TOPOLOGY
from topologies.poll import Timeout
from topologies.site import Site
from topologies.tests.emulation import EMULATION_MARKS, assert_gone, booted, run_topologies, skip_if_running

pytestmark = [*EMULATION_MARKS, pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd not installed (etcd-server)")]

EMU = Emulation.from_file(replicas=ha.HA_REPLICAS)
TOPO = EMU.spec.single


def etcd_leader_key() -> dict[str, object]:
    """The leader key read with etcdctl as the controllers' etcd user (TLS, its client
    certificate): what "where to look" tells the operator to run."""
    pki = EtcdPki(Emulation.attach().site().paths.pki)  # type: ignore[union-attr]
    out = etcdctl(pki, ha.etcd_endpoints(TOPO), "get", f"{ha.etcd_prefix(TOPO)}/leader", "--print-value-only", user=USER)
    values = out.splitlines()
    assert len(values) == 1, f"etcd holds {len(values)} leader keys: {out!r}"
    value: dict[str, object] = json.loads(values[0])
    return value


def the_leader(site: Site, names: list[str], timeout: float) -> str:
    """The one replica that leads, once every replica in `names` agrees on it."""
    try:
        return site.agreed_leader(names, timeout)
    except Timeout as exc:
        pytest.fail(str(exc), pytrace=False)


def test_ha_up_one_leader_takeover_down() -> None:
    skip_if_running(EMU)
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

        emu = Emulation.attach()
        assert emu is not None and emu.spec == EMU.spec
        site = emu.site()
        names = TOPO.controller.replica_names()
        leader = the_leader(site, names, 10)
        assert etcd_leader_key()["replica"] == leader

        recs = {p.name: p for p in emu.state.processes}
        assert all(processes.alive(recs[f"etcd-{n}"]) for n in names)
        assert all(processes.alive(recs[f"controller-{n}"]) for n in names)

        ping = subprocess.Popen(["ip", "netns", "exec", src, "ping", "-n", "-q", "-i", "0.02", "-c", "250", "-W", "1", dst],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1)
        site.kill_controller(leader)
        backups = [n for n in names if n != leader]
        successor = the_leader(site, backups, 15)
        assert etcd_leader_key()["replica"] == successor
        out, _ = ping.communicate(timeout=30)
        assert " 0% packet loss" in out, f"the data plane lost packets across the takeover:\n{out}"

        status = run_topologies("status")
        assert f"controller-{leader}" in status.stdout and "STOPPED" in status.stdout
    finally:
        down = run_topologies("down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert_gone(EMU)
    assert not any(processes.alive(p) for p in recs.values() if p.name.startswith(("etcd-", "controller-")))


def test_two_sites_with_ha_at_site_a() -> None:
    """Two super gateways, replicated controllers at site A only (what a chaos run across sites
    needs): every stage is ok (tunnels between the sites, every agent alive at every replica
    and at B's controller, every host pinging the other site), A has one leader that is
    primary on its switch, and a SIGKILL of that leader loses no packet of a flow A -> B."""
    changes = {"gateways": 2, "hosts_per_site": 2, "simulated_hosts": None}
    emu = Emulation.from_file(TWO_SITE_TOPOLOGY, replicas=ha.HA_REPLICAS, replicas_site="sgw-a", changes=changes)
    with booted(emu):
        a, b = emu.site("sgw-a"), emu.site("sgw-b")
        assert a.topo.replicated and not b.topo.replicated
        leader = the_leader(a, a.topo.controller.replica_names(), 10)
        assert a.agreed_leader(primary=True) == leader
        assert b.api().status().role == "primary"
        src, dst = a.topo.ns(a.topo.hosts[0].name), str(b.topo.hosts[0].ip)
        ping = subprocess.Popen(["ip", "netns", "exec", src, "ping", "-n", "-q", "-i", "0.02", "-c", "250", "-W", "1",
                                 dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1)
        a.kill_controller(leader)
        successor = the_leader(a, [n for n in a.topo.controller.replica_names() if n != leader], 15)
        out, _ = ping.communicate(timeout=30)
        assert successor != leader
        assert " 0% packet loss" in out, f"the data plane lost packets across the takeover at site A:\n{out}"
