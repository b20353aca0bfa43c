"""Load reports: the gateway's own CPU, softirq and charon, VICI counters, and the report.

The schema is the controller's (`supergw_proto.reports`): one source of truth,
imported here, never copied.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from supergw_proto.reports import GatewayReport, Heartbeat, IpsecBackend, PartnerState, SaState

from supergw_gateway.vici_client import IkeSaStatus

__all__ = ["CpuSample", "GatewayReport", "Heartbeat", "PartnerState", "build_report", "cpu_shares", "guest_cpus", "parse_proc_stat",
           "sa_states", "family_cpu_jiffies", "tasks_cpu_jiffies"]

CLK_TCK = 100


CpuScope = Literal["processes", "cgroup", "guest"]


@dataclass(frozen=True)
class CpuSample:
    """Cumulative jiffies at `t` (monotonic): the gateway's own busy time (`scope` says what
    that counts), softirq (a UML guest's; 0 where the kernel is shared), charon (utime+stime).
    `cores` is the capacity busy is measured against (100 % per core)."""

    t: float
    busy: float  # jiffies; fractional where measured in ns (schedstat)
    softirq: int
    charon: int
    scope: CpuScope = "processes"
    cores: float = 1.0


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(busy, softirq) jiffies from the aggregate `cpu` line of /proc/stat."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            user, nice, system, idle, iowait, irq, softirq = f[:7]
            steal = f[7] if len(f) > 7 else 0
            return user + nice + system + irq + softirq + steal, softirq
    raise ValueError("no aggregate cpu line in /proc/stat")


def guest_cpus(stat: str) -> float:
    """How many CPUs a /proc/stat lists (cpu0, cpu1, ...)."""
    n = sum(1 for line in stat.splitlines() if line.startswith("cpu") and line[3:4].isdigit())
    return float(max(1, n))


def tasks_cpu_jiffies(pids: Iterable[int]) -> float:
    """CPU the processes `pids` have used (every thread, from /proc/<pid>/task/*/schedstat: ns,
    where /proc/<pid>/stat counts whole jiffies), in jiffies; a process gone counts 0."""
    ns = 0
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                ns += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return ns * CLK_TCK / 1e9


def family_cpu_jiffies(parent: int, children: Iterable[int]) -> float:
    """CPU of `parent`, of every child it has reaped (its cutime + cstime) and of its live
    `children`, in jiffies: a process family whose members come and go (a UML guest: the
    kernel's process and one per guest process, all its children) counted without losing
    what a child used before it exited. 0 when `parent` is gone."""
    try:
        fields = Path(f"/proc/{parent}/stat").read_text().rsplit(")", 1)[1].split()
        reaped = int(fields[13]) + int(fields[14])
    except (OSError, IndexError, ValueError):
        return 0.0
    return tasks_cpu_jiffies([parent, *children]) + reaped


def parse_pid_stat(text: str) -> int:
    """utime+stime jiffies of a /proc/<pid>/stat line (comm may hold spaces)."""
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cpu_shares(a: CpuSample, b: CpuSample) -> tuple[float, float, float]:
    """(cpu %, softirq %, charon %) between two samples; 100 = one core."""
    dt = b.t - a.t
    if dt <= 0:
        return 0.0, 0.0, 0.0

    def pct(x: float) -> float:
        return max(0.0, 100.0 * x / CLK_TCK / dt)

    return pct(b.busy - a.busy), pct(b.softirq - a.softirq), pct(b.charon - a.charon)


def sa_states(sas: list[IkeSaStatus], conn: str) -> list[SaState]:
    out = []
    now_names = [s for s in sas if s.name == conn]
    for ike in now_names:
        out.append(SaState(name=ike.name, kind="ike", state=ike.state, established_s=ike.established_s,
                           bytes_in=sum(c.bytes_in for c in ike.children),
                           bytes_out=sum(c.bytes_out for c in ike.children),
                           packets_in=sum(c.packets_in for c in ike.children),
                           packets_out=sum(c.packets_out for c in ike.children)))
        for c in ike.children:
            out.append(SaState(name=c.name, kind="child", state=c.state, established_s=c.established_s,
                               bytes_in=c.bytes_in, bytes_out=c.bytes_out,
                               packets_in=c.packets_in, packets_out=c.packets_out))
    return out


def build_report(gateway: str, backend: str, prev: CpuSample, cur: CpuSample,
                 sas: list[IkeSaStatus], conn: str, timestamp: float | None = None,
                 sa_error: str | None = None, partner: PartnerState | None = None) -> GatewayReport:
    cpu, soft, charon = cpu_shares(prev, cur)
    children = [c for s in sas if s.name == conn for c in s.children]
    return GatewayReport(
        gateway=gateway,
        timestamp=time.time() if timestamp is None else timestamp,
        backend=IpsecBackend(backend),
        cpu_percent=round(cpu, 2),
        cpu_cores=cur.cores,
        cpu_scope=cur.scope,
        softirq_percent=round(soft, 2),
        charon_cpu_percent=round(charon, 2),
        tunnel_bytes_in=sum(c.bytes_in for c in children),
        tunnel_bytes_out=sum(c.bytes_out for c in children),
        tunnel_packets_in=sum(c.packets_in for c in children),
        tunnel_packets_out=sum(c.packets_out for c in children),
        sas=sa_states(sas, conn),
        sa_error=sa_error,
        partner=partner,
    )
