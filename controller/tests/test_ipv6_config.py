"""The `ipv6:` section (the gateway's IPv6 addresses, Router Advertisements): defaults per
RFC 4861 §6.2.1, bad values refused with the key named, and what the core does with it
(nd_settings at reconcile, a solicitation answered with an RA packet-out)."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import time
from pathlib import Path
from typing import Any

import pytest
from finsy import P4PacketOut, P4TableAction
from scapy.layers.inet6 import IPv6, ICMPv6ND_RA, ICMPv6ND_RS, ICMPv6NDOptPrefixInfo, ICMPv6NDOptSrcLLAddr
from scapy.layers.l2 import Ether

from supergw_proto import p4constants as pc
from supergw_controller.config import ConfigError
from supergw_controller.southbound.domain import Op, PacketIn
from supergw_controller.southbound.entities import nd_settings

from corekit import Clock, make_config, running_core

V6: dict[str, Any] = {
    "link_local": "fe80::1",
    "global_ip": "fd00:60::1",
    "router_advertisements": {"prefixes": [{"prefix": "fd00:60::/64"}]},
}


def test_defaults_follow_rfc_4861(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, ipv6=V6)
    assert cfg.ipv6 is not None and cfg.ipv6.router_advertisements is not None
    ra = cfg.ipv6.router_advertisements
    assert (ra.max_interval_s, ra.min_interval, ra.router_lifetime) == (600.0, 198.0, 1800)
    p = ra.prefixes[0]
    assert (p.on_link, p.autonomous, p.valid_lifetime_s, p.preferred_lifetime_s) == (True, True, 2_592_000, 604_800)
    short = make_config(tmp_path, ipv6={**V6, "router_advertisements": {"max_interval_s": 4}}).ipv6
    assert short is not None and short.router_advertisements is not None
    assert (short.router_advertisements.min_interval, short.router_advertisements.router_lifetime) == (4.0, 12)
    assert make_config(tmp_path).ipv6 is None  # IPv4 only unless configured


@pytest.mark.parametrize(
    ("ipv6", "needle"),
    [
        ({"link_local": "fd00::1"}, "ipv6.link_local"),
        ({"link_local": "fe80::1", "global_ip": "ff02::1"}, "ipv6.global_ip"),
        ({**V6, "router_advertisements": {"max_interval_s": 2}}, "max_interval_s"),
        ({**V6, "router_advertisements": {"max_interval_s": 100, "min_interval_s": 90}}, "exceeds 0.75 x max_interval_s"),
        ({**V6, "router_advertisements": {"max_interval_s": 100, "router_lifetime_s": 50}}, "below max_interval_s"),
        ({**V6, "router_advertisements": {"router_lifetime_s": 9001}}, "router_lifetime_s"),
        ({**V6, "router_advertisements": {"prefixes": [{"prefix": "fd00:60::/48"}]}}, "autonomous (SLAAC) needs a /64"),
        ({**V6, "router_advertisements": {"prefixes": [{"prefix": "fe80::/64"}]}}, "cannot be advertised"),
        ({**V6, "router_advertisements": {"prefixes": [{"prefix": "fd00:60::1/64"}]}}, "host bits set"),
        ({**V6, "router_advertisements": {"prefixes": [{"prefix": "fd00:60::/64", "valid_lifetime_s": 10,
                                                         "preferred_lifetime_s": 20}]}}, "exceeds valid_lifetime_s"),
        ({**V6, "router_advertisements": {"prefixes": [{"prefix": "fd00:60::/64"}, {"prefix": "fd00:60::/64"}]}},
         "is also prefixes[0]"),
        ({**V6, "router_advertisements": {"mtu": 1000}}, "mtu"),
        ({**V6, "router_advertisements": {"interval": 5}}, "interval"),
    ],
)
def test_bad_ipv6_config_is_a_clear_error(tmp_path: Path, ipv6: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(needle)):
        make_config(tmp_path, ipv6=ipv6)


def test_nd_settings_entry() -> None:
    e = nd_settings(ipaddress.IPv6Address("fe80::1"), None)
    assert isinstance(e.action, P4TableAction) and dict(e.action.args) == {"link_local_ip6": int(ipaddress.IPv6Address("fe80::1")),
                                                             "global_ip6": 0}
    off = nd_settings(None, None)
    assert isinstance(off.action, P4TableAction) and off.action.name == pc.ACTION_MARK_ND_UNCONFIGURED


def _rs(**ip: Any) -> bytes:
    return bytes(Ether(dst="33:33:00:00:00:02", src="02:00:00:00:00:11")
                 / IPv6(src="fe80::11", dst="ff02::2", **{"hlim": 255, **ip})
                 / ICMPv6ND_RS() / ICMPv6NDOptSrcLLAddr(lladdr="02:00:00:00:00:11"))


def test_solicitation_is_answered_with_an_ra_out_of_its_port(tmp_path: Path) -> None:
    async def body() -> None:
        cfg = make_config(tmp_path, ipv6={**V6, "router_advertisements": {
            "max_interval_s": 1800, "prefixes": [{"prefix": "fd00:60::/64"}]}})
        core, session = await running_core(cfg, time.monotonic)  # the advertiser sleeps in real time
        assert core.advertiser is not None
        task = asyncio.create_task(core.advertiser.run())
        await asyncio.sleep(0.05)
        first = [m for m in session.sent if isinstance(m, P4PacketOut)]
        assert sorted(m.metadata[pc.CTRL_HDR_PACKET_OUT_EGRESS_PORT] for m in first) == [1, 2]  # host ports only
        ra = Ether(first[0].payload)
        assert ra[IPv6].src == "fe80::1" and ra[IPv6].hlim == 255 and ra[Ether].src == "02:5e:00:00:00:00"
        assert ra[ICMPv6ND_RA].routerlifetime == 5400 and ra[ICMPv6NDOptPrefixInfo].prefix == "fd00:60::"
        assert ICMPv6NDOptSrcLLAddr not in ra
        session.sent.clear()
        # forwarded on the way (hop limit < 255): invalid, not answered (RFC 4861 §6.1.1)
        await core.packet_in(PacketIn(pc.PuntReason.ROUTER_SOLICITATION, 2, _rs(hlim=64)))
        assert core.advertiser.solicitations_total == 0
        # the port's 3 s rate limit after the first RA holds the answer (the schedule's own
        # tests cover it on a fake clock); after it, within MAX_RA_DELAY_TIME
        await asyncio.sleep(3.0)
        await core.packet_in(PacketIn(pc.PuntReason.ROUTER_SOLICITATION, 2, _rs()))
        await asyncio.sleep(0.7)
        answers = [m for m in session.sent if isinstance(m, P4PacketOut)]
        assert [m.metadata[pc.CTRL_HDR_PACKET_OUT_EGRESS_PORT] for m in answers] == [2]
        task.cancel()

    asyncio.run(body())


def test_reconcile_writes_nd_settings(tmp_path: Path) -> None:
    async def body() -> None:
        cfg = make_config(tmp_path, ipv6=V6)
        core, session = await running_core(cfg, Clock())
        await core.switch.reconcile(core.hosts_learning.reconcile, core.placement.wanted)
        nd = [u for b in session.batches for u in b if getattr(u.entity, "table_id", None) == pc.TABLE_ND_SETTINGS]
        assert len(nd) == 1 and nd[0].op is Op.MODIFY
        args = dict(nd[0].entity.action.args)
        assert args == {"link_local_ip6": int(ipaddress.IPv6Address("fe80::1")),
                        "global_ip6": int(ipaddress.IPv6Address("fd00:60::1"))}

    asyncio.run(body())
