"""Dataplane benchmark: `python -m bench.dataplane [--quick] [--seconds S] [--repeat N] [--switch-cpu C]`.

Writes bench/results/dataplane.{json,md,png} with
  switch_pps_64, switch_pps_1400  headline: host -> gateway frames that reached the gateways with dst rewritten
                                  to the gateway MAC, per CPU-second of the shipped supergw-switch (its ports'
                                  NAPI threads and its process, all on the switch's core); goal for 64 B >= 1e6
  switch_wall_pps_64              the same run's frames per wall-clock second
  switch_pps_64_gateway_to_host   gateway -> host frames that reached the host with src rewritten to a vmac, per
                                  CPU-second of the switch
  tc_program_ns_64                the tc program's own run time per frame (kernel.bpf_stats_enabled), of the
                                  switch's ns per frame
  rig_pps_64                      the rig (sgw-dpbench live): eBPF programs configured directly, one repeated frame
                                  whose gateway MAC is its vmac, generator + switch + sink on one core
  move_rtt_ms                     median P4Runtime MODIFY of one bucket entry, write to reply
  bmv2_pps_64, bmv2_pps_1400      BMv2 (simple_switch_grpc, no logging) on the switch's core, no-loss rate
  switch_over_bmv2_64             switch_pps_64 / BMv2's frames per CPU-second at its no-loss rate
See bench/README.md for the method. Every object is named sgw-bench-* and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.dataplane import bmv2 as bmv2_tools
from bench.dataplane import frames, testbed, trial
from bench.dataplane.cputime import SwitchMeter
from bench.dataplane.generators import Dpbench, DpbenchResult, Traffic
from bench.dataplane.lan_state import Gateway, Lan
from bench.dataplane.method import method_text
from bench.report import Metric, Series, write_report

REPO = Path(__file__).resolve().parents[2]
SWITCH_BIN = REPO / "targets" / "ebpf" / "bin" / "supergw-switch"
P4INFO = REPO / "p4src" / "v1model" / "supergw.p4info.txtpb"
P4_PROGRAM = REPO / "p4src" / "v1model" / "supergw.p4"
LOG_DIR = REPO / "bench" / "results"  # *.log there is git-ignored
GOAL_PPS = 1_000_000.0
GOAL_MOVE_MS = 5.0
SIZES = (64, 1400)
N_HOSTS = 1024
GATEWAY_IP = "10.98.0.1"
VMAC_BASE = "02:5e:98:00:00:00"
BUCKETS = 256
NO_LOSS = 0.99  # a paced rate "passes" when at least this share of the frames arrives


@dataclass(frozen=True)
class Settings:
    seconds: float  # per measured run
    repeat: int  # runs per headline figure (median)
    rig_packets: int
    rig_repeat: int
    writes: int
    bmv2_steps: int  # paced runs of the no-loss search, per size


FULL = Settings(seconds=3.0, repeat=3, rig_packets=1_500_000, rig_repeat=5, writes=200, bmv2_steps=7)
QUICK = Settings(seconds=1.0, repeat=1, rig_packets=300_000, rig_repeat=1, writes=50, bmv2_steps=3)


def say(msg: str) -> None:
    print(f"[dataplane {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _in_switch_ns(argv: list[str], what: str) -> dict[str, object]:
    proc = subprocess.run(["ip", "netns", "exec", testbed.SWITCH_NS, sys.executable, *argv],
                          capture_output=True, text=True, cwd=REPO, timeout=180, check=False)
    if proc.returncode != 0:
        raise testbed.TestbedError(f"{what}: {proc.stderr.strip()[-800:]}")
    reply: dict[str, object] = json.loads(proc.stdout)
    return reply


def _lan_file(lan: Lan, tmp: Path) -> Path:
    path = tmp / "lan.json"
    path.write_text(lan.to_json())
    return path


def configure(lan: Lan, tmp: Path, bmv2: bmv2_tools.Bmv2 | None = None) -> None:
    """The controller's P4Runtime state for the LAN, written as the controller writes it."""
    addr, device = (testbed.BMV2_GRPC_ADDR, testbed.BMV2_DEVICE_ID) if bmv2 else (testbed.GRPC_ADDR, testbed.DEVICE_ID)
    argv = ["-m", "bench.dataplane.lan_state", "--addr", addr, "--device-id", str(device),
            "--p4info", str(bmv2.p4info if bmv2 else P4INFO), "--lan", str(_lan_file(lan, tmp))]
    if bmv2:
        argv += ["--device-config", str(bmv2.json)]
    _in_switch_ns(argv, "P4Runtime setup")


def time_moves(lan: Lan, tmp: Path, writes: int, bucket: int) -> list[float]:
    """bench.dataplane.control: MODIFYs of one bucket between the gateways, ms each."""
    reply = _in_switch_ns(["-m", "bench.dataplane.control", "--addr", testbed.GRPC_ADDR, "--device-id",
                           str(testbed.DEVICE_ID), "--p4info", str(P4INFO), "--lan", str(_lan_file(lan, tmp)),
                           "--writes", str(writes), "--bucket", str(bucket)], "P4Runtime move")
    latencies = reply["latencies_ms"]
    assert isinstance(latencies, list), "control replies with a list of latencies"
    return [float(x) for x in latencies]


def _wait_grpc(bed: testbed.Testbed, addr: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if not bed.switch_alive():
            log = (LOG_DIR / bed.log_name).read_text(errors="replace").splitlines()[-8:]
            raise testbed.TestbedError("switch exited:\n    " + "\n    ".join(log))
        proc = subprocess.run(
            ["ip", "netns", "exec", testbed.SWITCH_NS, sys.executable, "-m", "topologies.probe", "grpc", addr],
            capture_output=True, text=True, cwd=REPO, check=False,
        )
        if proc.returncode == 0:
            return
        last = proc.stderr.strip()
        time.sleep(0.3)
    raise testbed.TestbedError(f"switch gRPC not up after {timeout:.0f}s: {last}")


def _cpu_times() -> list[tuple[int, int]]:
    """(busy, total) jiffies per CPU from /proc/stat."""
    out = []
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu") and line[3].isdigit():
            vals = [int(v) for v in line.split()[1:]]
            idle = vals[3] + vals[4]
            out.append((sum(vals) - idle, sum(vals)))
    return out


def _least_busy_cpu(sample_s: float = 1.0) -> int:
    before = _cpu_times()
    time.sleep(sample_s)
    after = _cpu_times()
    busy = [(a[0] - b[0]) / max(1, a[1] - b[1]) for a, b in zip(after, before)]
    return min(range(len(busy)), key=busy.__getitem__)


def the_lan() -> Lan:
    gateways = [Gateway(f"g{i}", port, mac) for i, (port, mac) in enumerate(zip(testbed.GATEWAY_PORTS, testbed.GATEWAY_MACS), 1)]
    return Lan(testbed.HOST_PORT, gateways, [(h.mac, h.ip) for h in frames.hosts(N_HOSTS)], GATEWAY_IP, VMAC_BASE, BUCKETS)


def directions(lan: Lan) -> tuple[trial.Direction, trial.Direction]:
    assignment = lan.assignment()
    per_gateway = {g.port: 0 for g in lan.gateways}
    for mac, _ in lan.hosts:
        per_gateway[assignment[frames.bucket_of_host(mac, lan.buckets)].port] += 1
    sink_of = {g.port: f"{ns}:{testbed.FAR_END}" for g, ns in zip(lan.gateways, testbed.GATEWAY_NS)}
    to_gateway = trial.Direction(
        "host -> gateway", f"{testbed.HOST_NS}:{testbed.FAR_END}",
        {sink_of[port]: n / len(lan.hosts) for port, n in per_gateway.items()},
        trial.dst_rewritten, "dst MAC = the receiving gateway's MAC")
    to_host = trial.Direction(
        "gateway -> host", sink_of[lan.gateways[0].port], {f"{testbed.HOST_NS}:{testbed.FAR_END}": 1.0},
        trial.src_rewritten, f"src MAC = a vmac of {lan.vmac_base}/{lan.buckets}")
    return to_gateway, to_host


def plan_file(tmp: Path, lan: Lan, direction: trial.Direction, size: int) -> Path:
    lan_hosts = [frames.Host(mac, ip) for mac, ip in lan.hosts]
    if direction.rewritten is trial.dst_rewritten:
        plan = frames.host_to_gateway(lan_hosts, lan.vmac_base, lan.buckets)
    else:
        plan = frames.gateway_to_host(lan.gateways[0].mac, lan_hosts)
    path = tmp / f"plan-{direction.rewritten.__name__}-{size}.bin"
    frames.write_plan(path, plan, size)
    return path


def _dpbench_row(r: DpbenchResult, size: int, label: str) -> dict[str, object]:
    return {"what": f"rig: sgw-dpbench {label} {size} B", "frames": r.packets, "forwarded": r.forwarded,
            "seconds": round(r.seconds, 3), "ns_per_frame": round(r.ns_per_packet, 1), "pps": round(r.mpps * 1e6),
            "cpu_seconds": round(r.cpu_seconds + r.ksoftirqd_seconds, 3),
            "pps_per_cpu_second": round(r.pps_per_cpu_second) if label != "progrun" else None, "cpu": r.cpu}


def measure_rig(dpbench: Dpbench, s: Settings, cpu: int, rows: list[dict[str, object]]) -> float:
    """sgw-dpbench live at 64 B, the median of the runs' frames per wall-clock second."""
    size = 64
    r = dpbench.run(size - frames.FCS_BYTES, s.rig_packets, cpu, "progrun")
    rows.append(_dpbench_row(r, size, "progrun"))
    say(f"rig: sgw-dpbench progrun {size} B: {r.ns_per_packet:.0f} ns per frame in the tc program alone")
    wall: list[float] = []
    for attempt in range(1, s.rig_repeat + 1):
        r = dpbench.run(size - frames.FCS_BYTES, s.rig_packets, cpu, "live")
        rows.append(_dpbench_row(r, size, f"live #{attempt}"))
        wall.append(r.mpps * 1e6)
        say(f"rig: sgw-dpbench live {size} B {attempt}/{s.rig_repeat}: {r.mpps * 1e6:,.0f} frames per wall second")
    return statistics.median(wall)


def measure_switch(
    bed: testbed.Testbed, traffic: Traffic, lan: Lan, tmp: Path, s: Settings, rows: list[dict[str, object]],
) -> dict[str, list[trial.Trial]]:
    """Unpaced runs per direction and size: the generator offers more than the switch's core
    can take, so the switch's NAPI thread never waits for frames."""
    meter = SwitchMeter(bed.switch_cpu, bed.switch_threads, bed.switch_pid)
    to_gateway, to_host = directions(lan)
    out: dict[str, list[trial.Trial]] = {}
    for direction, sizes in ((to_gateway, SIZES), (to_host, (64,))):
        for size in sizes:
            plan = plan_file(tmp, lan, direction, size)
            key = f"{direction.label} {size}"
            out[key] = []
            for attempt in range(1, s.repeat + 1):
                t = trial.run(traffic, direction, plan, size, s.seconds, bed.traffic_cpu, meter, lan.vmac_base, lan.buckets)
                rows.append(t.row())
                out[key].append(t)
                say(f"supergw-switch {key} B {attempt}/{s.repeat}: {t.pps_per_cpu_second:,.0f} frames per switch "
                    f"CPU-second, {t.pps:,.0f} per wall second (switch threads {t.cpu.threads / t.cpu.wall:.0%} of "
                    f"the core; {t.delivered_share:.0%} of {t.traffic.offered_pps:,.0f}/s offered)")
    return out


def measure_program(bed: testbed.Testbed, traffic: Traffic, lan: Lan, tmp: Path, s: Settings,
                    rows: list[dict[str, object]]) -> tuple[float, float]:
    """One more host -> gateway 64 B run with the kernel's program statistics on
    (BPF_ENABLE_STATS, held by sgw-traffic for that run): the ns per frame of the tc program on
    the switch's host port, and the switch's CPU ns per frame in the same run."""
    to_gateway, _ = directions(lan)
    host_port = f"{testbed.SWITCH_NS}:{testbed.SWITCH_IFACES[testbed.HOST_PORT]}"
    meter = SwitchMeter(bed.switch_cpu, bed.switch_threads, bed.switch_pid)
    t = trial.run(traffic, to_gateway, plan_file(tmp, lan, to_gateway, 64), 64, s.seconds, bed.traffic_cpu, meter,
                  lan.vmac_base, lan.buckets, prog_stats=[host_port])
    progs = [p for p in t.traffic.programs if p.name == "sgw_ingress"]
    if len(progs) != 1:
        raise testbed.TestbedError(f"{host_port}: want the switch's sgw_ingress attached once, found {t.traffic.programs}")
    runs = progs[0]
    switch_ns = 1e9 / t.pps_per_cpu_second if t.pps_per_cpu_second else 0.0
    rows.append({**t.row(), "what": "profile: supergw-switch host -> gateway 64 B, eBPF run-time statistics on",
                 "tc_program_runs": runs.runs, "tc_program_ns_per_run": round(runs.ns_per_run, 1)})
    say(f"profile: the tc program ran {runs.ns_per_run:.0f} ns per frame of the switch's {switch_ns:.0f} ns")
    return runs.ns_per_run, switch_ns


def measure_bmv2(
    bed: testbed.Testbed, tool: bmv2_tools.Bmv2, traffic: Traffic, lan: Lan, tmp: Path, s: Settings,
    rows: list[dict[str, object]],
) -> dict[int, tuple[float, float]]:
    """BMv2 in place of supergw-switch: same veths, same core, same P4Runtime state, same
    generator, host -> gateway. An overloaded BMv2 spends its time dropping, so per size:
    one unpaced run, then the highest paced rate it forwards with < 1 % loss.
    Returns size -> (no-loss frames per wall second, frames per CPU-second at that rate)."""
    say(f"BMv2 on the same veths and core {bed.switch_cpu} (device {testbed.BMV2_DEVICE_ID}) ...")
    bed.start_bmv2(tool.binary)
    _wait_grpc(bed, testbed.BMV2_GRPC_ADDR)
    configure(lan, tmp, tool)
    to_gateway, _ = directions(lan)
    meter = SwitchMeter(bed.switch_cpu, bed.switch_threads, bed.switch_pid)
    out: dict[int, tuple[float, float]] = {}
    for size in SIZES:
        plan = plan_file(tmp, lan, to_gateway, size)
        by_rate: dict[float, trial.Trial] = {}

        def run(rate: float | None) -> dict[str, float]:
            t = trial.run(traffic, to_gateway, plan, size, s.seconds, bed.traffic_cpu, meter, lan.vmac_base,
                          lan.buckets, rate)
            if not bed.switch_alive():
                raise testbed.TestbedError(f"simple_switch_grpc exited during a {size} B run (log: {LOG_DIR / bed.log_name})")
            rows.append({**t.row(), "what": f"BMv2 {to_gateway.label} {size} B, " + (f"paced {rate:,.0f}/s" if rate else "unpaced")})
            say(f"  BMv2 {size} B {'paced ' + format(rate, ',.0f') + '/s' if rate else 'unpaced'}: {t.pps:,.0f} "
                f"frames/s reached the gateways ({t.delivered_share:.1%} of {t.traffic.offered_pps:,.0f} offered)")
            if rate:
                by_rate[t.pps] = t
            return {"pps": t.pps, "delivered_share": t.delivered_share}

        overload = run(None)["pps"]
        best = search_no_loss(run, overload, steps=s.bmv2_steps)
        if best is None:
            raise testbed.TestbedError(f"BMv2 lost more than {1 - NO_LOSS:.0%} of the frames at every paced rate ({size} B)")
        out[size] = (best, by_rate[best].pps_per_cpu_second)
    return out


def search_no_loss(
    trial: Callable[[float], dict[str, float]], start: float, steps: int = 7, attempts: int = 2
) -> float | None:
    """The highest delivered rate among paced trials that lose under 1 %: up by 1.3x from
    `start` while they pass (down by 0.7x while they fail), then bisect once per step left.
    A rate that loses is tried again (up to `attempts` runs): on a shared machine another
    task on the switch's core makes a run lose, and that is not the switch's rate."""
    passed: dict[float, float] = {}
    failed: list[float] = []
    rate = max(1000.0, start)
    for _ in range(steps):
        for _attempt in range(attempts):
            result = trial(rate)
            if result["delivered_share"] >= NO_LOSS:
                passed[rate] = result["pps"]
                break
        else:
            failed.append(rate)
        good = max(passed, default=None)
        bad = min((r for r in failed if good is None or r > good), default=None)
        if good is None:
            rate = rate * 0.7
        elif bad is None:
            rate = good * 1.3
        elif bad / good < 1.05:
            break
        else:
            rate = (good + bad) / 2
    return max(passed.values(), default=None)


def _median_trial(trials: list[trial.Trial]) -> trial.Trial:
    return sorted(trials, key=lambda t: t.pps_per_cpu_second)[len(trials) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dataplane", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one short run each: proves the benchmark works "
                        "end to end in about a minute; not for publishing")
    parser.add_argument("--seconds", type=float, help=f"per measured run (default {FULL.seconds:g}, quick {QUICK.seconds:g})")
    parser.add_argument("--repeat", type=int, help=f"runs per headline figure (default {FULL.repeat}, quick {QUICK.repeat})")
    parser.add_argument("--switch-cpu", type=int, default=None,
                        help="the core the switch runs on (default: the least busy one); the generator and sinks get another")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    s = Settings(args.seconds or base.seconds, args.repeat or base.repeat, base.rig_packets, base.rig_repeat,
                 base.writes, base.bmv2_steps)
    if os.geteuid() != 0:
        print("the dataplane benchmark needs root (namespaces, eBPF)", file=sys.stderr)
        return 1
    if not 0 < s.seconds <= 60 or not 1 <= s.repeat <= 20:
        print("--seconds must be in (0, 60], --repeat in [1, 20]", file=sys.stderr)
        return 2
    ncpu = os.cpu_count() or 1
    if ncpu < 2:
        print("the dataplane benchmark needs 2 CPUs: one for the switch, one for the generator and sinks", file=sys.stderr)
        return 1
    switch_cpu = _least_busy_cpu() if args.switch_cpu is None else args.switch_cpu
    if not 0 <= switch_cpu < ncpu:
        print(f"--switch-cpu {switch_cpu}: this machine has CPUs 0..{ncpu - 1}", file=sys.stderr)
        return 2
    traffic_cpu = next(c for c in range(ncpu) if c != switch_cpu)
    for need, hint in ((SWITCH_BIN, "make switch"), (P4INFO, "the committed P4Info")):
        if not need.is_file():
            print(f"missing {need.relative_to(REPO)} ({hint})", file=sys.stderr)
            return 1

    load1, load5, _ = os.getloadavg()
    rows: list[dict[str, object]] = [
        {"what": f"machine: {ncpu} CPUs, load average before the run", "loadavg_1m": round(load1, 2),
         "loadavg_5m": round(load5, 2), "switch_cpu": switch_cpu, "traffic_cpu": traffic_cpu}
    ]
    say(f"switch on cpu {switch_cpu}, generator and sinks on cpu {traffic_cpu}; load average {load1:.2f} over {ncpu} CPUs"
        + ("; --quick: figures prove the benchmark runs, they are not results" if args.quick else ""))
    lan = the_lan()
    with tempfile.TemporaryDirectory(prefix="sgw-bench-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            dpbench = Dpbench.find_or_build(REPO, tmp)
            traffic = Traffic.find_or_build(REPO, tmp)
            rig_pps = measure_rig(dpbench, s, switch_cpu, rows)
        except (testbed.TestbedError, subprocess.SubprocessError, OSError, ValueError, TypeError) as exc:
            say(f"FAILED (rig): {exc}")
            return 1
        bmv2_tool: bmv2_tools.Bmv2 | None = None
        bmv2_missing: str | None = None
        bmv2_failed = False
        try:
            bmv2_tool = bmv2_tools.prepare(P4_PROGRAM, tmp / "bmv2")
            say(f"BMv2: {bmv2_tool.describe()}")
        except (bmv2_tools.Bmv2Unavailable, subprocess.SubprocessError, OSError) as exc:
            bmv2_missing = str(exc)
            say(f"BMv2 will not be measured: {bmv2_missing}")
        bed = testbed.Testbed(SWITCH_BIN, LOG_DIR, switch_cpu, traffic_cpu)
        bmv2: dict[int, tuple[float, float]] = {}
        try:
            bed.build()
            bed.start_switch()
            _wait_grpc(bed, testbed.GRPC_ADDR)
            say(f"supergw-switch up (device {testbed.DEVICE_ID}); writing the controller's state for "
                f"{len(lan.hosts)} hosts, {lan.buckets} buckets over {len(lan.gateways)} gateways over P4Runtime")
            configure(lan, tmp)
            switch = measure_switch(bed, traffic, lan, tmp, s, rows)
            program_ns, switch_ns = measure_program(bed, traffic, lan, tmp, s, rows)
            bucket = frames.bucket_of_host(lan.hosts[0][0], lan.buckets)
            say(f"timing {s.writes} MODIFYs of bucket {bucket} ...")
            lat = time_moves(lan, tmp, s.writes, bucket)
            move_ms = statistics.median(lat)
            p99 = sorted(lat)[max(0, int(len(lat) * 0.99) - 1)]
            rows.append({"what": "move: P4Runtime MODIFY", "writes": len(lat), "median_ms": round(move_ms, 3),
                         "p99_ms": round(p99, 3), "max_ms": round(max(lat), 3)})
            say(f"  median {move_ms:.3f} ms, p99 {p99:.3f} ms")
            if bmv2_tool is not None:
                rows.append({"what": f"BMv2: {bmv2_tool.describe()}"})
                try:
                    bmv2 = measure_bmv2(bed, bmv2_tool, traffic, lan, tmp, s, rows)
                except (testbed.TestbedError, trial.TrialError, subprocess.SubprocessError, OSError) as exc:
                    bmv2_missing, bmv2_failed = f"BMv2 run failed: {exc}", True
                    say(f"FAILED (BMv2): {exc}")
        except (testbed.TestbedError, trial.TrialError, subprocess.SubprocessError, OSError) as exc:
            say(f"FAILED: {exc}")
            return 1
        finally:
            bed.stop_switch()
            testbed.teardown()
            say("testbed removed")

    head = {key: _median_trial(ts) for key, ts in switch.items()}
    h64, h1400, g64 = head["host -> gateway 64"], head["host -> gateway 1400"], head["gateway -> host 64"]
    runs = f"median of {s.repeat} run{'s' if s.repeat > 1 else ''} of {s.seconds:g} s"
    bmv2_note = bmv2_missing or (
        f"highest paced rate delivered with < {1 - NO_LOSS:.0%} loss, frames per wall-clock second, BMv2 and its "
        f"ports' NAPI threads on core {switch_cpu}; {bmv2_tool.binary if bmv2_tool else ''}"
        f"{' WITH packet logging compiled in' if bmv2_tool and bmv2_tool.logging_compiled_in else ', no logging'}")
    metrics = {
        "switch_pps_64": Metric(h64.pps_per_cpu_second, "pps", goal=GOAL_PPS, note=(
            f"host -> gateway, {N_HOSTS} source MACs over {BUCKETS} buckets on 2 gateways, frames that reached the "
            f"gateways with dst = the gateway's MAC per CPU-second of supergw-switch (its ports' NAPI threads "
            f"{h64.cpu.threads:.2f} s + its process {h64.cpu.process:.2f} s, core {switch_cpu}); {runs}; "
            f"{h64.pps_per_core_second:,.0f} per busy second of the whole core")),
        "switch_wall_pps_64": Metric(h64.pps, "pps", note=(
            f"the same run per wall-clock second; the switch's threads had {h64.cpu.threads / h64.cpu.wall:.0%} of "
            f"core {switch_cpu}, {h64.delivered_share:.0%} of {h64.traffic.offered_pps:,.0f}/s offered got through")),
        "switch_pps_1400": Metric(h1400.pps_per_cpu_second, "pps", note=(
            f"as switch_pps_64 at 1400 B ({h1400.pps_per_cpu_second * 1400 * 8 / 1e9:.1f} Gb/s per CPU-second); "
            f"{h1400.pps:,.0f} per wall second")),
        "switch_pps_64_gateway_to_host": Metric(g64.pps_per_cpu_second, "pps", note=(
            f"gateway -> {N_HOSTS} host MACs, frames that reached the host with src = a vmac per CPU-second of the "
            f"switch; {g64.pps:,.0f} per wall second")),
        "tc_program_ns_64": Metric(program_ns, "ns", note=(
            f"run time per frame of the switch's tc program (the kernel's run-time statistics, one more host -> gateway "
            f"64 B run) of the {switch_ns:.0f} ns per frame the switch spent in that run; the rest is the kernel's "
            f"veth receive, skb and transmit work")),
        "rig_pps_64": Metric(rig_pps, "pps", note=(
            f"rig, not the shipped process: sgw-dpbench live, the eBPF programs configured directly, one repeated "
            f"frame whose gateway MAC is its vmac, generator + switch + sink on one core, counted by the switch's own "
            f"port tx counter; frames per wall-clock second, median of {s.rig_repeat}")),
        "move_rtt_ms": Metric(move_ms, "ms", goal=GOAL_MOVE_MS, higher_is_better=False,
                              note=f"median of {len(lat)}; p99 {p99:.2f} ms"),
        "bmv2_pps_64": Metric(bmv2[64][0] if 64 in bmv2 else None, "pps", note=bmv2_note + (
            f"; {bmv2[64][1]:,.0f} per CPU-second" if 64 in bmv2 else "")),
        "bmv2_pps_1400": Metric(bmv2[1400][0] if 1400 in bmv2 else None, "pps", note=bmv2_note),
        "switch_over_bmv2_64": Metric(
            h64.pps_per_cpu_second / bmv2[64][1] if 64 in bmv2 and bmv2[64][1] else None, "x",
            note=("switch_pps_64 / BMv2's frames per CPU-second (its process and its ports' NAPI threads) at its "
                  "no-loss rate, same testbed, core and generator") if 64 in bmv2 else f"no BMv2 figure: {bmv2_note}"),
    }
    sizes = list(SIZES)
    paths = write_report(
        "dataplane", metrics, rows,
        series=[
            Series("supergw-switch, host -> gateway (per switch CPU-second)", sizes,
                   [head[f"host -> gateway {n}"].pps_per_cpu_second for n in sizes],
                   xlabel="frame size (bytes)", ylabel="frames per second, one core"),
            Series("supergw-switch, host -> gateway (per wall-clock second)", sizes,
                   [head[f"host -> gateway {n}"].pps for n in sizes]),
            *([Series("BMv2 simple_switch_grpc, no-loss rate (per wall-clock second)", sizes, [bmv2[n][0] for n in sizes])]
              if len(bmv2) == len(SIZES) else []),
        ],
        title="supergw dataplane: the shipped switch on one core, and bucket moves",
        log_y=bool(bmv2),  # BMv2 sits two orders of magnitude below the eBPF lines
        method=method_text(switch_cpu, traffic_cpu, s.seconds, s.repeat, s.writes, s.rig_packets, s.rig_repeat,
                           N_HOSTS, BUCKETS, NO_LOSS)
        + f"\n\nLoad average before this run: {load1:.2f} (1 min), {load5:.2f} (5 min) on {ncpu} CPUs."
        " On a shared machine the rates move with other work; run it on an idle one for stable numbers.",
    )
    say(f"wrote {paths.json}, {paths.markdown.name}, {paths.png.name}")
    return 1 if bmv2_failed else 0


if __name__ == "__main__":
    sys.exit(main())
