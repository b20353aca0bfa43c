"""The example site (the guide's files, the deploy test's configs), the netns helper's
checks, and the deploy test's parsers: all without a machine."""

from __future__ import annotations

import importlib.util
import string
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from sgwdeploy import image, lab
from sgwdeploy.host import DeployError
from supergw_controller.config import ConfigError
from supergw_controller.config import parse_config as parse_controller_config
from supergw_gateway.cli import main as gateway_cli
from supergw_gateway.config import parse_config
from supergw_gateway.errors import ConfigError as GatewayConfigError

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


def gateway_file(name: str, tmp_path: Path, certificates: bool = True) -> dict[str, Any]:
    """An example gateway config with its secrets filled in and its token file under tmp_path
    (and, with `certificates`, its CA file made by the guide's pki command)."""
    text = string.Template((SITE / f"{name}.yaml").read_text()).substitute(PSK_1="x" * 24, PSK_2="y" * 24)
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    if "controller" in data:
        token = tmp_path / f"{name}.token"
        token.write_text("t" * 32 + "\n")
        data["controller"]["token_file"] = str(token)
        if certificates:
            data["controller"]["ca_file"] = str(issued(tmp_path, data["controller"]["ca_file"]))
    return data


def issued(tmp_path: Path, path: str) -> Path:
    """Where the guide's `supergw-gateway pki` command (lab.PKI_COMMAND, run into tmp_path)
    put the file the example configs read as `path` in /etc/supergw/tls."""
    out = tmp_path / "pki"
    if not (out / "ca.crt").exists():
        assert lab.PKI_COMMAND[:4] == ("supergw-gateway", "pki", "--out", lab.PKI_DIR)
        assert gateway_cli(["pki", "--out", str(out), *lab.PKI_COMMAND[4:]]) == 0
    dirname, _, name = path.rpartition("/")
    assert dirname == lab.TLS_DIR and (out / name).is_file(), f"{path}: the guide's pki command makes no {name}"
    return out / name


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
    # Secure by default: REST over https, P4Runtime over mutual TLS. Without the files
    # (a fresh box) the controller names each and the pki command that makes it.
    with pytest.raises(ConfigError) as e:
        parse_controller_config(data, tmp_path, "controller.yaml")
    assert "api.tls.cert: file not found: /etc/supergw/tls/rest-ctl.crt: make it with " \
           "`supergw-gateway pki --out DIR --server rest-ctl=ADDRESS[,NAME]`" in str(e.value)
    assert "switch.tls.key: file not found: /etc/supergw/tls/p4rt-controller.key: make it with " \
           "`supergw-gateway pki --out DIR --client p4rt-controller`" in str(e.value)
    assert "switch.tls.cacert: file not found: /etc/supergw/tls/ca.crt: copy there the ca.crt" in str(e.value)
    for section in (data["api"]["tls"], data["switch"]["tls"]):
        for key, path in section.items():
            section[key] = str(issued(tmp_path, path))
    cfg = parse_controller_config(data, tmp_path, "controller.yaml")
    assert {g.name for g in cfg.gateways} == set(lab.GATEWAYS)
    assert cfg.api.ops_token_required  # secure by default: /metrics and /healthz need a token
    assert cfg.api.tls is not None and cfg.switch.tls is not None and cfg.switch.tls.cert is not None
    # The REST certificate the guide issues names the addresses the agents and supergwctl use.
    rest = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", str(cfg.api.tls.cert)],
                          capture_output=True, text=True, check=True).stdout
    assert f"IP Address:{lab.MGMT['ctl'].split('/')[0]}" in rest and "IP Address:127.0.0.1" in rest


def test_a_gateway_without_its_ca_file_names_it_and_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(GatewayConfigError, match="controller: ca_file: file not found: /etc/supergw/tls/ca.crt: "
                       r"copy there the ca.crt of the site's CA \(`supergw-gateway pki --out DIR"):
        parse_config(gateway_file("gw1", tmp_path, certificates=False), "gw1")


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
        assert gw["controller"]["url"] == "https://" + lab.MGMT["ctl"].split("/")[0] + ":" + ctl["api"]["listen"].split(":")[1]
        assert gw["controller"]["ca_file"] == ctl["switch"]["tls"]["cacert"] == f"{lab.TLS_DIR}/ca.crt"
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
