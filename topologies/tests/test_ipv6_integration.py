"""Issue 20's "done when" on the real emulation: a stock Linux host with nothing configured
but SLAAC (accept_ra) gets its IPv6 default route from the controller's Router Advertisement,
resolves the router (fe80::1, advertised without a link-layer option) to its own bucket's
vmac through the switch's Neighbor Advertisement, and pings a remote IPv6 host through a
gateway's tunnel (IPv6 inside, IPv4 outer).

The default topology is dual-stack (`lan.subnet6`); the test removes h1's configured IPv6
address so only what the RA gives is left, and turns IPv6 off and on on its interface so the
host solicits (RS, answered by the controller on h1's port). Once on the eBPF switch and once
on BMv2 (skipped with the reason when BMv2 or `make p4`'s JSON is missing). Needs root, the
built switch and strongSwan; about a minute per switch.
"""

from __future__ import annotations

import ipaddress
import subprocess
import time

import pytest

from supergw_proto.bucket import bucket_of, vmac
from topologies import bmv2
from topologies.emulation import Emulation
from topologies.model import SWITCH_KINDS, SwitchKind
from topologies.tests.emulation import EMULATION_MARKS, booted

pytestmark = EMULATION_MARKS

RA_WAIT_S = 25.0  # an RS is answered within 0.5 s (3 s after the port's last RA); periodic ones come <= 16 s apart at first


def _in(ns: str, *argv: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=30, check=check)


def _ra_state(ns: str, prefix: ipaddress.IPv6Network) -> tuple[str, list[str]]:
    """(h's IPv6 default route, its usable global addresses in `prefix`: DAD done, else the
    host would send from its link-local address, which a router must not forward)."""
    route = _in(ns, "ip", "-6", "route", "show", "default").stdout.strip()
    addrs = []
    out = _in(ns, "ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "global", "-tentative").stdout
    for line in out.splitlines():
        a = ipaddress.IPv6Interface(line.split()[3])
        if a.ip in prefix:
            addrs.append(str(a.ip))
    return route, addrs


@pytest.mark.parametrize("switch", SWITCH_KINDS)
def test_slaac_host_pings_a_remote_ipv6_host_through_the_tunnel(switch: SwitchKind) -> None:
    if switch == "bmv2" and (why := bmv2.missing()) is not None:
        pytest.skip(why)
    emu = Emulation.from_file(switch=switch)
    topo = emu.spec.single
    assert topo.dual_stack and topo.lan.subnet6 is not None, "the default topology is dual-stack"
    h, r = topo.hosts[0], topo.remote.hosts[0]
    ns = topo.ns(h.name)
    with booted(emu):
        # a stock host: no configured IPv6 address, only what SLAAC makes of the RA
        _in(ns, "ip", "-6", "addr", "del", f"{topo.lan6(h.ip)}/64", "dev", "eth0", check=True)
        _in(ns, "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=1", check=True)
        _in(ns, "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=0", check=True)
        route, addrs = "", list[str]()
        deadline = time.monotonic() + RA_WAIT_S
        while time.monotonic() < deadline and not (route and addrs):
            time.sleep(0.25)
            route, addrs = _ra_state(ns, topo.lan.subnet6)
        assert f"via {topo.lan.gateway_ll} dev eth0 proto ra" in route, (
            f"no default route from our RA within {RA_WAIT_S:.0f} s: {route!r}")
        assert addrs, f"no SLAAC address in {topo.lan.subnet6}"

        ping = _in(ns, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", str(topo.remote6(r.ip)))
        assert ping.returncode == 0, f"ping to {topo.remote6(r.ip)} failed:\n{ping.stdout}{ping.stderr}"

        want = vmac(topo.lan.vmac_base, bucket_of(h.mac, topo.lan.buckets, topo.lan.dispatch.hash))
        neigh = _in(ns, "ip", "-6", "neigh", "show", str(topo.lan.gateway_ll), "dev", "eth0").stdout
        assert f"lladdr {want}" in neigh and "router" in neigh, (
            f"the router {topo.lan.gateway_ll} should resolve to h1's bucket vmac {want}: {neigh!r}")

        # the controller learned the host's SLAAC address from its traffic
        seen = {x.mac: x.ipv6 for x in emu.site().api().hosts()}
        assert set(addrs) <= set(seen.get(h.mac, [])), seen.get(h.mac)
