"""Replicated controllers without root: the plan, generated configs, the etcd command line;
one site or two, with replicas at one site only (what a chaos run across sites needs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from topologies import ha
from topologies.configs import Secrets, validate_with_owners, write_all
from topologies.etcd_auth import EtcdPki
from topologies.model import Topology, TopologyError
from topologies.paths import SitePaths
from topologies.schema import TWO_SITE_TOPOLOGY, load


def ha_site() -> Topology:
    return load(replicas=ha.HA_REPLICAS).single


def test_replicas_get_namespaces_addresses_and_the_switch_on_mgmt() -> None:
    one = load().single
    assert not one.replicated and one.p4runtime_addr == "127.0.0.1:9559"
    topo = ha_site()
    assert topo.replicated
    assert topo.controller.replica_names() == ["c1", "c2", "c3"]
    assert [str(ip) for ip in topo.replica_ips().values()] == ["10.255.60.31", "10.255.60.32", "10.255.60.33"]
    assert {"sgw-emu-c1", "sgw-emu-c2", "sgw-emu-c3"} <= set(topo.namespaces())
    # every replica reaches P4Runtime over the management network
    assert topo.p4runtime_addr == f"{topo.mgmt.controller_ip}:9559"
    assert [c.process for c in topo.controllers()] == ["controller-c1", "controller-c2", "controller-c3"]
    assert topo.api_url("c2") == "http://10.255.60.32:8080" and topo.api_url() == "http://10.255.60.31:8080"


def test_bad_replica_counts_are_refused() -> None:
    with pytest.raises(TopologyError, match="replicas"):
        load(replicas=0)
    with pytest.raises(TopologyError, match="replicas"):
        load(replicas=9)
    with pytest.raises(TopologyError, match="no such site"):
        load(replicas=3, replicas_site="sgw-x")
    data = load().single.model_dump(mode="json")
    data["hosts"][0]["name"] = "c2"  # a host named like a replica
    with pytest.raises(TopologyError, match="names used twice"):
        Topology.model_validate(data).with_replicas(3)


def test_replica_configs_validate_and_point_at_the_cluster(tmp_path: Path) -> None:
    pytest.importorskip("supergw_controller.config")
    pytest.importorskip("supergw_gateway.config")
    topo = ha_site()
    gen = write_all(topo, SitePaths(tmp_path, tmp_path / "logs"), Secrets.fresh(16))
    assert validate_with_owners(gen) == []
    assert set(gen.controllers) == {"controller-c1", "controller-c2", "controller-c3"}
    assert not (tmp_path / "config" / "controller.yaml").exists()
    c2 = yaml.safe_load(gen.controllers["controller-c2"].read_text())
    assert c2["store"]["backend"] == "etcd"
    assert c2["store"]["etcd"]["endpoints"] == [
        "https://10.255.60.32:2379", "https://10.255.60.31:2379", "https://10.255.60.33:2379"
    ]
    tls = c2["store"]["etcd"]["tls"]  # the controllers' etcd user: the CN of this certificate
    assert tls["cert"] == str(tmp_path / "config" / "pki" / "supergw.crt") and Path(tls["key"]).stat().st_mode & 0o077 == 0
    assert c2["store"]["etcd"]["prefix"] == "/supergw/sgw-emu"
    assert c2["ha"]["replica"] == "c2" and c2["ha"]["api_url"] == "http://10.255.60.32:8080"
    assert c2["port_monitor"] == {"enabled": True, "netns": "sgw-emu-sw"}
    assert c2["switch"]["address"] == "10.255.60.2:9559"
    assert "state_db" not in c2
    member = yaml.safe_load(gen.gateways["gw1"].read_text())["controller"]
    assert member["urls"] == [f"http://10.255.60.3{i}:8080" for i in (1, 2, 3)] and "url" not in member
    assert "controller" not in yaml.safe_load(gen.gateways["peer1"].read_text())


def test_two_sites_with_replicas_at_site_a_only(tmp_path: Path) -> None:
    pytest.importorskip("supergw_controller.config")
    pytest.importorskip("supergw_gateway.config")
    spec = load(TWO_SITE_TOPOLOGY, replicas=3, replicas_site="sgw-a")
    a, b = spec.sites
    assert a.replicated and not b.replicated
    assert a.p4runtime_addr == "10.255.61.2:9559" and b.p4runtime_addr == "127.0.0.1:9559"
    assert {"sgw-a-c1", "sgw-a-c2", "sgw-a-c3"} <= set(a.namespaces())
    assert not any(ns.startswith("sgw-b-c") for ns in b.namespaces())
    assert [c.api_url for c in a.controllers()] == [f"http://10.255.61.3{i}:8080" for i in (1, 2, 3)]
    assert ha.etcd_prefix(a) == "/supergw/sgw-a"
    gens = [write_all(s, SitePaths(tmp_path / s.prefix, tmp_path / "logs" / s.prefix), Secrets.fresh(16))
            for s in (a, b)]
    assert [validate_with_owners(g) for g in gens] == [[], []]
    assert set(gens[0].controllers) == {"controller-c1", "controller-c2", "controller-c3"}
    assert set(gens[1].controllers) == {"controller"}
    agw1 = yaml.safe_load(gens[0].gateways["agw1"].read_text())["controller"]
    bgw1 = yaml.safe_load(gens[1].gateways["bgw1"].read_text())["controller"]
    assert agw1["urls"] == [c.api_url for c in a.controllers()] and bgw1["url"] == "http://10.255.62.2:8080"
    # the same in the file: sites[].replicas
    data = yaml.safe_load(TWO_SITE_TOPOLOGY.read_text())
    data["sites"][0]["replicas"] = 3
    path = tmp_path / "ha-a.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load(path) == spec


def test_etcd_members_form_one_cluster(tmp_path: Path) -> None:
    topo = ha_site()
    argv = ha.etcd_argv(topo, "c3", tmp_path, EtcdPki(tmp_path / "pki"))
    switches = {a for a in argv[1:] if a.startswith("--") and "=" in a}  # boolean flags: --flag=value
    pairs = [a for a in argv[1:] if a not in switches]
    flags = dict(zip(pairs[0::2], pairs[1::2], strict=True)) | dict(a.split("=", 1) for a in switches)
    assert argv[0] == "etcd" and flags["--name"] == "c3"
    assert flags["--pre-vote"] == "true"
    assert flags["--listen-client-urls"] == "https://10.255.60.33:2379"
    assert flags["--initial-cluster"] == (
        "c1=https://10.255.60.31:2380,c2=https://10.255.60.32:2380,c3=https://10.255.60.33:2380"
    )
    # TLS with client certificates towards clients and peers (docs/deploy-linux.md)
    assert flags["--client-cert-auth"] == "true" and flags["--peer-client-cert-auth"] == "true"
    assert flags["--cert-file"] == str(tmp_path / "pki" / "etcd-c3.crt")
    assert flags["--trusted-ca-file"] == flags["--peer-trusted-ca-file"] == str(tmp_path / "pki" / "ca.crt")
