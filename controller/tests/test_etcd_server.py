"""The test etcd itself: starts healthy, keeps its data across a crash, says why it failed."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path

import pytest

from etcd_server import EtcdServer, EtcdStartError, etcd_binary


def _kv(server: EtcdServer, op: str, body: dict[str, str]) -> dict[str, object]:
    """etcd's v3 JSON gateway, so this test needs nothing but etcd itself."""
    req = urllib.request.Request(f"{server.url}/v3/kv/{op}", data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=2) as resp:
        out: dict[str, object] = json.loads(resp.read())
        return out


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def test_data_survives_kill_and_restart(etcd_server: EtcdServer) -> None:
    assert etcd_server.endpoint == f"127.0.0.1:{etcd_server.port}"
    _kv(etcd_server, "put", {"key": _b64("/t/a"), "value": _b64("1")})
    etcd_server.kill()
    assert not etcd_server.running
    etcd_server.start()
    kvs = _kv(etcd_server, "range", {"key": _b64("/t/a")})["kvs"]
    assert isinstance(kvs, list) and base64.b64decode(kvs[0]["value"]) == b"1"


def test_start_failure_names_the_log(tmp_path: Path) -> None:
    if etcd_binary() is None:
        pytest.skip("etcd is not installed")
    first = EtcdServer(tmp_path / "a")
    first.start()
    try:
        clash = EtcdServer(tmp_path / "b", start_timeout_s=5)
        clash.port = first.port  # the client port is taken: etcd exits at once
        with pytest.raises(EtcdStartError, match="address already in use"):
            clash.start()
    finally:
        first.cleanup()
