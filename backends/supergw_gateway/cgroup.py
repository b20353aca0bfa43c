"""cgroup v1 CPU quotas: one group per gateway under /sys/fs/cgroup/cpu; its CPU usage from
cpuacct (or the cgroup v2 `cpu.stat` when the machine runs the unified hierarchy)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from supergw_gateway.errors import GatewayError

CPU_ROOT = Path("/sys/fs/cgroup/cpu")
CPUACCT_ROOTS = (Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup/cpu,cpuacct"), Path("/sys/fs/cgroup"))
_NS_PER_JIFFY = 10_000_000  # USER_HZ 100


@dataclass(frozen=True)
class CpuAcct:
    """CPU time used by the group `name`, from the first hierarchy that has it."""

    name: str
    roots: tuple[Path, ...] = CPUACCT_ROOTS

    def usage_jiffies(self) -> int | None:
        """Cumulative CPU of every task in the group (1/100 s), None when no such group exists."""
        for root in self.roots:
            d = root / self.name
            try:
                return int((d / "cpuacct.usage").read_text()) // _NS_PER_JIFFY
            except (OSError, ValueError):
                pass
            try:
                for line in (d / "cpu.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) * 1000 // _NS_PER_JIFFY
            except (OSError, ValueError):
                pass
        return None


@dataclass(frozen=True)
class CpuGroup:
    name: str
    root: Path = CPU_ROOT

    @property
    def path(self) -> Path:
        return self.root / self.name

    def ensure(self) -> None:
        if not (self.root / "cpu.cfs_quota_us").exists():
            raise GatewayError(f"no cgroup v1 cpu controller at {self.root}")
        self.path.mkdir(exist_ok=True)

    def set_quota(self, percent: float | None) -> None:
        """percent of one core (100 = one full core); None removes the limit."""
        self.ensure()
        period = int((self.path / "cpu.cfs_period_us").read_text())
        quota = -1 if percent is None else max(1000, int(period * percent / 100))
        (self.path / "cpu.cfs_quota_us").write_text(str(quota))

    def quota_percent(self) -> float | None:
        quota = int((self.path / "cpu.cfs_quota_us").read_text())
        period = int((self.path / "cpu.cfs_period_us").read_text())
        return None if quota < 0 else 100.0 * quota / period

    def add(self, pid: int) -> None:
        """Moves every thread of `pid` (cgroup.procs)."""
        self.ensure()
        (self.path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            return []

    def remove(self) -> None:
        if not self.path.exists():
            return
        for pid in self.pids():
            try:
                (self.root / "cgroup.procs").write_text(str(pid))
            except OSError:
                pass
        try:
            self.path.rmdir()
        except OSError as exc:
            raise GatewayError(f"cannot remove cgroup {self.path}: {exc}") from None
