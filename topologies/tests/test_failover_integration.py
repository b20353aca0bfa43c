"""Failover behaviour on the real emulation (`make run`): real agents, real tunnels, shipped defaults.

A frozen gateway (SIGSTOP of its charon and agent) loses all its buckets and gets its
weighted share back once it runs again, on an idle system; a gateway whose tunnel is torn
down (its agent still talking) loses its buckets in one failover and gets them back when
the tunnel returns. Behaviour only: the timing goals live in bench/failover.

Needs root, the built switch and strongSwan; takes about a minute. Run it under
`flock /tmp/supergw-netns.lock` like everything that builds namespaces.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from topologies.emulation import Emulation
from topologies.site import Site
from topologies.tests.emulation import EMULATION_MARKS, all_alive, booted, until

pytestmark = EMULATION_MARKS


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with booted(Emulation.from_file()) as emu:
        yield emu.site()


def test_frozen_gateway_loses_its_buckets_and_gets_its_share_back(site: Site) -> None:
    until(site, "every gateway alive", all_alive, 30)
    victim = site.topo.gateways[1].name
    before = site.gateways()
    assert before[victim].buckets > 0
    pids = site.gateway_pids(victim)  # its charon and its agent
    site.signal_gateway(pids, signal.SIGSTOP)
    try:
        until(site, f"{victim} dead with 0 buckets", lambda g: g[victim].state == "dead" and g[victim].buckets == 0, 15)
        others = [n for n in site.gateways() if n != victim]
        assert sum(site.gateways()[n].buckets for n in others) == site.topo.lan.buckets
    finally:
        site.signal_gateway(pids, signal.SIGCONT)
    share = site.share(victim)
    # Idle system (no probe traffic): the refill must not depend on load.
    until(site, f"{victim} back to its share of {share} buckets",
          lambda g: g[victim].state in ("alive", "recovering") and g[victim].buckets >= share, 30)
    status = site.api().status()
    assert status.failovers_total >= 1 and status.heartbeats_rejected == {}


def test_down_tunnel_moves_buckets_away_and_back(site: Site) -> None:
    from supergw_gateway.config import load_config
    from supergw_gateway.runtime import Gateway
    from supergw_gateway.tunnel import child_name, conn_name

    until(site, "every gateway alive", all_alive, 30)
    victim = site.topo.gateways[0].name
    cfg = load_config(site.gateway_config(victim))
    gw = Gateway(cfg)
    with gw.vici() as v:
        v.terminate(ike=conn_name(cfg))
    until(site, f"{victim} dead (tunnel down) with 0 buckets",
          lambda g: g[victim].state == "dead" and g[victim].buckets == 0 and g[victim].tunnel_up is False, 15)
    g = site.gateways()[victim]
    assert g.unhealthy == "tunnel down (no installed CHILD SA)"
    assert g.heartbeat_age_s is not None and g.heartbeat_age_s < 1.0  # its agent is alive and talking
    assert f'supergw_gateway_tunnel_up{{gateway="{victim}"}} 0.0' in site.api().metrics()
    with gw.vici() as v:
        v.initiate(conn_name(cfg), child_name(cfg))
    share = site.share(victim)
    until(site, f"{victim} back with its tunnel and {share} buckets",
          lambda g: g[victim].tunnel_up is True and g[victim].buckets >= share, 30)
