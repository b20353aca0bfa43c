"""Traffic sources of the dataplane benchmark.

- `Dpbench`: the datapath team's `sgw-dpbench` (targets/ebpf/cmd/sgw-dpbench). Its `live`
  mode makes frames in the kernel (XDP, BPF_F_TEST_XDP_LIVE_FRAMES) and transmits them into
  the host veth of its own switch (the same eBPF programs, attached by the same Go
  dataplane package), pinned to one CPU; it counts what reaches the gateway veth. Its
  `progrun` mode times the tc program alone with BPF_PROG_RUN (no I/O).
- `AfPacketGenerator`: `afpacket_gen.c` (AF_PACKET + sendmmsg + qdisc bypass), used against
  the real `supergw-switch` process configured over P4Runtime, as the end-to-end cross-check.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.dataplane import testbed
from bench.dataplane.cputime import CpuMeter

AFGEN_SRC = Path(__file__).resolve().parent / "afpacket_gen.c"


@dataclass(frozen=True)
class Sent:
    frames: int
    seconds: float
    cpu_seconds: float = 0.0  # the generator process's CPU time (softirq work it ran included)
    ksoftirqd_seconds: float = 0.0


@dataclass(frozen=True)
class AfPacketGenerator:
    binary: Path

    @classmethod
    def build(cls, tmp: Path) -> AfPacketGenerator:
        binary = tmp / "sgw-bench-afgen"
        subprocess.run(["gcc", "-O2", "-Wall", "-o", str(binary), str(AFGEN_SRC)], check=True)
        return cls(binary)

    def describe(self) -> str:
        return "AF_PACKET socket, PACKET_QDISC_BYPASS, sendmmsg() batches of 256 (bench/dataplane/afpacket_gen.c)"

    def run(self, frames_file: Path, seconds: float, cpu: int, rate: float | None = None) -> Sent:
        """Send for `seconds`, as fast as possible or paced at `rate` frames per second."""
        meter = CpuMeter(cpu)
        pace = [f"{rate:.0f}"] if rate is not None else []
        out = testbed.sh(
            ["taskset", "-c", str(cpu), str(self.binary), "eth0", str(frames_file), f"{seconds:g}", *pace],
            testbed.HOST_NS, timeout=seconds + 30,
        )
        child, ksoft = meter.seconds()
        m = re.search(r"sent (\d+) seconds ([\d.]+)", out)
        if not m:
            raise testbed.TestbedError(f"generator printed no summary: {out!r}")
        return Sent(int(m.group(1)), float(m.group(2)), child, ksoft)


@dataclass(frozen=True)
class DpbenchResult:
    mode: str
    frame_bytes: int
    packets: int
    forwarded: int
    seconds: float
    ns_per_packet: float
    mpps: float
    cpu: int
    cpu_seconds: float = 0.0  # whole sgw-dpbench process (setup included), one mode per call
    ksoftirqd_seconds: float = 0.0
    core_softirq_seconds: float = 0.0

    @property
    def pps_conservative(self) -> float:
        """Every softirq tick on the core charged to this run as well (errs low)."""
        spent = self.cpu_seconds + self.core_softirq_seconds
        return self.forwarded / spent if spent > 0 else 0.0

    @property
    def pps_per_cpu_second(self) -> float:
        spent = self.cpu_seconds + self.ksoftirqd_seconds
        return self.forwarded / spent if spent > 0 else 0.0


@dataclass(frozen=True)
class Dpbench:
    binary: Path

    @classmethod
    def find_or_build(cls, repo: Path, tmp: Path) -> Dpbench:
        built = repo / "targets" / "ebpf" / "bin" / "sgw-dpbench"
        if built.is_file():
            return cls(built)
        out = tmp / "sgw-dpbench"
        proc = subprocess.run(["go", "build", "-o", str(out), "./cmd/sgw-dpbench"], cwd=repo / "targets" / "ebpf",
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise testbed.TestbedError(f"cannot build sgw-dpbench: {proc.stderr.strip()[-500:]}")
        return cls(out)

    def run(self, frame_bytes_no_fcs: int, packets: int, cpu: int, mode: str) -> DpbenchResult:
        """One mode (`live` or `progrun`) per process, so its CPU time is that mode's."""
        meter = CpuMeter(cpu)
        proc = subprocess.run(
            [str(self.binary), "-mode", mode, "-n", str(packets), "-size", str(frame_bytes_no_fcs),
             "-cpu", str(cpu), "-device-id", str(testbed.DPBENCH_DEVICE_ID), "-json"],
            capture_output=True, text=True, timeout=60, check=False,
        )
        child, ksoft = meter.seconds()
        if proc.returncode != 0:
            raise testbed.TestbedError(f"sgw-dpbench failed: {proc.stderr.strip()[-800:]}")
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if len(lines) != 1:
            raise testbed.TestbedError(f"sgw-dpbench printed {len(lines)} results, expected 1: {proc.stdout[-300:]!r}")
        return DpbenchResult(**json.loads(lines[0]), cpu_seconds=child, ksoftirqd_seconds=ksoft,
                             core_softirq_seconds=meter.core_softirq_seconds())
