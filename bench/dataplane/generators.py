"""Traffic sources of the dataplane benchmark.

- `Traffic`: `sgw-traffic` (targets/ebpf/cmd/sgw-traffic), against the shipped
  `supergw-switch` process (and BMv2) in the testbed: frames of a plan (many hosts, many
  buckets) sent from the traffic core into a switch port, counted with the MAC rewrite
  checked by a tc sink at the receiving end. Its generator mode is the kernel's choice
  (`Traffic.modes`): made in the kernel by XDP (BPF_F_TEST_XDP_LIVE_FRAMES) where the kernel
  allows it, else written into an AF_PACKET TX ring; every result names the mode.
- `Dpbench`: the rig, `sgw-dpbench` (targets/ebpf/cmd/sgw-dpbench): its own namespace and
  switch made of the same eBPF programs configured directly (no P4Runtime, no switch
  process), one repeated frame whose gateway MAC is its vmac (the rewrite writes nothing),
  generator, switch and sink on one core, counted by the switch's own port tx counter. Its
  `progrun` mode times the tc program alone with BPF_PROG_RUN (no I/O).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.dataplane import testbed
from bench.dataplane.cputime import CpuMeter

@dataclass(frozen=True)
class SinkCount:
    at: str  # NETNS:DEV
    frames: int
    bytes: int
    dst_is_own_mac: int  # dst MAC == the receiving interface's MAC (a gateway's)
    src_is_vmac: int  # src MAC is a vmac of the run's base and mask


@dataclass(frozen=True)
class ProgRuns:
    """What one program attached to a watched interface did during the traffic."""

    at: str  # NETNS:DEV
    id: int
    name: str
    runs: int
    run_time_ns: int

    @property
    def ns_per_run(self) -> float:
        return self.run_time_ns / self.runs if self.runs else 0.0


@dataclass(frozen=True)
class GeneratorMode:
    """How sgw-traffic or sgw-dpbench sent a run's frames, and why that way."""

    mode: str  # "xdp-live-frames" or "af-packet-tx-ring" (targets/ebpf/internal/pktgen)
    why: str


@dataclass(frozen=True)
class ModeAvailability:
    """Whether this kernel allows a generator mode (`sgw-traffic -modes`)."""

    mode: str
    allowed: bool
    why: str  # what the mode costs per frame, or why the kernel refuses it


@dataclass(frozen=True)
class TrafficResult:
    sent: int  # frames the generator handed to the kernel
    seconds: float  # first to last frame sent
    offered_pps: float
    frame_bytes: int
    family: str  # the plan's frames: "ipv4" or "ipv6"
    plan_frames: int
    cpu: int
    sinks: list[SinkCount]
    programs: list[ProgRuns]
    generator: GeneratorMode

    @property
    def received(self) -> int:
        return sum(s.frames for s in self.sinks)


@dataclass(frozen=True)
class Traffic:
    """`sgw-traffic` (targets/ebpf/cmd/sgw-traffic): sends a plan's frames out of one
    interface and counts what reaches the sinks. `mode` is its -gen-mode."""

    binary: Path
    mode: str = "auto"
    # af-packet-tx-ring: UDP frames with checksum offload state (CHECKSUM_PARTIAL), as a host's
    # stack hands them over; False: without (the receiving GRO verifies their checksums).
    checksum_offload: bool = True

    @classmethod
    def build(cls, repo: Path) -> Traffic:
        return cls(_build(repo, "sgw-traffic"))

    def modes(self) -> list[ModeAvailability]:
        """The generator modes, fastest first, and whether this kernel allows each."""
        proc = subprocess.run([str(self.binary), "-modes"], capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode != 0:
            raise testbed.TestbedError(f"sgw-traffic -modes failed: {proc.stderr.strip()[-500:]}")
        return [ModeAvailability(**m) for m in json.loads(proc.stdout)]

    def run(self, gen: str, sinks: list[str], plan: Path, seconds: float, cpu: int, vmac_base: str, buckets: int,
            rate: float | None = None, prog_stats: list[str] | None = None) -> TrafficResult:
        """`prog_stats`: NETNS:DEV whose TCX ingress programs' runs and run time to report
        (the kernel's statistics are on for this run only)."""
        argv = [str(self.binary), "-gen", gen, "-frames", str(plan), "-seconds", f"{seconds:g}", "-cpu", str(cpu),
                "-vmac-base", vmac_base, "-bucket-mask", str(buckets - 1),
                "-gen-mode", self.mode, *([] if self.checksum_offload else ["-no-checksum-offload"]),
                *(a for s in sinks for a in ("-sink", s)), *(["-rate", f"{rate:.0f}"] if rate else []),
                *(a for p in prog_stats or [] for a in ("-prog-stats", p))]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
        if proc.returncode != 0:
            raise testbed.TestbedError(f"sgw-traffic failed: {proc.stderr.strip()[-800:]}")
        raw = json.loads(proc.stdout)
        raw["sinks"] = [SinkCount(**s) for s in raw["sinks"]]
        raw["programs"] = [ProgRuns(**p) for p in raw["programs"]]
        raw["generator"] = GeneratorMode(**raw["generator"])
        return TrafficResult(**raw)


def _build(repo: Path, name: str) -> Path:
    """targets/ebpf/bin/<name>, built by `make -C targets/ebpf bench-tool`, which rebuilds it
    when its sources changed (a binary left from an older checkout would send other frames)."""
    ebpf = repo / "targets" / "ebpf"
    proc = subprocess.run(["make", "-s", "bench-tool"], cwd=ebpf, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise testbed.TestbedError(f"cannot build {name} (`make -C targets/ebpf bench-tool`): {proc.stderr.strip()[-500:]}")
    return ebpf / "bin" / name


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
    family: str = "ipv4"  # sgw-dpbench -ipv6: IPv6/UDP frames
    generator: GeneratorMode | None = None  # how a live run sent its frames (None for progrun)
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
    def build(cls, repo: Path) -> Dpbench:
        return cls(_build(repo, "sgw-dpbench"))

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
        raw = json.loads(lines[0])
        if raw.get("generator") is not None:
            raw["generator"] = GeneratorMode(**raw["generator"])
        return DpbenchResult(**raw, cpu_seconds=child, ksoftirqd_seconds=ksoft,
                             core_softirq_seconds=meter.core_softirq_seconds())
