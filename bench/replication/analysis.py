"""From the phases' raw costs to the report: per-SA costs per size (the cost curve), lag
percentiles, the growth of each cost with the number of SAs, and the failures.

Every curve is a cost *per SA* (bytes, CPU, seconds of a copy or a takeover divided by the SAs
it moved; a lag is per message already): flat means the total grows linearly with the SAs.
Its growth exponent k is the least-squares slope of log(cost per SA) over log(SAs): 0 linear
in total, 1 quadratic; the curve with the largest k grows fastest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.replication.measure import CONTROL, DROP_WITHIN_S, PhaseCost, TakeoverResult
from bench.report import Metric, Series

INITIAL, CHILD, IKE, NEW_BACKUP, TAKEOVER = "initial copy", "CHILD rekey", "IKE rekey", "full copy to a new backup", \
    "takeover"
STEADY = (INITIAL, CHILD, IKE)  # the phases whose lags are the relay's steady-state lag


@dataclass
class SizeRun:
    """Every phase at one size (SAs on gateway 0), or why the size stopped."""

    sas: int
    clients: int
    phases: list[PhaseCost] = field(default_factory=list)
    takeover: TakeoverResult | None = None
    error: str | None = None

    def phase(self, name: str) -> PhaseCost | None:
        return next((p for p in self.phases if p.phase == name), None)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (0 <= q <= 1) with linear interpolation between order statistics; None
    without values."""
    if not values:
        return None
    if not 0 <= q <= 1:
        raise ValueError(f"quantile {q} is outside 0..1")
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def growth_exponent(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of log(y) over log(x) over the points with a positive y; None with
    fewer than two such points at distinct x."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y is not None and y > 0 and x > 0]
    if len({p[0] for p in pts}) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sum((p[0] - mx) ** 2 for p in pts)


def per_sa(value: float, sas: int) -> float:
    if sas < 1:
        raise ValueError(f"a phase over {sas} SAs has no cost per SA")
    return value / sas


def phase_row(p: PhaseCost) -> dict[str, object]:
    """One phase at one size, per SA (per rekey, per copied or taken-over SA)."""
    n = p.sas
    return {
        "SAs": n, "phase": p.phase, "sender": p.sender, "receiver": p.receiver,
        "messages/SA": round(per_sa(p.messages, n), 2),
        "payload B/SA": round(per_sa(p.payload_bytes, n), 1),
        "wire B/SA": round(per_sa(p.wire_bytes, n), 1),
        "wire back B/SA": round(per_sa(p.wire_back_bytes, n), 1),
        "sender relay µs/SA": round(per_sa(p.sender_relay_s, n) * 1e6, 1),
        "sender agent µs/SA": round(per_sa(p.sender_agent_s, n) * 1e6, 1),
        "receiver relay µs/SA": round(per_sa(p.receiver_relay_s, n) * 1e6, 1),
        "receiver agent µs/SA": round(per_sa(p.receiver_agent_s, n) * 1e6, 1),
        "sender charon µs/SA": round(per_sa(p.sender_charon_s, n) * 1e6, 1),
        "receiver charon µs/SA": round(per_sa(p.receiver_charon_s, n) * 1e6, 1),
        "lag p50 ms": _round(percentile(p.lags_ms, 0.5), 2),
        "lag p99 ms": _round(percentile(p.lags_ms, 0.99), 2),
        "lag max ms": _round(max(p.lags_ms) if p.lags_ms else None, 2),
        "lag samples": len(p.lags_ms),
        "UDP drops": p.udp_drops,
        "copy": "exact" if p.copy_problem is None else p.copy_problem,
        "s": round(p.seconds, 3),
        **{k: round(v, 3) for k, v in p.times.items()},
        **p.counts,
    }


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def steady_lags(run: SizeRun) -> list[float]:
    return [x for p in run.phases if p.phase in STEADY for x in p.lags_ms]


@dataclass(frozen=True)
class Curve:
    """One cost against SAs: a plot line, a JSON series, a growth exponent."""

    key: str
    label: str
    unit: str
    panel: str
    value: Callable[[SizeRun], float | None]
    headline: bool = True  # also a metric at the headline sizes (else in the tables and the plot only)


def _phase_value(name: str, fn: Callable[[PhaseCost], float]) -> Callable[[SizeRun], float | None]:
    def get(run: SizeRun) -> float | None:
        p = run.phase(name)
        return None if p is None else fn(p)
    return get


def _takeover_time(key: str) -> Callable[[SizeRun], float | None]:
    def get(run: SizeRun) -> float | None:
        if run.takeover is None or key not in run.takeover.cost.times:
            return None
        return run.takeover.cost.times[key] * 1000 / run.sas
    return get


def _list_sas_ms(run: SizeRun) -> float | None:
    if run.takeover is None or not run.takeover.cost.list_sas:
        return None
    return max(s for s, _n in run.takeover.cost.list_sas) * 1000


BYTES, CPU, LAG, TIME, SWEEP = "bytes relayed per SA", "CPU per SA", "lag per message", "time per SA", \
    "the taker's sweep"
CURVES: tuple[Curve, ...] = (
    Curve("copy_bytes_per_sa", "initial copy: sync messages", "B", BYTES,
          _phase_value(INITIAL, lambda p: p.payload_bytes / p.sas)),
    Curve("copy_wire_bytes_per_sa", "initial copy: on the wire (TLS)", "B", BYTES,
          _phase_value(INITIAL, lambda p: p.wire_bytes / p.sas)),
    Curve("child_rekey_bytes", "per CHILD rekey", "B", BYTES, _phase_value(CHILD, lambda p: p.payload_bytes / p.sas)),
    Curve("ike_rekey_bytes", "per IKE rekey", "B", BYTES, _phase_value(IKE, lambda p: p.payload_bytes / p.sas)),
    Curve("new_backup_bytes_per_sa", "full copy to a new backup", "B", BYTES,
          _phase_value(NEW_BACKUP, lambda p: p.payload_bytes / p.sas), headline=False),
    Curve("sender_relay_cpu_us_per_sa", "sender relay (initial copy)", "µs", CPU,
          _phase_value(INITIAL, lambda p: p.sender_relay_s / p.sas * 1e6)),
    Curve("receiver_relay_cpu_us_per_sa", "receiver relay (initial copy)", "µs", CPU,
          _phase_value(INITIAL, lambda p: p.receiver_relay_s / p.sas * 1e6)),
    Curve("sender_relay_cpu_us_per_child_rekey", "sender relay (CHILD rekey)", "µs", CPU,
          _phase_value(CHILD, lambda p: p.sender_relay_s / p.sas * 1e6)),
    Curve("receiver_relay_cpu_us_per_child_rekey", "receiver relay (CHILD rekey)", "µs", CPU,
          _phase_value(CHILD, lambda p: p.receiver_relay_s / p.sas * 1e6)),
    Curve("backup_charon_cpu_us_per_sa", "backup's charon (initial copy)", "µs", CPU,
          _phase_value(INITIAL, lambda p: p.receiver_charon_s / p.sas * 1e6)),
    Curve("new_backup_receiver_cpu_us_per_sa", "new backup's relay (full copy)", "µs", CPU,
          _phase_value(NEW_BACKUP, lambda p: p.receiver_relay_s / p.sas * 1e6), headline=False),
    Curve("taker_agent_cpu_us_per_sa", "taker's agent (takeover, sweeps too)", "µs", CPU,
          lambda r: None if r.takeover is None else r.takeover.cost.sender_agent_s / r.sas * 1e6, headline=False),
    Curve("lag_p50_ms", "p50 (initial copy and rekeys)", "ms", LAG, lambda r: percentile(steady_lags(r), 0.5)),
    Curve("lag_p99_ms", "p99 (initial copy and rekeys)", "ms", LAG, lambda r: percentile(steady_lags(r), 0.99)),
    Curve("lag_max_ms", "max (initial copy and rekeys)", "ms", LAG,
          lambda r: max(steady_lags(r)) if steady_lags(r) else None),
    Curve("takeover_lag_p99_ms", "p99 (the taker's relay during a takeover)", "ms", LAG,
          lambda r: None if r.takeover is None else percentile(r.takeover.cost.lags_ms, 0.99)),
    Curve("new_backup_ms_per_sa", "full copy to a new backup (acknowledged)", "ms", TIME,
          _phase_value(NEW_BACKUP, lambda p: p.times["acked_s"] * 1000 / p.sas), headline=False),
    Curve("takeover_children_ms_per_sa", "takeover: every CHILD SA renewed", "ms", TIME,
          _takeover_time("children_renewed_s"), headline=False),
    Curve("takeover_ike_ms_per_sa", "takeover: every IKE SA rekeyed", "ms", TIME, _takeover_time("ike_rekeyed_s"), headline=False),
    Curve("sweep_list_sas_ms", "slowest VICI list-sas of a sweep (not per SA)", "ms", SWEEP, _list_sas_ms),
)
PANELS = (BYTES, CPU, LAG, TIME, SWEEP)


def series(runs: Sequence[SizeRun]) -> list[Series]:
    done = [r for r in runs if r.phases]
    xs = [float(r.sas) for r in done]
    return [Series(f"{c.panel}: {c.label}", xs, [c.value(r) for r in done], xlabel="SAs on the primary gateway",
                   ylabel=c.unit) for c in CURVES]


def growth(runs: Sequence[SizeRun]) -> dict[str, float | None]:
    done = [r for r in runs if r.phases]
    return {c.key: growth_exponent([float(r.sas) for r in done], [c.value(r) for r in done]) for c in CURVES}


def fastest(runs: Sequence[SizeRun]) -> str:
    """A sentence naming the cost that grows fastest per SA, and the flattest."""
    g = {k: v for k, v in growth(runs).items() if v is not None and k != "sweep_list_sas_ms"}
    if not g:
        return "Fewer than two sizes measured: no growth to compare."
    by_key = {c.key: c for c in CURVES}
    top = max(g, key=lambda k: g[k])
    flat = min(g, key=lambda k: abs(g[k]))
    sweep = growth(runs).get("sweep_list_sas_ms")
    out = (f"Fastest-growing cost per SA: {by_key[top].panel}, {by_key[top].label} (k = {g[top]:.2f}: per SA it "
           f"grows as SAs^{g[top]:.2f}, in total as SAs^{1 + g[top]:.2f}). Flattest: {by_key[flat].panel}, "
           f"{by_key[flat].label} (k = {g[flat]:.2f}).")
    if sweep is not None:
        out += f" The taker's slowest list-sas grows as SAs^{sweep:.2f}."
    return out


def metrics(runs: Sequence[SizeRun], headline: Sequence[int]) -> dict[str, Metric]:
    """Each curve at the headline sizes (the issue's 64 and 1,000, or what was run), then the
    growth exponents, then the probes that must be zero."""
    out: dict[str, Metric] = {}
    for n in headline:
        run = next((r for r in runs if r.sas == n and r.phases), None)
        for c in (c for c in CURVES if c.headline):
            value = None if run is None else c.value(run)
            out[f"{c.key}_n{n}"] = Metric(None if value is None else round(value, 3), c.unit,
                                          note=f"{c.panel}: {c.label}" + ("" if run else f"; size {n} not measured"))
        nb = run.phase(NEW_BACKUP) if run is not None else None
        v = nb.times.get("acked_s") if nb is not None else None
        out[f"new_backup_copy_s_n{n}"] = Metric(None if v is None else round(v, 3), "s", note=(
            "ring change order -> the new backup acknowledged every message of the replay (all SAs)"))
        t = run.takeover if run is not None else None
        for key, note in (("children_renewed_s", "takeover order -> every taken-over CHILD SA renewed (all SAs)"),
                          ("ike_rekeyed_s", "takeover order -> every taken-over IKE SA rekeyed (all SAs)")):
            v = t.cost.times.get(key) if t is not None else None
            out[f"takeover_{key}_n{n}"] = Metric(None if v is None else round(v, 3), "s", note=note)
    for key, k in growth(runs).items():
        out[f"growth_k_{key}"] = Metric(None if k is None else round(k, 3), "",
                                        note="cost per SA ∝ SAs^k over the sizes run (0: linear in total)")
    ran = [r for r in runs if r.phases]
    controls = [p for r in ran for p in r.phases if p.phase == CONTROL]
    out["control_messages_replication_off"] = Metric(
        float(sum(p.messages for p in controls)) if controls else None, "messages",
        note="negative control: sync messages relayed while g0 had no backup and every CHILD SA was rekeyed: must be 0")
    out["control_stale_copies_caught"] = Metric(
        float(sum(1 for p in controls if stale_copies_seen(p))) if controls else None, f"of {len(controls)} sizes",
        note="negative control: sizes where the copy check found every one of the old backup's copies stale (it can fail)")
    out["udp_drops"] = Metric(float(sum(p.udp_drops for r in ran for p in r.phases)), "datagrams",
                              note="UDP datagrams dropped at reception in the gateways (sync socket ends, IKE): must be 0")
    out["new_ike_auths"] = Metric(float(sum(r.takeover.new_ike_auths for r in ran if r.takeover)), "",
                                  note="IKE_AUTHs the clients sent after the kill (their counters): must be 0")
    out["client_replay_drops"] = Metric(float(sum(r.takeover.replay_drops for r in ran if r.takeover)), "packets",
                                        note="ESP the clients' libipsec refused as replay (their logs): must be 0")
    return out


def failures(runs: Sequence[SizeRun]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for r in runs:
        where = f"{r.sas} SAs"
        if r.error:
            out.append({"trial": where, "why": r.error})
        for p in r.phases:
            if p.phase == CONTROL:
                out += [{"trial": f"{where}: {p.phase}", "why": why} for why in control_failures(p)]
                continue
            if p.copy_problem:
                out.append({"trial": f"{where}: {p.phase}", "why": f"{p.receiver}'s copy: {p.copy_problem}"})
            if p.counts.get("old_backup_left"):
                out.append({"trial": f"{where}: {p.phase}", "why": (
                    f"the old backup still held {p.counts['old_backup_left']} PASSIVE copies of {p.sender}'s SAs "
                    f"{DROP_WITHIN_S:.0f} s after it was ordered to protect another gateway")})
            if p.udp_drops:
                out.append({"trial": f"{where}: {p.phase}", "why": f"{p.udp_drops} UDP datagrams dropped at reception"})
            if p.lags_full:
                out.append({"trial": f"{where}: {p.phase}", "why": "the lag list overflowed: lags are incomplete"})
        t = r.takeover
        if t is not None:
            out += [{"trial": f"{where}: takeover", "why": f} for f in t.failures]
            for what, v in (("new IKE_AUTHs", t.new_ike_auths), ("replay drops at the clients", t.replay_drops),
                            ("client IKE SAs not rekeyed onto the taker's SPIs", t.not_rekeyed)):
                if v:
                    out.append({"trial": f"{where}: takeover", "why": f"{v} {what}"})
    return out


def stale_copies_seen(p: PhaseCost) -> bool:
    """The control's copy check found every one of the old backup's copies stale."""
    return p.copy_problem is not None and f"{p.sas} with other CHILD SAs" in p.copy_problem


def control_failures(p: PhaseCost) -> list[str]:
    """The negative control fails when anything was relayed with replication off, or when the
    copy check did not see that every copy the old backup holds is stale."""
    out = []
    if p.messages or p.payload_bytes or p.wire_bytes:
        out.append(f"replication off, yet {p.messages} sync messages ({p.payload_bytes} B, {p.wire_bytes} B on the "
                   "wire) were relayed: the byte counters count something else")
    if not stale_copies_seen(p):
        out.append(f"{p.receiver} kept copies from before every CHILD rekey, yet the copy check said "
                   f"{p.copy_problem or 'exact'} (wanted {p.sas} with other CHILD SAs): the copy check cannot fail")
    return out


def takeover_row(r: SizeRun) -> dict[str, Any] | None:
    t = r.takeover
    if t is None:
        return None
    lst = [s for s, _n in t.cost.list_sas]
    return {"SAs": r.sas, **{k: round(v, 3) for k, v in t.cost.times.items()},
            "sweep list-sas": len(lst), "list-sas median ms": _round(_ms(percentile(lst, 0.5)), 1),
            "list-sas max ms": _round(_ms(max(lst) if lst else None), 1),
            "VICI rekeys": t.cost.counts.get("sweep_rekeys"), "pings answered": f"{t.answered}/{t.pinged}",
            "new IKE_AUTHs": t.new_ike_auths, "replay drops": t.replay_drops, "not on the taker's SPIs": t.not_rekeyed}
