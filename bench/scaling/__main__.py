"""The clustering paper's evaluation (§4) on the two-site emulation: real gateways (UML guests,
kernel ESP), real tunnels, real switches and controllers.

`python -m bench.scaling [--quick]` (root; run it under `flock /work/.emu.lock`; it boots and
stops the emulation itself, once per (ESP suite, N) for Fig. 4 and once per Fig. 5 run).
Writes bench/results/scaling.{json,md,png}.

- Fig. 4, gateway-bound (fig4.py): zero-loss throughput of N = 1..4 pairs, each gateway
  limited by its own CPU quota, repeated trials with 95 % intervals, T(N)/T(1) beside the
  partition's prediction, a skewed partition as negative control, capacity vs quota.
- Fig. 5 in the paper's regime (fig5.py): K = 256, 224 hosts one per bucket, all on gateway 1
  at t = 0; the paper's Algorithm 5 per seed and our greedy policy, one boot each; the paper's
  criterion (delivered = offered) beside ours (bucket spread); moves with their reasons.
- The soak (soak.py) in our policy's Fig. 5 boot after its run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench.scaling import fig4, fig5, results, soak
from bench.scaling.emulation import LoadedEmulation, say
from bench.scaling.settings import BIG_FRAME, DEFAULT_SUITE, SMALL_FRAME, SUITE_LABEL, Settings
from topologies.schema import TWO_SITE_PAPER_TOPOLOGY

def parse(argv: list[str] | None) -> Settings:
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="CI/development run: N = 1 and 3, 1408 B, default suite, 2 trials, one short Fig. 5 run each")
    p.add_argument("--gateways", type=int, nargs="+", metavar="N", help="cluster sizes (default 1 2 3 4)")
    p.add_argument("--suites", nargs="+", choices=list(SUITE_LABEL.values()), help="ESP suites (default both; --quick gcm)")
    p.add_argument("--frames", type=int, nargs="+", choices=[BIG_FRAME, SMALL_FRAME], help="frame sizes (default both)")
    p.add_argument("--quota", type=float, default=10.0, metavar="PERCENT",
                   help="each gateway's CPU quota, %% of one core (default 10: 8 gateways take 40 %% of 2 cores)")
    p.add_argument("--scheduler", choices=["rt", "cfs"], default="rt",
                   help="how a gateway gets its quota: rt (default) SCHED_FIFO within a real-time budget of the "
                        "quota, served the moment a frame arrives; cfs: a CFS quota and weight")
    p.add_argument("--trials", type=int, default=None, help="zero-loss searches per cell (default 4; --quick 2)")
    p.add_argument("--control-trials", type=int, default=None, help="searches of the skewed control per N (default 3)")
    p.add_argument("--skew", type=float, default=1.5, help="the control: gateway 1 holds this x its even share")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="Fig. 5: one Algorithm 5 run per seed (default 1 2 3)")
    p.add_argument("--fig5-load", type=float, default=0.9, help="Fig. 5's offered load, a fraction of T(3) (default 0.9)")
    p.add_argument("--no-fig4", action="store_true", help="skip Fig. 4 (Fig. 5 then needs --t3-pps)")
    p.add_argument("--no-fig5", action="store_true", help="skip Fig. 5 and the soak")
    p.add_argument("--t3-pps", type=float, default=None, help="Fig. 5's basis when Fig. 4 is skipped: T(3), pps/dir")
    p.add_argument("--soak-s", type=float, default=None, help="soak length (default 600; --quick 30; 0 skips it)")
    p.add_argument("--topology", type=Path, default=TWO_SITE_PAPER_TOPOLOGY, help="two-site file to start from")
    p.add_argument("--results-dir", type=Path, default=None,
                   help="where scaling.{json,md,png} go (default bench/results; a development run elsewhere)")
    a = p.parse_args(argv)
    quick = a.quick
    ns = sorted(set(a.gateways or ([1, 3] if quick else [1, 2, 3, 4])))
    if any(not 1 <= n <= 4 for n in ns):
        p.error("--gateways: N is 1..4")
    if not 0 < a.quota <= 100:
        p.error("--quota: a percentage of one core in (0, 100]")
    trials = a.trials if a.trials is not None else (2 if quick else 4)
    control = a.control_trials if a.control_trials is not None else (2 if quick else 3)
    if trials < 1 or control < 0:
        p.error("--trials must be >= 1 and --control-trials >= 0")
    if a.skew <= 1.0:
        p.error("--skew: > 1 (an even share is no control)")
    if not 0 < a.fig5_load <= 1:
        p.error("--fig5-load: a fraction in (0, 1]")
    if a.soak_s is not None and a.soak_s < 0:
        p.error("--soak-s: >= 0")
    if a.no_fig4 and not a.no_fig5 and not a.t3_pps:
        p.error("--no-fig4 needs --t3-pps for Fig. 5 (or --no-fig5)")
    if a.t3_pps is not None and a.t3_pps <= 0:
        p.error("--t3-pps: > 0")
    if not a.topology.is_file():
        p.error(f"--topology: {a.topology} is not a file")
    seeds = a.seeds or ([1] if quick else [1, 2, 3])
    notes = [f"Fig. 5's T(3) given on the command line: {a.t3_pps:g} pps/dir"] if a.t3_pps else []
    return Settings(
        ns=ns,
        frames=a.frames or ([BIG_FRAME] if quick else [BIG_FRAME, SMALL_FRAME]),
        suites=[k for k, v in SUITE_LABEL.items() if v in a.suites] if a.suites
        else ([DEFAULT_SUITE] if quick else list(SUITE_LABEL)),
        quota_percent=a.quota,
        realtime=a.scheduler == "rt",
        trials=trials,
        control_trials=control,
        quota_factors=(0.5, 2.0),
        skew=a.skew,
        probe_s=2.0 if quick else 3.0,
        resolution=0.04 if quick else 0.02,
        max_probes=8 if quick else 12,
        fig5_seeds=seeds,
        fig5_paper_s=120.0 if quick else 480.0,
        fig5_greedy_s=40.0 if quick else 90.0,
        fig5_load=a.fig5_load,
        soak_s=a.soak_s if a.soak_s is not None else (30.0 if quick else 600.0),
        base=a.topology,
        fig4=not a.no_fig4,
        fig5=not a.no_fig5,
        results_dir=a.results_dir,
        quick=quick,
        notes=notes,
        t3_pps=a.t3_pps,
    )


def main(argv: list[str] | None = None) -> int:
    s = parse(argv)
    if os.geteuid() != 0:
        print("bench.scaling needs root (namespaces, eBPF, UML, cgroups); run it under "
              "`flock /work/.emu.lock`", file=sys.stderr)
        return 2
    res = results.Results()
    res.note_load("start")

    def report() -> None:
        results.write(s, res)

    if s.fig4:
        fig4.run(s, res.fig4, report)
        res.note_load("Fig. 4 done")
    if s.fig5:
        t3 = res.fig4.cell(DEFAULT_SUITE, BIG_FRAME, 3)
        measured = t3.interval() if t3 is not None else None
        t3_pps = s.t3_pps or (measured.mean if measured is not None else None)

        def soak_after(emu: LoadedEmulation) -> None:
            if s.soak_s > 0 and t3_pps:
                soak.soak(emu, s.soak_s, soak.SOAK_LOAD * t3_pps, res.soak)

        fig5.run(s, res.fig5, t3_pps, report, soak_after)
        res.note_load("Fig. 5 done")
    report()
    for f in res.failures():
        say(f"FAILED: {f}")
    return 1 if res.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
