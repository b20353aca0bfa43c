from __future__ import annotations

from pathlib import Path
from typing import Any

from supergw_gateway.config import parse_config
from supergw_gateway.tunnel import build_conn, build_shared, child_name, conn_name


def test_psk_conn(gw_dict: dict[str, Any]) -> None:
    cfg = parse_config(gw_dict)
    conn = build_conn(cfg)[conn_name(cfg)]
    assert conn["proposals"] == ["aes128gcm16-prfsha256-x25519"]
    child = conn["children"][child_name(cfg)]
    assert child["esp_proposals"] == ["aes128gcm16-x25519"]
    assert child["local_ts"] == ["10.1.0.0/24"] and child["remote_ts"] == ["10.2.0.0/24"]
    assert child["start_action"] == "none"  # libipsec cannot trap
    assert conn["dpd_delay"] == "10s" and child["dpd_action"] == "restart"
    assert conn["local-1"] == {"auth": "psk", "id": "192.0.2.1"}
    shared = build_shared(cfg)
    assert shared is not None and shared["data"] == "0123456789abcdef"
    assert shared["owners"] == ["192.0.2.1", "192.0.2.2"]


def test_x509_conn(gw_dict: dict[str, Any], tmp_path: Path) -> None:
    for n in ("ca.crt", "gw.crt", "gw.key"):
        (tmp_path / n).write_text(f"PEM {n}")
    gw_dict["auth"] = {"method": "x509", "cacert": str(tmp_path / "ca.crt"), "cert": str(tmp_path / "gw.crt"),
                       "key": str(tmp_path / "gw.key")}
    gw_dict["local"]["id"] = "gw1.example"
    gw_dict["proposals"] = {"ike": ["aes256gcm16-prfsha384-ecp384"], "esp": ["aes256gcm16"]}
    cfg = parse_config(gw_dict)
    conn = build_conn(cfg)[conn_name(cfg)]
    assert conn["local-1"]["auth"] == "pubkey" and conn["local-1"]["certs"] == [b"PEM gw.crt"]
    assert conn["remote-1"]["cacerts"] == [b"PEM ca.crt"]
    assert conn["proposals"] == ["aes256gcm16-prfsha384-ecp384"]
    assert build_shared(cfg) is None
