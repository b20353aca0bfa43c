"""The two-site form of the topology file: derived sites, their configs (validated by the
owners' loaders), bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from supergw_proto.bucket import bucket_of
from supergw_proto.p4constants import BucketHash
from topologies.configs import Secrets, controller_config, gateway_config, validate_with_owners, write_all
from topologies.model import DEFAULT_TOPOLOGY, Topology, TopologyError
from topologies.network import switch_interfaces
from topologies.paths import SitePaths
from topologies.schema import TWO_SITE_PAPER_TOPOLOGY, TWO_SITE_TOPOLOGY, load
from topologies.tests.topofiles import changed_topology


def load_two_site(path: Path = TWO_SITE_TOPOLOGY, **changes: Any) -> tuple[Any, list[Topology]]:
    """(the file's mapping, its two sites)."""
    spec = load(path, changes=changes)
    return yaml.safe_load(path.read_text()) | changes, spec.sites


def paths(root: Path) -> SitePaths:
    return SitePaths(root, root / "logs")


def _write(tmp_path: Path, **changes: Any) -> Path:
    return changed_topology(TWO_SITE_TOPOLOGY, tmp_path, **changes)


def test_default_file_gives_two_sites_paired_by_index() -> None:
    spec = load(TWO_SITE_TOPOLOGY)
    a, b = spec.sites
    assert len(a.gateways) == len(b.gateways) == 3
    assert len(a.hosts) == len(b.hosts) == 4
    for ga, gb in zip(a.gateways, b.gateways):
        assert ga.peer.name == gb.name and gb.peer.name == ga.name
        assert ga.peer.wan_ip == gb.wan_ip and gb.peer.wan_ip == ga.wan_ip
    assert a.remote.subnet == b.lan.subnet and b.remote.subnet == a.lan.subnet
    assert not set(a.namespaces()) & set(b.namespaces())
    assert spec.shared_wan == "sgw-wan" and spec.shared_wan not in a.namespaces() + b.namespaces()
    assert spec.partner(a) == b and spec.partner(b) == a
    # gateway names are cgroup names too (sgw-gw-<name>): they must differ between sites
    assert not {g.name for g in a.gateways} & {g.name for g in b.gateways}
    assert all(len(a.wan_port(g)) <= 15 for g in a.gateways)


def test_overrides_and_sizes(tmp_path: Path) -> None:
    a, b = load(_write(tmp_path), switch="bmv2", changes={"gateways": 2, "hosts_per_site": 2}).sites
    assert a.switch.kind == b.switch.kind == "bmv2"
    assert [g.name for g in a.gateways] == ["agw1", "agw2"] and [h.name for h in b.hosts] == ["bh1", "bh2"]
    assert set(switch_interfaces(a).values()) == {"sw-ah1", "sw-ah2", "sw-agw1", "sw-agw2", "sw-hsim"}


@pytest.mark.parametrize("name", ["two-site.yaml", "two-site-paper.yaml"])
def test_shipped_files_give_configs_the_owners_accept(tmp_path: Path, name: str) -> None:
    _, sites = load_two_site(TWO_SITE_TOPOLOGY.with_name(name))
    for topo in sites:
        gen = write_all(topo, paths(tmp_path / topo.prefix), Secrets.fresh(24))
        assert validate_with_owners(gen) == []
        assert set(gen.gateways) == {g.name for g in topo.gateways}  # no peer configs: the partner writes its own


def test_the_controller_config_carries_the_dispatch_section(tmp_path: Path) -> None:
    _, (a, _) = load_two_site(TWO_SITE_PAPER_TOPOLOGY)
    assert controller_config(a, paths(tmp_path))["dispatch"] == {"hash": "identity", "partition_period": 256}
    _, (a, _) = load_two_site()
    assert controller_config(a, paths(tmp_path))["dispatch"] == {"hash": "crc32"}  # the default


def test_configs_pair_the_sites(tmp_path: Path) -> None:
    ts, (a, b) = load_two_site()
    sec = Secrets.fresh(24)
    ca = gateway_config(a, a.gateways[0], "lan", sec, tmp_path, tmp_path)
    cb = gateway_config(b, b.gateways[0], "lan", sec, tmp_path, tmp_path)
    assert ca["initiate"] is True and cb["initiate"] is False
    assert ca["cpu_quota_percent"] == cb["cpu_quota_percent"] == ts["gateway_cpu_percent"]
    assert ca["remote"] == {"address": cb["local"]["address"], "subnets": cb["local"]["subnets"]}
    assert ca["controller"]["url"] != cb["controller"]["url"]
    assert [g["name"] for g in controller_config(b, paths(tmp_path))["gateways"]] == ["bgw1", "bgw2", "bgw3"]


def test_uml_gateways_and_the_controllers_rebalancer_section(tmp_path: Path) -> None:
    from supergw_gateway.uml_init import stable_mac

    rebalancer = {"policy": "paper", "paper": {"seed": 3}}
    _, (a, b) = load_two_site(TWO_SITE_PAPER_TOPOLOGY, gateway_backend="uml", rebalancer=rebalancer)
    for topo in (a, b):
        gen = write_all(topo, paths(tmp_path / topo.prefix), Secrets.fresh(24))
        assert validate_with_owners(gen) == []
        conf = yaml.safe_load(gen.gateways[topo.gateways[0].name].read_text())
        assert conf["backend"] == "uml"
        ctl = controller_config(topo, paths(tmp_path / topo.prefix))
        # the switch sends each gateway's frames to its guest NIC's MAC, not to the namespace's veth
        assert [g["mac"] for g in ctl["gateways"]] == [stable_mac(g.name, "lan0") for g in topo.gateways]
        assert ctl["rebalancer"]["policy"] == "paper" and ctl["rebalancer"]["paper"]["seed"] == 3
    _, (a, _) = load_two_site()
    assert a.gateway_backend == "auto" and "rebalancer" not in controller_config(a, paths(tmp_path))
    assert [g["mac"] for g in controller_config(a, paths(tmp_path))["gateways"]] == [g.mac for g in a.gateways]


@pytest.mark.parametrize(("changes", "needle"), [
    ({"gateway_backend": "qemu"}, "gateway_backend"),
    ({"rebalancer": {"policy": "random"}}, "rebalancer.policy"),
    ({"rebalancer": {"threshold": 0.5}}, "rebalancer.threshold"),
    ({"gateways": 5}, "gateways"),
    ({"gateways": 0}, "gateways"),
    ({"hosts_per_site": 0}, "hosts_per_site"),
    ({"hosts_per_site": 33}, "hosts_per_site"),
    ({"kind": "one-site"}, "kind"),
    ({"gateway_cpu_percent": -5}, "gateway_cpu_percent"),
    ({"bogus": 1}, "bogus"),
    ({"dispatch": {"hash": "crc16"}}, "dispatch.hash"),
    ({"dispatch": {"partition_period": 3}}, "dispatch.partition_period"),
    ({"simulated_hosts": {"count": 4, "first_host": 100, "mac_step": 0}}, "simulated_hosts.mac_step"),
])
def test_bad_values_are_named(tmp_path: Path, changes: dict[str, Any], needle: str) -> None:
    with pytest.raises(TopologyError, match=needle):
        load_two_site(_write(tmp_path, **changes))


def test_bad_sites_are_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(TWO_SITE_TOPOLOGY.read_text())
    same = [dict(s, initiate=True) for s in data["sites"]]
    with pytest.raises(TopologyError, match="exactly one site initiates"):
        load_two_site(_write(tmp_path, sites=same))
    long_prefix = [dict(data["sites"][0], prefix="sgw-long"), data["sites"][1]]
    with pytest.raises(TopologyError, match="prefix"):
        load_two_site(_write(tmp_path, sites=long_prefix))
    overlap = [data["sites"][0], dict(data["sites"][1], lan=data["sites"][0]["lan"])]
    with pytest.raises(TopologyError, match="overlap"):
        load_two_site(_write(tmp_path, sites=overlap))
    with pytest.raises(TopologyError, match="cannot read"):
        load_two_site(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("lan", "0.0.0.0/32", r"sites\[a\].lan 0.0.0.0/32 is too small"),  # was an IndexError (the config fuzz found it)
    ("lan", "10.60.0.0/25", "is too small"),
    ("mgmt", "10.255.61.0/29", r"sites\[a\].mgmt 10.255.61.0/29 is too small"),
])
def test_a_site_subnet_too_small_for_its_derived_addresses_is_named(tmp_path: Path, key: str, value: str,
                                                                     needle: str) -> None:
    data = yaml.safe_load(TWO_SITE_TOPOLOGY.read_text())
    sites = [dict(data["sites"][0], **{key: value}), data["sites"][1]]
    with pytest.raises(TopologyError, match=needle):
        load_two_site(_write(tmp_path, sites=sites))


def test_a_remote_access_subnet_too_small_is_named() -> None:
    from topologies.schema import REMOTE_ACCESS_TOPOLOGY

    with pytest.raises(TopologyError, match="remote_subnet 10.71.0.0/30 is too small"):
        load(REMOTE_ACCESS_TOPOLOGY, changes={"remote_subnet": "10.71.0.0/30"})


def test_the_kind_key_picks_the_form() -> None:
    assert len(load(TWO_SITE_TOPOLOGY).sites) == 2
    assert len(load(DEFAULT_TOPOLOGY).sites) == 1


def test_paper_preset_has_the_papers_ranges() -> None:
    ts, (a, b) = load_two_site(TWO_SITE_PAPER_TOPOLOGY)
    assert ts["gateways"] == 3 and a.lan.buckets == b.lan.buckets == 4096
    for topo, net, mac in ((a, "192.168.203", "00:00:03:00"), (b, "192.168.204", "00:00:04:00")):
        sim = topo.simulated_hosts
        assert sim is not None and sim.count == 224 and sim.port in topo.host_ports
        # §4.3's hosts: the MACs step by 256
        assert (str(sim.ips()[0]), sim.macs()[0]) == (f"{net}.24", f"{mac}:18:00")
        assert sim.macs()[1] == f"{mac}:19:00"
        assert (str(sim.ips()[-1]), sim.macs()[-1]) == (f"{net}.247", f"{mac}:f7:00")
        # identity hash, and every simulated host in a bucket whose class (b mod 256) is 0:
        # the paper's start, all flows on gateway 1 (controller/tests: fill_missing with a period)
        assert topo.lan.dispatch.hash is BucketHash.IDENTITY and topo.lan.dispatch.partition_period == 256
        buckets = {bucket_of(m, topo.lan.buckets, topo.lan.dispatch.hash) for m in sim.macs()}
        assert buckets == {j << 8 for j in range(16)}
        assert len(topo.hosts) == 4 and str(topo.hosts[0].ip) == f"{net}.11"  # namespace hosts for ping demos
        assert topo.lan.vmac_base == "02:88:88:88:00:00"
        assert f"{topo.prefix}-hsim" in topo.namespaces()


@pytest.mark.parametrize(("sim", "message"), [
    ({"count": 200, "first_host": 100, "port": 200}, "gateways' LAN addresses"),
    ({"count": 16, "first_host": 12, "port": 200}, "overlap the namespace hosts"),
    ({"count": 16, "first_host": 100, "port": 2}, "simulated_hosts.port"),
    ({"count": 16, "first_host": 100, "port": 252}, "simulated_hosts.port"),
    ({"count": 0, "first_host": 100, "port": 200}, "simulated_hosts.count"),
    ({"count": 16, "first_host": 100, "port": 200, "macs": 3}, "simulated_hosts.macs"),
])
def test_bad_simulated_hosts_are_refused_with_the_key(tmp_path: Path, sim: dict[str, int], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        load_two_site(_write(tmp_path, simulated_hosts=sim))


def test_hosts_may_not_reach_the_gateways_addresses(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="first_host"):
        load_two_site(_write(tmp_path, first_host=230, hosts_per_site=30))


def test_paired_gateways_get_pair_beacons_with_one_secret_per_pair(tmp_path: Path) -> None:
    import dataclasses

    from supergw_gateway.config import load_config

    _, (a, b) = load_two_site()
    base = Secrets.fresh(24)
    gens = [write_all(a, paths(tmp_path / "a"), base),
            write_all(b, paths(tmp_path / "b"), dataclasses.replace(Secrets.fresh(24), psk=base.psk,
                                                                     pair_seed=base.pair_seed))]
    secrets_seen = set()
    for ga, gb in zip(a.gateways, b.gateways):
        ca, cb = load_config(gens[0].gateways[ga.name]), load_config(gens[1].gateways[gb.name])
        assert ca.partner is not None and cb.partner is not None
        assert (ca.partner.name, cb.partner.name) == (gb.name, ga.name)
        assert (ca.partner.address, cb.partner.address) == (gb.lan_ip, ga.lan_ip)
        assert (ca.partner_local_address, cb.partner_local_address) == (ga.lan_ip, gb.lan_ip)
        assert ca.partner.secret() == cb.partner.secret()  # both ends of the pair
        assert ca.partner.secret_file.stat().st_mode & 0o077 == 0
        assert ca.partner.secret().decode() not in gens[0].gateways[ga.name].read_text()  # a file, not inline
        secrets_seen.add(ca.partner.secret())
    assert len(secrets_seen) == len(a.gateways)  # one per pair


def test_one_site_peers_have_no_pair_beacons(tmp_path: Path) -> None:
    from supergw_gateway.config import load_config

    gen = write_all(load(DEFAULT_TOPOLOGY).single, paths(tmp_path), Secrets.fresh(24))
    assert all(load_config(p).partner is None for p in gen.gateways.values())
