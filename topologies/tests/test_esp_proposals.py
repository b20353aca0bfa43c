"""`esp_proposals` in a two-site file reaches every gateway's config; a bad one is refused by the gateway's loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from topologies.configs import Secrets, validate_with_owners, write_all
from topologies.model import Topology, TopologyError
from topologies.paths import SitePaths
from topologies.schema import TWO_SITE_TOPOLOGY, load


def sites(path: Path = TWO_SITE_TOPOLOGY) -> list[Topology]:
    return load(path).sites


def paths(root: Path) -> SitePaths:
    return SitePaths(root, root / "logs")


def _two_site(tmp_path: Path, proposals: object) -> Path:
    data = yaml.safe_load(TWO_SITE_TOPOLOGY.read_text())
    data["esp_proposals"] = proposals
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_proposals_reach_both_sites_gateways(tmp_path: Path) -> None:
    for topo in sites(_two_site(tmp_path, ["aes128-sha256-x25519"])):
        gen = write_all(topo, paths(tmp_path / topo.prefix), Secrets.fresh(24))
        assert validate_with_owners(gen) == []
        for path in gen.gateways.values():
            assert yaml.safe_load(path.read_text())["proposals"] == {"esp": ["aes128-sha256-x25519"]}


def test_without_proposals_the_gateway_default_applies(tmp_path: Path) -> None:
    gen = write_all(sites()[0], paths(tmp_path), Secrets.fresh(24))
    assert all("proposals" not in yaml.safe_load(p.read_text()) for p in gen.gateways.values())


def test_bad_proposals_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="esp_proposals"):
        sites(_two_site(tmp_path, []))
    gen = write_all(sites(_two_site(tmp_path, ["AES 128!"]))[0], paths(tmp_path), Secrets.fresh(24))
    assert any("invalid proposal" in problem for problem in validate_with_owners(gen))
