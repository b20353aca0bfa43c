"""Rendering a gateway's remote-access side: charon settings, the cache mapping, VICI messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supergw_gateway.charon import CharonSettings, render_strongswan_conf
from supergw_gateway.config import GatewayConfig, parse_config
from supergw_gateway.executor import Result
from supergw_gateway.ra import gateway as ra_gateway
from supergw_gateway.ra.client import ClientConfig, build_conn, parse_state


def cfg_with(d: dict[str, Any], caching: dict[str, Any] | None = None) -> GatewayConfig:
    if caching is not None:
        d["remote_access"]["caching"] = caching
    return parse_config(d)


def test_strongswan_conf_carries_the_spi_plan(ra_dict: dict[str, Any]) -> None:
    opts = ra_gateway.charon_options(cfg_with(ra_dict))
    conf = render_strongswan_conf(CharonSettings("unix:///v", Path("/l"), libipsec=True, options=opts))
    for line in ("spi_min = 0xc1000000", "spi_max = 0xc1ffffff", "spi_mask = 0xff00000000000000",
                 "spi_label = 0x0100000000000000"):
        assert f"\n  {line}\n" in conf
    assert " counters " in conf.split("load = ")[1].splitlines()[0] + " "
    assert "install_virtual_ip = no" in conf
    plain = render_strongswan_conf(CharonSettings("unix:///v", Path("/l"), libipsec=True))
    assert "spi_min" not in plain and "counters" not in plain


@pytest.mark.parametrize(("caching", "ike", "child", "agent"), [
    ({"strategy": "none"},
     {"reauth_time": "86400s", "over_time": "8640s", "dpd_delay": "30s"}, {"life_time": "95040s"}, None),
    ({"strategy": "clocked", "lifetime_s": 28800},
     {"reauth_time": "28800s", "over_time": "2880s", "dpd_delay": "0s"}, {"life_time": "31680s"}, None),
    ({"strategy": "clocked", "lifetime_s": 20, "over_time_s": 2},
     {"reauth_time": "20s", "over_time": "2s"}, {"life_time": "22s"}, None),
    ({"strategy": "established", "lifetime_s": 7200, "idle_s": 60},
     {"reauth_time": "86400s", "dpd_delay": "0s"}, {"life_time": "95040s"}, "present (inbound ESP within 60s) for 7200s"),
    ({"strategy": "data", "lifetime_bytes": 20_000_000, "max_auth_age_s": 0},
     {"reauth_time": "0s", "dpd_delay": "0s"}, {"life_time": "0s"}, "carried 20000000 bytes"),
])
def test_cache_mapping(ra_dict: dict[str, Any], caching: dict[str, Any], ike: dict[str, str],
                       child: dict[str, str], agent: str | None) -> None:
    cfg = cfg_with(ra_dict, caching)
    m = ra_gateway.cache_mapping(cfg.remote_access)  # type: ignore[arg-type]
    # Never an exchange the gateway starts toward a client that may be away.
    assert m.ike["rekey_time"] == "0s" and m.child["rekey_time"] == "0s" and m.ike["rand_time"] == "0s"
    assert m.child["rand_time"] == "0s" and m.ike["mobike"] == "yes" and m.ike["unique"] == "replace"
    assert ike.items() <= m.ike.items() and child.items() <= m.child.items()
    assert (m.agent is None) == (agent is None) and (agent is None or agent in m.agent)  # type: ignore[operator]
    assert m.describe()[0] == f"strategy {caching['strategy']}:"


def test_connection_and_pool(ra_dict: dict[str, Any]) -> None:
    cfg = cfg_with(ra_dict, {"strategy": "clocked", "lifetime_s": 60})
    conn = ra_gateway.build_conn(cfg)["ra"]
    assert conn["local_addrs"] == ["203.0.113.1"] and conn["pools"] == ["ra-gw1-pool"]
    assert conn["local-1"] == {"auth": "pubkey", "id": "vpn.example", "certs": [b"PEM"]}
    assert conn["remote-1"] == {"auth": "pubkey", "cacerts": [b"PEM"]}
    assert conn["proposals"] == cfg.proposals.ike and conn["reauth_time"] == "60s"
    child = conn["children"]["ra-net"]
    assert child["local_ts"] == ["10.1.0.0/24"] and child["esp_proposals"] == cfg.proposals.esp
    assert ra_gateway.build_pool(cfg) == {"ra-gw1-pool": {"addrs": "10.90.0.0/24"}}
    info = ra_gateway.report_info(cfg)
    assert (info.esp_spi_min, info.ike_spi_label, info.caching) == (0xC1000000, 1 << 56, "clocked")


class Recording:
    where = "recording"

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def run(self, argv: list[str], check: bool = True, timeout: float = 30.0) -> Result:
        self.argvs.append(argv)
        return Result(0, "", "")


def test_public_address_is_held_without_arp(ra_dict: dict[str, Any]) -> None:
    ex = Recording()
    ra_gateway.hold_public_address(cfg_with(ra_dict), ex)
    assert ex.argvs == [
        ["sysctl", "-qw", "net/ipv4/conf/wan0/arp_ignore=3"],
        ["sysctl", "-qw", "net/ipv4/conf/wan0/arp_announce=2"],
        ["ip", "addr", "replace", "203.0.113.1/32", "scope", "host", "dev", "wan0"],
    ]


def test_client_connection_and_state(tmp_path: Path) -> None:
    import ipaddress

    for name in ("ca", "c", "k"):
        (tmp_path / name).write_text(name)
    c = ClientConfig(name="c1", netns="ns", device="eth0", address=ipaddress.IPv4Interface("10.77.0.10/24"),
                     gateway=ipaddress.IPv4Address("10.77.0.1"), server=ipaddress.IPv4Address("203.0.113.1"),
                     server_id="vpn.example", identity="c1.example", cacert=tmp_path / "ca", cert=tmp_path / "c",
                     key=tmp_path / "k", subnets=(ipaddress.IPv4Network("10.80.0.0/24"),), run_dir=tmp_path)
    conn = build_conn(c)["ra"]
    assert conn["vips"] == ["0.0.0.0"] and conn["mobike"] == "yes" and conn["remote_addrs"] == ["203.0.113.1"]
    assert conn["remote-1"] == {"auth": "pubkey", "id": "vpn.example", "cacerts": [b"ca"]}
    assert conn["children"]["ra-net"]["close_action"] == "start"
    raw = {"ra": {"uniqueid": "3", "state": "ESTABLISHED", "initiator-spi": "aa" * 8, "responder-spi": "01" * 8,
                  "local-host": "10.77.0.10", "remote-host": "203.0.113.1", "local-vips": ["10.90.0.4"],
                  "established": "7", "child-sas": {
                      "ra-net-1": {"state": "DELETING", "spi-in": "1"},
                      "ra-net-2": {"state": "INSTALLED", "spi-in": "c0000002", "spi-out": "c1000002",
                                   "bytes-in": "84", "bytes-out": "168"}}}}
    st = parse_state(raw)
    assert st is not None and (st.ike_id, st.vip, st.spi_in, st.bytes_out) == (3, "10.90.0.4", "c0000002", 168)
    assert parse_state({}) is None


def test_validate_prints_the_cache_mapping(ra_dict: dict[str, Any], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from supergw_gateway.cli import main

    ra_dict["remote_access"]["caching"] = {"strategy": "data", "lifetime_bytes": 1000}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(ra_dict))
    assert main(["validate", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert "remote access, strategy data:" in out and "reauth_time=86400s" in out and "carried 1000 bytes" in out
