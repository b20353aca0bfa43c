"""The `router_advertisements:` section: defaults per RFC 4861 §6.2.1, bad values refused
with the key named, and what the core does with it (RAs out of every host port, a
solicitation answered with an RA packet-out out of its port)."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest
from finsy import P4PacketOut
from scapy.layers.inet6 import IPv6, ICMPv6ND_RA, ICMPv6ND_RS, ICMPv6NDOptPrefixInfo, ICMPv6NDOptSrcLLAddr
from scapy.layers.l2 import Ether

from supergw_proto import p4constants as pc
from supergw_controller.config import Config, ConfigError
from supergw_controller.southbound.domain import PacketIn

from corekit import make_config, running_core

IP6: dict[str, Any] = {"link_local": "fe80::1", "global": "fd00:60::1"}
RA: dict[str, Any] = {"prefixes": [{"prefix": "fd00:60::/64"}]}


def config(tmp_path: Path, ra: dict[str, Any] | None = None, **over: Any) -> Config:
    return make_config(tmp_path, gateway_ip6=IP6, router_advertisements=RA if ra is None else ra, **over)


def test_defaults_follow_rfc_4861(tmp_path: Path) -> None:
    ra = config(tmp_path).router_advertisements
    assert ra is not None
    assert (ra.max_interval_s, ra.min_interval, ra.router_lifetime) == (600.0, 198.0, 1800)
    p = ra.prefixes[0]
    assert (p.on_link, p.autonomous, p.valid_lifetime_s, p.preferred_lifetime_s) == (True, True, 2_592_000, 604_800)
    short = config(tmp_path, {"max_interval_s": 4}).router_advertisements
    assert short is not None and (short.min_interval, short.router_lifetime) == (4.0, 12)
    assert make_config(tmp_path).router_advertisements is None  # none unless configured


@pytest.mark.parametrize(
    ("ra", "needle"),
    [
        ({"max_interval_s": 2}, "router_advertisements.max_interval_s"),
        ({"max_interval_s": 100, "min_interval_s": 90}, "exceeds 0.75 x max_interval_s"),
        ({"max_interval_s": 100, "router_lifetime_s": 50}, "below max_interval_s"),
        ({"router_lifetime_s": 9001}, "router_lifetime_s"),
        ({"prefixes": [{"prefix": "fd00:60::/48"}]}, "autonomous (SLAAC) needs a /64"),
        ({"prefixes": [{"prefix": "fe80::/64"}]}, "cannot be advertised"),
        ({"prefixes": [{"prefix": "fd00:60::1/64"}]}, "host bits set"),
        ({"prefixes": [{"prefix": "fd00:60::/64", "valid_lifetime_s": 10, "preferred_lifetime_s": 20}]},
         "exceeds valid_lifetime_s"),
        ({"prefixes": [{"prefix": "fd00:60::/64"}, {"prefix": "fd00:60::/64"}]}, "is also prefixes[0]"),
        ({"mtu": 1000}, "mtu"),
        ({"interval": 5}, "interval"),
    ],
)
def test_bad_router_advertisements_are_a_clear_error(tmp_path: Path, ra: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(needle)):
        config(tmp_path, ra)


def test_router_advertisements_need_the_link_local_address(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set gateway_ip6.link_local"):
        make_config(tmp_path, router_advertisements=RA)


def _rs(**ip: Any) -> bytes:
    return bytes(Ether(dst="33:33:00:00:00:02", src="02:00:00:00:00:11")
                 / IPv6(src="fe80::11", dst="ff02::2", **{"hlim": 255, **ip})
                 / ICMPv6ND_RS() / ICMPv6NDOptSrcLLAddr(lladdr="02:00:00:00:00:11"))


def test_solicitation_is_answered_with_an_ra_out_of_its_port(tmp_path: Path) -> None:
    async def body() -> None:
        cfg = config(tmp_path, {"max_interval_s": 1800, "prefixes": [{"prefix": "fd00:60::/64"}]})
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
