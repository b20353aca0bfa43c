"""python -m bench.gateway: what the tuning profile buys IPsec, per backend and per knob.

Headline `tuning_gain_ipsec` = IPsec TCP throughput with the whole profile (applied by the
gateways' own `up`, plus the endpoint knobs on the hosts) / without it, per backend; a
per-knob table puts each of the tuning paper's knobs on its own beside it, all measured in
one run, alternating rounds, medians with their range. Secondary: the plain path and the
IPsec/plain ratios, throughput by CPU quota and IKEv2 handshakes per second (full run only).
Writes bench/results/gateway.{json,md,png}.
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
from bench.gateway.plot import plot_gains
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
    try:
        outcome = tuning.measure(lab, tuning.CONFIGS, a.rounds, a.seconds, label, say)
        caps = {} if a.quick else capacity(label, lab, a.seconds)
    finally:
        lab.destroy()
    return {"outcome": outcome, "ipsec": tuning.table(outcome.samples, tuning.CONFIGS),
            "plain": tuning.table(outcome.samples, tuning.CONFIGS, "plain"), "capacity": caps}


def _r(v: float | None, nd: int = 3) -> float | None:
    return round(v, nd) if v is not None else None


def _range(lo: float | None, hi: float | None, nd: int = 2) -> str:
    return f"{lo:.{nd}f}–{hi:.{nd}f}" if lo is not None and hi is not None else "—"


def metrics_for(label: str, r: dict[str, Any]) -> dict[str, Metric]:
    ipsec: list[tuning.Row] = r["ipsec"]
    plain: list[tuning.Row] = r["plain"]
    base, tuned = tuning.gain(ipsec, "default"), tuning.gain(ipsec, tuning.TUNED)
    pbase, ptuned = tuning.gain(plain, "default"), tuning.gain(plain, tuning.TUNED)
    m: dict[str, Metric] = {}
    m[f"tuning_gain_ipsec_{label}"] = Metric(
        _r(tuned.gain) if tuned else None, "tuned/default",
        note=(f"IPsec TCP, median of {tuned.runs if tuned else 0} run(s) per configuration in alternating rounds; "
              "per-round gains "
              f"{_range(tuned.gain_low if tuned else None, tuned.gain_high if tuned else None)}"))
    for name, row in (("default", base), ("tuned", tuned)):
        m[f"ipsec_mbps_{name}_{label}"] = Metric(_r(row.median, 1) if row else None, "Mb/s",
                                                  note=f"range {_range(row.low if row else None, row.high if row else None, 0)}")
    for name, prow in (("default", pbase), ("tuned", ptuned)):
        m[f"plain_mbps_{name}_{label}"] = Metric(_r(prow.median, 1) if prow else None, "Mb/s",
                                                  note="secondary: same path, tunnel down, plain routes")
    for name, row, prow in (("default", base, pbase), ("tuned", tuned, ptuned)):
        ratio = row.median / prow.median if row and prow and row.median and prow.median else None
        m[f"ratio_{name}_{label}"] = Metric(_r(ratio), "ipsec/plain", note="secondary: medians, same profile")
    for q, mbps in r["capacity"].items():
        m[f"capacity_{label}_{q}pct"] = Metric(mbps, "Mb/s", note=f"{q}% of a core per gateway")
    return m


def table_rows(label: str, r: dict[str, Any]) -> list[dict[str, object]]:
    refused: dict[str, list[str]] = r["outcome"].refused
    by = {c.name: c for c in tuning.CONFIGS}
    return [{"backend": label, "knobs": row.config, "what": by[row.config].what, "runs": row.runs,
             "median Mb/s": _r(row.median, 1), "min–max Mb/s": _range(row.low, row.high, 0),
             "gain": _r(row.gain), "per-round gain": _range(row.gain_low, row.gain_high),
             "refused at gw-a/host-a": len(refused.get(row.config, []))} for row in r["ipsec"]]


def method_text(a: argparse.Namespace) -> str:
    quick = " **Quick run** (`--quick`): a check that the benchmark works, not a result." if a.quick else ""
    return (
        f"Two-site lab on one machine ({os.cpu_count()} cores): host-a - gw-a = WAN = gw-b - host-b, each a "
        "network namespace. xfrm_uml: each gateway is a User-Mode Linux guest (kernel 6.1, real XFRM ESP, "
        "generic C AES-GCM, no AES-NI) with charon inside; libipsec: charon-systemd with kernel-libipsec in "
        "the namespace (userspace ESP in UDP 4500). IPsec throughput: one iperf3 TCP stream host-a -> host-b "
        f"through the tunnel for {a.seconds:g} s (1 s omitted), received bytes. {a.rounds} round(s); each "
        "round measures every configuration of the table once, the order reversed every other round so a "
        "drift of the machine favours none; numbers are medians over the rounds with their min–max, and "
        "`per-round gain` is the range of config/default within each round. "
        "Each configuration is the gateways' own lifecycle: both gateways get a `tuning` section "
        "(the knob groups of the row, `host_wide: true`, jumbo declared on their LAN and WAN veths) and "
        "`up` applies it — on running gateways it restores first what the section no longer asks; libipsec "
        "gateways are restarted when the ESP socket's buffer changes, since charon sizes it when it opens "
        "it. Endpoint rows (tcp; the hosts' side of mtu) tune both hosts through the same record/restore "
        "code. Knobs a device or kernel cannot take are refused and counted (`refused at gw-a/host-a`; the JSON "
        "lists each with its reason): veths take no interrupt coalescing, UML's vec NICs no MTU above "
        "1500 and no RPS; in a UML guest every sysctl is the guest's own. Everything is restored at the end. "
        "Headline `tuning_gain_ipsec` = median IPsec throughput with everything (`all`) / default. "
        "Secondary: `plain` is the same path with the tunnel terminated and plain routes through the same "
        "gateways, measured in the default and `all` configurations; ratio = ipsec/plain there. "
        "Capacity: both gateways' IPsec processes (charon, or the whole UML guest) under a cgroup v1 CPU "
        "quota, default profile. IKE: child-less IKEv2 PSK SAs initiated back to back by several VICI "
        f"sessions for {a.ike_seconds:g} s (aes128gcm16-prfsha256-x25519), DoS limits and logging off, "
        "64 charon threads." + quick
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="a couple of minutes: 1 round of 2 s runs, no CPU quotas, no IKE")
    ap.add_argument("--rounds", type=int, default=None, help="rounds over every configuration (default 4; --quick 1)")
    ap.add_argument("--seconds", type=float, default=None, help="per iperf3 run (default 5; --quick 2)")
    ap.add_argument("--ike-seconds", type=float, default=5.0)
    ap.add_argument("--ike-workers", type=int, default=8)
    ap.add_argument("--backends", nargs="*", default=list(BACKENDS), choices=list(BACKENDS))
    ap.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where gateway.{json,md,png} go")
    ap.add_argument("--only", choices=("ike",), default=None,
                    help="quick run of one part; prints JSON and leaves bench/results untouched")
    a = ap.parse_args(argv)
    a.rounds = a.rounds if a.rounds is not None else (1 if a.quick else 4)
    a.seconds = a.seconds if a.seconds is not None else (2.0 if a.quick else 5.0)
    if a.rounds < 1 or a.seconds < 1:
        ap.error("--rounds must be >= 1 and --seconds >= 1")
    if os.geteuid() != 0:
        print("bench.gateway needs root (namespaces, UML, cgroups)", file=sys.stderr)
        return 2
    if a.only == "ike":
        print(json.dumps(bench_ike(a.ike_seconds, a.ike_workers), indent=2))
        return 0
    results: dict[str, dict[str, Any]] = {}
    for label in a.backends:
        say(f"== {label}: {len(tuning.CONFIGS)} configurations x {a.rounds} round(s)")
        results[label] = bench_backend(label, BACKENDS[label], a)
    ike: dict[str, Any] | None = None
    if not a.quick:
        say("== IKEv2 handshakes")
        ike = bench_ike(a.ike_seconds, a.ike_workers)

    metrics: dict[str, Metric] = {}
    for label, r in results.items():
        metrics |= metrics_for(label, r)
    if ike is not None:
        metrics["ike_per_s"] = Metric(ike["ike_per_s"], "handshakes/s", goal=1000,
                                      note=f"{ike['workers']} VICI initiators, child-less IKEv2 PSK, both charons on 2 cores")
    rows = [row for label, r in results.items() for row in table_rows(label, r)]
    method = method_text(a)
    if ike is not None:
        ms, cores = ike.get("cpu_ms_per_handshake") or {}, ike.get("cpu_cores") or {}
        method += "\n\n" + IKE_NOTES.format(
            ms=f"{ms.get('initiator')} (initiator) and {ms.get('responder')} (responder)",
            cpu=f"{cores.get('whole_box_busy')} of the box's {cores.get('box_cores')}",
        )
    title = "supergw gateway benchmark: what tuning buys IPsec" + (" (quick run)" if a.quick else "")
    paths = write_report("gateway", metrics, rows=rows, title=title, method=method, results_dir=a.results_dir,
                         rows_title="IPsec throughput per tuning configuration")
    plot_gains(paths.png, title, {label: r["ipsec"] for label, r in results.items()})
    doc = json.loads(paths.json.read_text())
    doc["quick"] = a.quick
    doc["tuning_gain_ipsec"] = {k: _r(g.gain) if (g := tuning.gain(r["ipsec"])) else None for k, r in results.items()}
    doc["per_knob"] = {k: [asdict(row) for row in r["ipsec"]] for k, r in results.items()}
    doc["per_knob_plain"] = {k: [asdict(row) for row in r["plain"]] for k, r in results.items()}
    doc["configs"] = [asdict(c) for c in tuning.CONFIGS]
    doc["samples"] = {k: [asdict(s) for s in r["outcome"].samples] for k, r in results.items()}
    doc["tuning_refused"] = {k: r["outcome"].refused for k, r in results.items()}
    doc["ratio_default"] = {k: metrics[f"ratio_default_{k}"].value for k in results}
    doc["ratio_tuned"] = {k: metrics[f"ratio_tuned_{k}"].value for k in results}
    doc["capacity_by_quota"] = {k: r["capacity"] for k, r in results.items()}
    if ike is not None:
        doc["ike_per_s"] = ike["ike_per_s"]
        doc["ike"] = ike
    paths.json.write_text(json.dumps(doc, indent=2) + "\n")
    for label in results:
        say(f"{label}: tuning_gain_ipsec {doc['tuning_gain_ipsec'][label]}")
    say(f"wrote {paths.json} (+ .md, .png)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
