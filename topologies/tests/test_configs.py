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
