"""The example site (the guide's files, the deploy test's configs), the netns helper's
checks, and the deploy test's parsers: all without a machine."""

from __future__ import annotations

import importlib.util
import string
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from sgwdeploy import image, lab
from sgwdeploy.host import DeployError
from supergw_controller.config import parse_config as parse_controller_config
from supergw_gateway.config import parse_config

PACKAGING = Path(__file__).resolve().parent.parent
SITE = PACKAGING / "example-site"


def _netns_helper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gateway_netns", PACKAGING / "libexec/gateway_netns.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gateway_netns"] = mod
    spec.loader.exec_module(mod)
    return mod


netns = _netns_helper()


def gateway_file(name: str, tmp_path: Path) -> dict[str, Any]:
    """An example gateway config with its secrets filled in and its token file under tmp_path."""
    text = string.Template((SITE / f"{name}.yaml").read_text()).substitute(PSK_1="x" * 24, PSK_2="y" * 24)
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    if "controller" in data:
        token = tmp_path / f"{name}.token"
        token.write_text("t" * 32 + "\n")
        data["controller"]["token_file"] = str(token)
    return data


@pytest.mark.parametrize("name", ["gw1", "gw2", "peer1", "peer2"])
def test_example_gateway_configs_validate_and_suit_the_units(name: str, tmp_path: Path) -> None:
    cfg = parse_config(gateway_file(name, tmp_path), name)
    assert netns.problems(cfg, name) == []
    assert (cfg.controller is not None) == name.startswith("gw")


def test_the_example_controller_config_validates_with_the_packaged_p4info(tmp_path: Path) -> None:
    """The controller.yaml the guide shows and the deploy test installs, as this tree's
    controller reads it (token files under tmp_path, the P4Info the package ships)."""
    data = lab.controller_config()
    assert data["pipeline"]["p4info"] == "/usr/share/supergw/supergw.p4info.txtpb"
    data["pipeline"]["p4info"] = str(PACKAGING.parent / "p4src/v1model/supergw.p4info.txtpb")

    def token(path: str) -> str:
        f = tmp_path / Path(path).name
        f.write_text(f"secret-of-{f.stem}-" + "s" * 24 + "\n")  # each different, as the controller demands
        return str(f)

    for t in data["api"]["tokens"]:
        t["token_file"] = token(t["token_file"])
    for g in data["gateways"]:
        g["agent_token_file"] = token(g["agent_token_file"])
    cfg = parse_controller_config(data, tmp_path, "controller.yaml")
    assert {g.name for g in cfg.gateways} == set(lab.GATEWAYS)


def test_the_netns_helper_names_every_mismatch(tmp_path: Path) -> None:
    data = gateway_file("gw1", tmp_path)
    data["namespace"] = "other"
    data["state_dir"] = str(tmp_path)
    problems = netns.problems(parse_config(data, "x"), "gw2")
    assert len(problems) == 3
    assert "the file's gateway is 'gw1', the unit instance is 'gw2'" in problems[0]
    assert "namespace 'other': the packaged units use 'sgw-gw-gw2'" in problems[1]
    assert "leave `state_dir:` out of the file" in problems[2]
    assert netns.main(["bogus"]) == 2


def test_the_site_cabling_agrees_with_the_guide_files() -> None:
    ports = lab.switch_ports()
    ctl = lab.controller_config()
    assert set(ports) == set(ctl["ports"]), "switch.env and controller.yaml number different ports"
    for port, role in ctl["ports"].items():
        assert (role == "host") == (port in {p for p, _ in lab.LAN_HOSTS.values()}), port
    assert [g["name"] for g in ctl["gateways"]] == list(lab.GATEWAYS)
    for g in ctl["gateways"]:
        assert ctl["ports"][g["port"]] == "gateway"
        gw = yaml.safe_load((SITE / f"{g['name']}.yaml").read_text())
        assert gw["controller"]["url"] == "http://" + lab.MGMT["ctl"].split("/")[0] + ":" + ctl["api"]["listen"].split(":")[1]
    assert ctl["switch"]["address"].split(":")[0] == lab.MGMT["sw"].split("/")[0]
    env = (SITE / "switch.env").read_text()
    assert f"--grpc-server-addr {ctl['switch']['address']}" in env and f"--device-id {ctl['switch']['device_id']}" in env


def test_debian_mirror_from_either_sources_format(tmp_path: Path) -> None:
    (tmp_path / "debian.sources").write_text(
        "Types: deb\nURIs: http://security.debian.org/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n")
    assert image.debian_mirror((tmp_path / "none", tmp_path)) == "http://mirror.example/debian"
    one = tmp_path / "sources.list"
    one.write_text("# x\ndeb [arch=amd64] http://other.example/debian bookworm main\n")
    assert image.debian_mirror((one,)) == "http://other.example/debian"
    one.write_text("deb http://other.example/debian trixie main\n")
    with pytest.raises(DeployError, match="no Debian bookworm mirror"):
        image.debian_mirror((one,))


PING = """PING 10.71.0.12 (10.71.0.12) 56(84) bytes of data.
64 bytes from 10.71.0.12: icmp_seq=1 ttl=62 time=0.5 ms
64 bytes from 10.71.0.12: icmp_seq=2 ttl=62 time=0.5 ms
64 bytes from 10.71.0.12: icmp_seq=7 ttl=62 time=0.5 ms
64 bytes from 10.71.0.12: icmp_seq=8 ttl=62 time=0.5 ms

--- 10.71.0.12 ping statistics ---
8 packets transmitted, 4 received, 50% packet loss, time 350ms
"""


def test_ping_results_count_losses_and_the_longest_gap() -> None:
    r = lab.PingResult.parse(PING, 0.05)
    assert (r.sent, r.received, r.lost) == (8, 4, 4)
    assert r.longest_gap_s == pytest.approx(0.25)
    with pytest.raises(DeployError, match="no summary"):
        lab.PingResult.parse("ping: connect: Network is unreachable\n", 0.05)
