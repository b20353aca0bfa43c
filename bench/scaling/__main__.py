"""The clustering paper's evaluation (§4) on the two-site emulation: real gateways, real tunnels.

`python -m bench.scaling [--quick] [--soak-s 600]` (root; run it under
`flock /work/.emu.lock`; it boots and stops the emulation itself, once per (series, N, ESP
suite), and once more for Fig. 5). Writes bench/results/scaling.{json,md,png}.

- Fig. 4: zero-loss throughput (binary search on the offered rate, both directions at once;
  "zero" = at most 0.01 % of the frames lost) for N = 1..4 gateway pairs, 64- and 1408-byte
  frames, two ESP suites, §4.2's host MACs (one host per bucket), in two series:
  - capacity-capped (the headline, `ratio_nN` = T(N) / T(1) at 1408 bytes, default suite):
    each gateway has a fixed capacity, a packet-rate cap on its WAN egress (tbf,
    `topologies/shaping.py`) well below what it reaches on the busy machine, so its capacity
    does not shrink when the others run; each gateway's own throughput at T(N) and the spread
    of hosts and bytes per gateway come from the controllers' REST views of the same probe.
  - CPU-capped (`cpu_capped_ratio_nN`): each gateway's charon capped by its cgroup at a small
    share of a core, the machine's CPU shared by all of them (contention included).
- Fig. 5 (N = 3, §4.3's MACs: 16 loaded buckets, all starting on gateway 1): 90 % of what
  T(3) carries at the best spread whole buckets allow, in both directions; one snapshot a
  second of throughput, loss, every gateway's CPU and the controllers' bucket map.
  `redistribution_s`: until loss stays zero and the loaded buckets are spread as evenly as
  whole buckets allow (max/mean = ceil(B/N) / (B/N)); shipped policy, and
  `redistribution_paper_policy_s` with `rebalancer.policy: paper` (the paper's Algorithm 5 as
  written: a ring, load = each gateway's CPU, controller/REBALANCER-API.md).
- Failover (bench.failover.two_site.measure) and a soak counting failovers, in Fig. 5's boot.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import gaps
from bench.report import Metric, Series, write_report
from bench.scaling import plots
from bench.scaling.analysis import (ZERO_LOSS, GatewayShare, Snapshot, best_imbalance, bucket_spread, cpu_spread,
                                    redistribution_s, settled, spread_by_site, zero_loss_rate)
from bench.scaling.emulation import BenchError, LoadedEmulation, ProbeResult, changes, say
from supergw_proto.rest import ApiError
from topologies.hostsim_client import HostsimError
from topologies.schema import TWO_SITE_PAPER_TOPOLOGY, load
from topologies.shaping import EgressCap

BASE_TOPOLOGY = TWO_SITE_PAPER_TOPOLOGY
DEFAULT_SUITE = "aes128gcm16-x25519"  # supergw_gateway.config.DEFAULT_ESP_PROPOSAL, what users get
OTHER_SUITE = "aes128-sha256-x25519"  # AES-CBC + HMAC-SHA-256: the paper's "cipher + HMAC" kind of tunnel
SUITE_LABEL = {DEFAULT_SUITE: "gcm", OTHER_SUITE: "cbc-sha256"}
CAPACITY, CPU = "capacity", "cpu"  # the two Fig. 4 series
SERIES_LABEL = {CAPACITY: "capacity-capped", CPU: "CPU-capped"}
KEY_PREFIX = {CAPACITY: "", CPU: "cpu_capped_"}
FIG5_LOAD = 0.90  # of what T(3) carries at the best spread whole buckets allow
SOAK_LOAD = 0.80
SOAK_FLOW_BUDGET_S = 1.0  # a soak flow silent for longer at the end of the soak has not recovered (bench/gaps.py)
BIG_FRAME, SMALL_FRAME = 1408, 64
FIG4_MAC_STEP = 1  # §4.2's hosts 00:00:03:00:00:18 ...: one bucket each under the identity hash
GOALS = {2: None, 3: 2.9, 4: 3.8}


@dataclass(frozen=True)
class Settings:
    ns: list[int]
    frames: list[int]
    suites: list[str]
    series: list[str]
    cpu_percent: float
    cap_pps: float
    cap_cpu_percent: float
    probe_s: float
    resolution: float
    max_probes: int
    fig5_s: float
    paper_s: float
    soak_s: float
    failover_trials: int
    base: Path
    buckets: int
    buckets_why: str
    fig5: bool = True
    results_dir: Path | None = None  # None: bench/results


@dataclass
class Results:
    fig4: list[dict[str, Any]] = field(default_factory=list)
    fig5: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    fig5_start: dict[str, dict[str, Any]] = field(default_factory=dict)  # per policy: buckets, forced moves, rate
    redistribution: dict[str, float | None] = field(default_factory=dict)
    failover: dict[str, float] = field(default_factory=dict)
    failover_note: str = ""
    soak: dict[str, Any] = field(default_factory=dict)
    site_a: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    loadavg: list[dict[str, Any]] = field(default_factory=list)

    def rate(self, series: str, suite: str, frame: int, n: int) -> float | None:
        return next((float(r["pps"]) for r in self.fig4 if r["series"] == series and r["suite"] == SUITE_LABEL[suite]
                     and r["frame_bytes"] == frame and r["n"] == n), None)


def mbps(pps: float, frame: int) -> float:
    return pps * frame * 8 / 1e6


def note_load(results: Results, when: str) -> None:
    one, five, fifteen = os.getloadavg()
    results.loadavg.append({"when": when, "load1": one, "load5": five, "load15": fifteen,
                            "at": time.strftime("%H:%M:%S")})


def per_gateway(peak: ProbeResult | None, hosts: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    """Each gateway at T(N): its simulated hosts, what the switch sent it (frames/s, Mb/s of the
    site's outgoing direction), the ESP packets it sent and received per second (its agent's
    report), the packets its cap dropped, its CPU (% of a core)."""
    out: dict[str, dict[str, Any]] = {}
    shares: dict[str, GatewayShare] = (peak.shares or {}) if peak else {}
    for site in hosts.values():
        for g, count in site.items():
            share = shares.get(g)
            out[g] = {"hosts": count,
                      "dispatch_pps": round(share.dispatch_pps, 1) if share else None,
                      "dispatch_mbps": round(share.dispatch_mbps, 3) if share else None,
                      "esp_out_pps": round(share.esp_out_pps, 1) if share else None,
                      "esp_in_pps": round(share.esp_in_pps, 1) if share else None,
                      "cap_drops": (peak.cap_drops or {}).get(g) if peak else None,
                      "cpu_percent": round(peak.cpu.get(g, 0.0), 1) if peak else None}
    return out


def spreads(gateways: dict[str, dict[str, Any]], sites: dict[str, list[str]]) -> dict[str, float | None]:
    """The worst site's max/mean of hosts, dispatched bytes and ESP packets sent per gateway."""
    out: dict[str, float | None] = {}
    for key in ("hosts", "dispatch_mbps", "esp_out_pps"):
        values = {g: float(v[key]) for g, v in gateways.items() if v.get(key) is not None}
        out[key] = round(spread_by_site(values, sites), 3) if len(values) == len(gateways) and values else None
    return out


def search(emu: LoadedEmulation, s: Settings, res: Results, series: str, suite: str, frame: int, n: int) -> None:
    label = f"{SERIES_LABEL[series]} N={n} {frame} B {SUITE_LABEL[suite]}"
    known = res.rate(series, suite, frame, 1) or next(
        (res.rate(series, x, frame, 1) for x in SUITE_LABEL if res.rate(series, x, frame, 1)), None)
    if series == CAPACITY:
        start = 0.9 * n * s.cap_pps  # the capacity is known: start just under N of them
    else:
        start = max(200.0, 0.6 * n * known) if known else 500.0
    best: dict[str, ProbeResult] = {}
    shortfall: list[str] = []
    account = series == CAPACITY

    def probe(rate: float) -> float:
        r = emu.probe(rate, frame, s.probe_s, account=account)
        if r.loss > ZERO_LOSS:
            # a rate fails only when a second probe loses frames too: the machine is shared
            say(f"  {label}: {rate:8.0f} pps/dir lost {100 * r.loss:.4f} %: once more")
            again = emu.probe(rate, frame, s.probe_s, account=account)
            r = again if again.loss < r.loss else r
        ok = r.loss <= ZERO_LOSS
        drops = f", cap drops {sum((r.cap_drops or {}).values())}" if r.cap_drops is not None else ""
        say(f"  {label}: {rate:8.0f} pps/dir -> loss {100 * r.loss:.4f} % "
            f"({'ok' if ok else 'loss'}), machine {r.machine_cpu:.0f} % of a core{drops}")
        if r.achieved_pps < 0.97 * rate:
            # the generator could not offer the rate: count it as failed (never flatter the result)
            shortfall.append(f"{rate:.0f} pps asked, {r.achieved_pps:.0f} offered")
            return 1.0
        if ok and rate >= best.get("r", r).rate_pps:
            best["r"] = r
        return r.loss

    result = zero_loss_rate(probe, start, 400_000.0, resolution=s.resolution, max_probes=s.max_probes)
    peak = best.get("r")
    gw_cpu = {g: round(v, 1) for g, v in (peak.cpu if peak else {}).items()}
    balance = emu.host_balance()
    gateways = per_gateway(peak, balance)
    spread = spreads(gateways, {site.name: site.gateways for site in emu.sites})
    row = {
        "series": series, "suite": SUITE_LABEL[suite], "frame_bytes": frame, "n": n,
        "pps": round(result.rate_pps, 1), "mbps": round(mbps(result.rate_pps, frame), 2),
        "probes": len(result.probes), "at_ceiling": result.at_ceiling,
        # the true zero-loss rate lies between pps and this (None: no rate failed)
        "lowest_failing_pps": min((p.rate_pps for p in result.probes if not p.passed), default=None),
        "cap_pps": s.cap_pps if series == CAPACITY else None,
        "cpu_cap_percent": s.cap_cpu_percent if series == CAPACITY else s.cpu_percent,
        "machine_cpu_percent": round(peak.machine_cpu, 1) if peak else None,
        "gateways_cpu_percent": round(sum(v for g, v in gw_cpu.items() if g in emu.gateways), 1) if peak else None,
        "cpu_at_peak": gw_cpu,
        "generator_shortfall": "; ".join(shortfall),
        "hosts_per_gateway": " ".join(f"{g}:{c}" for counts in balance.values() for g, c in counts.items()),
        "host_spread": spread["hosts"], "byte_spread": spread["dispatch_mbps"], "esp_spread": spread["esp_out_pps"],
        "gateway_pps_at_peak": " ".join(f"{g}:{v['dispatch_pps']:.0f}" for g, v in gateways.items()
                                        if v["dispatch_pps"] is not None),
        "per_gateway": gateways,
    }
    res.fig4.append(row)
    say(f"T(N={n}, {frame} B, {SUITE_LABEL[suite]}, {SERIES_LABEL[series]}) = {result.rate_pps:.0f} pps/dir = "
        f"{row['mbps']} Mb/s/dir (machine {row['machine_cpu_percent']} % of a core at that rate); per gateway "
        f"{row['gateway_pps_at_peak'] or 'not measured'}; spread hosts {spread['hosts']} bytes {spread['dispatch_mbps']}")


def controller_view(emu: LoadedEmulation) -> dict[str, dict[str, Any]]:
    """Per gateway: buckets carrying simulated hosts, and the CPU its agent reports (0..1 of its
    own capacity, what the shipped rebalancer compares with its cpu_ceiling)."""
    out: dict[str, dict[str, Any]] = {}
    for site in emu.sites:
        hot = set(site.host_buckets)
        owner = {b.bucket: b.gateway for b in site.api.buckets()}
        for g in site.api.gateways():
            report = g.last_report
            out[g.name] = {
                "hot_buckets": sum(1 for b in hot if owner.get(b) == g.name),
                "reported_cpu": round(report.cpu_percent / (100.0 * report.cpu_cores), 3) if report else None,
            }
    return out


def snapshots(emu: LoadedEmulation, rate: float, seconds: float, label: str,
              views: list[dict[str, dict[str, Any]]]) -> list[Snapshot]:
    """Offer `rate` per direction at 1408 B for `seconds`, one snapshot a second; stops early
    once 15 s in a row were settled (`analysis.settled`)."""
    a, b = emu.sites
    meter = emu.meter()
    emu.start(rate, BIG_FRAME, seconds)
    started = time.monotonic()
    prev = {"tx": 0, "rx": 0, "lost": 0}
    out: list[Snapshot] = []
    sites = {s.name: s.gateways for s in emu.sites}
    settled_since: float | None = None
    while time.monotonic() - started < seconds:
        time.sleep(max(0.0, len(out) + 1 - (time.monotonic() - started)))
        t = time.monotonic() - started
        ta, tb = a.hostsim.stats()["totals"], b.hostsim.stats()["totals"]
        cpu, _machine = meter.read()
        view = controller_view(emu)
        now = {"tx": ta["test_tx_packets"] + tb["test_tx_packets"], "rx": ta["test_rx_packets"] + tb["test_rx_packets"],
               "lost": ta["lost"] + tb["lost"]}
        d = {k: now[k] - prev[k] for k in now}
        prev = now
        dt = t - (out[-1].t_s if out else 0.0)
        snap = Snapshot(t_s=round(t, 2), offered_pps=d["tx"] / dt, delivered_pps=d["rx"] / dt,
                        loss=d["lost"] / (d["rx"] + d["lost"]) if d["rx"] + d["lost"] else 0.0,
                        gateway_cpu={g: cpu[g] for g in emu.gateways}, sites=sites,
                        loaded_buckets={g: int(v["hot_buckets"]) for g, v in view.items()})
        out.append(snap)
        views.append(view)
        settled_since = (settled_since if settled_since is not None else t) if settled(snap) else None
        if len(out) % 5 == 0:
            spread, best = bucket_spread(snap)
            say(f"  {label} t={t:5.1f}s delivered {mbps(snap.delivered_pps / 2, BIG_FRAME):6.1f} Mb/s/dir, loss "
                f"{100 * snap.loss:6.2f} %, site A loaded buckets "
                f"{' '.join(str(snap.loaded_buckets.get(g, '?')) for g in a.gateways)} (spread {spread:.3f}, best "
                f"{best:.3f}), CPU {' '.join(f'{cpu[g]:.0f}' for g in a.gateways)}")
        if settled_since is not None and t - settled_since >= 15:
            break
    emu.stop()
    return out


def warm_up(emu: LoadedEmulation, rate: float, limit_s: float = 60.0) -> None:
    """Offer `rate` until the hosts are spread as evenly as whole buckets allow (within 2 %, at
    both sites: `LoadedEmulation.balanced`): the initial map or an earlier move may leave a
    gateway more than its share, and the shipped rebalancer fixes that with load moves."""
    started = time.monotonic()
    while True:
        balance = emu.host_balance()
        if emu.balanced() or len(emu.sites[0].gateways) == 1:
            say(f"warm-up: hosts per gateway {balance} after {time.monotonic() - started:.0f}s")
            return
        if time.monotonic() - started > limit_s:
            say(f"warm-up: still unbalanced after {limit_s:.0f}s: {balance} (searching anyway)")
            return
        emu.probe(rate, BIG_FRAME, 4.0)


def fig5_run(emu: LoadedEmulation, s: Settings, res: Results, policy: str, rate: float) -> None:
    seconds = s.paper_s if policy == "paper" else s.fig5_s
    res.site_a = list(emu.sites[0].gateways)  # the CPU lines of the figure, as the paper's left cluster
    time.sleep(3)  # the controllers' rates fall to zero: any moves below are of idle buckets
    hot, moved = emu.flows_to(1)
    res.fig5_start[policy] = {"loaded_buckets": hot, "forced_moves": moved, "rate_pps": round(rate, 1),
                              "best_imbalance": round(best_imbalance(hot, len(emu.sites[0].gateways)), 4)}
    say(f"Fig. 5, policy {policy}: every flow ({hot} buckets per site) on gateway 1 at both sites "
        f"({moved} buckets moved there first); offering {rate:.0f} pps/dir "
        f"({mbps(rate, BIG_FRAME):.1f} Mb/s/dir) for up to {seconds:.0f}s")
    views: list[dict[str, dict[str, Any]]] = []
    snaps = snapshots(emu, rate, seconds, policy, views)
    value = redistribution_s(snaps)
    res.redistribution[policy] = value
    res.fig5[policy] = [
        {"t_s": x.t_s, "offered_mbps": round(mbps(x.offered_pps / 2, BIG_FRAME), 2),
         "delivered_mbps": round(mbps(x.delivered_pps / 2, BIG_FRAME), 2), "loss_percent": round(100 * x.loss, 3),
         "bucket_spread": round(bucket_spread(x)[0], 3), "settled": settled(x),
         "cpu_spread": round(cpu_spread(x), 3), "cpu": {g: round(v, 1) for g, v in x.gateway_cpu.items()},
         "controller": view}
        for x, view in zip(snaps, views)]
    say(f"redistribution ({policy}): {value if value is not None else 'not settled'} s")


def soak(emu: LoadedEmulation, s: Settings, res: Results, rate: float) -> None:
    before = emu.failovers()
    say(f"soak: {rate:.0f} pps/dir ({100 * SOAK_LOAD:.0f} % of the reachable T(3)) for {s.soak_s:.0f}s, counting failovers")
    emu.start(rate, BIG_FRAME, s.soak_s)
    started = time.monotonic()
    while time.monotonic() - started < s.soak_s:
        time.sleep(min(30.0, s.soak_s - (time.monotonic() - started)) + 0.01)
        say(f"  soak t={time.monotonic() - started:4.0f}s failovers so far {emu.failovers() - before}")
    for site in emu.sites:
        site.hostsim.wait_run_done(timeout=15)
    time.sleep(0.3)
    a, b = emu.sites
    from topologies.hostsim_client import run_loss

    sa, sb = a.hostsim.stats(flows=True), b.hostsim.stats(flows=True)
    ab, ba = run_loss(sa, sb), run_loss(sb, sa)
    # a healthy flow's tail is about one frame spacing (its last frame lost by chance): allow three
    budget = max(SOAK_FLOW_BUDGET_S, 3 * max(sa["run"]["flows"], sb["run"]["flows"]) / rate)
    flows = gaps.hostsim_flows(sa, sb, budget) + gaps.hostsim_flows(sb, sa, budget)
    stalled = gaps.failed(flows)
    res.soak = {"seconds": s.soak_s, "rate_pps": round(rate, 1), "failovers": emu.failovers() - before,
                "loss": (ab.lost + ba.lost) / max(1, ab.sent + ba.sent),
                "flows": len(flows), "longest_flow_gap_ms": max((f.gap_ms for f in flows), default=None),
                "flows_not_recovered": len(stalled),
                "not_recovered": [f"{f.flow}: {f.problem}" for f in stalled][:10]}
    say(f"soak: {res.soak['failovers']} failovers, loss {100 * res.soak['loss']:.4f} %, longest flow gap "
        f"{res.soak['longest_flow_gap_ms']} ms, {len(stalled)} of {len(flows)} flows not recovered")


def failover(emu: LoadedEmulation, s: Settings, res: Results) -> None:
    try:
        from bench.failover import two_site
    except ImportError as exc:
        res.failover_note = f"bench.failover.two_site not importable: {exc}"
        return
    say(f"failover: bench.failover.two_site.measure({s.failover_trials} trials per kind) on the running N = 3 system")
    try:
        values = two_site.measure(s.failover_trials, topology=emu.topology)
    except NotImplementedError as exc:
        res.failover_note = f"bench.failover.two_site.measure is not implemented yet: {exc}"
    except Exception as exc:  # noqa: BLE001 - its failure must not lose the scaling results
        res.failover_note = f"bench.failover.two_site.measure failed: {type(exc).__name__}: {exc}"
    else:
        res.failover = {k: float(v) for k, v in values.items()}
    if res.failover_note:
        say(f"failover: {res.failover_note}")
    emu.wait_healthy()


def fig4_hosts(base: Path) -> dict[str, Any]:
    """The topology file's `simulated_hosts:` with §4.2's MAC step (the rest as the file has it)."""
    data = yaml.safe_load(base.read_text())
    hosts = data.get("simulated_hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, dict):
        raise BenchError(f"{base}: no simulated_hosts mapping, nothing to offer load with")
    return hosts | {"mac_step": FIG4_MAC_STEP}


def fig4_boot(s: Settings, res: Results, series: str, suite: str, n: int) -> None:
    """One boot of Fig. 4: §4.2's host MACs (one bucket each), the series' caps, the searches."""
    hosts = fig4_hosts(s.base)
    cpu = s.cap_cpu_percent if series == CAPACITY else s.cpu_percent
    emu = LoadedEmulation(s.base, changes(n, cpu, None if suite == DEFAULT_SUITE else suite, s.buckets, hosts))
    emu.up()
    try:
        note_load(res, f"{SERIES_LABEL[series]} N={n} {SUITE_LABEL[suite]} booted")
        emu.probe(200.0, BIG_FRAME, 2.0)  # hosts learned by both switches, flows seen
        if series == CAPACITY:
            emu.cap_gateways(EgressCap(s.cap_pps))
            warm = 0.5 * n * s.cap_pps
        else:
            t1 = res.rate(series, suite, BIG_FRAME, 1)
            warm = 0.5 * n * t1 if t1 else 300.0
        warm_up(emu, warm)
        for frame in s.frames:
            search(emu, s, res, series, suite, frame, n)
        note_load(res, f"{SERIES_LABEL[series]} N={n} {SUITE_LABEL[suite]} done")
    finally:
        emu.stop()
        if emu.cap is not None:
            removed = emu.uncap_gateways()
            say(f"caps removed from {len(removed)} gateways")
        emu.down()


def fig5_boot(s: Settings, res: Results) -> None:
    """N = 3 with the preset as written (§4.3's MACs, 16 loaded buckets that start on gateway 1),
    the CPU-capped series' cap: Fig. 5 for each policy first, then failover and the soak."""
    t3 = res.rate(CPU, DEFAULT_SUITE, BIG_FRAME, 3)
    if not t3:
        res.notes.append("no CPU-capped T(3) at 1408 B (default suite): no Fig. 5, failover or soak")
        return
    emu = LoadedEmulation(s.base, changes(3, s.cpu_percent, None, s.buckets))
    emu.up()
    try:
        note_load(res, "Fig. 5 N=3 booted")
        # no load before the first run: even 2 s at 200 pps/dir let the shipped rebalancer spread
        # the 16 buckets (6/5/5), and the start would need forced moves; the hosts resolved IP_G
        # during the boot, so both switches have learned them already
        booted = emu.loaded_buckets()  # where the preset's placement put the loaded buckets
        res.fig5_start["boot"] = {"after_boot": booted}
        say(f"Fig. 5 boot: loaded buckets per gateway after the boot {booted}")
        loaded = max(len(set(site.host_buckets)) for site in emu.sites)
        # T(3) was measured with one host per bucket; whole buckets of 14 hosts leave the
        # fullest gateway best_imbalance x its share at best: offer a fraction of what that carries
        reach = t3 / best_imbalance(loaded, 3)
        fig5_run(emu, s, res, "supergw", FIG5_LOAD * reach)
        # the default before bench/scaling measured it (8 moves per 2 s round), in the same boot
        emu.set_policy({"move_budget": 8})
        fig5_run(emu, s, res, "supergw-budget8", FIG5_LOAD * reach)
        emu.set_policy({"policy": "paper", "paper": {"seed": 1}})
        say("controllers restarted with rebalancer.policy: paper (Algorithm 5: a ring in gateway order, by CPU "
            "load; T_L 1.33 s, T_M 4 s, L_D 10 points, |W| 4)")
        fig5_run(emu, s, res, "paper", FIG5_LOAD * reach)
        emu.set_policy({})
        say("controllers restarted with the shipped rebalancer for failover and the soak")
        if s.failover_trials > 0:
            failover(emu, s, res)
        if s.soak_s > 0:
            warm_up(emu, 0.5 * reach, limit_s=30.0)
            soak(emu, s, res, SOAK_LOAD * reach)
        note_load(res, "Fig. 5 N=3 done")
    finally:
        emu.stop()
        emu.down()


def method_text(s: Settings, res: Results) -> str:
    budget = []
    for series in s.series:
        for frame in (BIG_FRAME, min(s.frames)) if min(s.frames) != BIG_FRAME else (BIG_FRAME,):
            r = next((r for r in res.fig4 if r["series"] == series and r["n"] == max(s.ns) and r["suite"] == "gcm"
                      and r["frame_bytes"] == frame), None)
            if r is not None:
                budget.append(f"{SERIES_LABEL[series]}, N = {r['n']}, {r['frame_bytes']} B at {r['pps']:.0f} pps/dir: "
                              f"machine {r['machine_cpu_percent']} % of 200 % (both cores), gateways "
                              f"{r['gateways_cpu_percent']} %, others "
                              f"{', '.join(f'{k} {v} %' for k, v in r['cpu_at_peak'].items() if not k[1:].startswith('gw'))}")
    loads = "; ".join(f"{x['when']} ({x['at']}): {x['load1']:.2f} / {x['load5']:.2f} / {x['load15']:.2f}"
                      for x in res.loadavg)
    cap = EgressCap(s.cap_pps)
    start = res.fig5_start.get("supergw", {})
    boot = res.fig5_start.get("boot", {})
    return (
        f"Two-site emulation ({s.base.name}: two switches running our pipeline (eBPF), two controllers, N gateway "
        f"pairs with strongSwan kernel-libipsec (the backend this kernel supports: XFRM without ESP), real agents, "
        f"one supergw-hostsim per site simulating the paper's 224 hosts on one switch port). Offered load is "
        f"bidirectional: each site's hosts send UDP to the other site's at the same rate; rates are per direction, "
        f"frames as in RFC 2544 (with FCS). Zero loss = at most {100 * ZERO_LOSS:.2f} % of the frames sent in a "
        f"{s.probe_s:.0f} s probe lost (both directions, sender's count against the receiver's); the search doubles "
        f"from an estimate until a rate loses frames, then bisects to {100 * s.resolution:.0f} % (at most "
        f"{s.max_probes} rates); a rate fails only when a second probe at that rate loses frames too (the machine "
        f"is shared with other work), and a probe the generator could not offer counts as failed. {s.buckets_why}. "
        f"Fig. 4 boots with §4.2's host MACs (00:00:03:00:00:18 ... :f7, mac_step {FIG4_MAC_STEP}): under the "
        f"identity hash each host is its own bucket, so N gateways can get equal shares (224 = 75 + 75 + 74 at "
        f"N = 3, 4 x 56 at N = 4); before the searches of a boot, load runs until the hosts are spread as evenly as "
        f"whole buckets allow (max/mean within 2 % of ceil(H/N)/(H/N) at both sites; hosts per gateway in the rows). "
        f"Capacity-capped series (ratio_nN, the headline): every gateway's WAN egress (wan0 in its namespace: the "
        f"ESP packets it sends after encrypting) gets a tbf qdisc of {cap.describe()}: every packet costs at "
        f"least one 1514-byte frame of tokens, so it is a packet-rate cap for both frame sizes. Each direction of a "
        f"pair is capped once, at the gateway that encrypts it (site A's gateway for A -> B, its partner for "
        f"B -> A); the cap is installed after the boot and removed (`tc qdisc del`) before the teardown "
        f"(topologies/shaping.py through Site.cap_wan_egress). There, not at the LAN side or in the switch: it is "
        f"the gateway's own output, what a separate gateway box would limit, and the switch's dispatch stays "
        f"unshaped. The gateways' cgroups allow {s.cap_cpu_percent:g} % of a core each (not the "
        f"limit: one gateway reaches several times the cap on the busy machine), so N x cap stays well under the "
        f"machine's capacity. Per gateway at T(N) (the probe that defined it): hosts, frames/s and Mb/s the switch "
        f"sent it (its buckets' counters in the controller's REST view, before and after the probe), ESP packets "
        f"it sent and received per second (its agent's reports, through the controller), packets its cap dropped "
        f"and its CPU; host_spread, byte_spread and esp_spread are the worse site's max/mean of those. The "
        f"capacity search starts at 0.9 x N x cap, so its rates for N are N times those for N = 1 and T(N)/T(1) "
        f"lands on N when every gateway carries its cap; the ratio's note gives the bounds the searches leave "
        f"(T(N) / lowest failing rate at N = 1 .. lowest failing at N / T(1)). CPU-capped "
        f"series (cpu_capped_*): no rate cap; every gateway's charon is limited to {s.cpu_percent:g} % of one core "
        f"by its cgroup (gateway_cpu_percent), so 2 x 4 gateways take at most {8 * s.cpu_percent:g} % of this "
        f"2-core machine; there the gateways share the machine's cores, caches and scheduler, and what a gateway "
        f"gets of its cap shrinks as N grows. Budget measured at the N = {max(s.ns)} peak: "
        f"{'; '.join(budget) or 'not measured'}. "
        f"Fig. 5: its own boot, N = 3, the preset as written (§4.3's MACs, 14 hosts in each of 16 buckets, "
        f"identity hash, K = 4096, partition period 256, meant to start all 16 on gateway 1; loaded buckets per "
        f"gateway after the boot {boot.get('after_boot', 'n/a')}; no load before the shipped policy's run "
        f"(even 2 s at 200 pps/dir let the shipped rebalancer spread them), buckets (both sites) moved to gateway 1 "
        f"before it: {start.get('forced_moves', 'n/a')}; each later run starts from operator moves "
        f"of every loaded bucket to gateway 1, system idle), CPU cap as the CPU-capped series. Offered: "
        f"{100 * FIG5_LOAD:.0f} % of T(3) / best_imbalance (CPU-capped T(3) at 1408 B, default suite, was measured "
        f"with one host per bucket; with 16 whole buckets over 3 gateways the fullest carries at best 6/16, "
        f"1.125 x its share), in both directions; a snapshot every second (loss from the receivers' sequence holes, "
        f"CPU per gateway from its cgroup's processes, the controllers' bucket map). Redistributed (settled) = "
        f"zero loss in that second and, at both sites, the loaded buckets spread as evenly as whole buckets allow: "
        f"max/mean of loaded buckets per gateway = ceil(B/N) / (B/N) for B loaded buckets over N gateways "
        f"(16 over 3: 6 / 5.33 = 1.125; a fixed 1.10 could never be met), i.e. no gateway holds more than "
        f"ceil(B/N). redistribution_s = from the start of the load (every flow on gateway 1) to the end of the "
        f"first second that is settled and stays settled until the run ends (runs stop after 15 settled seconds); "
        f"the CPU spread is in the JSON per snapshot. The paper's policy runs in the same boot with both "
        f"controllers restarted with rebalancer.policy: paper (its defaults, seed 1): the paper's Algorithm 5 as "
        f"written, the gateways in a ring in config order, every T_M = 4 s each one whose CPU load (its agent's "
        f"report, every T_L = 1.33 s) exceeds its successor's by more than L_D = 10 points hands |W| = 4 buckets "
        f"drawn at random from its own (loaded or idle) to its successor. Soak, in the same boot after "
        f"failover: {s.soak_s:.0f} s at {100 * SOAK_LOAD:.0f} % of that reachable rate; every simulated-host flow "
        f"is read by bench/gaps.py (`hostsim_flows`: sent by the sender, received by the receiver; its gap the "
        f"longest of first send -> first arrival, between two arrivals, last arrival -> last send), and a flow "
        f"whose last arrival is more than max({SOAK_FLOW_BUDGET_S:g} s, 3 frame spacings) before its last send "
        f"has not recovered (soak_flows_not_recovered; any fails the run). Failover: "
        f"bench.failover.two_site.measure, whose probes are read the same way (bench/failover's method); a probe "
        f"that never came back leaves the failover keys null with the reason and fails the run. Machine load "
        f"average (1/5/15 min), shared with other work: {loads}."
    )


def goal_note(value: float | None, goal: float | None, what: str) -> str:
    if value is None:
        return f"{what}: not measured"
    if goal is None or value >= goal:
        return what
    return f"{what}; {goal - value:.2f} ({100 * (1 - value / goal):.1f} %) short of the goal"


def ratio_bounds(res: Results, series: str, n: int) -> tuple[float, float] | None:
    """T(N)/T(1) at its lowest and highest given both searches' brackets (the highest passing
    and the lowest failing rate), 1408 B, default suite; None without both brackets."""
    def bracket(k: int) -> tuple[float, float] | None:
        row = next((r for r in res.fig4 if r["series"] == series and r["suite"] == SUITE_LABEL[DEFAULT_SUITE]
                    and r["frame_bytes"] == BIG_FRAME and r["n"] == k), None)
        if row is None or not row["pps"] or row.get("lowest_failing_pps") is None:
            return None
        return float(row["pps"]), float(row["lowest_failing_pps"])

    one, many = bracket(1), bracket(n)
    if one is None or many is None:
        return None
    return many[0] / one[1], many[1] / one[0]


def ratio_metrics(res: Results, series: str) -> dict[str, Metric]:
    metrics: dict[str, Metric] = {}
    prefix = KEY_PREFIX[series]
    t1 = res.rate(series, DEFAULT_SUITE, BIG_FRAME, 1)
    for n in (2, 3, 4):
        tn = res.rate(series, DEFAULT_SUITE, BIG_FRAME, n)
        value = tn / t1 if t1 and tn is not None else None
        goal = GOALS[n] if series == CAPACITY else None
        what = f"{SERIES_LABEL[series]}: T(N)/T(1), 1408 B, default suite"
        bounds = ratio_bounds(res, series, n)
        if value is not None and bounds is not None:
            what += f" (within the searches' resolution: {bounds[0]:.2f} .. {bounds[1]:.2f})"
        metrics[f"{prefix}ratio_n{n}"] = Metric(value, "x", goal=goal, note=goal_note(value, goal, what))
    for r in res.fig4:
        if r["series"] != series:
            continue
        key = f"{prefix}zero_loss_{r['suite'].replace('-', '_')}_{r['frame_bytes']}_n{r['n']}"
        metrics[f"{key}_pps"] = Metric(r["pps"], "pps/dir")
        metrics[f"{key}_mbps"] = Metric(r["mbps"], "Mb/s/dir")
        if series == CAPACITY and r["suite"] == "gcm" and r["frame_bytes"] == BIG_FRAME:
            for what in ("host_spread", "byte_spread"):
                metrics[f"{what}_n{r['n']}"] = Metric(
                    r[what], "x", note=f"max/mean per gateway at T({r['n']}), worse site" if r[what] is not None
                    else "not measured")
    return metrics


def report(s: Settings, res: Results) -> None:
    metrics: dict[str, Metric] = {}
    for kind in (CAPACITY, CPU):
        if kind in s.series:
            metrics |= ratio_metrics(res, kind)
    if CAPACITY in s.series:
        metrics["gateway_cap_pps"] = Metric(s.cap_pps, "pps", note="each gateway's WAN egress cap (tbf, capacity-capped series)")
    sg, pp = res.redistribution.get("supergw"), res.redistribution.get("paper")
    best = res.fig5_start.get("supergw", {}).get("best_imbalance")
    criterion = f"loaded buckets within max/mean {best} (ceil(B/N)/(B/N)) and no loss" if best else "not measured"
    metrics["redistribution_s"] = Metric(sg, "s", goal=5.0, higher_is_better=False,
                                         note=f"shipped policy; {criterion}" if "supergw" in res.redistribution
                                         else "not measured")
    metrics["redistribution_paper_policy_s"] = Metric(pp, "s", note="paper: ~180 s" if "paper" in res.redistribution
                                                      else "not measured")
    metrics["redistribution_budget8_s"] = Metric(
        res.redistribution.get("supergw-budget8"), "s",
        note="shipped policy with rebalancer.move_budget 8 (the default until this benchmark) instead of 64"
        if "supergw-budget8" in res.redistribution else "not measured")
    metrics["redistribution_best_imbalance"] = Metric(best, "x", note=criterion)
    for kind in ("freeze", "kill", "link"):
        key = f"failover_{kind}_ms"
        metrics[key] = Metric(res.failover.get(key), "ms", goal=500.0, higher_is_better=False,
                              note=res.failover_note or f"median of {s.failover_trials}, worse direction")
    for key, value in res.failover.items():
        if key not in metrics:
            metrics[key] = Metric(value, "ms")
    metrics["spurious_failovers_soak"] = Metric(
        res.soak.get("failovers"), "", note=f"goal 0; {res.soak['seconds']:.0f} s at 80 % of the reachable T(3)"
        if res.soak else "soak not run")
    metrics["soak_flows_not_recovered"] = Metric(
        res.soak.get("flows_not_recovered"), "flows",
        note=(f"goal 0; of {res.soak['flows']} simulated-host flows, silent at the end of the soak (bench/gaps.py: "
              f"last arrival -> last send; longest gap of any flow {res.soak['longest_flow_gap_ms']} ms) "
              f"{res.soak['not_recovered']}") if "flows" in res.soak else "soak not run")
    metrics["gateway_cpu_percent"] = Metric(s.cpu_percent, "% of a core",
                                            note="cgroup cap of each gateway's charon (CPU-capped series and Fig. 5)")
    one, five, fifteen = os.getloadavg()
    metrics["loadavg_1m_end"] = Metric(one, "", note=f"5 min {five:.2f}, 15 min {fifteen:.2f}")
    if res.loadavg:
        metrics["loadavg_1m_max_during_run"] = Metric(max(x["load1"] for x in res.loadavg), "")
    series = [Series(f"Fig. 5 {policy}: delivered Mb/s per direction", [r["t_s"] for r in rows],
                     [r["delivered_mbps"] for r in rows], "s", "Mb/s") for policy, rows in res.fig5.items()]
    series += [Series(f"Fig. 5 {policy}: loss %", [r["t_s"] for r in rows], [r["loss_percent"] for r in rows], "s", "%")
               for policy, rows in res.fig5.items()]
    rows = [{k: v for k, v in r.items() if k not in ("cpu_at_peak", "per_gateway")} for r in res.fig4]
    method = method_text(s, res) + ("" if not res.notes else " Notes: " + " ".join(res.notes))
    paths = write_report("scaling", metrics, rows, series, title="Clustering paper §4 on the two-site emulation",
                         method=method, results_dir=s.results_dir)
    # the JSON keeps every snapshot, each gateway at every T(N) and the load averages; the PNG mirrors the paper's figures
    import json

    doc = json.loads(paths.json.read_text())
    doc["fig5_snapshots"] = res.fig5
    doc["fig5_start"] = res.fig5_start
    doc["loadavg"] = res.loadavg
    doc["soak"] = res.soak
    tag = "{series}_{suite}_{frame_bytes}_n{n}"
    doc["cpu_at_peak"] = {tag.format(**r): r["cpu_at_peak"] for r in res.fig4}
    doc["per_gateway_at_peak"] = {tag.format(**r): r["per_gateway"] for r in res.fig4}
    paths.json.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    plots.draw(paths.png, res.fig4, res.fig5, res.site_a, "Clustering paper §4 on the two-site emulation "
               f"(libipsec; capacity-capped: {s.cap_pps:g} pps per gateway; CPU-capped: {s.cpu_percent:g} % of a core)")
    say(f"wrote {paths.json}, {paths.markdown}, {paths.png}")


def choose_buckets(base: Path, asked: int | None) -> tuple[int, str]:
    """K for the run and why: the preset's, unless the pipeline's bucket hash (the preset's
    `dispatch.hash` in the controller's `bucket_of`, the one Python copy of it) puts its simulated
    hosts into fewer than half as many buckets as hosts; then 4096, the largest K."""
    from supergw_proto.bucket import bucket_of, hash_name
    from supergw_proto.p4constants import MAX_BUCKETS

    site = load(base).sites[0]
    sim = site.simulated_hosts
    if sim is None:
        raise SystemExit(f"{base}: no simulated_hosts, nothing to offer load with")
    macs = list(sim.macs())
    preset = site.lan.buckets

    hash_ = site.lan.dispatch.hash

    def spread(k: int) -> int:
        return len({bucket_of(m, k, hash_) for m in macs})

    if asked is not None:
        return asked, f"K = {asked} (asked for): the {len(macs)} simulated hosts per site use {spread(asked)} buckets"
    if spread(preset) >= len(macs) / 2 or preset == MAX_BUCKETS:
        return preset, (f"K = {preset} (the preset's, {hash_name(hash_)} hash): the {len(macs)} "
                        f"simulated hosts per site use {spread(preset)} buckets")
    return 4096, (f"K = 4096, not the preset's {preset}: the bucket hash maps the {len(macs)} consecutive "
                  f"simulated MACs per site onto {spread(preset)} of {preset} buckets but {spread(4096)} "
                  f"of 4096")


def parse(argv: list[str] | None) -> Settings:
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="development run: N = 1 and 3, 1408 B, default suite, short")
    p.add_argument("--gateways", type=int, nargs="+", metavar="N", help="cluster sizes (default 1 2 3 4)")
    p.add_argument("--series", nargs="+", choices=[CAPACITY, CPU],
                   help="Fig. 4 series (default both; Fig. 5 needs the cpu series' T(3))")
    p.add_argument("--cpu-percent", type=float, default=8.0, help="cgroup cap of each gateway, %% of a core (cpu series, Fig. 5)")
    p.add_argument("--cap-pps", type=float, default=600.0,
                   help="capacity series: each gateway's WAN egress cap, packets/s (default 600)")
    p.add_argument("--cap-cpu-percent", type=float, default=50.0,
                   help="capacity series: cgroup cap of each gateway, %% of a core (default 50: not the limit)")
    p.add_argument("--no-fig5", action="store_true", help="skip Fig. 5, failover and the soak (their boot)")
    p.add_argument("--soak-s", type=float, default=None, help="soak length (default 600; --quick 30; 0 skips it)")
    p.add_argument("--failover-trials", type=int, default=None, help="trials per failure kind (default 5; 0 skips)")
    p.add_argument("--topology", type=Path, default=BASE_TOPOLOGY, help="two-site file to start from")
    p.add_argument("--buckets", type=int, default=None,
                   help="K (default: the preset's, or 4096 when the hash crowds its hosts into few buckets)")
    p.add_argument("--suites", nargs="+", choices=list(SUITE_LABEL.values()), help="ESP suites (default both; --quick gcm)")
    p.add_argument("--frames", type=int, nargs="+", choices=[BIG_FRAME, SMALL_FRAME], help="frame sizes (default both)")
    p.add_argument("--results-dir", type=Path, default=None,
                   help="where scaling.{json,md,png} go (default bench/results; a development run elsewhere)")
    a = p.parse_args(argv)
    if a.cpu_percent <= 0 or a.cap_cpu_percent <= 0 or (a.soak_s is not None and a.soak_s < 0):
        p.error("--cpu-percent and --cap-cpu-percent must be > 0 and --soak-s >= 0")
    try:
        EgressCap(a.cap_pps)
    except ValueError as exc:
        p.error(f"--cap-pps: {exc}")
    ns = a.gateways or ([1, 3] if a.quick else [1, 2, 3, 4])
    if any(not 1 <= n <= 4 for n in ns):
        p.error("--gateways: N is 1..4")
    buckets, why = choose_buckets(a.topology, a.buckets)
    return Settings(
        ns=sorted(set(ns)),
        frames=a.frames or ([BIG_FRAME] if a.quick else [BIG_FRAME, SMALL_FRAME]),
        suites=[k for k, v in SUITE_LABEL.items() if v in a.suites] if a.suites
        else ([DEFAULT_SUITE] if a.quick else [DEFAULT_SUITE, OTHER_SUITE]),
        series=[x for x in (CAPACITY, CPU) if x in (a.series or [CAPACITY, CPU])],
        cpu_percent=a.cpu_percent,
        cap_pps=a.cap_pps,
        cap_cpu_percent=a.cap_cpu_percent,
        probe_s=2.0 if a.quick else 3.0,
        resolution=0.04 if a.quick else 0.02,
        max_probes=7 if a.quick else 10,
        fig5_s=25.0 if a.quick else 60.0,
        paper_s=40.0 if a.quick else 300.0,
        soak_s=a.soak_s if a.soak_s is not None else (30.0 if a.quick else 600.0),
        failover_trials=a.failover_trials if a.failover_trials is not None else (1 if a.quick else 5),
        base=a.topology,
        buckets=buckets,
        buckets_why=why,
        fig5=not a.no_fig5,
        results_dir=a.results_dir,
    )


def main(argv: list[str] | None = None) -> int:
    s = parse(argv)
    if os.geteuid() != 0:
        print("bench.scaling needs root (namespaces, eBPF, cgroups, tc); run it under "
              "`flock -o /work/.emu.lock`", file=sys.stderr)
        return 2
    res = Results()
    note_load(res, "start")
    failed: list[str] = []
    for series in s.series:
        for suite in s.suites:
            for n in s.ns:
                # the second suite's 64-byte search is what a late run drops first: keep the order
                try:
                    fig4_boot(s, res, series, suite, n)
                except (BenchError, HostsimError, ApiError, OSError) as exc:
                    failed.append(f"{SERIES_LABEL[series]} N={n} {SUITE_LABEL[suite]}: {exc}")
                    say(f"FAILED {SERIES_LABEL[series]} N={n} {SUITE_LABEL[suite]}: {exc}")
                report(s, res)  # after every boot: a late or failed run still leaves what it measured
    if s.fig5 and 3 in s.ns and DEFAULT_SUITE in s.suites:
        try:
            fig5_boot(s, res)
        except (BenchError, HostsimError, ApiError, OSError) as exc:
            failed.append(f"Fig. 5: {exc}")
            say(f"FAILED Fig. 5: {exc}")
        report(s, res)
    if res.failover_note and not res.failover:  # e.g. a failover whose probe never came back (two_site.measure)
        failed.append(f"failover: {res.failover_note}")
    if res.soak.get("flows_not_recovered"):
        failed.append(f"soak: {res.soak['flows_not_recovered']} flows had not recovered at its end: "
                      f"{res.soak['not_recovered']}")
    if failed:
        res.notes.append("Failed: " + " | ".join(failed))
        report(s, res)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
