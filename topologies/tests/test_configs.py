"""Generated controller and gateway configs pass their owners' own validators."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from topologies.configs import Secrets, validate_with_owners, write_all
from topologies.paths import SitePaths
from topologies.schema import load


def test_generated_configs_validate(tmp_path: Path) -> None:
    pytest.importorskip("supergw_controller.config")
    pytest.importorskip("supergw_gateway.config")
    topo = load().single
    gen = write_all(topo, SitePaths(tmp_path, tmp_path / "logs"), Secrets.fresh(16))
    assert validate_with_owners(gen) == []
    assert set(gen.gateways) == {g.name for g in topo.gateways} | {g.peer.name for g in topo.gateways}
    assert set(gen.controllers) == {"controller"}
    ctl = yaml.safe_load(gen.controllers["controller"].read_text())
    assert ctl["switch"]["device_id"] == topo.switch.device_id
    assert gen.token_file.read_text().strip() == gen.secrets.api_token
    member = yaml.safe_load(gen.gateways["gw1"].read_text())
    peer = yaml.safe_load(gen.gateways["peer1"].read_text())
    assert member["initiate"] is True and peer["initiate"] is False
    assert member["remote"]["address"] == peer["local"]["address"]
    assert member["local"]["subnets"] == peer["remote"]["subnets"]
    assert member["auth"]["psk"] == peer["auth"]["psk"]
    assert "controller" in member and "controller" not in peer
    assert oct(gen.gateways["gw1"].stat().st_mode & 0o777) == "0o600"
    # Every gateway has its own agent secret, in a 0600 file named by both configs, never inline.
    agent_files = {Path(g["agent_token_file"]) for g in ctl["gateways"]}
    assert len(agent_files) == len(topo.gateways)
    assert len({p.read_text() for p in agent_files}) == len(agent_files)
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in agent_files)
    assert Path(member["controller"]["token_file"]) in agent_files and "token" not in member["controller"]
    assert gen.secrets.api_token not in gen.controllers["controller"].read_text() + gen.gateways["gw1"].read_text()


def test_dual_stack_configs(tmp_path: Path) -> None:
    """The default topology is dual-stack: the controller advertises the LAN prefix from
    fe80::1 and holds fd00:60::1, each gateway's LAN interface has its IPv4 address's twin,
    and every tunnel carries both LAN prefixes inside an IPv4 outer."""
    pytest.importorskip("supergw_controller.config")
    pytest.importorskip("supergw_gateway.config")
    topo = load().single
    assert topo.dual_stack
    gen = write_all(topo, SitePaths(tmp_path, tmp_path / "logs"), Secrets.fresh(16))
    assert validate_with_owners(gen) == []
    ctl = yaml.safe_load(gen.controllers["controller"].read_text())
    assert ctl["gateway_ip6"] == {"link_local": "fe80::1", "global": "fd00:60::1"}
    assert ctl["router_advertisements"]["prefixes"] == [{"prefix": "fd00:60::/64"}]
    member = yaml.safe_load(gen.gateways["gw1"].read_text())
    peer = yaml.safe_load(gen.gateways["peer1"].read_text())
    assert member["interfaces"][0]["addresses6"] == ["fd00:60::fb/64"]  # 10.60.0.251's twin
    assert peer["interfaces"][0]["addresses6"] == ["fd00:61::fb/64"]
    assert member["local"]["subnets"] == ["10.60.0.0/24", "fd00:60::/64"] == peer["remote"]["subnets"]
    assert member["remote"]["subnets"] == ["10.61.0.0/24", "fd00:61::/64"] == peer["local"]["subnets"]
    assert ":" not in member["local"]["address"]  # IPv4 outer
    assert str(topo.lan6(topo.hosts[0].ip)) == "fd00:60::b"


def test_two_site_is_dual_stack_on_both_sides(tmp_path: Path) -> None:
    from topologies.model import TOPOLOGY_DIR

    a, b = load(TOPOLOGY_DIR / "two-site.yaml").sites
    assert (str(a.lan.subnet6), str(a.remote.subnet6)) == ("fd00:60::/64", "fd00:61::/64")
    assert (str(b.lan.subnet6), str(b.remote.subnet6)) == ("fd00:61::/64", "fd00:60::/64")
