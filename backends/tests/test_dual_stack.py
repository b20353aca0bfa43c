"""Dual-stack gateways: IPv6 inner subnets in the tunnel's traffic selectors, IPv6 interface
addresses and routes, an IPv6 outer address between the sites; bad mixes are clear errors."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from supergw_gateway.config import IPV6_SYSCTLS, parse_config
from supergw_gateway.errors import ConfigError
from supergw_gateway.tunnel import build_conn, child_name, conn_name
from supergw_gateway.uml_init import GuestAddrs, render_init


@pytest.fixture
def dual(gw_dict: dict[str, Any]) -> dict[str, Any]:
    gw_dict["interfaces"][0]["addresses6"] = ["fd00:1::1/64"]
    gw_dict["interfaces"][1]["addresses6"] = ["2001:db8:100::1/64"]
    gw_dict["local"]["subnets"].append("fd00:1::/64")
    gw_dict["remote"]["subnets"].append("fd00:2::/64")
    return gw_dict


def test_ipv6_inner_subnets_are_traffic_selectors_of_the_one_child(dual: dict[str, Any]) -> None:
    cfg = parse_config(dual)
    assert cfg.ipv6
    conn = build_conn(cfg)[conn_name(cfg)]
    child = conn["children"][child_name(cfg)]
    assert child["local_ts"] == ["10.1.0.0/24", "fd00:1::/64"]
    assert child["remote_ts"] == ["10.2.0.0/24", "fd00:2::/64"]
    assert conn["local_addrs"] == ["192.0.2.1"]  # IPv4 outer by default


def test_ipv6_outer_between_the_sites(dual: dict[str, Any]) -> None:
    dual["local"]["address"] = "2001:db8:100::1"
    dual["remote"]["address"] = "2001:db8:100::2"
    cfg = parse_config(dual)
    conn = build_conn(cfg)[conn_name(cfg)]
    assert (conn["local_addrs"], conn["remote_addrs"]) == (["2001:db8:100::1"], ["2001:db8:100::2"])
    assert cfg.local_id == "2001:db8:100::1"


def test_an_ipv4_only_gateway_stays_ipv4_only(gw_dict: dict[str, Any]) -> None:
    assert not parse_config(gw_dict).ipv6


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda d: d["remote"].update(address="2001:db8:100::2"), "different IP versions"),
        (lambda d: (d["local"].update(address="2001:db8:100::9"), d["remote"].update(address="2001:db8:100::2")),
         "must be the wan interface address"),
        (lambda d: d["remote"]["subnets"].append("fd00:1::/80"), "overlaps"),
        (lambda d: d.update(routes=[{"destination": "fd00:9::/64", "via": "10.1.0.254"}]), "different IP versions"),
        (lambda d: d["interfaces"][0].update(addresses6=["ff02::1/64"]), "cannot be an interface address"),
        (lambda d: d["interfaces"][0].update(addresses6=["fd00:1::1/64", "fd00:1::1/48"]), "listed twice"),
    ],
)
def test_bad_dual_stack_config_is_a_clear_error(dual: dict[str, Any], change: Any, needle: str) -> None:
    change(dual)
    with pytest.raises(ConfigError, match=needle):
        parse_config(dual, "t.yaml")


def test_ipv6_routes_load(dual: dict[str, Any]) -> None:
    dual["routes"] = [{"destination": "fd00:9::/64", "via": "fd00:1::fe"}]
    cfg = parse_config(dual)
    assert cfg.routes[0].via == ipaddress.IPv6Address("fd00:1::fe")


def test_uml_guest_turns_ipv6_on_before_its_addresses(dual: dict[str, Any]) -> None:
    init = render_init(parse_config(dual), GuestAddrs.from_subnet(ipaddress.IPv4Network("169.254.77.0/30")), "/py")
    lines = init.splitlines()
    on = [lines.index(f"sysctl -qw {k}") for k in IPV6_SYSCTLS]
    addr6 = lines.index("ip -6 addr add fd00:1::1/64 dev lan0 nodad")
    assert max(on) < addr6
    assert "ip -6 addr add 2001:db8:100::1/64 dev wan0 nodad" in lines


def test_ipv4_guest_leaves_ipv6_alone(gw_dict: dict[str, Any]) -> None:
    init = render_init(parse_config(gw_dict), GuestAddrs.from_subnet(ipaddress.IPv4Network("169.254.77.0/30")), "/py")
    assert "ipv6" not in init and "ip -6" not in init
