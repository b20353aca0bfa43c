"""CpuMeter charges a child's CPU time to the measurement."""

from __future__ import annotations

import subprocess
import sys

from bench.dataplane.cputime import CpuMeter


def test_busy_child_is_counted() -> None:
    meter = CpuMeter(0)
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    child, ksoft = meter.seconds()
    assert child > 0.05
    assert ksoft >= 0.0
