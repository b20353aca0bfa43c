"""bench.replication --quick as an integration test (about 50 s): the replication benchmark on
real charons and the real relay at 16 and 64 SAs, every probe that must be zero zero, every copy
exact, and its negative control (replication off: nothing relayed, every copy seen stale)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import require_root_strongswan

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]


def test_replication_benchmark_quick(tmp_path: Path) -> None:
    require_root_strongswan()
    run = subprocess.run([sys.executable, "-m", "bench.replication", "--quick", "--results-dir", str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"bench.replication --quick failed:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    doc = json.loads((tmp_path / "replication.json").read_text())
    m = doc["metrics"]
    assert doc["failures"] == []
    assert m["copy_bytes_per_sa_n64"] > 100 and m["child_rekey_bytes_n64"] > 100
    assert m["control_messages_replication_off"] == 0 and m["control_stale_copies_caught"] == 2
    assert m["udp_drops"] == 0 and m["new_ike_auths"] == 0 and m["client_replay_drops"] == 0
    assert (tmp_path / "replication.png").stat().st_size > 10_000
