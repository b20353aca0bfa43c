"""Failover behaviour on the real emulation (`make run`): real agents, real tunnels, shipped defaults.

A frozen gateway (SIGSTOP of its charon and agent) loses all its buckets and gets its
weighted share back once it runs again, on an idle system; a gateway whose tunnel is torn
down (its agent still talking) loses its buckets in one failover and gets them back when
the tunnel returns. Behaviour only: the timing goals live in bench/failover.

Needs root, the built switch and strongSwan; takes about a minute. Run it under
`flock /tmp/supergw-netns.lock` like everything that builds namespaces.
"""

from __future__ import annotations

import json
import math
import os
import signal
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from topologies import components
from topologies.configs import controller_url
from topologies.model import Topology, load_topology
from topologies.network import existing_namespaces
from topologies.processes import RunState
from topologies.run import STATE
from topologies.tests.emulation import EMULATION_MARKS, Gateways, run_topologies, wait_for_gateways

pytestmark = EMULATION_MARKS



class Emu:
    def __init__(self, topo: Topology, state: RunState) -> None:
        self.topo, self.state = topo, state
        self.token = Path(state.info["token_file"]).read_text().strip()
        self.url = controller_url(topo) + "/api/v1"
        self.conf_dir = Path(state.info["controller_config"]).parent

    def get(self, path: str) -> Any:
        req = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def gws(self) -> dict[str, dict[str, Any]]:
        return {g["name"]: g for g in self.get("/gateways")}

    def until(self, what: str, cond: Callable[[Gateways], bool], timeout: float) -> None:
        wait_for_gateways(self.gws, what, cond, timeout)

    def gw_config(self, name: str) -> Path:
        return self.conf_dir / f"gateway-{name}.yaml"

    def share(self, name: str) -> int:
        gws = self.gws()
        return int(math.floor(self.topo.lan.buckets * float(gws[name]["weight"]) / sum(float(g["weight"]) for g in gws.values())))


@pytest.fixture(scope="module")
def emu() -> Iterator[Emu]:
    topo = load_topology()
    if STATE.exists() or existing_namespaces(topo):
        pytest.skip("an emulation is already running here (make stop first)")
    try:
        up = run_topologies("up")
        assert up.returncode == 0, up.stdout + up.stderr
        state = RunState.load(STATE)
        assert state is not None
        yield Emu(topo, state)
    finally:
        assert run_topologies("down").returncode == 0


def _all_alive(gws: dict[str, dict[str, Any]]) -> bool:
    return all(g["state"] == "alive" for g in gws.values())


def test_frozen_gateway_loses_its_buckets_and_gets_its_share_back(emu: Emu) -> None:
    emu.until("every gateway alive", _all_alive, 30)
    victim = emu.topo.gateways[1].name
    before = emu.gws()
    assert before[victim]["buckets"] > 0
    charon = components.gateway_status(emu.gw_config(victim)).get("charon_pid")
    agent = next(p.pid for p in emu.state.processes if p.name == f"agent-{victim}")
    assert isinstance(charon, int)
    for pid in (charon, agent):
        os.kill(pid, signal.SIGSTOP)
    try:
        emu.until(f"{victim} dead with 0 buckets", lambda g: g[victim]["state"] == "dead" and g[victim]["buckets"] == 0,
                  15)
        others = [n for n in emu.gws() if n != victim]
        assert sum(emu.gws()[n]["buckets"] for n in others) == emu.topo.lan.buckets
    finally:
        for pid in (charon, agent):
            os.kill(pid, signal.SIGCONT)
    share = emu.share(victim)
    # Idle system (no probe traffic): the refill must not depend on load.
    emu.until(f"{victim} back to its share of {share} buckets",
              lambda g: g[victim]["state"] in ("alive", "recovering") and g[victim]["buckets"] >= share, 30)
    status = emu.get("/status")
    assert status["failovers_total"] >= 1 and status.get("heartbeats_rejected") == {}


def test_down_tunnel_moves_buckets_away_and_back(emu: Emu) -> None:
    from supergw_gateway.config import load_config
    from supergw_gateway.runtime import Gateway
    from supergw_gateway.tunnel import child_name, conn_name

    emu.until("every gateway alive", _all_alive, 30)
    victim = emu.topo.gateways[0].name
    cfg = load_config(emu.gw_config(victim))
    gw = Gateway(cfg)
    with gw.vici() as v:
        v.terminate(ike=conn_name(cfg))
    emu.until(f"{victim} dead (tunnel down) with 0 buckets",
              lambda g: g[victim]["state"] == "dead" and g[victim]["buckets"] == 0 and g[victim]["tunnel_up"] is False,
              15)
    g = emu.gws()[victim]
    assert g["unhealthy"] == "tunnel down (no installed CHILD SA)"
    assert g["heartbeat_age_s"] is not None and g["heartbeat_age_s"] < 1.0  # its agent is alive and talking
    metrics = urllib.request.urlopen(controller_url(emu.topo) + "/metrics", timeout=5).read().decode()
    assert f'supergw_gateway_tunnel_up{{gateway="{victim}"}} 0.0' in metrics
    with gw.vici() as v:
        v.initiate(conn_name(cfg), child_name(cfg))
    share = emu.share(victim)
    emu.until(f"{victim} back with its tunnel and {share} buckets",
              lambda g: g[victim]["tunnel_up"] is True and g[victim]["buckets"] >= share, 30)
