"""Fig. 4 (§4.2), gateway-bound: zero-loss throughput of N = 1..4 gateway pairs, each gateway
limited by its own IPsec work, beside what the host-to-gateway partition predicts.

One boot per (ESP suite, N): the two-site emulation with UML gateways (kernel ESP in each
gateway's own guest kernel), every guest under the same cgroup CPU quota (the capacity under
test; no rate cap anywhere), the paper's K = 256 and §4.2's 224 hosts per site, one per bucket,
spread by the paper's partition (75/75/74 at N = 3), redistribution off. Per frame size,
`trials` zero-loss searches (offered load bidirectional, each site's hosts to the other's);
T(N) is their mean with a 95 % interval and T(N)/T(1) is set beside the partition's
prediction N x mean/max of the pairs' hosts (partition.py). At N >= 2 (default suite, 1408 B)
the negative control: the same searches after operator moves give gateway 1 `skew` times
its even share; its ratio must come out lower than the even partition's, near its own
prediction. At N = 1 (default suite, 1408 B) the capacity at other quotas: it must follow
the quota for the gateways to be the limit. Every probe records the machine's CPU, each
gateway's and the generators' and switches' processes'; the searches' failing probes show
where frames were lost (the generator offered the rate, the switch dispatched what it got,
the fullest gateway did not encrypt it all).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.report import Metric
from bench.scaling import partition
from bench.scaling.analysis import ZERO_LOSS, zero_loss_rate
from bench.scaling.emulation import RUN_ERRORS, LoadedEmulation, ProbeResult, say
from bench.scaling.settings import (BIG_FRAME, DEFAULT_SUITE, REDISTRIBUTION_OFF, SUITE_LABEL, Settings,
                                    boot_changes)
from bench.scaling.stats import Interval, mean_interval, ratio_interval

EVEN, SKEWED = "even", "skewed"
WITHIN = 0.03  # the goal: a ratio within 3 % of its partition's prediction
CEILING_PPS = 400_000.0  # no search runs away; far above anything this machine carries
FIRST_START_PPS = 400.0  # the first search of a run, before anything is known
NEXT_GROWTH = 1.12  # later searches start just under the previous result and step by this
GENERATOR_SHORT = 0.97  # a probe whose generators offered less than this of the rate counts as failed
COMPONENTS = ("hostsims", "switches", "controllers", "agents")


@dataclass(frozen=True)
class Trial:
    """One zero-loss search."""

    rate_pps: float  # the highest rate that passed (per direction)
    lowest_failing_pps: float | None
    probes: int
    peak: ProbeResult | None  # the probe that passed at rate_pps
    failing: ProbeResult | None  # the probe at the lowest failing rate: where the frames went
    shortfalls: tuple[str, ...] = ()  # rates the generators could not offer


@dataclass
class Cell:
    """Every trial of one (suite, frame, N, partition, quota)."""

    suite: str
    frame: int
    n: int
    layout: str  # EVEN | SKEWED
    quota: float  # % of a core per gateway
    hosts: dict[str, list[int]]  # per site, simulated hosts per gateway (gateway order)
    trials: list[Trial] = field(default_factory=list)

    @property
    def pairs(self) -> list[int]:
        a, b = self.hosts.values()
        return partition.pair_hosts(a, b)

    @property
    def prediction(self) -> float:
        return partition.prediction(self.pairs)

    @property
    def rates(self) -> list[float]:
        return [t.rate_pps for t in self.trials if t.rate_pps > 0]

    def interval(self) -> Interval | None:
        return mean_interval(self.rates) if self.rates else None

    def key(self) -> str:
        return f"{SUITE_LABEL[self.suite]}_{self.frame}_n{self.n}_{self.layout}_q{self.quota:g}"


@dataclass
class Fig4Results:
    cells: list[Cell] = field(default_factory=list)
    stray_moves: list[str] = field(default_factory=list)  # moves during the searches (none expected)
    events: list[str] = field(default_factory=list)  # the controllers' other events during the searches
    failed: list[str] = field(default_factory=list)  # boots that failed, and why
    notes: list[str] = field(default_factory=list)

    def cell(self, suite: str, frame: int, n: int, layout: str = EVEN, quota: float | None = None) -> Cell | None:
        return next((c for c in self.cells if c.suite == suite and c.frame == frame and c.n == n
                     and c.layout == layout and (quota is None or c.quota == quota)), None)


# ------------------------------------------------------------------------------- measuring

def search(emu: LoadedEmulation, s: Settings, label: str, frame: int, start: float, growth: float) -> Trial:
    """One zero-loss search; a rate fails only when a second probe at it loses frames too (the
    machine is shared), and a probe the generators could not offer counts as failed."""
    passed: dict[float, ProbeResult] = {}
    failed: dict[float, ProbeResult] = {}
    short: list[str] = []

    def probe(rate: float) -> float:
        r = emu.probe(rate, frame, s.probe_s, account=True)
        if r.loss > ZERO_LOSS:
            again = emu.probe(rate, frame, s.probe_s, account=True)
            r = again if again.loss < r.loss else r
        offered = r.achieved_pps >= GENERATOR_SHORT * rate
        ok = r.loss <= ZERO_LOSS and offered
        say(f"  {label}: {rate:8.0f} pps/dir -> loss {100 * r.loss:.4f} % ({'ok' if ok else 'loss'}), offered "
            f"{r.achieved_pps:.0f}, machine {r.machine_cpu:.0f} % of a core")
        if not offered:
            short.append(f"{rate:.0f} pps asked, {r.achieved_pps:.0f} offered")
        (passed if ok else failed)[rate] = r
        return r.loss if offered else 1.0

    result = zero_loss_rate(probe, start, CEILING_PPS, resolution=s.resolution, max_probes=s.max_probes, growth=growth)
    lowest = min(failed, default=None)
    return Trial(result.rate_pps, lowest, len(result.probes), passed.get(result.rate_pps),
                 failed.get(lowest) if lowest is not None else None, tuple(short))


def fill(emu: LoadedEmulation, s: Settings, cell: Cell, count: int, first_start: float) -> None:
    """`count` searches into `cell`: the first from `first_start` doubling, the next ones from
    just under the previous result in small steps (the start decides which rates are probed,
    not the answer: every search brackets its own)."""
    label = f"{SUITE_LABEL[cell.suite]} N={cell.n} {cell.frame} B {cell.layout} q{cell.quota:g}%"
    start, growth = first_start, 2.0
    for i in range(count):
        trial = search(emu, s, f"{label} #{i + 1}", cell.frame, start, growth)
        cell.trials.append(trial)
        say(f"T({label}) trial {i + 1}/{count} = {trial.rate_pps:.0f} pps/dir ({trial.probes} probes)")
        if trial.rate_pps > 0:
            start, growth = 0.94 * trial.rate_pps, NEXT_GROWTH


def run(s: Settings, res: Fig4Results, report: Callable[[], None]) -> None:
    for suite in s.suites:
        for n in s.ns:
            try:
                boot(s, res, suite, n)
            except RUN_ERRORS as exc:
                res.failed.append(f"Fig. 4 N={n} {SUITE_LABEL[suite]}: {exc}")
                say(f"FAILED Fig. 4 N={n} {SUITE_LABEL[suite]}: {exc}")
            report()  # after every boot: a late or failed run still leaves what it measured


def boot(s: Settings, res: Fig4Results, suite: str, n: int) -> None:
    emu = LoadedEmulation(s.base, boot_changes(s, n, suite, REDISTRIBUTION_OFF))
    emu.up()
    try:
        emu.set_quota(s.quota_percent, s.realtime)  # the same share, granted in shorter periods (emulation.QUOTA_PERIOD_US)
        emu.probe(200.0, BIG_FRAME, 2.0)  # every host's flow seen by both switches before any search
        marks, t0 = emu.event_marks(), time.time()
        hosts = emu.partition()
        for frame in s.frames:
            one = res.cell(suite, frame, 1, EVEN, s.quota_percent)
            cell = Cell(suite, frame, n, EVEN, s.quota_percent, hosts)
            res.cells.append(cell)
            t1 = one.interval() if one is not None else None
            fill(emu, s, cell, s.trials, t1.mean if t1 is not None else FIRST_START_PPS)
        if n == 1 and suite == DEFAULT_SUITE and BIG_FRAME in s.frames:
            quota_scaling(emu, s, res, hosts)
        stray, events = emu.moves_since(marks, t0)
        if n >= 2 and suite == DEFAULT_SUITE and BIG_FRAME in s.frames and s.control_trials > 0:
            control(emu, s, res, n)
            more, later = emu.moves_since(marks, t0)
            stray += [m for m in more if m.reason != "operator"]
            events += later
        res.stray_moves += [f"N={n} {SUITE_LABEL[suite]}: {m.describe()}" for m in stray]
        res.events += [f"N={n} {SUITE_LABEL[suite]}: {e}" for e in events]
    finally:
        emu.stop()
        emu.down()


def quota_scaling(emu: LoadedEmulation, s: Settings, res: Fig4Results, hosts: dict[str, list[int]]) -> None:
    """T(1) at other quotas: the gateways are the limit only if their capacity follows the quota."""
    base = res.cell(DEFAULT_SUITE, BIG_FRAME, 1)
    known = base.interval() if base is not None else None
    try:
        for factor in s.quota_factors:
            quota = s.quota_percent * factor
            emu.set_quota(quota, s.realtime)
            say(f"every gateway's quota now {quota:g} % of a core")
            cell = Cell(DEFAULT_SUITE, BIG_FRAME, 1, EVEN, quota, hosts)
            res.cells.append(cell)
            fill(emu, s, cell, max(2, s.control_trials), factor * known.mean if known else FIRST_START_PPS)
    finally:
        emu.set_quota(s.quota_percent, s.realtime)


def control(emu: LoadedEmulation, s: Settings, res: Fig4Results, n: int) -> None:
    """The negative control: gateway 1 of both sites takes `skew` x its even share."""
    moved = 0
    for site in emu.sites:
        wanted = partition.skewed(sorted(set(site.host_buckets)), site.gateways, s.skew)
        moved += emu.place(site, wanted)
    hosts = emu.partition()
    say(f"skewed partition (operator moves of {moved} buckets): hosts per gateway {hosts}")
    cell = Cell(DEFAULT_SUITE, BIG_FRAME, n, SKEWED, s.quota_percent, hosts)
    res.cells.append(cell)
    even = res.cell(DEFAULT_SUITE, BIG_FRAME, n)
    known = even.interval() if even is not None else None
    start = known.mean * cell.prediction / even.prediction if known and even else FIRST_START_PPS
    fill(emu, s, cell, s.control_trials, start)


# ------------------------------------------------------------------------------- results

def ratio(res: Fig4Results, suite: str, frame: int, n: int, layout: str = EVEN) -> Interval | None:
    """T(N)/T(1) of the trials, with its 95 % interval; None without trials on both sides."""
    one, many = res.cell(suite, frame, 1), res.cell(suite, frame, n, layout)
    if one is None or many is None or not one.rates or not many.rates:
        return None
    return ratio_interval(many.rates, one.rates)


def verdict(value: Interval, predicted: float) -> str:
    off = value.mean / predicted - 1
    return (f"{100 * off:+.1f} % from the prediction {predicted:.3g} "
            f"({'within' if abs(off) <= WITHIN else 'outside'} {100 * WITHIN:.0f} %)")


def failures(res: Fig4Results) -> list[str]:
    """Failed boots, moves during the searches, and a negative control that did not come out lower."""
    return [*res.failed, *(f"Fig. 4: a move during the searches ({m})" for m in res.stray_moves),
            *control_failures(res)]


def control_failures(res: Fig4Results) -> list[str]:
    """The negative control's verdicts that break the method: a skewed partition not lower."""
    out = []
    for c in res.cells:
        if c.layout != SKEWED:
            continue
        skew, even = ratio(res, c.suite, c.frame, c.n, SKEWED), ratio(res, c.suite, c.frame, c.n)
        if skew is None or even is None:
            out.append(f"N={c.n}: the skewed control was not measured")
        elif not skew.high < even.low and not skew.mean < even.mean:
            out.append(f"N={c.n}: the skewed partition's ratio {skew.describe()} is not lower than the even "
                       f"partition's {even.describe()}: the method cannot tell a skewed partition")
    return out


def metrics(s: Settings, res: Fig4Results) -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    for n in (2, 3, 4):
        cell = res.cell(DEFAULT_SUITE, BIG_FRAME, n)
        r = ratio(res, DEFAULT_SUITE, BIG_FRAME, n)
        if cell is None or r is None:
            out[f"ratio_n{n}"] = Metric(None, "x", note="not measured")
            continue
        predicted = cell.prediction
        out[f"ratio_n{n}"] = Metric(
            r.mean, "x", goal=round((1 - WITHIN) * predicted, 3),
            note=f"T({n})/T(1), 1408 B, gcm, gateway-bound: {r.describe()}; {verdict(r, predicted)}; hosts per "
                 f"pair {cell.pairs}")
        out[f"ratio_prediction_n{n}"] = Metric(round(predicted, 4), "x",
                                               note=f"N x mean/max of the pairs' hosts {cell.pairs} (an input)")
        skew = res.cell(DEFAULT_SUITE, BIG_FRAME, n, SKEWED)
        rs = ratio(res, DEFAULT_SUITE, BIG_FRAME, n, SKEWED)
        if skew is not None and rs is not None:
            lower = rs.mean < r.mean
            out[f"skewed_ratio_n{n}"] = Metric(
                rs.mean, "x", note=f"negative control, hosts per pair {skew.pairs}: {rs.describe()}; "
                                   f"{verdict(rs, skew.prediction)}; {'lower' if lower else 'NOT lower'} than the even "
                                   f"partition's {r.mean:.3g}")
    for c in res.cells:
        iv = c.interval()
        if c.layout == EVEN and c.quota == s.quota_percent:
            key = f"zero_loss_{SUITE_LABEL[c.suite].replace('-', '_')}_{c.frame}_n{c.n}"
            out[f"{key}_pps"] = Metric(iv.mean if iv else None, "pps/dir",
                                       note=iv.describe() if iv else "no rate passed")
    base = res.cell(DEFAULT_SUITE, BIG_FRAME, 1, quota=s.quota_percent)
    for c in res.cells:
        if c.quota != s.quota_percent and base is not None and c.rates and base.rates:
            q = ratio_interval(c.rates, base.rates)
            out[f"capacity_at_{c.quota:g}pct_vs_{s.quota_percent:g}pct"] = Metric(
                q.mean, "x", note=f"T(1) at {c.quota:g} % / at {s.quota_percent:g} % of a core: {q.describe()}; "
                                  f"the quota's ratio is {c.quota / s.quota_percent:g}")
    out["gateway_quota_percent"] = Metric(s.quota_percent, "% of a core",
                                          note="each gateway's cgroup CPU quota (an input: the capacity under test)")
    return out


def evidence(t: Trial) -> dict[str, Any]:
    """Where the capacity ran out, from a search's peak and lowest failing probes."""
    out: dict[str, Any] = {}
    for name, p in (("peak", t.peak), ("failing", t.failing)):
        if p is None:
            continue
        out[name] = {
            "rate_pps": p.rate_pps, "loss": round(p.loss, 6), "offered_pps": round(p.achieved_pps, 1),
            "machine_cpu_percent": round(p.machine_cpu, 1),
            "cpu_percent": {k: round(v, 1) for k, v in p.cpu.items()},
            "sent_by_site": p.sent_by_site,
            "per_gateway": {g: {"dispatch_pps": round(x.dispatch_pps, 1), "esp_out_pps": round(x.esp_out_pps, 1),
                                "esp_in_pps": round(x.esp_in_pps, 1)} for g, x in (p.shares or {}).items()},
        }
    return out


def against(res: Fig4Results, c: Cell, quota: float) -> tuple[Interval | None, float]:
    """What a cell's mean is compared with, and what predicts it: T(N)/T(1) and the partition's
    prediction, or for a cell at another quota T(1) there / T(1) at the run's quota and the quota's ratio."""
    if c.quota != quota:
        base = res.cell(c.suite, c.frame, 1, EVEN, quota)
        known = base is not None and bool(base.rates) and bool(c.rates)
        return (ratio_interval(c.rates, base.rates) if known and base is not None else None), c.quota / quota
    return ratio(res, c.suite, c.frame, c.n, c.layout), c.prediction


def rows(res: Fig4Results, quota: float) -> list[dict[str, Any]]:
    out = []
    for c in res.cells:
        iv = c.interval()
        r, predicted = against(res, c, quota)
        peaks = [t.peak for t in c.trials if t.peak is not None]
        fails = [t.failing for t in c.trials if t.failing is not None]
        out.append({
            "suite": SUITE_LABEL[c.suite], "frame_bytes": c.frame, "n": c.n, "partition": c.layout,
            "quota_percent": c.quota, "hosts_per_pair": " ".join(map(str, c.pairs)),
            "trials_pps": " ".join(f"{x:.0f}" for x in c.rates) or "none passed",
            "t_pps": round(iv.mean, 1) if iv else None,
            "t_ci95": f"{iv.low:.0f}..{iv.high:.0f}" if iv and iv.known else None,
            "mbps": round(iv.mean * c.frame * 8 / 1e6, 2) if iv else None,
            "ratio": round(r.mean, 3) if r else None,
            "ratio_ci95": f"{r.low:.3f}..{r.high:.3f}" if r and r.known else None,
            "prediction": round(predicted, 3),
            "machine_cpu_at_peak": _mean([p.machine_cpu for p in peaks]),
            "gateways_cpu_at_peak": _mean([sum(v for k, v in p.cpu.items() if k not in COMPONENTS) for p in peaks]),
            "hostsims_cpu_at_peak": _mean([p.cpu.get("hostsims", 0.0) for p in peaks]),
            "offered_at_failing": _mean([p.achieved_pps / p.rate_pps for p in fails], 3),
            "switched_at_failing": _mean([_switched(p) for p in fails if _switched(p) is not None], 4),
            "generator_shortfall": "; ".join(x for t in c.trials for x in t.shortfalls),
        })
    return out


def _switched(p: ProbeResult) -> float | None:
    """Frames the switches dispatched to gateways / frames the generators sent, both sites."""
    if not p.shares or not p.sent_by_site:
        return None
    sent = sum(p.sent_by_site.values())
    return sum(x.dispatch_pps for x in p.shares.values()) * p.duration_s / sent if sent else None


def _mean(values: Sequence[float | None], digits: int = 1) -> float | None:
    got = [v for v in values if v is not None]
    return round(sum(got) / len(got), digits) if got else None
