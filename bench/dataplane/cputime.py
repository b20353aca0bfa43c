"""CPU time spent on the measured core by a benchmark child and by that core's ksoftirqd.

The machine is shared, so wall-clock rates move with other people's work. Frames per
CPU-second of *our* work is what "packets per second on one core" means and does not: this
kernel has tick-based accounting without IRQ-time accounting, so softirq work run in our
child's context (veth receive, the switch's tc program, the sink) is charged to the child;
softirq work deferred to `ksoftirqd/<cpu>` is added from that thread (which may include
other work on the core, so the rate errs low).

Under heavy contention, softirq work our traffic raised can also run at the interrupt exit of
another task and be charged to it; the per-CPU-second rate can then err high. For that case
`core_softirq_seconds` gives a conservative bound: charge *all* softirq time on the core to us
(double-counting what is already in the child's system time).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path


def _ksoftirqd_pid(cpu: int) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == f"ksoftirqd/{cpu}":
                    return int(entry.name)
            except OSError:
                continue
    return None


def process_seconds(pid: int | None) -> float:
    """User+system CPU seconds of a process (all its threads) or kernel thread, 0 when gone."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _core_softirq_seconds(cpu: int) -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            return int(line.split()[7]) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _children_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@dataclass
class CpuMeter:
    """Start before running one child to completion; `seconds()` after it was reaped."""

    cpu: int

    def __post_init__(self) -> None:
        self._ksoftirqd = _ksoftirqd_pid(self.cpu)
        self._children0 = _children_seconds()
        self._ksoft0 = process_seconds(self._ksoftirqd)
        self._softirq0 = _core_softirq_seconds(self.cpu)

    def seconds(self) -> tuple[float, float]:
        """(child CPU seconds, ksoftirqd CPU seconds) since the meter was made."""
        return _children_seconds() - self._children0, process_seconds(self._ksoftirqd) - self._ksoft0

    def core_softirq_seconds(self) -> float:
        """All softirq time on the core since the meter was made, whoever it served."""
        return _core_softirq_seconds(self.cpu) - self._softirq0
