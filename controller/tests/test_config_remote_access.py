"""The `remote_access` section: a valid one loads (paths resolved, the outside session's
view derived), and every kind of bad one is refused naming the key."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest

from supergw_controller.config import ConfigError
from test_config import bad, base, load
from test_config import cfgdir as cfgdir  # the fixture


def ra() -> dict[str, Any]:
    return {
        "public_ip": "203.0.113.1",
        "public_mac": "02:50:00:00:00:01",
        "switch": {"address": "127.0.0.1:50701", "device_id": 701},
        "uplinks": [1],
        "gateways": {"gw1": {"port": 11, "mac": "52:54:00:00:02:01"}, "gw2": {"port": 12, "mac": "52:54:00:00:02:02"}},
    }


def with_ra(**over: Any) -> dict[str, Any]:
    data = base()
    section = ra()
    section.update(over)
    data["remote_access"] = section
    return data


def test_valid_section_and_the_outside_sessions_view(cfgdir: Path) -> None:
    cfg = load(cfgdir, with_ra())
    assert cfg.remote_access is not None
    assert cfg.remote_access.public_ip == ipaddress.IPv4Address("203.0.113.1")
    assert cfg.remote_access.pins is True
    assert cfg.remote_access.takeover is True  # on by default: inert until agents report replication
    assert load(cfgdir, with_ra(takeover=False)).remote_access.takeover is False  # type: ignore[union-attr]
    out = cfg.outside_switch()
    assert (out.switch.address, out.switch.device_id) == ("127.0.0.1:50701", 701)
    assert out.pipeline == cfg.pipeline  # the same program by default
    assert cfg.switch.device_id == 700  # the LAN's view is unchanged


def test_without_section_there_is_no_outside(cfgdir: Path) -> None:
    cfg = load(cfgdir, base())
    assert cfg.remote_access is None
    with pytest.raises(ValueError, match="no remote_access"):
        cfg.outside_switch()


def test_own_pipeline_resolved_and_checked(cfgdir: Path) -> None:
    (cfgdir / "out.txtpb").write_text("# p4info\n")
    cfg = load(cfgdir, with_ra(pipeline={"p4info": "out.txtpb"}))
    assert cfg.outside_switch().pipeline.p4info == cfgdir / "out.txtpb"
    msg = bad(cfgdir, with_ra(pipeline={"p4info": "nope.txtpb"}))
    assert "remote_access.pipeline.p4info: file not found" in msg


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"gateways": {"gw1": {"port": 11, "mac": "52:54:00:00:02:01"}}}, "no outside port for ['gw2']"),
        (
            {"gateways": {**ra()["gateways"], "gw9": {"port": 13, "mac": "52:54:00:00:02:09"}}},
            "['gw9'] are not in gateways",
        ),
        ({"uplinks": [11]}, "port 11 is already an uplink"),
        ({"uplinks": [1, 1]}, "port 1 listed twice"),
        ({"uplinks": []}, "uplinks"),
        (
            {"gateways": {"gw1": {"port": 11, "mac": "52:54:00:00:02:01"}, "gw2": {"port": 12, "mac": "52:54:00:00:02:01"}}},
            "is also gw1's",
        ),
        ({"public_mac": "03:50:00:00:00:01"}, "multicast"),
        ({"public_ip": "0.0.0.0"}, "cannot be a public address"),
        ({"public_ip": "10.0.0.1"}, "is also gateway_ip"),
        ({"switch": {"address": "127.0.0.1:50700", "device_id": 700}}, "the outside is another device"),
        ({"switch": {"address": "nohost", "device_id": 1}}, "host:port"),
        ({"extra": 1}, "extra"),
        ({"takeover": "maybe"}, "remote_access.takeover"),
        ({"takeover": None}, "remote_access.takeover"),
    ],
)
def test_bad_sections_are_refused_naming_the_key(cfgdir: Path, over: dict[str, Any], says: str) -> None:
    msg = bad(cfgdir, with_ra(**over))
    assert says in msg, msg
    assert "remote_access" in msg


def test_not_with_ha(cfgdir: Path) -> None:
    data = with_ra()
    data["ha"] = {"replica": "a"}
    data["store"] = {"backend": "etcd", "etcd": {"endpoints": ["127.0.0.1:2379"]}}
    assert "not supported with ha" in bad(cfgdir, data)


def test_error_type(cfgdir: Path) -> None:
    with pytest.raises(ConfigError):
        load(cfgdir, with_ra(uplinks="x"))
