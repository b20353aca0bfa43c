"""python -m bench.gateway: what the tuning profile buys IPsec, per backend and per knob, measured
as the tuning paper measured (its stopping rule, 10 s runs, its write-size sweep).

Headline `ipsec_plain_ratio_tuned` = IPsec / plain IP through the same gateways with the whole
profile (the paper: comparable after tuning), with its 95 % interval; `tuning_gain_ipsec` =
IPsec with the whole profile / without it; a per-knob table puts each knob of the paper on its
own, with its gain's 95 % interval and whether that interval excludes 1.0
(`knobs_with_effect`). Secondary: throughput by CPU quota and IKEv2 handshakes per second
(full run only). Writes bench/results/gateway.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.gateway import tuning
from bench.gateway.ike import measure as measure_ike
from bench.gateway.plot import plot
from bench.gateway.stats import StoppingRule
from bench.gateway.throughput import Iperf, with_quota
from bench.report import RESULTS_DIR, Metric, write_report
from supergw_gateway.config import Backend
from supergw_gateway.lab import Lab
from supergw_gateway.runtime import Gateway

BACKENDS = {"xfrm_uml": Backend.UML, "libipsec": Backend.LIBIPSEC}
QUOTAS = (100, 50, 25, 10)
T0 = time.monotonic()
IKE_NOTES = """### IKE rate: what limits it

Measured in this run: each charon used about {ms} CPU-ms per handshake and the handshakes kept
{cpu} CPU cores busy. The two charons share the machine's cores, so the ceiling is about
(cores x 1000) / (initiator + responder CPU-ms) handshakes/s; 1000/s would need under 1 CPU-ms per
handshake per side. perf (profiled by hand, see bench/gateway/README.md for the configurations tried)
puts crypto (libcrypto) at ~5 % of charon's samples; the rest is libstrongswan/libcharon, glibc
malloc, futex/scheduler wake-ups of the thread pool, and glibc `printf_positional` (~8 %):
strongSwan registers custom printf specifiers, which sends every snprintf (settings key lookups,
identity/traffic-selector formatting) through glibc's slow positional path even with logging off."""



def say(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def capacity(label: str, lab: Lab, seconds: float) -> dict[str, float]:
    """IPsec throughput (default profile) with both gateways' IPsec processes under a CPU quota."""
    gws = {k: Gateway(lab.config(k), say) for k in ("b", "a")}
    iperf: Iperf | None = None
    caps: dict[str, float] = {}
    try:
        for g in gws.values():
            g.up()
        iperf = Iperf(lab)
        for q in QUOTAS:
            mbps = with_quota(gws, float(q), lambda: iperf.run(seconds) if iperf else None)
            say(f"{label}: ipsec at {q:3d}% of a core per gateway "
                + (f"{mbps:8.1f} Mb/s" if mbps is not None else "no result"))
            if mbps is not None:
                caps[str(q)] = round(mbps, 1)
    finally:
        if iperf:
            iperf.close()
        for g in gws.values():
            g.down()
    return caps


def bench_ike(seconds: float, workers: int) -> dict[str, Any]:
    lab = Lab("bk", Backend.LIBIPSEC)
    # The handshake rate is charon's: lift the DoS limits meant for strangers, reuse nothing,
    # and keep logging off the hot path (formatting log lines costs more than the crypto).
    # Every blocking VICI initiate holds a charon worker thread until the SA is up: with 16
    # threads, 8+ concurrent initiators starve the IKE processing itself (measured: 0.7/s).
    lab.extra = {"charon": {"cookie_threshold": 1000000, "block_threshold": 1000000, "reuse_ikesa": False,
                            "dos_protection": False, "log_level": -1, "threads": 64}}
    lab.create()
    gws = {k: Gateway(lab.config(k), say) for k in ("b", "a")}
    try:
        for g in gws.values():
            g.up()
        return measure_ike(gws["a"], gws["b"], seconds, workers, say)
    finally:
        for g in gws.values():
            g.down()
        lab.destroy()


def bench_backend(label: str, backend: Backend, a: argparse.Namespace) -> dict[str, Any]:
    lab = Lab(f"b{label[0]}", backend)
    lab.create()
    rule = StoppingRule(a.min_runs, a.max_runs, a.ci)
    cells = tuning.plan_cells(tuning.CONFIGS, a.sizes, a.main_size)
    try:
        outcome = tuning.measure(lab, tuning.CONFIGS, cells, rule, a.seconds, label, say)
        caps = {} if a.quick else capacity(label, lab, a.seconds)
    finally:
        lab.destroy()
    return {"outcome": outcome, "rows": tuning.table(outcome, cells, rule), "capacity": caps, "rule": rule}


def _r(v: float | None, nd: int = 3) -> float | None:
    return round(v, nd) if v is not None else None


def _ci(lo: float | None, hi: float | None, nd: int = 3) -> str:
    return f"[{lo:.{nd}f}, {hi:.{nd}f}]" if lo is not None and hi is not None else "—"


KNOBS = [c.name for c in tuning.CONFIGS if c.name != "default"]


def per_knob(label: str, r: dict[str, Any], a: argparse.Namespace) -> list[tuning.Row]:
    return [x for x in r["rows"] if x.path == "ipsec" and x.size == a.main_size]


def metrics_for(label: str, r: dict[str, Any], a: argparse.Namespace) -> dict[str, Metric]:
    out: tuning.Outcome = r["outcome"]
    rows: list[tuning.Row] = r["rows"]
    by = {(x.config, x.path, x.size): x for x in rows}
    m: dict[str, Metric] = {}
    for name, config in (("tuned", tuning.TUNED), ("default", "default")):
        q = tuning.ratio(out, config, a.main_size)
        m[f"ipsec_plain_ratio_{name}_{label}"] = Metric(
            _r(q.mean) if q else None, "ipsec/plain",
            note=f"{config}: IPsec / plain IP through the same gateways, {a.main_size} B writes, mean of {q.n if q else 0} "
                 f"per-round ratios, 95 % interval {_ci(q.low if q else None, q.high if q else None)}; the paper: "
                 "comparable after tuning")
    tuned = by.get((tuning.TUNED, "ipsec", a.main_size))
    m[f"tuning_gain_ipsec_{label}"] = Metric(
        _r(tuned.gain) if tuned else None, "tuned/default",
        note=f"IPsec, the whole profile / default, {a.main_size} B writes: mean of per-round ratios, 95 % interval "
             f"{_ci(tuned.gain_low if tuned else None, tuned.gain_high if tuned else None)}")
    knobs = [x for x in per_knob(label, r, a) if x.config in KNOBS]
    acting = [x for x in knobs if x.effect in ("gain", "loss")]
    m[f"knobs_with_effect_{label}"] = Metric(
        len(acting), "configurations",
        note="gain's 95 % interval excludes 1.0: " + (", ".join(
            f"{x.config} {x.gain:.3f} {_ci(x.gain_low, x.gain_high)}" for x in acting if x.gain is not None)
            or "none") + f"; of {len(knobs)}")
    done = sum(1 for x in rows if x.converged)
    m[f"cells_converged_{label}"] = Metric(
        done, "cells", note=f"of {len(rows)} (configuration, path, size) cells, the 95 % interval of the mean within "
                            f"+-{100 * a.ci:g} % in {a.min_runs}-{a.max_runs} runs of {a.seconds:g} s")
    for name, config in (("default", "default"), ("tuned", tuning.TUNED)):
        for path in tuning.PATHS:
            x = by.get((config, path, a.main_size))
            m[f"{path}_mbps_{name}_{label}"] = Metric(
                _r(x.mean, 1) if x else None, "Mb/s",
                note=f"{a.main_size} B writes, mean of {x.runs if x else 0} runs, 95 % interval "
                     f"{_ci(x.low if x else None, x.high if x else None, 0)}")
    for q, mbps in r["capacity"].items():
        m[f"capacity_{label}_{q}pct"] = Metric(mbps, "Mb/s", note=f"{q}% of a core per gateway")
    return m


def knob_rows(label: str, r: dict[str, Any], a: argparse.Namespace) -> list[dict[str, object]]:
    refused: dict[str, list[str]] = r["outcome"].refused
    by = {c.name: c for c in tuning.CONFIGS}
    return [{"backend": label, "knobs": x.config, "what": by[x.config].what, "runs": x.runs,
             "mean Mb/s": _r(x.mean, 1), "95 % interval": _ci(x.low, x.high, 0),
             "+-": f"{100 * (x.high - x.low) / 2 / x.mean:.1f} %" if x.mean and x.low is not None and x.high is not None
             else "—", "rule met": "yes" if x.converged else "no",
             "gain": _r(x.gain), "gain 95 % interval": _ci(x.gain_low, x.gain_high), "effect": x.effect,
             "refused at gw-a/host-a": len(refused.get(x.config, []))} for x in per_knob(label, r, a)]


def sweep_rows(label: str, r: dict[str, Any], a: argparse.Namespace) -> list[dict[str, object]]:
    out: tuning.Outcome = r["outcome"]
    by = {(x.config, x.path, x.size): x for x in r["rows"]}
    rows: list[dict[str, object]] = []
    for config in tuning.SWEPT:
        for size in a.sizes:
            ip, pl, q = by.get((config, "ipsec", size)), by.get((config, "plain", size)), tuning.ratio(out, config, size)
            rows.append({"backend": label, "config": config, "write B": size,
                         "ipsec Mb/s": _r(ip.mean, 1) if ip else None, "ipsec runs": ip.runs if ip else 0,
                         "plain Mb/s": _r(pl.mean, 1) if pl else None, "plain runs": pl.runs if pl else 0,
                         "ipsec/plain": _r(q.mean) if q else None,
                         "95 % interval": _ci(q.low if q else None, q.high if q else None)})
    return rows


def refusal_rows(results: dict[str, dict[str, Any]]) -> list[dict[str, object]]:
    """Per backend and knob group: what its gateways and hosts refused, with the reasons."""
    out: list[dict[str, object]] = []
    for label, r in results.items():
        refused: dict[str, list[str]] = r["outcome"].refused
        for c in tuning.CONFIGS:
            if c.name in ("default", "gateway", tuning.TUNED):
                continue
            why = sorted({x.split(": ", 1)[-1] for x in refused.get(c.name, [])})
            out.append({"backend": label, "knobs": c.name, "refused": len(refused.get(c.name, [])),
                        "why": "; ".join(why) or "—"})
    return out


CANNOT_ACT = """### Which knobs cannot act where, and why

- **UML guests (xfrm_uml)**: interrupt coalescing (`rx-usecs`): the guest's `vec` NICs (and
  the veths around them) have no interrupt coalescing to set (`ethtool -C` is refused). RPS:
  a UML guest has one virtual CPU, there is nothing to spread softirq work over (its NICs have
  no `rps_cpus`). Jumbo MTU: the `vec` driver fixes a NIC's maximum MTU when the guest boots
  (1500 unless the kernel command line's `mtu=` says otherwise, which our UML backend does
  not set), so the MTU knob is refused inside the guest and on the veths it reads; the knob
  acts only on the hosts' side. What remains for a guest: its sysctls (backlog, NAPI budget,
  the TCP stack) and the offloads of the veths the guest's raw sockets sit on.
- **libipsec** (userspace ESP in the namespace): interrupt coalescing is refused on veths;
  the MTU knob acts on the veths (9000) but not inside the tunnel: kernel-libipsec's TUN
  device `ipsec0` keeps MTU 1400 (a larger one loses packets silently), so over IPsec the
  jumbo path only moves where segments are cut (MSS clamped to the tunnel's MTU). Over plain
  IP the same knob carries 9000-byte frames end to end: the plain rows of the sweep show what
  it can do where it can act.
- Per configuration, the knobs refused at gw-a and host-a and the reasons the lifecycle gave
  are in the table below and in the JSON (`tuning_refused`)."""


def method_text(a: argparse.Namespace) -> str:
    quick = " **Quick run** (`--quick`): a check that the benchmark works, not a result." if a.quick else ""
    return (
        f"Two-site lab on one machine ({os.cpu_count()} cores): host-a - gw-a = WAN = gw-b - host-b, each a "
        "network namespace. xfrm_uml: each gateway is a User-Mode Linux guest (kernel 6.1, real XFRM ESP, "
        "generic C AES-GCM, no AES-NI) with charon inside; libipsec: charon-systemd with kernel-libipsec in "
        "the namespace (userspace ESP in UDP 4500). Each run: one iperf3 TCP stream host-a -> host-b for "
        f"{a.seconds:g} s (1 s more omitted as warm-up) with writes of a fixed size (`-l`, the paper's netperf packet "
        "size), Mb/s received. The paper's stopping rule (Iatrou et al. §3.1): each cell (configuration, path, write "
        f"size) runs {a.min_runs}-{a.max_runs} times, until the 95 % t interval of its mean is within "
        f"+-{100 * a.ci:g} % of the mean (`rule met`; a cell that did not get there in {a.max_runs} runs says so). "
        "Runs go in rounds: a round runs every cell not done yet and, beside it, the cells it is compared with (the "
        "default at its path and size; its other path), the order of the configurations reversed every other round. "
        "A gain (configuration / default) and an IPsec/plain ratio are the mean of the per-round ratios of runs taken "
        "in the same round, with the 95 % t interval of that mean; a knob whose gain's interval excludes 1.0 has an "
        f"effect (`effect`). The per-knob table is IPsec at {a.main_size} B writes; the sweep runs the default and "
        f"the whole profile over IPsec and plain IP at {', '.join(str(x) for x in a.sizes)} B. Plain IP is the same "
        "route through the same gateways with the tunnel terminated. Each configuration is the gateways' own "
        "lifecycle: both gateways get a `tuning` section (the knob groups of the row, `host_wide: true`, jumbo "
        "declared on their LAN and WAN veths) and `up` applies it — on running gateways it restores first what the "
        "section no longer asks; libipsec gateways are restarted when the ESP socket's buffer changes, since charon "
        "sizes it when it opens it. Endpoint rows (tcp; the hosts' side of mtu) tune both hosts through the same "
        "record/restore code. Everything is restored at the end. Inputs, not results: the write sizes, the run "
        "length, the stopping rule, the knob values of the profile (supergw_gateway.tuning). Capacity: both "
        "gateways' IPsec processes (charon, or the whole UML guest) under a cgroup v1 CPU quota, default profile, "
        f"one {a.seconds:g} s run each. IKE: child-less IKEv2 PSK SAs initiated back to back by several VICI "
        f"sessions for {a.ike_seconds:g} s (aes128gcm16-prfsha256-x25519), DoS limits and logging off, 64 charon "
        "threads." + quick
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="a few minutes: 2 runs of 2 s per cell, one write size, no CPU quotas, no IKE")
    ap.add_argument("--seconds", type=float, default=None, help="per iperf3 run (default 10, the paper's; --quick 2)")
    ap.add_argument("--min-runs", type=int, default=None, help="runs per cell at least (default 4; --quick 2)")
    ap.add_argument("--max-runs", type=int, default=None, help="runs per cell at most (default 12; --quick 2)")
    ap.add_argument("--ci", type=float, default=0.015,
                    help="stop a cell once its 95 %% interval is within this fraction of its mean (default 0.015)")
    ap.add_argument("--sizes", type=lambda t: [int(x) for x in t.split(",")], default=None,
                    help=f"write sizes of the sweep, bytes (default {','.join(str(x) for x in tuning.SIZES)})")
    ap.add_argument("--main-size", type=int, default=tuning.MAIN_SIZE,
                    help="write size of the per-knob table (default %(default)s)")
    ap.add_argument("--ike-seconds", type=float, default=5.0)
    ap.add_argument("--ike-workers", type=int, default=8)
    ap.add_argument("--backends", nargs="*", default=list(BACKENDS), choices=list(BACKENDS))
    ap.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where gateway.{json,md,png} go")
    ap.add_argument("--only", choices=("ike",), default=None,
                    help="quick run of one part; prints JSON and leaves bench/results untouched")
    a = ap.parse_args(argv)
    a.seconds = a.seconds if a.seconds is not None else (2.0 if a.quick else 10.0)
    a.min_runs = a.min_runs if a.min_runs is not None else (2 if a.quick else 4)
    a.max_runs = a.max_runs if a.max_runs is not None else (2 if a.quick else 12)
    a.sizes = a.sizes if a.sizes is not None else ([a.main_size] if a.quick else list(tuning.SIZES))
    if a.seconds < 1 or not 2 <= a.min_runs <= a.max_runs or not 0 < a.ci < 1 or min(a.sizes + [a.main_size]) < 1:
        ap.error("--seconds must be >= 1, 2 <= --min-runs <= --max-runs, 0 < --ci < 1 and sizes >= 1")
    if os.geteuid() != 0:
        print("bench.gateway needs root (namespaces, UML, cgroups)", file=sys.stderr)
        return 2
    if a.only == "ike":
        print(json.dumps(bench_ike(a.ike_seconds, a.ike_workers), indent=2))
        return 0
    results: dict[str, dict[str, Any]] = {}
    for label in a.backends:
        say(f"== {label}: {len(tuning.CONFIGS)} configurations, {a.min_runs}-{a.max_runs} runs of {a.seconds:g} s per "
            f"cell (the 95 % interval within +-{100 * a.ci:g} %)")
        results[label] = bench_backend(label, BACKENDS[label], a)
    ike: dict[str, Any] | None = None
    if not a.quick:
        say("== IKEv2 handshakes")
        ike = bench_ike(a.ike_seconds, a.ike_workers)

    metrics: dict[str, Metric] = {}
    for label, r in results.items():
        metrics |= metrics_for(label, r, a)
    if ike is not None:
        metrics["ike_per_s"] = Metric(ike["ike_per_s"], "handshakes/s", goal=1000,
                                      note=f"{ike['workers']} VICI initiators, child-less IKEv2 PSK, both charons on 2 cores")
    rows = [row for label, r in results.items() for row in knob_rows(label, r, a)]
    method = method_text(a) + "\n\n" + CANNOT_ACT
    if ike is not None:
        ms, cores = ike.get("cpu_ms_per_handshake") or {}, ike.get("cpu_cores") or {}
        method += "\n\n" + IKE_NOTES.format(
            ms=f"{ms.get('initiator')} (initiator) and {ms.get('responder')} (responder)",
            cpu=f"{cores.get('whole_box_busy')} of the box's {cores.get('box_cores')}",
        )
    title = "supergw gateway benchmark: what tuning buys IPsec" + (" (quick run)" if a.quick else "")
    paths = write_report("gateway", metrics, rows=rows, title=title, method=method, results_dir=a.results_dir,
                         rows_title=f"IPsec throughput per tuning configuration ({a.main_size} B writes)",
                         tables={"IPsec against plain IP per write size (the paper's sweep)":
                                 [x for label, r in results.items() for x in sweep_rows(label, r, a)],
                                 "Knobs refused per configuration (gw-a and host-a)": refusal_rows(results)})
    plot(paths.png, title, {label: per_knob(label, r, a) for label, r in results.items()},
         {label: {c: [(sz, tuning.ratio(r["outcome"], c, sz)) for sz in a.sizes] for c in tuning.SWEPT}
          for label, r in results.items()})
    doc = json.loads(paths.json.read_text())
    doc["quick"] = a.quick
    doc["rule"] = {"min_runs": a.min_runs, "max_runs": a.max_runs, "ci_half_width": a.ci, "seconds": a.seconds,
                   "sizes": a.sizes, "main_size": a.main_size}
    doc["cells"] = {k: [asdict(x) | {"effect": x.effect} for x in r["rows"]] for k, r in results.items()}
    doc["knobs_with_effect"] = {k: [x.config for x in per_knob(k, r, a) if x.config in KNOBS
                                    and x.effect in ("gain", "loss")] for k, r in results.items()}
    doc["configs"] = [asdict(c) for c in tuning.CONFIGS]
    doc["samples"] = {k: [asdict(s) for s in r["outcome"].samples] for k, r in results.items()}
    doc["tuning_refused"] = {k: r["outcome"].refused for k, r in results.items()}
    doc["capacity_by_quota"] = {k: r["capacity"] for k, r in results.items()}
    if ike is not None:
        doc["ike_per_s"] = ike["ike_per_s"]
        doc["ike"] = ike
    paths.json.write_text(json.dumps(doc, indent=2) + "\n")
    for label in results:
        say(f"{label}: IPsec/plain tuned {metrics[f'ipsec_plain_ratio_tuned_{label}'].value}, knobs with an effect: "
            f"{doc['knobs_with_effect'][label]}")
    say(f"wrote {paths.json} (+ .md, .png)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
