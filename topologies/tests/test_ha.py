"""The HA emulation's pieces that need no root: topology, generated configs, etcd command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from topologies import ha
from topologies.configs import Secrets, validate_with_owners, write_all
from topologies.model import Topology, TopologyError, load_topology



def test_replicas_get_namespaces_addresses_and_the_switch_on_mgmt() -> None:
    one = ha.prepare(load_topology(), None)
    assert not ha.enabled(one) and one.switch.grpc_addr == "127.0.0.1:9559"
    topo = ha.prepare(load_topology(), 3)
    assert ha.enabled(topo)
    assert topo.controller.replica_names() == ["c1", "c2", "c3"]
    assert [str(ip) for ip in topo.replica_ips().values()] == ["10.255.60.31", "10.255.60.32", "10.255.60.33"]
    assert {"sgw-emu-c1", "sgw-emu-c2", "sgw-emu-c3"} <= set(topo.namespaces())
    # every replica reaches P4Runtime over the management network
    assert topo.switch.grpc_addr == f"{topo.mgmt.controller_ip}:9559"


def test_bad_replica_counts_are_refused() -> None:
    with pytest.raises(TopologyError, match="replicas"):
        ha.prepare(load_topology(), 0)
    with pytest.raises(TopologyError, match="replicas"):
        ha.prepare(load_topology(), 9)
    data = load_topology().model_dump(mode="json")
    data["hosts"][0]["name"] = "c2"  # a host named like a replica
    with pytest.raises(TopologyError, match="names used twice"):
        ha.prepare(Topology.model_validate(data), 3)


def test_replica_configs_validate_and_point_at_the_cluster(tmp_path: Path) -> None:
    pytest.importorskip("supergw_controller.config")
    pytest.importorskip("supergw_gateway.config")
    topo = ha.prepare(load_topology(), 3)
    gen, paths = ha.write_configs(topo, write_all(topo, tmp_path, Secrets.fresh(16)))
    assert ha.validate(paths) == [] and validate_with_owners(gen) == []
    assert gen.controller == paths["c1"] and not (tmp_path / "config" / "controller.yaml").exists()
    c2 = yaml.safe_load(paths["c2"].read_text())
    assert c2["store"]["backend"] == "etcd"
    assert c2["store"]["etcd"]["endpoints"] == ["10.255.60.32:2379", "10.255.60.31:2379", "10.255.60.33:2379"]
    assert c2["store"]["etcd"]["prefix"] == "/supergw/sgw-emu"
    assert c2["ha"]["replica"] == "c2" and c2["ha"]["api_url"] == "http://10.255.60.32:8080"
    assert c2["port_monitor"] == {"enabled": True, "netns": "sgw-emu-sw"}
    assert c2["switch"]["address"] == "10.255.60.2:9559"
    assert "state_db" not in c2
    member = yaml.safe_load(gen.gateways["gw1"].read_text())["controller"]
    assert member["urls"] == [f"http://10.255.60.3{i}:8080" for i in (1, 2, 3)] and "url" not in member
    assert "controller" not in yaml.safe_load(gen.gateways["peer1"].read_text())


def test_etcd_members_form_one_cluster(tmp_path: Path) -> None:
    topo = ha.prepare(load_topology(), 3)
    argv = ha.etcd_argv(topo, "c3", tmp_path)
    switches = {a for a in argv[1:] if a.startswith("--") and "=" in a}  # boolean flags: --flag=value
    pairs = [a for a in argv[1:] if a not in switches]
    flags = dict(zip(pairs[0::2], pairs[1::2], strict=True)) | dict(a.split("=", 1) for a in switches)
    assert argv[0] == "etcd" and flags["--name"] == "c3"
    assert flags["--pre-vote"] == "true"
    assert flags["--listen-client-urls"] == "http://10.255.60.33:2379"
    assert flags["--initial-cluster"] == (
        "c1=http://10.255.60.31:2380,c2=http://10.255.60.32:2380,c3=http://10.255.60.33:2380"
    )
