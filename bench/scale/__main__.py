"""A site of 50,000 hosts and 32 gateways, with the cost curve of every part (issue 29).

    python -m bench.scale [--quick] [--gateways 4,8,16,32] [--hosts 1000,5000,20000,50000]
                          [--bmv2-gateways 4] [--bmv2-hosts 1000,5000] [--no-writes] [--no-pins]
                          [--results-dir DIR]

Root, under the machine lock (`flock /work/.emu.lock`); about 75 minutes, `--quick` (one point:
N = 4, 1,000 hosts, eBPF; smaller write and pin runs) about 3. Writes bench/results/scale.{json,md,png}
(`--quick`: scale-quick.*). Exit status 1 when a phase failed, a probe did not recover or, in a
full run, a goal was missed (each listed with the part that limits it).

For each gateway count N the one-site emulation (`make run`'s system: the real eBPF switch or
BMv2, the real controller with its shipped defaults, N real strongSwan gateways each with its
peer and tunnel and its agent) is booted through the emulation engine (plan.py), and for each
host count H: the controller is restarted on emptied host tables, H dual-stack simulated hosts
start at once (learning.py), the site is measured at rest (costs.py), over REST (rest.py), in a
gateway failover, a rebalance round and a controller restart (faults.py). Then P4Runtime write
rates on both targets (writes.py) and remote-access pins at scale (pins.py). What every number
counts, from which event to which: bench/scale/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.dataplane.bmv2 import PERF_BUILD
from bench.probes import BenchError
from bench.scale import ha, pins, plan, point, results, writes
from bench.scale.site import ScaleSite
from supergw_controller.config import TimingConfig
from supergw_proto import p4constants as pc
from topologies import bmv2
from topologies.emulation import Emulation, EmulationError
from topologies.hostsim_client import HOSTSIM_BIN
from topologies.paths import SWITCH_BIN
from topologies.schema import REMOTE_ACCESS_TOPOLOGY

_T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[{time.monotonic() - _T0:7.1f}s] {msg}", flush=True)


def ints(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in text.split(",") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated counts, e.g. 4,8,16,32") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one count, each >= 1")
    return out


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one point (N = 4, 1,000 hosts, eBPF), small extras: for CI")
    p.add_argument("--gateways", type=ints, default=None, help="gateway counts on eBPF (default 4,8,16,32)")
    p.add_argument("--hosts", type=ints, default=None, help="host counts on eBPF (default 1000,5000,20000,50000)")
    p.add_argument("--bmv2-gateways", type=ints, default=None, help="gateway counts on BMv2 (default 4; quick: none)")
    p.add_argument("--bmv2-hosts", type=ints, default=None, help="host counts on BMv2 (default 1000,5000)")
    p.add_argument("--no-writes", action="store_true", help="skip the P4Runtime write rates")
    p.add_argument("--no-pins", action="store_true", help="skip the remote-access pins")
    p.add_argument("--ha", action="store_true", help="also replicated controllers (three replicas, etcd) at the largest point")
    p.add_argument("--results-dir", type=Path, default=None, help="where the report goes (default bench/results)")
    args = p.parse_args(argv)
    if args.gateways is None:
        args.gateways = plan.QUICK_GATEWAYS if args.quick else plan.FULL_GATEWAYS
    if args.hosts is None:
        args.hosts = plan.QUICK_HOSTS if args.quick else plan.FULL_HOSTS
    if args.bmv2_gateways is None:
        args.bmv2_gateways = () if args.quick else (4,)
    if args.bmv2_hosts is None:
        args.bmv2_hosts = (1000, 5000)
    if max(args.gateways + args.bmv2_gateways, default=0) > 32 or max(args.hosts + args.bmv2_hosts) > 65536 - 1:
        p.error("at most 32 gateways and 65,535 hosts (the switch's host tables hold 65,536)")
    return args


def missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (namespaces, veths, eBPF, strongSwan): run it as root under flock /work/.emu.lock"
    for path, how in ((SWITCH_BIN, "make switch"), (HOSTSIM_BIN, "make hostsim")):
        if not path.is_file():
            return f"{path} is missing: {how}"
    return None


@contextmanager
def booted(gateways: int, switch: str, workdir: Path) -> Iterator[ScaleSite]:
    """The scale site of `gateways` gateways, booted through the engine and removed afterwards."""
    running = Emulation.attach()
    if running is not None and running.is_running():
        raise EmulationError(f"an emulation runs already ({running.describe()}): `make stop` it first")
    emu = Emulation.from_file(plan.write_topology(gateways, switch, workdir), say=lambda m: say("  " + m))
    t0 = time.monotonic()
    ok = emu.up()
    try:
        if not ok:
            raise EmulationError(f"the scale site did not come up: {', '.join(emu.state.failed_stages())} failed")
        say(f"  booted N = {gateways} on {switch} in {time.monotonic() - t0:.0f} s")
        site = ScaleSite(emu, say)
        site.stop_hosts()
        yield site
    finally:
        emu.down(quiet=True)


def matrix(run: results.Run, switch: str, gateways: tuple[int, ...], hosts: tuple[int, ...],
           settings: point.Settings, workdir: Path) -> None:
    for n in gateways:
        say(f"== {switch}: N = {n} gateways, hosts {', '.join(map(str, hosts))}")
        try:
            with booted(n, switch, workdir) as site:
                for index, h in enumerate(hosts):
                    run.points.append(point.run(site, switch, plan.Point(n, h), index, settings, say))
        except (EmulationError, BenchError) as exc:
            say(f"== {switch} N = {n}: {exc}")
            failed = point.PointResult(switch, plan.Point(n, hosts[0]))
            failed.errors.append(f"boot: {exc}")
            run.points.append(failed)


def guarded(run: results.Run, what: str, fn: Callable[[], None]) -> None:
    """Run one part of the benchmark; a failure is a note of the report, and the rest runs."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - said in the report with what failed; the other parts still run
        run.failed_parts.append(f"{what} failed: {type(exc).__name__}: {exc}")
        say(f"== {what} FAILED: {exc}\n{traceback.format_exc(limit=6)}")


def pin_phase(run: results.Run, sizes: tuple[int, ...], gateways: int, switch: str) -> None:
    say(f"== remote-access pins: {', '.join(map(str, sizes))} clients over {gateways} gateways")
    emu = Emulation.from_file(REMOTE_ACCESS_TOPOLOGY, switch=switch,  # type: ignore[arg-type]
                              changes={"gateways": gateways, "clients": 0}, say=lambda m: say("  " + m))
    ok = emu.up()
    stand: pins.StandIn | None = None
    try:
        if not ok:
            run.pins_note = f"the remote-access site did not come up: {', '.join(emu.state.failed_stages())}"
            return
        site = emu.site()
        stand = pins.take_over(site)
        observer = pins.outside_observer(site)
        try:
            for size in sizes:
                r = pins.pin_run(site, stand, observer, size, timeout=120)
                run.pins[str(size)] = r
                say(f"   {size} clients: {r.pins} pins in {r.seconds or 0:.2f} s ({r.pins_per_s or 0:,.0f}/s), "
                    f"{r.sync_errors} failed syncs")
                pins.clear(site, stand, observer)
            if stand.errors:
                run.notes.append(f"stand-in agents: {len(stand.errors)} refused calls (first: {stand.errors[0]})")
        finally:
            observer.close()
    finally:
        if stand is not None:
            stand.stop()
        emu.down(quiet=True)


METHOD = """\
One site, the real switch and controller with the shipped defaults (controller `timing:`
heartbeats every 100 ms, 3 missed, reports every {report_ms} ms; `learning.digest_list_size`
256, `digest_timeout_ms` 2, `digest_batching` auto: the eBPF switch batches its digests, BMv2 sends each at once and the controller gathers them), N real strongSwan gateways (kernel-libipsec: real IKE and ESP to
a peer each) with their real agents (UDP heartbeats, reports), K = 4096 buckets, hosts
simulated by supergw-hostsim (IPv4 and IPv6 each) on one switch port. Pair beacons are off:
they run between two sites' gateways, and this is one site (as `make run`). Every point starts
from a controller restarted on emptied host tables; its hosts all start at once (a cold start).
Learning: each host's first frame (stamped by hostsim) to its `host_ips` / `host_ip6s` entry
first read on the switch by a stream-less P4Runtime session. At rest: CPU and RSS over a quiet
window. REST: GETs from this machine over the management network, answer fully read. Failover:
the probe host's gateway frozen (SIGSTOP of charon and agent) under a 10 ms ping; verdict and
write from the controller's history markers. Restart: the controller's process stopped and
started under a 10 ms ping. P4Runtime writes: a switch of their own, entries encoded before
the clock. Pins: the remote-access site, agents replaced by stand-ins that report synthetic
clients (pins.py). bench/scale/README.md says what every number counts.\
"""


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if (why := missing()) is not None:
        print(f"bench.scale: {why}", file=sys.stderr)
        return 2
    report_ms = TimingConfig().report_interval_ms
    settings = point.Settings(
        quick=args.quick, steady_s=5.0 if args.quick else 10.0, rest_calls=20 if args.quick else 100,
        dashboard_rounds=5 if args.quick else 20, ctl_runs=2 if args.quick else 5, report_interval_s=report_ms / 1000,
        rebalance_at=max(args.gateways), learn_timeout_s=60 + max(args.hosts) / 500)
    run = results.Run()
    with tempfile.TemporaryDirectory(prefix="sgw-scale-") as tmp:
        work = Path(tmp)
        guarded(run, "the eBPF points", lambda: matrix(run, "ebpf", args.gateways, args.hosts, settings, work))
        guarded(run, "the BMv2 points", lambda: bmv2_points(run, args, settings, work))
        if not args.no_writes:
            guarded(run, "the P4Runtime write rates", lambda: write_rates(run, args.quick, work))
        if args.ha:
            guarded(run, "the replicated controllers", lambda: ha_phase(run, args, work))
        if not args.no_pins:
            sizes = (100,) if args.quick else (1000, pc.CLIENT_PINS_TABLE_SIZE, pc.CLIENT_PINS_TABLE_SIZE + 1)
            guarded(run, "the remote-access pins", lambda: pin_phase(run, sizes, gateways=2 if args.quick else 4,
                                                                      switch="ebpf"))
    method = METHOD.format(report_ms=report_ms)
    paths, short = results.write(run, method, args.results_dir, args.quick)
    say(f"results: {paths.markdown}")
    for s in short:
        say(f"MISSED: {s}")
    errors = bool(run.failed_parts) or any(p.errors for p in run.points)
    return 1 if errors or (short and not args.quick) else 0


def bmv2_points(run: results.Run, args: argparse.Namespace, settings: point.Settings, work: Path) -> None:
    if not args.bmv2_gateways:
        return
    # BMv2 as measured elsewhere (bench/dataplane): the build without logging macros, found
    # first on PATH by the engine (topologies/bmv2.py), which the controller then drives.
    if PERF_BUILD.is_file():
        os.environ["PATH"] = f"{PERF_BUILD.parent}:{os.environ['PATH']}"
    if (why := bmv2.missing()) is not None:
        run.notes.append(f"BMv2 points not run: {why}")
        say(f"== BMv2 points not run: {why}")
        return
    bmv2_settings = point.Settings(**{**settings.__dict__, "rebalance_at": 0})
    matrix(run, "bmv2", args.bmv2_gateways, args.bmv2_hosts, bmv2_settings, work)


def write_rates(run: results.Run, quick: bool, work: Path) -> None:
    say("== P4Runtime write rates")
    batches = (1, 10, 100, 1000) if quick else (1, 10, 100, 1000, 5000)
    run.writes, run.writes_missing = writes.measure(("ebpf", "bmv2"), batches, per_batch=2000 if quick else 20000,
                                                    site_hosts=2000 if quick else 50000, workdir=work, say=say)


def ha_phase(run: results.Run, args: argparse.Namespace, work: Path) -> None:
    say(f"== replicated controllers: N = {max(args.gateways)}, {max(args.hosts)} hosts")
    try:
        run.ha = ha.measure(max(args.gateways), max(args.hosts), "ebpf", work, say)
    except (EmulationError, BenchError) as exc:
        run.ha = results.HaResult(max(args.hosts), None, None, None, None, note=f"(failed: {exc})")


if __name__ == "__main__":
    sys.exit(main())
