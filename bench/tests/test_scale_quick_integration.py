"""`python -m bench.scale --quick` end to end (root, under the machine lock; `make integration`):
one point (N = 4 real gateways and agents, 1,000 dual-stack simulated hosts, the real eBPF
switch and controller), the write rates of both targets and 100 remote-access clients' pins.
It checks that every phase measured something a user could act on, not the goals of the full
run (those are at 50,000 hosts and 32 gateways: bench/results/scale.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.scale.__main__ import main

pytestmark = pytest.mark.integration


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: namespaces, veths, eBPF, strongSwan")
def test_quick_scale_run_measures_every_part(tmp_path: Path) -> None:
    rc = main(["--quick", "--results-dir", str(tmp_path)])
    doc = json.loads((tmp_path / "scale-quick.json").read_text())
    assert rc == 0, doc["failures"]
    m = doc["metrics"]
    (point,) = doc["rows"]
    assert point["learned"] == 1000 and not point["errors"], point
    assert m["learning_hosts_per_s"] > 0 and m["learning_p99_ms"] is not None and m["learning_ip6_p99_ms"] is not None
    assert m["failover_write_ms"] is not None and m["failover_gap_ms"] < 2000
    assert m["restart_lost_probes"] == 0 and m["restart_adopt_s"] is not None
    for name in ("status", "gateways", "buckets", "hosts"):
        assert m[f"rest_p99_ms_{name}"] is not None
    assert m["p4rt_ebpf_entries_per_s"] > 0 and m["p4rt_ebpf_buckets_rewrite_ms"] is not None
    assert m["pins_per_s"] is not None and m["pins_per_s"] > 0
    assert (tmp_path / "scale-quick.md").is_file() and (tmp_path / "scale-quick.png").stat().st_size > 0
