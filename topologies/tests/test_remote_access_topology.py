"""The remote-access form of the topology file (remote-access.yaml): derived site, the outside
switch's ports, the clients, the configs the owners' loaders accept, and bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from supergw_gateway.ra.config import cluster_conflicts, cluster_spi_plan
from topologies.configs import Secrets, controller_config, validate_with_owners, write_all
from topologies.model import TopologyError
from topologies.network import outside_interfaces, switch_interfaces
from topologies.paths import SitePaths
from topologies.raclients import client_configs
from topologies.schema import REMOTE_ACCESS_TOPOLOGY, load
from topologies.tests.topofiles import changed_topology


def _write(tmp_path: Path, **changes: Any) -> Path:
    return changed_topology(REMOTE_ACCESS_TOPOLOGY, tmp_path, **changes)


def test_the_file_derives_one_site_with_an_outside_switch_and_clients() -> None:
    topo = load(REMOTE_ACCESS_TOPOLOGY).single
    ra = topo.remote_access
    assert ra is not None and ra.clients == 8 and len(topo.gateways) == 3
    assert outside_interfaces(topo) == {1: "o-up", 11: "o-gw1", 12: "o-gw2", 13: "o-gw3"}
    assert set(switch_interfaces(topo).values()) == {"sw-h1", "sw-h2", "sw-gw1", "sw-gw2", "sw-gw3"}
    names = topo.namespaces()
    assert {"sgw-ra-osw", "sgw-ra-cnet", "sgw-ra-rw1", "sgw-ra-rw8"} <= set(names) and len(set(names)) == len(names)
    assert [str(ra.pool(k)) for k in range(3)] == ["10.90.0.0/24", "10.90.1.0/24", "10.90.2.0/24"]
    assert str(ra.client_ip(1)) == "100.64.0.11" and topo.outside_p4runtime_addr == "10.255.70.3:9559"
    assert len({topo.wan_mac(g) for g in topo.gateways} | {g.mac for g in topo.gateways}) == 6


def test_sizes_from_changes_and_the_command_line(tmp_path: Path) -> None:
    topo = load(REMOTE_ACCESS_TOPOLOGY, changes={"gateways": 4, "clients": 64}).single
    assert len(topo.gateways) == 4 and topo.remote_access is not None and topo.remote_access.clients == 64
    assert topo.ns("rw64") in topo.namespaces()
    one = load(REMOTE_ACCESS_TOPOLOGY, changes={"gateways": 1, "clients": 0}).single
    assert [g.name for g in one.gateways] == ["gw1"] and one.remote.hosts[0].via == "peer1"


@pytest.mark.parametrize("changes, needle", [
    ({"gateways": 5}, "gateways"),
    ({"clients": 2000}, "clients"),
    ({"clients": -1}, "clients"),
    ({"remote_access": {"public_ip": "10.70.0.9"}}, "remote_access"),
    ({"kind": "remote-acces"}, "kind"),
])
def test_bad_files_name_the_key(tmp_path: Path, changes: dict[str, Any], needle: str) -> None:
    with pytest.raises(TopologyError, match=needle):
        load(_write(tmp_path, **changes))


@pytest.mark.parametrize("ra_change, needle", [
    ({"public_ip": "10.70.0.9"}, "public_ip"),
    ({"client_subnet": "10.70.0.0/16"}, "client_subnet"),
    ({"pools": "10.90.0.0/25"}, "pools"),
    ({"router_wan_ip": "198.51.100.11"}, "router_wan_ip"),
    ({"outside": {"device_id": 701, "mgmt_ip": "10.255.70.2"}}, "outside.mgmt_ip"),
    ({"clients": 3}, "top-level key"),
])
def test_bad_remote_access_sections_are_refused(tmp_path: Path, ra_change: dict[str, Any], needle: str) -> None:
    ra = yaml.safe_load(REMOTE_ACCESS_TOPOLOGY.read_text())["remote_access"] | ra_change
    with pytest.raises(TopologyError, match=needle):
        load(_write(tmp_path, remote_access=ra))


def test_configs_pass_the_owners_loaders(tmp_path: Path) -> None:
    topo = load(REMOTE_ACCESS_TOPOLOGY, changes={"gateways": 2, "clients": 3}).single
    paths = SitePaths(tmp_path, tmp_path / "logs")
    gen = write_all(topo, paths, Secrets.fresh(24))
    assert validate_with_owners(gen) == []
    ctl = controller_config(topo, paths)
    assert ctl["remote_access"]["uplinks"] == [1]
    assert ctl["remote_access"]["gateways"] == {g.name: {"port": g.port, "mac": topo.wan_mac(g)} for g in topo.gateways}
    gws = [yaml.safe_load(gen.gateways[g.name].read_text()) for g in topo.gateways]
    assert [g["remote_access"]["pool"] for g in gws] == ["10.90.0.0/24", "10.90.1.0/24"]
    assert [g["remote_access"]["spi"] for g in gws] == [cluster_spi_plan(k).model_dump() for k in range(2)]
    assert cluster_conflicts({f"g{k}": cluster_spi_plan(k) for k in range(2)}) == []
    assert all(g["routes"] == [{"destination": "100.64.0.0/16", "via": "198.51.100.2"}] for g in gws)
    clients = client_configs(topo, paths)
    assert [c.name for c in clients] == ["rw1", "rw2", "rw3"]
    assert all(c.cert.is_file() and c.key.is_file() and str(c.server) == "203.0.113.1" for c in clients)
    assert len({c.identity for c in clients}) == 3


def test_remote_access_on_uml_gateways_is_refused_with_the_reason() -> None:
    topo = load(REMOTE_ACCESS_TOPOLOGY).single
    data = topo.model_dump(mode="json") | {"gateway_backend": "uml"}
    from topologies.model import Topology

    with pytest.raises(ValueError, match="remote access does not run on UML gateways"):
        Topology.model_validate(data)
