from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supergw_gateway.cli import main
from supergw_gateway.config import DEFAULT_ESP_PROPOSAL, DEFAULT_IKE_PROPOSAL, Backend, load_config, parse_config
from supergw_gateway.errors import ConfigError
from tests.conftest import with_value


def test_valid_defaults(gw_dict: dict[str, Any]) -> None:
    cfg = parse_config(gw_dict)
    assert cfg.backend is Backend.AUTO
    assert cfg.proposals.ike == [DEFAULT_IKE_PROPOSAL] and cfg.proposals.esp == [DEFAULT_ESP_PROPOSAL]
    assert cfg.netns == "sgw-gw-gw1"
    assert cfg.local_id == "192.0.2.1"
    assert cfg.dpd.action == "restart" and cfg.rekey.child_rekey_s == 3600


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (("name",), "Bad Name", "invalid gateway name"),
        (("backend",), "dpdk", "backend"),
        (("auth", "psk"), "short", "psk"),
        (("auth",), {"method": "rsa"}, "auth"),
        (("proposals",), {"esp": ["AES128!"]}, "invalid proposal"),
        (("remote", "subnets"), ["10.1.0.128/25"], "overlaps"),
        (("remote", "address"), "192.0.2.1", "must differ"),
        (("local", "address"), "192.0.2.9", "must be the wan interface address"),
        (("interfaces",), [{"role": "lan", "device": "lan0", "address": "10.1.0.1/24"}], "exactly one interface"),
        (("interfaces", 0, "device"), "this-name-is-far-too-long", "invalid interface name"),
        (("controller",), {"url": "ftp://x"}, "controller.url"),
        (("cpu_quota_percent",), 0, "cpu_quota_percent"),
        (("surprise",), 1, "surprise"),
    ],
)
def test_bad_config_is_a_clear_error(gw_dict: dict[str, Any], path: tuple[Any, ...], value: Any, needle: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(with_value(gw_dict, path, value), "t.yaml")
    assert needle in str(ei.value)
    assert str(ei.value).startswith("t.yaml: invalid gateway config")


def test_x509_files_must_exist(gw_dict: dict[str, Any], tmp_path: Path) -> None:
    gw_dict["auth"] = {"method": "x509", "cacert": str(tmp_path / "ca.crt"), "cert": "/nope", "key": "/nope"}
    with pytest.raises(ConfigError, match="does not exist"):
        parse_config(gw_dict)


def test_load_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read gateway config"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(bad)


def test_cli_reports_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "gw.yaml"
    f.write_text("name: gw1\ninterfaces: []\n")
    assert main(["validate", "-c", str(f)]) == 2
    err = capsys.readouterr().err
    assert "supergw-gateway: error:" in err and "interfaces" in err


def test_controller_secret_per_endpoint(gw_dict: dict[str, Any], tmp_path: Path) -> None:
    """One secret for every controller, or each controller (replica) with its own; files or inline."""
    (tmp_path / "a.token").write_text("secret-of-gw-at-a-0123\n")
    gw_dict["controller"] = {
        "token": "shared-secret-0123456789",
        "urls": [
            "http://10.0.0.1:8700",
            {"url": "http://10.0.0.2:8700", "token_file": str(tmp_path / "a.token")},
            {"url": "http://10.0.0.3:8700", "token": "inline-secret-0123456789"},
        ],
    }
    ctl = parse_config(gw_dict).controller
    assert ctl is not None
    assert ctl.endpoints == ["http://10.0.0.1:8700", "http://10.0.0.2:8700", "http://10.0.0.3:8700"]
    assert [ctl.secret(u) for u in ctl.endpoints] == [
        "shared-secret-0123456789", "secret-of-gw-at-a-0123", "inline-secret-0123456789",
    ]
    assert "secret-0123456789" not in repr(ctl)  # secrets stay out of logs and tracebacks


@pytest.mark.parametrize(
    ("controller", "needle"),
    [
        ({"url": "http://c:1", "token": "short"}, "controller.token: Value should have at least 8"),
        ({"url": "http://c:1", "token": "long-enough-1", "token_file": "/x"}, "give at most one of `token` or `token_file`"),
        ({"url": "http://c:1", "token_file": "/nonexistent/agent.token"}, "token_file: cannot read /nonexistent/agent.token"),
        ({"urls": [{"url": "http://c:1", "token_file": "/nonexistent/t"}]}, "token_file: cannot read /nonexistent/t"),
        ({"url": "http://c:1", "ca_file": "/nonexistent/ca.pem"}, "ca_file: file not found: /nonexistent/ca.pem: copy there the ca.crt"),
    ],
)
def test_bad_controller_secret_is_a_clear_error(gw_dict: dict[str, Any], controller: dict[str, Any], needle: str) -> None:
    gw_dict["controller"] = controller
    with pytest.raises(ConfigError) as ei:
        parse_config(gw_dict)
    assert needle in str(ei.value)


def test_empty_token_file_is_a_clear_error(gw_dict: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "empty.token").write_text("\n")
    gw_dict["controller"] = {"url": "http://c:1", "token_file": str(tmp_path / "empty.token")}
    with pytest.raises(ConfigError, match="is empty"):
        parse_config(gw_dict)
