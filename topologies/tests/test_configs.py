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


IPV6_WAN = {"netns": "sgw-wan", "subnet": "198.51.100.0/24", "subnet6": "fd00:198:51:100::/64"}


def test_ipv6_outer_between_two_sites(tmp_path: Path) -> None:
    """`wan.subnet6`: every tunnel runs between the WAN addresses' IPv6 twins, each gateway
    holds its twin on its WAN interface, and the owners' loaders accept the configs."""
    pytest.importorskip("supergw_gateway.config")
    from supergw_gateway.config import load_config
    from topologies.schema import TWO_SITE_TOPOLOGY

    a, b = load(TWO_SITE_TOPOLOGY, changes={"wan": IPV6_WAN}).sites
    sec = Secrets.fresh(16)
    gens = [write_all(t, SitePaths(tmp_path / t.prefix, tmp_path / "logs"), sec) for t in (a, b)]
    assert all(validate_with_owners(g) == [] for g in gens)
    ga = yaml.safe_load(gens[0].gateways["agw1"].read_text())
    gb = yaml.safe_load(gens[1].gateways["bgw1"].read_text())
    assert ga["local"]["address"] == "fd00:198:51:100::b" == gb["remote"]["address"]  # 198.51.100.11's twin
    assert gb["local"]["address"] == "fd00:198:51:100::15" == ga["remote"]["address"]  # .21
    assert ga["interfaces"][1] == {"role": "wan", "device": "wan0", "address": "198.51.100.11/24",
                                   "addresses6": ["fd00:198:51:100::b/64"]}
    assert ga["local"]["subnets"] == ["10.60.0.0/24", "fd00:60::/64"]  # both inner families, as before
    assert load_config(gens[0].gateways["agw1"]).ipv6


def test_ipv6_outer_on_one_site(tmp_path: Path) -> None:
    topo = load(changes={"wan": {"subnet": "198.51.100.0/24", "subnet6": "2001:db8:100::/64"}}).single
    gen = write_all(topo, SitePaths(tmp_path, tmp_path / "logs"), Secrets.fresh(16))
    assert validate_with_owners(gen) == []
    member = yaml.safe_load(gen.gateways["gw1"].read_text())
    peer = yaml.safe_load(gen.gateways["peer1"].read_text())
    assert (member["local"]["address"], member["remote"]["address"]) == ("2001:db8:100::b", "2001:db8:100::15")
    assert peer["interfaces"][1]["addresses6"] == ["2001:db8:100::15/64"]


@pytest.mark.parametrize(("wan6", "needle"), [
    ("fd00:60::/64", "wan.subnet6 fd00:60::/64 overlaps lan.subnet6"),
    ("fd00:61::/64", "overlaps remote.subnet6"),
    ("2001:db8::/125", "is smaller than wan.subnet"),
    ("10.0.0.0/8", "wan.subnet6"),
])
def test_bad_ipv6_outer_is_refused_with_the_key(wan6: str, needle: str) -> None:
    from topologies.model import TopologyError

    with pytest.raises(TopologyError, match=needle):
        load(changes={"wan": {"subnet": "198.51.100.0/24", "subnet6": wan6}})


def test_remote_access_refuses_an_ipv6_outer() -> None:
    from topologies.model import TopologyError
    from topologies.schema import REMOTE_ACCESS_TOPOLOGY

    with pytest.raises(TopologyError, match="wan.subnet6"):
        load(REMOTE_ACCESS_TOPOLOGY, changes={"wan": {"subnet": "198.51.100.0/24", "subnet6": "2001:db8:100::/64"}})
