"""bench/scale's report: the headline metrics (at the largest point, N = 32 and 50,000 hosts in
a full run) with the issue's goals, one table per part over every point, the cost curves
against hosts and against N (scale.png), the part that grows fastest, and every goal missed
with the part that limits it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.report import Metric, ReportPaths, Series, write_report
from bench.scale import analysis
from bench.scale.costs import Steady
from bench.scale.pins import PinRun
from bench.scale.point import PointResult
from bench.scale.writes import TargetWrites

GOAL_LEARNING = 5000.0  # hosts/s
GOAL_FAILOVER_WRITE_MS = 100.0
GOAL_GAP_MS = 500.0  # today's failover budget (bench/failover)
GOAL_REST_P99_MS = 100.0
GOAL_EBPF_WRITES = 20000.0  # entries/s
BEND_LIMIT = 1.25  # controller memory per host of the last segment over the first: above it, superlinear


@dataclass
class HaResult:
    hosts: int
    takeover_s: float | None
    lost: int | None
    etcd_db_bytes: int | None
    etcd_writes_per_s: float | None
    note: str = ""


@dataclass
class Run:
    points: list[PointResult] = field(default_factory=list)
    writes: list[TargetWrites] = field(default_factory=list)
    writes_missing: dict[str, str] = field(default_factory=dict)
    pins: dict[str, PinRun] = field(default_factory=dict)
    pins_note: str = ""
    ha: HaResult | None = None
    notes: list[str] = field(default_factory=list)
    failed_parts: list[str] = field(default_factory=list)  # a whole part that raised (its points or run lost)


def _rows(points: Sequence[PointResult], part: Callable[[PointResult], dict[str, Any] | None]) -> list[dict[str, Any]]:
    out = []
    for p in points:
        row = part(p)
        if row is not None:
            out.append({**p.key(), **row})
    return out


def headline(run: Run, switch: str = "ebpf") -> PointResult | None:
    """The point the goals are judged at: the largest (N, H) of `switch` with a learning run."""
    done = [p for p in run.points if p.switch == switch and p.learning is not None]
    return max(done, key=lambda p: (p.point.gateways, p.point.hosts), default=None)


def _rest_metrics(p: PointResult) -> dict[str, Metric]:
    out = {}
    for lat in p.rest:
        name = "rest_p99_ms_" + lat.endpoint.replace("?", "_").replace("=", "_").replace("...", "x").replace(".", "_")
        out[name] = Metric(lat.q(99), "ms", goal=GOAL_REST_P99_MS, higher_is_better=False,
                           note=f"GET {lat.endpoint}: {len(lat.samples_ms)} calls, p50 {lat.q(50) or 0:.1f} ms, "
                                f"answer {lat.bytes / 1024:.0f} kB")
    return out


def metrics(run: Run) -> dict[str, Metric]:
    p = headline(run)
    m: dict[str, Metric] = {}
    at = "" if p is None else f" at N = {p.point.gateways}, {p.point.hosts} hosts ({p.switch})"
    lr = None if p is None else p.learning
    m["learning_hosts_per_s"] = Metric(
        None if lr is None else lr.v4.hosts_per_s, "hosts/s", goal=GOAL_LEARNING,
        note=f"cold start{at}: every host's first frame at once; learned hosts / (first frame -> last host's "
             f"host_ips entry read on the switch)" + ("" if lr is None else f"; {lr.v4.learned} of {lr.hosts} learned"))
    m["learning_p99_ms"] = Metric(None if lr is None else _ms(lr.v4.latency(99)), "ms", higher_is_better=False,
                                  note="per host: its first frame -> its entries read on the switch (cold start: "
                                       "queueing included; reads every " + (f"{1000 * lr.poll_s:.0f} ms)" if lr else "poll)"))
    m["learning_ip6_p99_ms"] = Metric(None if lr is None else _ms(lr.v6.latency(99)), "ms", higher_is_better=False,
                                      note="the same for each host's IPv6 address (host_ip6s)")
    f = None if p is None else p.failover
    m["failover_write_ms"] = Metric(None if f is None else f.write_ms, "ms", goal=GOAL_FAILOVER_WRITE_MS,
                                    higher_is_better=False,
                                    note="" if f is None else f"verdict (gateway_dead) -> the last of its {f.moved} "
                                    f"buckets written ({f.buckets} held){at}")
    m["failover_gap_ms"] = Metric(None if f is None else f.flow.gap_ms, "ms", goal=GOAL_GAP_MS, higher_is_better=False,
                                  note="a 10 ms ping through the frozen gateway: last answer before -> first after"
                                       + ("" if f is None else f" ({f.flow.lost} probes lost; verdict "
                                                               f"{f.verdict_ms or 0:.0f} ms after the freeze)"))
    if p is not None:
        m.update(_rest_metrics(p))
        if p.dashboard is not None:
            m["dashboard_refresh_p99_ms"] = Metric(p.dashboard.q(99), "ms", higher_is_better=False,
                                                   note="the dashboard's six GETs of one 2 s refresh, one after another")
        if p.ctl is not None:
            m["supergwctl_hosts_p99_ms"] = Metric(p.ctl.q(99), "ms", higher_is_better=False,
                                                  note="`supergwctl hosts` (its first page of 100) as a process, "
                                                       "start to exit (Python start-up included)")
    r = None if p is None else p.restart
    m["restart_adopt_s"] = Metric(None if r is None else r.adopt_s, "s", higher_is_better=False,
                                  note=f"controller started -> primary and holding every host again{at}")
    m["restart_lost_probes"] = Metric(None if r is None else float(r.flow.lost), "probes",
                                      note="goal 0: a 10 ms ping across the restart" +
                                           ("" if r is None else f" ({r.flow.sent} sent)"))
    for w in run.writes:
        best = w.best()
        goal = GOAL_EBPF_WRITES if w.target == "ebpf" else None
        m[f"p4rt_{w.target}_entries_per_s"] = Metric(
            None if best is None else best.entries_per_s, "entries/s", goal=goal,
            note="" if best is None else f"host-table INSERTs in WriteRequests of {best.batch} (best batch size; "
                                         f"{w.binary})")
        m[f"p4rt_{w.target}_buckets_rewrite_ms"] = Metric(w.buckets_modify_ms, "ms", higher_is_better=False,
                                                          note="all 4096 buckets MODIFY in one WriteRequest")
        if w.site_insert_s is not None:
            m[f"p4rt_{w.target}_site_hosts_s"] = Metric(w.site_insert_s, "s", higher_is_better=False,
                                                        note=f"{w.site_hosts} hosts' {w.site_entries} entries in "
                                                             f"requests of 1000")
    for target, why in run.writes_missing.items():
        m[f"p4rt_{target}_entries_per_s"] = Metric(None, "entries/s", note=why)
    m.update(cost_metrics(run))
    rb = next((q.rebalance for q in sorted(run.points, key=lambda q: -q.point.hosts) if q.rebalance), None)
    m["rebalance_plan_ms"] = Metric(None if rb is None else rb.plan_ms, "ms", higher_is_better=False,
                                    note="" if rb is None else f"one round at N = {rb.gateways} ({rb.moves} moves)")
    m["rebalance_write_ms"] = Metric(None if rb is None else rb.write_ms, "ms", higher_is_better=False)
    pin = run.pins.get("1000") or next(iter(run.pins.values()), None)
    m["pins_per_s"] = Metric(None if pin is None else pin.pins_per_s, "pins/s",
                             note=run.pins_note or (f"{pin.clients} clients' pins on the outside switch" if pin else ""))
    if run.ha is not None:
        m["ha_takeover_s"] = Metric(run.ha.takeover_s, "s", higher_is_better=False,
                                    note=f"leader SIGKILL -> new leader primary with {run.ha.hosts} hosts {run.ha.note}")
        m["ha_etcd_db_bytes"] = Metric(None if run.ha.etcd_db_bytes is None else float(run.ha.etcd_db_bytes), "B")
        m["ha_etcd_writes_per_s"] = Metric(run.ha.etcd_writes_per_s, "writes/s")
    return m


def _ms(v: float | None) -> float | None:
    return None if v is None else 1000 * v


def _fit_points(run: Run, switch: str = "ebpf") -> tuple[int, list[PointResult]]:
    """The points of the largest N of `switch` with a steady-state sample, by hosts."""
    steady = [p for p in run.points if p.switch == switch and p.steady is not None]
    if not steady:
        return 0, []
    n = max(p.point.gateways for p in steady)
    return n, sorted((p for p in steady if p.point.gateways == n), key=lambda p: p.point.hosts)


def memory_fit(run: Run) -> analysis.Fit | None:
    _n, pts = _fit_points(run)
    if len({p.point.hosts for p in pts}) < 2:
        return None
    return analysis.linear_fit([float(p.point.hosts) for p in pts],
                               [float(p.steady.controller_rss) if p.steady else 0.0 for p in pts])


def cost_metrics(run: Run) -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    n, pts = _fit_points(run)
    fit = memory_fit(run)
    out["controller_bytes_per_host"] = Metric(
        None if fit is None else fit.slope, "B/host", higher_is_better=False,
        note="" if fit is None else f"slope of the controller's RSS over hosts at N = {n} (least squares, "
                                   f"R² {fit.r2:.3f}, {fit.intercept / 2**20:.0f} MB at 0 hosts)")
    out["controller_memory_bend"] = Metric(
        None if fit is None else fit.bend, "ratio", goal=BEND_LIMIT, higher_is_better=False,
        note="bytes per host of the largest step over those of the smallest: 1 = linear; above "
             f"{BEND_LIMIT} a superlinear term")
    learn = [p for p in pts if p.learning is not None]
    if learn:
        big = learn[-1]
        lr = big.learning
        assert lr is not None
        out["controller_cpu_us_per_host_learned"] = Metric(
            1e6 * lr.controller_cpu_s / max(1, lr.v4.learned), "µs", higher_is_better=False,
            note=f"controller CPU over the cold start / hosts learned (N = {n}, {big.point.hosts} hosts, IPv6 included)")
    by_n = _steady_by_gateways(run)
    if len(by_n) >= 2:
        ns = sorted(by_n)
        fit_n = analysis.linear_fit([float(x) for x in ns], [by_n[x].controller_cpu for x in ns])
        out["controller_cpu_pct_per_gateway"] = Metric(
            100 * fit_n.slope, "% of a core", higher_is_better=False,
            note="slope of the controller's CPU at rest over N (heartbeats, reports, counters; the largest H of each N)")
    if by_n:
        n_max = max(by_n)
        at_max = by_n[n_max]
        out["controller_cpu_ms_per_report_round"] = Metric(
            1000 * at_max.cpu_per_report_round, "ms", higher_is_better=False,
            note=f"controller CPU at rest per report interval ({at_max.report_interval_s:g} s) at N = {n_max} (its "
                 "largest host count): every gateway's report, its heartbeats, the counter polls")
    grow = growth(run)
    if grow:
        name, e = max(grow.items(), key=lambda kv: kv[1])
        out["fastest_growth_exponent"] = Metric(e, "", higher_is_better=False,
                                                note=f"{name}: log-log slope over the points (1 = linear)")
    return out


def _steady_by_gateways(run: Run) -> dict[int, Steady]:
    """N -> the eBPF at-rest sample of its largest host count."""
    out: dict[int, Steady] = {}
    for p in sorted(run.points, key=lambda p: p.point.hosts):
        if p.switch == "ebpf" and p.steady is not None:
            out[p.point.gateways] = p.steady
    return out


def _costs_by_hosts(run: Run) -> dict[str, list[tuple[float, float]]]:
    """Each cost at the largest N over hosts."""
    _n, pts = _fit_points(run)
    out: dict[str, list[tuple[float, float]]] = {}

    def add(name: str, x: float, y: float | None) -> None:
        if y is not None:
            out.setdefault(name, []).append((x, y))

    for p in pts:
        h = float(p.point.hosts)
        if p.learning is not None:
            add("learning time (s)", h, p.learning.v4.span_s)
            add("controller CPU learning (s)", h, p.learning.controller_cpu_s)
            add("switch CPU learning (s)", h, p.learning.switch_cpu_s)
        if p.steady is not None:
            add("controller RSS (MB)", h, p.steady.controller_rss / 2**20)
            add("controller CPU at rest (%)", h, 100 * p.steady.controller_cpu)
            add("switch CPU at rest (%)", h, 100 * p.steady.switch_cpu)
        for lat in p.rest:
            add(f"GET {lat.endpoint} p99 (ms)", h, lat.q(99))
        if p.restart is not None:
            add("restart adopt (s)", h, p.restart.adopt_s)
        if p.failover is not None:
            add("failover write (ms)", h, p.failover.write_ms)
    return out


def _costs_by_gateways(run: Run) -> dict[str, list[tuple[float, float]]]:
    """Each cost at the largest H of each N, over N."""
    pts = [p for p in run.points if p.switch == "ebpf" and p.steady is not None]
    by_n = {p.point.gateways: p for p in sorted(pts, key=lambda p: p.point.hosts)}
    out: dict[str, list[tuple[float, float]]] = {}
    for n, p in sorted(by_n.items()):
        if p.steady is not None:
            out.setdefault("controller CPU at rest (%)", []).append((n, 100 * p.steady.controller_cpu))
            out.setdefault("agents CPU (%)", []).append((n, 100 * p.steady.agents_cpu))
            out.setdefault("controller RSS (MB)", []).append((n, p.steady.controller_rss / 2**20))
        if p.failover is not None and p.failover.write_ms is not None:
            out.setdefault("failover write (ms)", []).append((n, p.failover.write_ms))
        if p.learning is not None and p.learning.v4.hosts_per_s:
            out.setdefault("learning (hosts/s)", []).append((n, p.learning.v4.hosts_per_s))
    return out


def growth(run: Run) -> dict[str, float]:
    """Growth exponent of each cost over hosts (at the largest N) — the fastest names the part."""
    out = {}
    for name, pts in _costs_by_hosts(run).items():
        e = analysis.growth_exponent([x for x, _ in pts], [y for _, y in pts])
        if e is not None:
            out[name] = e
    return out


def series(run: Run) -> list[Series]:
    out = []
    for name, pts in _costs_by_hosts(run).items():
        out.append(Series(name, [x for x, _ in pts], [y for _, y in pts], xlabel="hosts", ylabel="cost"))
    return out


def tables(run: Run) -> dict[str, list[dict[str, Any]]]:
    t: dict[str, list[dict[str, Any]]] = {
        "Learning (cold start, per point)": _rows(run.points, lambda p: p.learning.row() if p.learning else None),
        "At rest (per point)": _rows(run.points, lambda p: p.steady.row() if p.steady else None),
        "REST (per point and endpoint)": [
            {**p.key(), **lat.row()} for p in run.points for lat in [*p.rest, *filter(None, [p.dashboard, p.ctl])]],
        "Failover (per point)": _rows(run.points, lambda p: p.failover.row() if p.failover else None),
        "Rebalance round": _rows(run.points, lambda p: p.rebalance.row() if p.rebalance else None),
        "Controller restart (per point)": _rows(run.points, lambda p: p.restart.row() if p.restart else None),
        "P4Runtime writes": [b.row(w.target) for w in run.writes for b in w.batches],
        "Full-table rewrites": [{"target": w.target, "buckets_insert_ms": _round(w.buckets_insert_ms),
                                 "buckets_modify_ms": _round(w.buckets_modify_ms), "site_hosts": w.site_hosts,
                                 "site_entries": w.site_entries, "site_insert_s": _round(w.site_insert_s),
                                 "site_delete_s": _round(w.site_delete_s)} for w in run.writes],
        "Remote-access pins": [pin.row(what) for what, pin in run.pins.items()],
        "Growth over hosts (log-log slope, largest N)": [{"cost": k, "exponent": round(v, 2)}
                                                          for k, v in sorted(growth(run).items(), key=lambda kv: -kv[1])],
        "Errors": [{**p.key(), "error": e} for p in run.points for e in p.errors],
    }
    return {k: v for k, v in t.items() if v}


def _round(v: float | None, d: int = 2) -> float | None:
    return None if v is None else round(v, d)


def shortfalls(run: Run, m: dict[str, Metric]) -> list[str]:
    """Every goal missed, with the part that limits it (empty: all met)."""
    out = []
    for name, metric in m.items():
        if metric.met() is False:
            out.append(f"{name} = {metric.value:.4g} {metric.unit} (goal {'≥' if metric.higher_is_better else '≤'} "
                       f"{metric.goal:g}): {LIMITS.get(name.split('_p99')[0], LIMITS.get(name, 'see the tables'))}")
    lost = m.get("restart_lost_probes")
    if lost is not None and lost.value:
        out.append(f"restart_lost_probes = {lost.value:.0f} (goal 0): {LIMITS['restart_lost_probes']}")
    for p in run.points:
        for e in p.errors:
            out.append(f"{p.label}: {e}")
    return run.failed_parts + out


LIMITS = {
    "learning_hosts_per_s": "the controller's CPU (one Python process: digest lists decoded by finsy, the host table, "
                            "entries encoded) while the switch, the hosts and the agents share the machine's two cores",
    "failover_write_ms": "the controller's bucket write (encode + P4Runtime round trip) behind whatever its event loop "
                         "was doing at the verdict",
    "failover_gap_ms": "detection (3 missed 100 ms heartbeats) dominates; the write adds the rest",
    "rest": "the controller's event loop answers REST between digests, reports and counter polls",
    "controller_memory_bend": "the controller's per-host state (host table, views) grows faster than the hosts",
    "restart_lost_probes": "the data plane should forward on its own while the controller restarts: a loss is a write "
                           "of the restarted controller that changed forwarding",
    "p4rt_ebpf_entries_per_s": "the eBPF switch's P4Runtime server (validation, its Go table, one BPF map update per entry)",
}


def write(run: Run, method: str, results_dir: Path | None, quick: bool) -> tuple[ReportPaths, list[str]]:
    m = metrics(run)
    short = shortfalls(run, m)
    rows = [{**p.key(), "learned": p.learning.v4.learned if p.learning else None,
             "hosts_per_s": round(p.learning.v4.hosts_per_s) if p.learning and p.learning.v4.hosts_per_s else None,
             "errors": "; ".join(p.errors) or None} for p in run.points]
    name = "scale-quick" if quick else "scale"
    errors = run.failed_parts + [f"{p.label}: {e}" for p in run.points for e in p.errors]
    notes = list(run.notes)
    if quick:  # the goals are the full run's (N = 32, 50,000 hosts): at the quick point they are notes
        notes += [f"goal of the full run, not met at this quick point: {s}" for s in short if s not in errors]
        failing = errors
    else:
        failing = short
    paths = write_report(name, m, rows, series(run), title=f"A site of 50,000 hosts and 32 gateways: the cost of every part ({covered(run)})",
                         method=method + ("\n\n" + "\n".join(f"- {n}" for n in [covered(run), *notes])),
                         results_dir=results_dir, rows_title="Points",
                         failures=[{"failed": s} for s in failing], tables=tables(run))
    draw(paths.png, run)
    return paths, short


def covered(run: Run) -> str:
    """What this run measured, per switch: its gateway counts and host counts (a run of part of
    the matrix must not read as the full one)."""
    parts = []
    for switch in sorted({p.switch for p in run.points}):
        mine = [p.point for p in run.points if p.switch == switch]
        ns = ", ".join(str(n) for n in sorted({q.gateways for q in mine}))
        hs = ", ".join(f"{h:,}" for h in sorted({q.hosts for q in mine}))
        parts.append(f"{switch}: N = {ns}; hosts {hs}")
    return "points measured: " + ("; ".join(parts) or "none")


def draw(path: Path, run: Run) -> None:
    """scale.png: each cost against hosts (largest N) and against N (largest H of each N)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_h, by_n = _costs_by_hosts(run), _costs_by_gateways(run)
    panels = [(name, pts, "hosts") for name, pts in by_h.items()] + [(name, pts, "gateways N") for name, pts in by_n.items()]
    if not panels:
        return
    cols = 4
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, (name, pts, xlabel) in zip([a for r in axes for a in r], panels):
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=7)
        if xlabel == "hosts":
            ax.set_xscale("log")
    for ax in [a for r in axes for a in r][len(panels):]:
        ax.axis("off")
    fig.suptitle("bench/scale: cost of every part against hosts (at the largest N) and against N (at the largest H)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
