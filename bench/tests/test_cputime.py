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


def test_thread_run_time_comes_from_the_scheduler() -> None:
    import threading

    from bench.dataplane.cputime import CoreTimes, SwitchMeter, thread_seconds

    tid = threading.get_native_id()
    before = thread_seconds(tid)
    sum(i * i for i in range(2_000_000))
    assert thread_seconds(tid) - before > 0.01
    assert thread_seconds(2**22 + 12345) == 0.0  # gone: no time, no error
    meter = SwitchMeter(0, [tid], None)
    meter.start()
    sum(i * i for i in range(2_000_000))
    cpu = meter.stop()
    assert cpu.threads > 0.01 and cpu.process == 0.0 and cpu.switch == cpu.threads
    assert cpu.wall >= cpu.threads * 0.5
    assert CoreTimes.read(0).busy > 0


def test_unknown_core_is_an_error() -> None:
    import pytest

    from bench.dataplane.cputime import CoreTimes

    with pytest.raises(ValueError, match="cpu4096 is not in /proc/stat"):
        CoreTimes.read(4096)
