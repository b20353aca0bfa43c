"""`esp_proposals` in a two-site file reaches every gateway's config; a bad one is refused by the gateway's loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from topologies.configs import Secrets, validate_with_owners, write_all
from topologies.model import TopologyError
from topologies.twosite import TWO_SITE_TOPOLOGY, load_two_site


def _two_site(tmp_path: Path, proposals: object) -> Path:
    data = yaml.safe_load(TWO_SITE_TOPOLOGY.read_text())
    data["esp_proposals"] = proposals
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_proposals_reach_both_sites_gateways(tmp_path: Path) -> None:
    _, sites = load_two_site(_two_site(tmp_path, ["aes128-sha256-x25519"]))
    for topo in sites:
        gen = write_all(topo, tmp_path / topo.prefix, Secrets.fresh(24))
        assert validate_with_owners(gen) == []
        for path in gen.gateways.values():
            assert yaml.safe_load(path.read_text())["proposals"] == {"esp": ["aes128-sha256-x25519"]}


def test_without_proposals_the_gateway_default_applies(tmp_path: Path) -> None:
    _, sites = load_two_site()
    gen = write_all(sites[0], tmp_path, Secrets.fresh(24))
    assert all("proposals" not in yaml.safe_load(p.read_text()) for p in gen.gateways.values())


def test_bad_proposals_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="esp_proposals"):
        load_two_site(_two_site(tmp_path, []))
    _, sites = load_two_site(_two_site(tmp_path, ["AES 128!"]))
    gen = write_all(sites[0], tmp_path, Secrets.fresh(24))
    assert any("invalid proposal" in problem for problem in validate_with_owners(gen))
