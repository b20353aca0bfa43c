"""Failures are clear: wrong PSK, a proposal strongSwan rejects, a broken config file."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from supergw_gateway.config import Backend
from supergw_gateway.errors import TunnelError
from supergw_gateway.tunnel import conn_name
from tests.integration.conftest import require_root_strongswan

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fl(lab_factory: Any) -> Any:
    require_root_strongswan()
    return lab_factory("fl", Backend.LIBIPSEC, b={"auth": {"method": "psk", "psk": "a-different-secret-xyz"}},
                       a={"initiate": False})


def test_wrong_psk_fails_with_clear_message(fl: Any) -> None:
    gw = fl.gws["a"]
    with gw.vici() as v, pytest.raises(TunnelError) as ei:
        v.initiate(conn_name(gw.cfg), None, timeout_ms=10000)
    msg = str(ei.value)
    assert "authentication failed" in msg and "pre-shared key" in msg


def test_rejected_proposal_is_clear(fl: Any) -> None:
    from supergw_gateway.config import parse_config
    from supergw_gateway.runtime import Gateway

    d = fl.lab.config_dict("a", initiate=False, proposals={"esp": ["aes999gcm16-x25519"]})
    with pytest.raises(TunnelError, match="strongSwan rejected load-conn"):
        Gateway(parse_config(d)).apply_tunnel()


def test_cli_bad_config_file(tmp_path: Any) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("name: gw\nbackend: warp-drive\n")
    p = subprocess.run([sys.executable, "-m", "supergw_gateway.cli", "up", "-c", str(f)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert "invalid gateway config" in p.stderr and "backend" in p.stderr


def test_missing_namespace_is_clear(fl: Any) -> None:
    from supergw_gateway.config import parse_config
    from supergw_gateway.errors import GatewayError
    from supergw_gateway.runtime import Gateway

    d = fl.lab.config_dict("a", name="fl-ghost", namespace="sgw-gw-fl-ghost")
    with pytest.raises(GatewayError, match="namespace sgw-gw-fl-ghost does not exist"):
        Gateway(parse_config(d)).up()
