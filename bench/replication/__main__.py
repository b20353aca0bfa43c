"""bench/replication: what state replication costs (issue 27), on real charons and the real
relay: bytes and CPU per SA, the relay's lag, a new backup's full copy and a takeover, at
16, 64, 256 and 1,000 SAs on one gateway (see README.md for what every number counts).

`python -m bench.replication [--sizes 16,64,256,1000] [--clients 4] [--rekey-rate 200]
[--backend libipsec|uml] [--quick]` (root, under the machine lock). Writes
bench/results/replication.{json,md,png}; exit 1 when any size failed or a probe that must be
zero was not. `--quick`: 16 and 64 SAs (about 50 s once the certificates exist).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.replication import analysis, plot
from bench.replication.analysis import SizeRun
from bench.replication.lab import GATEWAYS, HALF_OPEN_PER_CLIENT, HALF_OPEN_TOTAL, POOL_PREFIX, rig
from bench.replication.measure import PhaseCost, establish, new_backup, rekey, replication_off, takeover
from bench.report import write_report
from supergw_gateway.config import CharonTuning
from supergw_gateway.statesync.links import INJECT_BURST, INJECT_RATE
from supergw_gateway.statesync.replicator import FAST_SWEEP_S, REKEY_RETRY_S
from supergw_proto.reports import DEFAULT_REPORT_INTERVAL_MS

SIZES = (16, 64, 256, 1000)
QUICK_SIZES = (16, 64)
HEADLINE = (64, 1000)
MAX_SAS = (1 << (32 - POOL_PREFIX)) - 2  # one pool's virtual IPs
TITLE = "State replication: cost per SA, lag, full copy and takeover against SAs per gateway"


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...]
    clients: int
    rekey_rate: float
    backend: str
    state_dir: Path
    results_dir: Path | None


def plan_from(argv: list[str] | None) -> Plan:
    p = argparse.ArgumentParser(prog="python -m bench.replication", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="SAs on the primary gateway, comma-separated")
    p.add_argument("--clients", type=int, default=4, help="client charons the SAs are spread over (default 4)")
    p.add_argument("--rekey-rate", type=float, default=200.0,
                   help="rekeys the clients ask for per second, all together (default 200)")
    p.add_argument("--backend", choices=("libipsec", "uml"), default="libipsec",
                   help="the gateways' ESP: kernel-libipsec in namespaces, or kernel XFRM in UML guests")
    p.add_argument("--state-dir", type=Path, default=Path("/run/sgw-bench-replication"),
                   help="certificates (kept between runs), logs of the last size")
    p.add_argument("--results-dir", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help=f"sizes {', '.join(map(str, QUICK_SIZES))} only")
    a = p.parse_args(argv)
    try:
        sizes = QUICK_SIZES if a.quick else tuple(sorted({int(x) for x in a.sizes.split(",") if x.strip()}))
    except ValueError:
        p.error(f"--sizes {a.sizes!r}: give whole numbers separated by commas, e.g. 16,64,256,1000")
    if not sizes or sizes[0] < 1 or sizes[-1] > MAX_SAS:
        p.error(f"--sizes: each from 1 to {MAX_SAS} (one gateway's /{POOL_PREFIX} pool)")
    if a.clients < 1 or a.clients > 16:
        p.error("--clients: from 1 to 16")
    if not 1 <= a.rekey_rate <= 5000:
        p.error("--rekey-rate: from 1 to 5000 per second")
    return Plan(sizes, a.clients, a.rekey_rate, a.backend, a.state_dir, a.results_dir)


def preflight(plan: Plan) -> str | None:
    if os.geteuid() != 0:
        return "needs root (namespaces, charon): run it as root, under the machine lock"
    tools = ["/usr/sbin/charon-systemd", shutil.which("ip"), shutil.which("ss"), shutil.which("pki")]
    if plan.backend == "uml":
        tools.append("/usr/bin/linux.uml")
    missing = [t for t in tools if not t or not Path(t).exists()]
    if missing:
        return f"missing {missing}: run `make deps`"
    return None


def run_size(n: int, plan: Plan) -> SizeRun:
    run = SizeRun(n, min(plan.clients, n))
    t0 = time.monotonic()
    print(f"== {n} SAs on g0 ({run.clients} client charons, {plan.backend})", flush=True)
    try:
        with rig(n, plan.clients, plan.backend, plan.state_dir,
                 progress=lambda m: print(f"   {m}", flush=True)) as r:
            steps: list[tuple[str, Callable[[], PhaseCost]]] = [
                     ("initial copy", lambda: establish(r)),
                     ("CHILD rekeys", lambda: rekey(r, "child", plan.rekey_rate)),
                     ("IKE rekeys", lambda: rekey(r, "ike", plan.rekey_rate)),
                     ("negative control: CHILD rekeys with replication off",
                      lambda: replication_off(r, plan.rekey_rate)),
                     ("full copy to a new backup", lambda: new_backup(r))]
            for what, step in steps:
                print(f"   {what} ...", flush=True)
                p = step()
                run.phases.append(p)
                row = analysis.phase_row(p)
                print(f"   {what}: {row['messages/SA']} messages and {row['payload B/SA']} B per SA "
                      f"({row['wire B/SA']} B on the wire), relay {row['sender relay µs/SA']} µs/SA out, "
                      f"{row['receiver relay µs/SA']} µs/SA in, lag p99 {row['lag p99 ms']} ms, "
                      f"copy {row['copy']}, {p.seconds:.1f} s", flush=True)
            print("   takeover: g0 killed, g2 takes over ...", flush=True)
            t = takeover(r)
            run.takeover = t
            print(f"   takeover: CHILD SAs renewed {t.cost.times['children_renewed_s']:.2f} s, IKE SAs rekeyed "
                  f"{t.cost.times['ike_rekeyed_s']:.2f} s; pings {t.answered}/{t.pinged}, new IKE_AUTHs "
                  f"{t.new_ike_auths}, replay drops {t.replay_drops}", flush=True)
    except Exception as exc:  # this size stops; the others still run, the report says why
        run.error = f"{type(exc).__name__}: {exc}"
        print(f"   FAILED at {n} SAs: {run.error}\n   logs: {plan.state_dir} (gw/, fleet/, agents/)", flush=True)
        traceback.print_exc()
    print(f"   {n} SAs done in {time.monotonic() - t0:.0f} s", flush=True)
    return run


def method(plan: Plan, runs: list[SizeRun]) -> str:
    t = CharonTuning()
    return f"""Real strongSwan charons (`ha` plugin, {plan.backend}) and the real relay
(`statesync.Replicator`, each in an agent process of its own, swept every
{DEFAULT_REPORT_INTERVAL_MS} ms as the agent sweeps it): {GATEWAYS} gateways in the ring
g0 -> g1 -> g2 -> g0, every SA on g0, held by g1. Clients: {plan.clients} stock client charons
(kernel-libipsec, strongSwan's client defaults: no DPD), each with many connections, each
connection its own identity, certificate and virtual IP. Per size, in order: every connection
initiated (initial copy g0 -> g1), every CHILD SA rekeyed, every IKE SA rekeyed (clients ask
through VICI at {plan.rekey_rate:g}/s in all), the ring changed to g0 -> g2 -> g1 (g2, which held
nothing, gets g0's full copy by replay; g1 drops its copies), then g0 killed (charon SIGKILL,
agent killed), its clients and pool steered to g2, g2 ordered to take g0 over (as the
controller does: `test_takeover.py`). README.md says what every number counts.

Inputs (settings, not results): sizes {', '.join(map(str, plan.sizes))} SAs; gateways at the
shipped charon defaults (block_threshold {t.block_threshold} half-open IKE SAs per peer,
cookie_threshold {t.cookie_threshold}, {t.threads} threads), so each client keeps at most
{HALF_OPEN_PER_CLIENT} connections half-open and all at most {HALF_OPEN_TOTAL}; a /{POOL_PREFIX}
pool per gateway (the one change from the lab's /24); the relay's injection pacing
{INJECT_RATE:g}/s (burst {INJECT_BURST}); the takeover's fast sweeps every {FAST_SWEEP_S[0]} s
for {FAST_SWEEP_S[1]} s, a rekey asked again after {REKEY_RETRY_S:g} s.

{analysis.fastest(runs)}"""


def report(plan: Plan, runs: list[SizeRun]) -> int:
    headline = [n for n in HEADLINE if n in plan.sizes] or [plan.sizes[0], plan.sizes[-1]]
    rows = [analysis.phase_row(p) for r in runs for p in r.phases]
    tk = [row for r in runs if (row := analysis.takeover_row(r)) is not None]
    growth = [{"cost": f"{c.panel}: {c.label}", "unit": c.unit, "k": None if (k := analysis.growth(runs)[c.key]) is None
               else round(k, 3)} for c in analysis.CURVES]
    fails = analysis.failures(runs)
    paths = write_report("replication", analysis.metrics(runs, sorted(set(headline))), rows, analysis.series(runs),
                         title=TITLE, method=method(plan, runs), results_dir=plan.results_dir,
                         rows_title="Cost per SA, per phase and size", failures=fails,
                         tables={"Takeover": tk, "Growth of each cost per SA (cost per SA ∝ SAs^k)": growth})
    plot.draw(paths.png, runs, TITLE)
    print(f"== results: {paths.markdown}, {paths.json}, {paths.png}", flush=True)
    if fails:
        print(f"== {len(fails)} failures (listed in the report): exit 1", flush=True)
    return 1 if fails else 0


def main(argv: list[str] | None = None) -> int:
    plan = plan_from(argv)
    problem = preflight(plan)
    if problem:
        print(f"bench.replication: {problem}", file=sys.stderr)
        return 2
    runs = [run_size(n, plan) for n in plan.sizes]
    return report(plan, runs)


if __name__ == "__main__":
    sys.exit(main())
