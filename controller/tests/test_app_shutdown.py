"""The real `supergw-controller` process stops cleanly on SIGTERM and SIGINT (no switch needed)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from corekit import config_data

API = "127.0.0.1:18771"
TOKEN = "shutdown-test-token"


def config(tmp_path: Path) -> Path:
    data = config_data(
        # Nothing listens there: the core keeps retrying the switch, the API serves.
        switch={"address": "127.0.0.1:50771", "device_id": 771},
        ports={1: "host", 11: "gateway"},
        gateways=[{"name": "g1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token": "shutdown-agent-g1-token"}],
        api={"listen": API, "token": TOKEN},
        state_db=str(tmp_path / "state.sqlite3"),
    )
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def api_up() -> bool:
    req = urllib.request.Request(f"http://{API}/api/v1/status", headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=1) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_controller_exits_cleanly_on_signal(tmp_path: Path, sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "supergw_controller.cli", "--config", str(config(tmp_path))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not api_up():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "REST API never came up"
            time.sleep(0.1)
        t0 = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    assert "REST API" in out
    assert took < 6, f"shutdown took {took:.1f}s"
    assert not api_up()
