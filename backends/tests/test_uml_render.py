from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest

from supergw_gateway.charon import CharonSettings, render_strongswan_conf
from supergw_gateway.config import parse_config
from supergw_gateway.uml_init import UML_MODULES, GuestAddrs, render_init, stable_mac


def test_strongswan_conf_backends() -> None:
    lib = render_strongswan_conf(CharonSettings("unix:///run/x/charon.vici", Path("/run/x/log"), libipsec=True))
    assert "kernel-libipsec kernel-netlink" in lib and "socket = unix:///run/x/charon.vici" in lib
    xfrm = render_strongswan_conf(CharonSettings("tcp://169.254.77.2:4502", Path("/l"), libipsec=False))
    assert "kernel-libipsec" not in xfrm and "kernel-netlink" in xfrm
    for line in xfrm.splitlines():  # strongswan.conf: no dotted section names
        assert not line.strip().endswith("{") or "." not in line


def test_strongswan_conf_takes_the_configs_tuning(gw_dict: dict[str, Any]) -> None:
    gw_dict["charon"] = {"threads": 32, "cookie_threshold": 0, "block_threshold": 7, "reuse_ikesa": False,
                         "dos_protection": False, "log_level": 2}
    conf = render_strongswan_conf(CharonSettings("unix:///v", Path("/l"), libipsec=True, tuning=parse_config(gw_dict).charon))
    for line in ("threads = 32", "cookie_threshold = 0", "block_threshold = 7", "reuse_ikesa = no",
                 "dos_protection = no", "default = 2"):
        assert f"  {line}\n" in conf, line


@pytest.mark.skipif(not UML_MODULES.exists(), reason="user-mode-linux is not installed")
def test_guest_init(gw_dict: dict[str, Any]) -> None:
    gw_dict["backend"] = "uml"
    gw_dict["routes"] = [{"destination": "203.0.113.0/24", "via": "192.0.2.254"}]
    cfg = parse_config(gw_dict)
    init = render_init(cfg, GuestAddrs.from_subnet(ipaddress.IPv4Network("169.254.77.0/30")), "/venv/python")
    assert "ip link set vec0 name lan0" in init and "ip link set vec1 name wan0" in init
    assert "ip addr add 192.0.2.1/24 dev wan0" in init
    assert f"ip link set wan0 address {stable_mac('gw1', 'wan0')}" in init  # same MAC after a restart
    assert stable_mac("gw1", "wan0") != stable_mac("gw1", "lan0") and int(stable_mac("gw1", "wan0")[:2], 16) & 1 == 0
    assert "ip route add 203.0.113.0/24 via 192.0.2.254" in init
    assert "--listen 169.254.77.2:4503" in init
    assert "STRONGSWAN_CONF=/run/gw/strongswan.conf /usr/sbin/charon-systemd" in init
