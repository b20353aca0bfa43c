"""`make run TOPO=remote-access` in small (root, `-m integration`, about a minute): two gateways
behind the outside switch and four stock strongSwan clients on one public address. `up` itself
checks that every client connects and pings a LAN host through its tunnel (its stages); this
test then checks, from outside the clients: each client's virtual IP comes from the pool of the
gateway the controller lists it on, pinned; a LAN host reaches every client back (the LAN
switch's pool routes, whichever bucket the host is in); and bucket moves leave every client's
IKE SA in place (same SPIs, no new IKE_AUTH)."""

from __future__ import annotations

import ipaddress
import subprocess

from bench.remote.measure import holder, states
from topologies import raclients
from topologies.emulation import Emulation
from topologies.poll import wait_until
from topologies.schema import REMOTE_ACCESS_TOPOLOGY
from topologies.tests.emulation import EMULATION_MARKS, booted, ping_counts

pytestmark = EMULATION_MARKS

CLIENTS = 4


def test_clients_reach_the_lan_and_stay_put_across_moves() -> None:
    emu = Emulation.from_file(REMOTE_ACCESS_TOPOLOGY, changes={"gateways": 2, "clients": CLIENTS})
    with booted(emu):
        site = emu.site()
        stages = emu.state.stages
        assert "clients reach LAN" in stages and str(stages["clients reach LAN"]).startswith("ok"), stages
        topo, ra = site.topo, site.topo.remote_access
        assert ra is not None
        fleet = raclients.clients(topo, site.paths)
        before = states(fleet)
        assert all(s is not None and s.vip is not None for s in before.values()), before
        holders = {n: holder(site, s) for n, s in before.items()}

        def listed() -> tuple[bool, str]:
            views = site.api().clients()
            pinned = {v.identity.split(".")[0]: (v.gateway, v.pinned) for v in views}
            return all(pinned.get(n) == (g, True) for n, g in holders.items()), f"controller lists {pinned}"
        wait_until(listed, 15, "every client listed and pinned on the gateway that holds it")

        h1 = topo.ns(topo.hosts[0].name)
        for name, st in before.items():
            assert st is not None and st.vip is not None
            out = subprocess.run(["ip", "netns", "exec", h1, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "1", st.vip],
                                 capture_output=True, text=True, check=False).stdout
            assert ping_counts(out)[1] >= 2, f"h1 -> {name} ({st.vip}, held by {holders[name]}): {out[-300:]}"

        auths = {c.cfg.name: c.ike_auths() for c in fleet}
        gws = [g.name for g in topo.gateways]
        api = site.api()  # the site's own client: closed by the emulation, not here
        for b in api.buckets()[:32]:
            api.move(b.bucket, gws[(gws.index(b.gateway) + 1) % 2] if b.gateway in gws else gws[0])
        for c in fleet:
            assert c.ping(ipaddress.IPv4Address(topo.hosts[1].ip), count=5, interval=0.2)[1] == 5, c.cfg.name
        after = states(fleet)
        for c in fleet:
            was, now = before[c.cfg.name], after[c.cfg.name]
            assert was is not None and now is not None
            assert (was.initiator_spi, was.responder_spi) == (now.initiator_spi, now.responder_spi), c.cfg.name
            assert c.ike_auths() == auths[c.cfg.name], f"{c.cfg.name} authenticated again after the moves"

