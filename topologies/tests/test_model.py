"""The topology file: the default loads, bad files get a clear error naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from topologies.model import DEFAULT_TOPOLOGY, Topology, TopologyError
from topologies.network import switch_interfaces
from topologies.schema import load


def load_topology(path: Path = DEFAULT_TOPOLOGY) -> Topology:
    return load(path).single


def _default() -> dict[str, Any]:
    data = yaml.safe_load(DEFAULT_TOPOLOGY.read_text())
    assert isinstance(data, dict)
    return data


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "topo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_default_topology_loads() -> None:
    topo = load_topology()
    assert 2 <= len(topo.gateways) <= 3
    assert all(ns.startswith("sgw-emu-") for ns in topo.namespaces())
    assert len(set(topo.namespaces())) == len(topo.namespaces())
    ports = switch_interfaces(topo)
    assert set(ports) == {h.port for h in topo.hosts} | {g.port for g in topo.gateways}
    assert all(len(name) <= 15 for name in ports.values())
    assert len(topo.mgmt_root_if) <= 15


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["hosts"][1].update(port=d["hosts"][0]["port"]), "switch ports used twice"),
        (lambda d: d["hosts"][0].update(mac="01:00:00:00:00:01"), "multicast"),
        (lambda d: d["hosts"][0].update(mac="nonsense"), "not a MAC address"),
        (lambda d: d["lan"].update(gateway_ip="192.168.1.1"), "outside subnet"),
        (lambda d: d["lan"].update(buckets=100), "not a power of two"),
        (lambda d: d["remote"]["hosts"][0].update(via="nobody"), "is not a peer gateway"),
        (lambda d: d["hosts"][0].update(name="Bad_Name"), "lowercase"),
        (lambda d: d.update(prefix="this-prefix-is-too-long"), "prefix"),
        (lambda d: d.update(colour="blue"), "colour"),
        (lambda d: d["hosts"][1].update(name="sw"), "reserved"),
        (lambda d: d["switch"].update(device_id=-1), "device_id"),
        (lambda d: d["gateways"][0].update(port=255), "CPU port"),
    ],
)
def test_bad_topology_is_rejected(tmp_path: Path, mutate: Any, message: str) -> None:
    data = _default()
    mutate(data)
    with pytest.raises(TopologyError, match=message):
        load_topology(_write(tmp_path, data))


def test_kind_picks_the_form(tmp_path: Path) -> None:
    data = _default()
    assert load_topology(_write(tmp_path, {**data, "kind": "site"})) == load_topology()
    with pytest.raises(TopologyError, match="kind: 'three-site' is not a topology kind"):
        load(_write(tmp_path, {**data, "kind": "three-site"}))


def test_unreadable_and_non_mapping_files(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read"):
        load_topology(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [unclosed")
    with pytest.raises(TopologyError, match="not valid YAML"):
        load_topology(bad)
    with pytest.raises(TopologyError, match="mapping"):
        load_topology(_write(tmp_path, [1, 2]))


def test_cli_reports_a_bad_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from topologies.run import main

    data = _default()
    data["lan"]["buckets"] = 3
    assert main(["up", "--topology", str(_write(tmp_path, data))]) == 2
    assert "lan: buckets 3 is not a power of two" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda d: d["remote"].pop("subnet6"), "needs both lan.subnet6 and remote.subnet6"),
        (lambda d: d["lan"].update(subnet6="fd00:60::/56"), "must be a /64"),
        (lambda d: d["remote"].update(subnet6="fd00:60::/64"), "lan.subnet6 overlaps remote.subnet6"),
        (lambda d: d["lan"].update(gateway_ll="fd00::1"), "not link-local"),
    ],
)
def test_bad_dual_stack_topology_is_a_clear_error(change: Any, needle: str) -> None:
    data = load().single.model_dump(mode="json", exclude_none=True)
    change(data)
    with pytest.raises(ValueError, match=needle):
        Topology.model_validate(data)
