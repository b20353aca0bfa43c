"""The real CLI rejects bad config files with a message naming the key (no switch needed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from sgwctl_topo import python
from topologies.paths import P4INFO

GOOD = {
    "switch": {"address": "127.0.0.1:50799", "device_id": 799},
    "pipeline": {"p4info": str(P4INFO)},
    "gateway_ip": "10.0.0.1",
    "buckets": 16,
    "vmac_base": "02:5e:00:00:00:00",
    "ports": {1: "host", 11: "gateway"},
    "gateways": [{"name": "g1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token": "cli-test-agent-g1-token"}],
    "api": {"listen": "127.0.0.1:18799", "token": "cli-test-token"},
}


def run_cli(tmp_path: Path, data: object, *extra: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return subprocess.run(
        [python(), "-m", "supergw_controller.cli", "--config", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_good_config_checks_ok(tmp_path: Path) -> None:
    if not P4INFO.exists():
        pytest.skip(f"{P4INFO} missing")
    r = run_cli(tmp_path, GOOD, "--check")
    assert r.returncode == 0, r.stderr
    assert "OK (1 gateways, 16 buckets)" in r.stdout


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gateways": [{"name": "g1", "port": 1, "mac": "52:54:00:00:01:01"}]}, "gateways[0].port: must be a port listed in ports with role 'gateway'"),
        ({"buckets": 24}, "buckets: 24 is not a power of two"),
        ({"vmac_base": "02:5e:00:00:00:01"}, "vmac_base: 02:5e:00:00:00:01 must have its low 16 bits zero"),
        ({"api": {"listen": "127.0.0.1:18799"}}, "api: no operator token"),
        ({"pipeline": {"p4info": "/nonexistent/p4info.txtpb"}}, "pipeline.p4info: file not found"),
        ({"timming": {}}, "timming: unknown key"),
    ],
)
def test_bad_config_is_rejected_with_the_key(tmp_path: Path, change: dict[str, object], message: str) -> None:
    r = run_cli(tmp_path, {**GOOD, **change})
    assert r.returncode == 2
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_not_yaml_and_missing_file(tmp_path: Path) -> None:
    r = run_cli(tmp_path, "switch: [oops\n")
    assert r.returncode == 2 and "not valid YAML" in r.stderr
    r = subprocess.run(
        [python(), "-m", "supergw_controller.cli", "--config", str(tmp_path / "none.yaml")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "cannot read config" in r.stderr


def test_busy_api_port_is_a_clear_error(tmp_path: Path) -> None:
    import socket

    if not P4INFO.exists():
        pytest.skip(f"{P4INFO} missing")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 18798))
        s.listen(1)
        r = run_cli(tmp_path, {**GOOD, "api": {"listen": "127.0.0.1:18798", "token": "cli-test-token"}})
    assert r.returncode == 2
    assert "api.listen 127.0.0.1:18798: Address already in use" in r.stderr, r.stderr
