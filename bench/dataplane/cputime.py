"""CPU time: of the switch on its core (`SwitchMeter`), and of a rig child on one core (`CpuMeter`).

`SwitchMeter` charges the switch with what runs its data path and control plane, all pinned
to the switch's core: the NAPI threads of its ports (the testbed runs every switch port's
receive processing in a threaded-NAPI kernel thread, so the frame's receive, the tc
program, the redirect and the transmit into the next veth all run there, in that thread's
context) and the switch process. Thread run times come from `/proc/<pid>/schedstat` (the
scheduler's nanosecond count), the process's from `/proc/<pid>/stat`. The whole core's busy
time (`/proc/stat`: wall time minus idle and iowait) is kept alongside: it also holds other
work that ran on that core, so frames per busy second of the core is a lower bound.

`CpuMeter` is the rig's (sgw-dpbench runs generator, switch and sink on one core):

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
import time
from collections.abc import Sequence
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


def thread_seconds(pid: int) -> float:
    """Run time of one thread (a kernel thread's whole life) from the scheduler, 0 when gone."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


@dataclass(frozen=True)
class CoreTimes:
    """One CPU's /proc/stat line, in seconds."""

    busy: float  # everything but idle and iowait (other tasks' work included)
    softirq: float
    steal: float  # taken by the hypervisor: neither ours nor idle

    @classmethod
    def read(cls, cpu: int) -> CoreTimes:
        hz = os.sysconf("SC_CLK_TCK")
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                return cls((sum(v[:8]) - v[3] - v[4]) / hz, v[6] / hz, v[7] / hz)
        raise ValueError(f"cpu{cpu} is not in /proc/stat")


@dataclass(frozen=True)
class SwitchCpu:
    """What one measured run cost the switch, in seconds."""

    threads: float  # the NAPI threads of the switch's ports
    process: float  # the switch process (every thread; BMv2's forwarding threads too)
    core_busy: float  # the switch's core, whoever used it
    core_softirq: float
    core_steal: float
    wall: float

    @property
    def switch(self) -> float:
        return self.threads + self.process


class SwitchMeter:
    """`start()` before the traffic, `stop()` after it has drained."""

    def __init__(self, cpu: int, thread_pids: Sequence[int], process_pid: int | None) -> None:
        self.cpu, self.thread_pids, self.process_pid = cpu, list(thread_pids), process_pid
        self._t0 = 0.0
        self._threads0 = self._process0 = 0.0
        self._core0 = CoreTimes(0.0, 0.0, 0.0)

    def _threads(self) -> float:
        return sum(thread_seconds(p) for p in self.thread_pids)

    def start(self) -> None:
        self._core0 = CoreTimes.read(self.cpu)
        self._threads0, self._process0 = self._threads(), process_seconds(self.process_pid)
        self._t0 = time.monotonic()

    def stop(self) -> SwitchCpu:
        wall = time.monotonic() - self._t0
        threads, process = self._threads() - self._threads0, process_seconds(self.process_pid) - self._process0
        core = CoreTimes.read(self.cpu)
        return SwitchCpu(max(0.0, threads), max(0.0, process), core.busy - self._core0.busy,
                         core.softirq - self._core0.softirq, core.steal - self._core0.steal, wall)
