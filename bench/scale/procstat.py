"""CPU time and resident memory of a process, from /proc (what bench/scale charges to the
controller, the switch and the agents)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


class ProcessGone(RuntimeError):
    pass


@dataclass(frozen=True)
class Sample:
    cpu_s: float  # user + system CPU seconds since the process started (all threads)
    rss_bytes: int


def sample(pid: int, proc: Path = Path("/proc")) -> Sample:
    try:
        stat = (proc / str(pid) / "stat").read_text()
        statm = (proc / str(pid) / "statm").read_text()
    except OSError as exc:
        raise ProcessGone(f"process {pid}: {exc.strerror or exc}") from None
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3, utime 14, stime 15
    utime, stime = int(fields[11]), int(fields[12])
    return Sample((utime + stime) / CLK_TCK, int(statm.split()[1]) * PAGE)


def cpu_between(pid: int, before: Sample) -> float:
    """CPU seconds `pid` used since `before`."""
    return sample(pid).cpu_s - before.cpu_s
