"""Rotating a token file takes effect without a restart; a bad file keeps the last good tokens.

The controller's config is read from token files in a scratch directory; the REST API (with
the in-memory core of test_api) is asked with the old and the new token after each change.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_api import P4INFO, FakeCore, report_body

from supergw_controller.api import API_PREFIX, create_app
from supergw_controller.config import ConfigError, parse_config

OLD_ADMIN = "old-admin-token-0123456789"
NEW_ADMIN = "new-admin-token-9876543210"
VIEWER = "viewer-token-0123456789abc"
OLD_AGENT = "old-agent-gw1-token-012345"
NEW_AGENT = "new-agent-gw1-token-543210"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def rotate(path: Path, secret: str) -> None:
    """How an operator rotates: write a new file, rename it over the old one (atomic)."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(secret + "\n")
    os.replace(tmp, path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {"admin": tmp_path / "admin.token", "viewer": tmp_path / "viewer.token", "gw1": tmp_path / "gw1.token"}
    for name, secret in (("admin", OLD_ADMIN), ("viewer", VIEWER), ("gw1", OLD_AGENT)):
        out[name].write_text(secret + "\n")
    return out


def config_data() -> dict[str, Any]:
    """gw1's agent and both operators read their tokens from the files of `files`."""
    return {
        "switch": {"address": "127.0.0.1:9559", "device_id": 1},
        "pipeline": {"p4info": str(P4INFO)},
        "gateway_ip": "10.0.0.1",
        "buckets": 64,
        "vmac_base": "02:5e:00:00:00:00",
        "ports": {1: "host", 11: "gateway", 12: "gateway"},
        "gateways": [
            {"name": "gw1", "port": 11, "mac": "02:00:00:00:01:01", "agent_token_file": "gw1.token"},
            {"name": "gw2", "port": 12, "mac": "02:00:00:00:01:02", "agent_token": "agent-gw2-token-0123456789"},
        ],
        "api": {
            "tokens": [
                {"name": "alice", "role": "admin", "token_file": "admin.token"},
                {"name": "viewer", "role": "read-only", "token_file": "viewer.token"},
            ]
        },
    }


@pytest.fixture
def client(files: dict[str, Path], tmp_path: Path) -> TestClient:
    cfg = parse_config(config_data(), tmp_path, "test")
    return TestClient(create_app(FakeCore(cfg), cfg))


def status(client: TestClient, token: str) -> int:
    return client.get(API_PREFIX + "/status", headers=bearer(token)).status_code


def report(client: TestClient, token: str) -> int:
    return client.post(API_PREFIX + "/gateways/gw1/report", json=report_body("gw1"), headers=bearer(token)).status_code


def test_rotated_operator_token_replaces_the_old_one(client: TestClient, files: dict[str, Path]) -> None:
    assert status(client, OLD_ADMIN) == 200
    rotate(files["admin"], NEW_ADMIN)
    assert status(client, NEW_ADMIN) == 200
    assert status(client, OLD_ADMIN) == 401
    assert status(client, VIEWER) == 200  # the unchanged files still count


def test_token_rewritten_in_place_is_read_again(client: TestClient, files: dict[str, Path]) -> None:
    assert status(client, OLD_ADMIN) == 200
    before = files["admin"].stat().st_mtime_ns
    files["admin"].write_text(NEW_ADMIN + "\n")  # same inode, same size
    # The kernel stamps mtime at its tick (a few ms); a rotation never follows a read that closely.
    os.utime(files["admin"], ns=(before + 10**9, before + 10**9))
    assert status(client, OLD_ADMIN) == 401
    assert status(client, NEW_ADMIN) == 200


def test_rotated_agent_token_and_its_bounded_overlap(files: dict[str, Path], tmp_path: Path) -> None:
    """The agent's copy of its token is rotated on another host, a little later: the previous
    token keeps working for heartbeats.key_overlap_s, then stops."""
    data = config_data() | {"heartbeats": {"key_overlap_s": 0.5}}
    cfg = parse_config(data, tmp_path, "test")
    client = TestClient(create_app(FakeCore(cfg), cfg))
    assert report(client, OLD_AGENT) == 204
    rotate(files["gw1"], NEW_AGENT)
    assert report(client, NEW_AGENT) == 204
    assert report(client, OLD_AGENT) == 204  # within the overlap
    assert status(client, OLD_AGENT) == 403  # still only gw1's agent token, never an operator's
    time.sleep(0.6)
    assert report(client, OLD_AGENT) == 401
    assert report(client, NEW_AGENT) == 204


def test_a_previous_agent_token_never_outlives_an_overlap_of_zero(files: dict[str, Path], tmp_path: Path) -> None:
    cfg = parse_config(config_data() | {"heartbeats": {"key_overlap_s": 0}}, tmp_path, "test")
    client = TestClient(create_app(FakeCore(cfg), cfg))
    assert report(client, OLD_AGENT) == 204
    rotate(files["gw1"], NEW_AGENT)
    assert report(client, OLD_AGENT) == 401
    assert report(client, NEW_AGENT) == 204


@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        ("missing", "api.tokens[0].token_file: cannot read"),
        ("directory", "api.tokens[0].token_file: cannot read"),
        ("short", "api.tokens[0].token_file: the secret in"),
        ("empty", "api.tokens[0].token_file: the secret in"),
        ("viewer's token", "api.tokens[1] (viewer): the same secret as api.tokens[0] (alice)"),
    ],
)
def test_bad_file_keeps_the_last_good_tokens(
    client: TestClient, files: dict[str, Path], caplog: pytest.LogCaptureFixture, breakage: str, reason: str
) -> None:
    caplog.set_level(logging.INFO, logger="supergw_controller.api.auth")
    path = files["admin"]
    path.unlink()
    if breakage == "directory":
        path.mkdir()
    elif breakage == "short":
        path.write_text("short\n")
    elif breakage == "empty":
        path.write_text("")
    elif breakage == "viewer's token":
        path.write_text(VIEWER + "\n")
    for _ in range(3):
        assert status(client, OLD_ADMIN) == 200
        assert client.post(API_PREFIX + "/gateways/gw1/drain", headers=bearer(OLD_ADMIN)).status_code == 200
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, "one error per change, not one per request"
    assert "tokens read before stay in force" in errors[0].getMessage() and reason in errors[0].getMessage()
    assert OLD_ADMIN not in caplog.text and VIEWER not in caplog.text  # the log names files, never secrets
    # Fixed: the new token is in force at once.
    if path.is_dir():
        path.rmdir()
    rotate(path, NEW_ADMIN)
    assert status(client, NEW_ADMIN) == 200
    assert status(client, OLD_ADMIN) == 401


def test_with_secrets_reread_names_every_problem(files: dict[str, Path], tmp_path: Path) -> None:
    cfg = parse_config(config_data(), tmp_path, "test")
    assert [p.name for p in cfg.secret_files()] == ["admin.token", "viewer.token", "gw1.token"]
    files["admin"].unlink()
    files["gw1"].write_text("short\n")
    with pytest.raises(ConfigError) as err:
        cfg.with_secrets_reread()
    assert "api.tokens[0].token_file: cannot read" in str(err.value)
    assert "gateways[0].agent_token_file: the secret in" in str(err.value)
    assert cfg.api.operator_tokens()[0][2] == OLD_ADMIN  # the config it was called on is unchanged
