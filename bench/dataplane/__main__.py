"""Dataplane benchmark: `python -m bench.dataplane [--quick] [--seconds S] [--repeat N] [--switch-cpu C]`.

Writes bench/results/dataplane.{json,md,png} with
  switch_pps_64, switch_pps_1400  headline: host -> gateway frames that reached the gateways with dst rewritten
                                  to the gateway MAC, per CPU-second of the shipped supergw-switch (its ports'
                                  NAPI threads and its process, all on the switch's core); goal for 64 B >= 1e6
  switch_wall_pps_64              the same run's frames per wall-clock second
  switch_pps_64_by_<generator>    switch_pps_64 with each generator mode (xdp-live-frames, af-packet-tx-ring): the
                                  headline's mode is the fastest this kernel allows; null with the kernel's refusal
  switch_pps_64_gateway_to_host   gateway -> host frames that reached the host with src rewritten to a vmac, per
                                  CPU-second of the switch
  switch_pps_ipv6_66,             the IPv6 row: host -> gateway IPv6/UDP frames (66 B: the smallest Ethernet frame
  switch_pps_ipv6_1400            that holds them), same switch, state, run and count; goal for 66 B >= 1e6
  tc_program_ns_64                the tc program's own run time per frame (kernel.bpf_stats_enabled), of the
                                  switch's ns per frame
  rig_pps_64                      the rig (sgw-dpbench live): eBPF programs configured directly, one repeated frame
                                  whose gateway MAC is its vmac, generator + switch + sink on one core
  move_rtt_ms                     median P4Runtime MODIFY of one bucket entry, write to reply
  bmv2_pps_64, bmv2_pps_1400      BMv2 (simple_switch_grpc, no logging) on the switch's core, no-loss rate
  switch_over_bmv2_64             switch_pps_64 / BMv2's frames per CPU-second at its no-loss rate
See bench/dataplane/README.md for the method. Every object is named sgw-bench-* and removed at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.dataplane import bmv2 as bmv2_tools
from bench.dataplane import frames, restart, testbed, trial
from bench.dataplane.generators import Dpbench, Traffic
from bench.dataplane.method import method_text
from bench.dataplane.runs import (
    BUCKETS, FULL, LOG_DIR, N_HOSTS, NO_LOSS, P4_PROGRAM, P4INFO, QUICK, REPO, SIZES, SIZES6, SWITCH_BIN, Settings,
    configure, least_busy_cpu, measure_bmv2, measure_other_generators, measure_program, measure_rig, measure_switch,
    measure_without_offload,
    median_trial, say,
    the_lan, time_moves, wait_grpc,
)
from bench.report import Metric, Series, write_report

GOAL_PPS = 1_000_000.0
GOAL_MOVE_MS = 5.0
IPV6_GOAL_RATIO = 0.9


def restart_failures(runs: dict[str, restart.RestartRun]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [{"trial": f"switch {k}", "why": f"{runs[k].lost} of {runs[k].sent} frames lost"}
                                    for k in ("restart", "crash") if runs[k].lost]
    if runs["control"].lost == 0:
        out.append({"trial": "switch restart, negative control", "why": "lost nothing: the runs cannot tell a "
                    "lossless restart from a lossy one"})
    return out


def restart_metrics(runs: dict[str, restart.RestartRun]) -> dict[str, Metric]:
    load = f"{restart.RESTART_HOSTS} hosts x {restart.RATE_PER_HOST:,.0f} frames/s host -> gateway, {restart.SECONDS:g} s"
    r, c, ctl = runs["restart"], runs["crash"], runs["control"]
    return {
        "switch_restart_lost": Metric(r.lost, "frames", note=(
            f"goal 0; switch restart under {load}: SIGTERM and a new supergw-switch (systemctl restart, a package "
            f"upgrade), frames sent - delivered; of {r.sent} sent; the process was down {r.down_s:.2f} s")),
        "switch_crash_lost": Metric(c.lost, "frames", note=(
            f"goal 0; as switch_restart_lost with SIGKILL (a crash); of {c.sent} sent; down {c.down_s:.2f} s")),
        "switch_restart_control_lost": Metric(ctl.lost, "frames", note=(
            f"negative control, must be > 0: the same restart of a switch run with --teardown-on-exit (its data plane "
            f"goes with it, as before), reconfigured over P4Runtime at once; of {ctl.sent} sent; down and "
            f"reconfigured {ctl.down_s:.2f} s")),
    }

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
    switch_cpu = least_busy_cpu() if args.switch_cpu is None else args.switch_cpu
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
            dpbench = Dpbench.build(REPO)
            traffic = Traffic.build(REPO)
            modes = traffic.modes()
            allowed = [m for m in modes if m.allowed]
            if not allowed:
                raise testbed.TestbedError("no generator mode works on this kernel: " + "; ".join(
                    f"{m.mode}: {m.why}" for m in modes))
            traffic = dataclasses.replace(traffic, mode=allowed[0].mode)
            for m in modes:
                rows.append({"what": f"generator mode {m.mode}", "allowed": m.allowed,
                             "used": "headline" if m.mode == traffic.mode else ("comparison" if m.allowed else "no"),
                             "why": m.why})
                say(f"generator {m.mode}: {'allowed' if m.allowed else 'refused'} ({m.why})")
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
            wait_grpc(bed, testbed.GRPC_ADDR)
            say(f"supergw-switch up (device {testbed.DEVICE_ID}); writing the controller's state for "
                f"{len(lan.hosts)} hosts, {lan.buckets} buckets over {len(lan.gateways)} gateways over P4Runtime")
            configure(lan, tmp)
            switch = measure_switch(bed, traffic, lan, tmp, s, rows)
            other_generators = measure_other_generators(bed, traffic, lan, tmp, s, rows, modes)
            bare = measure_without_offload(bed, traffic, lan, tmp, s, rows)
            program_ns, switch_ns = measure_program(bed, traffic, lan, tmp, s, rows)
            program6_ns, switch6_ns = measure_program(bed, traffic, lan, tmp, s, rows, ipv6=True)
            bucket = frames.bucket_of_host(lan.hosts[0][0], lan.buckets)
            say(f"timing {s.writes} MODIFYs of bucket {bucket} ...")
            lat = time_moves(lan, tmp, s.writes, bucket)
            move_ms = statistics.median(lat)
            p99 = sorted(lat)[max(0, int(len(lat) * 0.99) - 1)]
            rows.append({"what": "move: P4Runtime MODIFY", "writes": len(lat), "median_ms": round(move_ms, 3),
                         "p99_ms": round(p99, 3), "max_ms": round(max(lat), 3)})
            say(f"  median {move_ms:.3f} ms, p99 {p99:.3f} ms")
            restarts = restart.measure_restarts(bed, traffic, lan, tmp, rows, restart.Reconfigure(
                wait_grpc=lambda: wait_grpc(bed, testbed.GRPC_ADDR), configure=lambda: configure(lan, tmp)), say)
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

    head = {key: median_trial(ts) for key, ts in switch.items()}
    bare_head = {key: median_trial(ts) for key, ts in bare.items()}
    bare_ratio = (bare_head[f"IPv6 host -> gateway {SIZES6[0]}"].pps_per_cpu_second
                  / bare_head["host -> gateway 64"].pps_per_cpu_second) if bare_head else None
    h64, h1400, g64 = head["host -> gateway 64"], head["host -> gateway 1400"], head["gateway -> host 64"]
    v6_small, v6_1400 = head[f"IPv6 host -> gateway {SIZES6[0]}"], head["IPv6 host -> gateway 1400"]
    runs = f"median of {s.repeat} run{'s' if s.repeat > 1 else ''} of {s.seconds:g} s"
    gen_note = f"generator {traffic.mode}"
    by_generator: dict[str, Metric] = {}
    for m in modes:
        ts = switch["host -> gateway 64"] if m.mode == traffic.mode else other_generators.get(m.mode)
        key = f"switch_pps_64_by_{m.mode.replace('-', '_')}"
        if ts:
            t = median_trial(ts)
            by_generator[key] = Metric(t.pps_per_cpu_second, "pps", note=(
                f"as switch_pps_64, frames sent by {m.mode} ({'the headline runs' if m.mode == traffic.mode else 'runs of their own'}, "
                f"{runs}): {m.why}; {t.delivered_share:.0%} of {t.traffic.offered_pps:,.0f}/s offered got through, "
                f"switch threads {t.cpu.threads / t.cpu.wall:.0%} of the core"))
        else:
            by_generator[key] = Metric(None, "pps", note=f"{m.mode} not measured: {m.why}")
    bmv2_note = bmv2_missing or (
        f"highest paced rate delivered with < {1 - NO_LOSS:.0%} loss, frames per wall-clock second, BMv2 and its "
        f"ports' NAPI threads on core {switch_cpu}; {bmv2_tool.binary if bmv2_tool else ''}"
        f"{' WITH packet logging compiled in' if bmv2_tool and bmv2_tool.logging_compiled_in else ', no logging'}")
    metrics = {
        "switch_pps_64": Metric(h64.pps_per_cpu_second, "pps", goal=GOAL_PPS, note=(
            f"host -> gateway, {N_HOSTS} source MACs over {BUCKETS} buckets on 2 gateways, frames that reached the "
            f"gateways with dst = the gateway's MAC per CPU-second of supergw-switch (its ports' NAPI threads "
            f"{h64.cpu.threads:.2f} s + its process {h64.cpu.process:.2f} s, core {switch_cpu}); {runs}; "
            f"{h64.pps_per_core_second:,.0f} per busy second of the whole core; {gen_note}")),
        **by_generator,
        "switch_wall_pps_64": Metric(h64.pps, "pps", note=(
            f"the same run per wall-clock second; the switch's threads had {h64.cpu.threads / h64.cpu.wall:.0%} of "
            f"core {switch_cpu}, {h64.delivered_share:.0%} of {h64.traffic.offered_pps:,.0f}/s offered got through")),
        "switch_pps_1400": Metric(h1400.pps_per_cpu_second, "pps", note=(
            f"as switch_pps_64 at 1400 B ({h1400.pps_per_cpu_second * 1400 * 8 / 1e9:.1f} Gb/s per CPU-second); "
            f"{h1400.pps:,.0f} per wall second")),
        "switch_pps_64_gateway_to_host": Metric(g64.pps_per_cpu_second, "pps", note=(
            f"gateway -> {N_HOSTS} host MACs, frames that reached the host with src = a vmac per CPU-second of the "
            f"switch; {g64.pps:,.0f} per wall second")),
        f"switch_pps_ipv6_{SIZES6[0]}": Metric(v6_small.pps_per_cpu_second, "pps", goal=GOAL_PPS, note=(
            f"the IPv6 row: as switch_pps_64 with IPv6/UDP frames from each host's IPv6 address (learned, with "
            f"nd_settings configured) at {SIZES6[0]} B, the smallest Ethernet frame IPv6/UDP fits in; same switch, "
            f"state, core and count; {v6_small.pps:,.0f} per wall second, {v6_small.delivered_share:.0%} of "
            f"{v6_small.traffic.offered_pps:,.0f}/s offered got through")),
        "switch_pps_ipv6_1400": Metric(v6_1400.pps_per_cpu_second, "pps", note=(
            f"as switch_pps_ipv6_{SIZES6[0]} at 1400 B; {v6_1400.pps:,.0f} per wall second")),
        "tc_program_ns_64": Metric(program_ns, "ns", note=(
            f"run time per frame of the switch's tc program (the kernel's run-time statistics, one more host -> gateway "
            f"64 B run) of the {switch_ns:.0f} ns per frame the switch spent in that run; the rest is the kernel's "
            f"veth receive, skb and transmit work")),
        f"tc_program_ns_ipv6_{SIZES6[0]}": Metric(program6_ns, "ns", note=(
            f"as tc_program_ns_64 for the IPv6 row's frames ({SIZES6[0]} B), of the {switch6_ns:.0f} ns per frame the "
            f"switch spent in that run")),
        "ipv6_over_ipv4_64": Metric(v6_small.pps_per_cpu_second / h64.pps_per_cpu_second if h64.pps_per_cpu_second else None,
                                    "x", goal=IPV6_GOAL_RATIO, note=(
            f"switch_pps_ipv6_{SIZES6[0]} / switch_pps_64, the same switch, state and run: IPv6 within "
            f"{1 - IPV6_GOAL_RATIO:.0%} of IPv4 is the goal")),
        "ipv6_over_ipv4_64_no_offload": Metric(bare_ratio, "x", note=(
            "negative control of ipv6_over_ipv4_64, must come out lower: the same two rows with frames handed over "
            "without checksum offload state (the switch port's GRO then verifies each IPv6 frame's UDP checksum in "
            "software, and none of the IPv4 frames', whose checksum is zero)" if bare_ratio is not None else
            f"not measured: the {traffic.mode} generator has no checksum offload state to drop")),
        **restart_metrics(restarts),
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
            Series("supergw-switch, IPv6 host -> gateway (per switch CPU-second)", list(SIZES6),
                   [head[f"IPv6 host -> gateway {n}"].pps_per_cpu_second for n in SIZES6]),
            *([Series("BMv2 simple_switch_grpc, no-loss rate (per wall-clock second)", sizes, [bmv2[n][0] for n in sizes])]
              if len(bmv2) == len(SIZES) else []),
        ],
        title="supergw dataplane: the shipped switch on one core, and bucket moves",
        log_y=bool(bmv2),  # BMv2 sits two orders of magnitude below the eBPF lines
        failures=[*([{"trial": "BMv2", "why": bmv2_missing}] if bmv2_failed else []), *restart_failures(restarts)],
        method=method_text(switch_cpu, traffic_cpu, s.seconds, s.repeat, s.writes, s.rig_packets, s.rig_repeat,
                           N_HOSTS, BUCKETS, NO_LOSS, SIZES6[0], traffic.mode)
        + f"\n\nLoad average before this run: {load1:.2f} (1 min), {load5:.2f} (5 min) on {ncpu} CPUs."
        " On a shared machine the rates move with other work; run it on an idle one for stable numbers.",
    )
    say(f"wrote {paths.json}, {paths.markdown.name}, {paths.png.name}")
    for f in restart_failures(restarts):
        say(f"FAILED: {f['trial']}: {f['why']}")
    return 1 if bmv2_failed or restart_failures(restarts) else 0


if __name__ == "__main__":
    sys.exit(main())
