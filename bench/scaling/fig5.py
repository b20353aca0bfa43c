"""Fig. 5 (§4.3) in the paper's regime: how long each policy takes to spread load that starts
all on gateway 1.

One boot per run: N = 3 pairs of UML gateways under the Fig. 4 quota, K = 256, §4.2's hosts
one per bucket, and both controllers booted with the policy under test (no restart during
the run): `rebalancer.policy: paper` (the paper's Algorithm 5 as written, its random draw
seeded per run: controller/REBALANCER-API.md, "The paper's policy") or our shipped greedy
policy. Before the load starts, operator moves put every loaded bucket (all 224 hosts) on
gateway 1 at both sites, with no load running; then both sites offer `fig5_load` x Fig. 4's
T(3) (1408 B, default suite, the same quota) in both directions, and a snapshot is taken
every second: offered and delivered frames, loss, each gateway's CPU (its cgroup, host side)
and the load its agent reported (what Algorithm 5 compares), loaded buckets per gateway and
every move the controllers logged in that second with its reason.

Two criteria, both from the snapshots (redistribution.py): the paper's (every second from
then on delivers the offered load) and ours (no loss and the loaded buckets as even as whole
buckets allow). A move with a reason other than the policy's own (a failover, drain, refill,
pin or operator move) during the run makes the run invalid: it then measures something else.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.report import Metric
from bench.scaling.emulation import RUN_ERRORS, LoadedEmulation, say
from bench.scaling.redistribution import (MoveRecord, Snapshot, bucket_spread, delivers_offered, invalid_moves,
                                          offered_reached_s, redistribution_s, settled)
from bench.scaling.settings import BIG_FRAME, DEFAULT_SUITE, Settings, boot_changes

PAPER, GREEDY = "paper", "supergw"
OWN_REASONS = {PAPER: {"paper-rebalance"}, GREEDY: {"rebalance"}}
N = 3  # §4.3's cluster
QUIET_S = 4.0  # after the moves to gateway 1: the agents report an idle CPU, the counters fall to zero
HOLD_S = 30.0  # a run ends once the paper's criterion held this long and ours held, or no load moved, as long


@dataclass
class Run:
    policy: str
    seed: int | None
    rate_pps: float  # offered per direction
    start: dict[str, Any]  # what the boot left and the moves that put every loaded bucket on gateway 1
    snapshots: list[Snapshot] = field(default_factory=list)
    reported: list[dict[str, float | None]] = field(default_factory=list)  # per second: each agent's load (0..1)
    dispatched: list[dict[str, float]] = field(default_factory=list)  # per second: frames/s the switch sent each gateway
    ended: str = ""

    @property
    def label(self) -> str:
        return self.policy if self.seed is None else f"{self.policy}-seed{self.seed}"

    @property
    def paper_s(self) -> float | None:
        return offered_reached_s(self.snapshots)

    @property
    def spread_s(self) -> float | None:
        return redistribution_s(self.snapshots)

    @property
    def invalid(self) -> list[MoveRecord]:
        return invalid_moves(self.snapshots, OWN_REASONS[self.policy])


@dataclass
class Fig5Results:
    runs: list[Run] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # runs that failed, and why
    notes: list[str] = field(default_factory=list)


def run(s: Settings, res: Fig5Results, t3_pps: float | None, report: Callable[[], None],
        after_greedy: Callable[[LoadedEmulation], None] | None = None) -> None:
    """Every seed of the paper's policy, then ours (`after_greedy` runs in that boot after it:
    the soak)."""
    if not t3_pps:
        res.notes.append("no Fig. 4 T(3) at 1408 B (default suite): Fig. 5 has no offered load and was not run")
        return
    rate = s.fig5_load * t3_pps
    plan = [(PAPER, seed, s.fig5_paper_s, None) for seed in s.fig5_seeds] + [(GREEDY, None, s.fig5_greedy_s, after_greedy)]
    for policy, seed, max_s, after in plan:
        try:
            one(s, res, policy, seed, rate, max_s, after)
        except RUN_ERRORS as exc:
            res.failed.append(f"Fig. 5 {policy} seed {seed}: {exc}")
            say(f"FAILED Fig. 5 {policy} seed {seed}: {exc}")
        report()


def one(s: Settings, res: Fig5Results, policy: str, seed: int | None, rate: float, max_s: float,
        after: Callable[[LoadedEmulation], None] | None = None) -> None:
    rebalancer: dict[str, Any] = {"policy": "paper", "paper": {"seed": seed}} if policy == PAPER else {}
    emu = LoadedEmulation(s.base, boot_changes(s, N, DEFAULT_SUITE, rebalancer))
    emu.up()
    try:
        emu.set_quota(s.quota_percent, s.realtime)  # as Fig. 4's (emulation.QUOTA_PERIOD_US)
        booted = emu.loaded_buckets()
        moved = sum(emu.place(site, {b: site.gateways[0] for b in set(site.host_buckets)}) for site in emu.sites)
        r = Run(policy, seed, rate, {"after_boot": booted, "operator_moves_to_gateway_1": moved,
                                     "loaded_buckets": emu.loaded_buckets()})
        res.runs.append(r)
        time.sleep(QUIET_S)
        say(f"Fig. 5 {r.label}: every loaded bucket on gateway 1 at both sites ({moved} operator moves, no load "
            f"running); offering {rate:.0f} pps/dir at {BIG_FRAME} B for up to {max_s:.0f} s")
        snapshots(emu, r, max_s)
        say(f"Fig. 5 {r.label}: the paper's criterion {r.paper_s} s, ours {r.spread_s} s, "
            f"{len(r.invalid)} moves of another reason ({r.ended})")
        if after is not None:
            after(emu)
    finally:
        emu.stop()
        emu.down()


def snapshots(emu: LoadedEmulation, r: Run, max_s: float) -> None:
    """One snapshot a second until `max_s` or the run has settled (see HOLD_S)."""
    a, b = emu.sites
    meter = emu.meter()
    marks = emu.event_marks()
    sites = {s.name: s.gateways for s in emu.sites}
    t0_wall = time.time()
    emu.start(r.rate_pps, BIG_FRAME, max_s + 5)
    started = time.monotonic()
    prev = {"tx": 0, "rx": 0, "lost": 0}
    last_frames = {g: n for _, per in emu.bucket_state().values() for g, n in per.items()}
    reached_since: float | None = None
    ours_since: float | None = None
    last_load_move = 0.0
    r.ended = f"{max_s:.0f} s elapsed"
    while time.monotonic() - started < max_s:
        time.sleep(max(0.0, len(r.snapshots) + 1 - (time.monotonic() - started)))
        t = time.monotonic() - started
        ta, tb = a.hostsim.stats()["totals"], b.hostsim.stats()["totals"]
        cpu, _machine = meter.read()
        state = emu.bucket_state()
        loaded = {g: n for counts, _ in state.values() for g, n in counts.items()}
        frames = {g: n for _, per in state.values() for g, n in per.items()}
        reported = {g.name: (g.last_report.cpu_percent / (100.0 * g.last_report.cpu_cores)
                             if g.last_report is not None else None) for site in emu.sites for g in site.api.gateways()}
        moves, events = emu.moves_since(marks, t0_wall)
        now = {"tx": ta["test_tx_packets"] + tb["test_tx_packets"], "rx": ta["test_rx_packets"] + tb["test_rx_packets"],
               "lost": ta["lost"] + tb["lost"]}
        d = {k: now[k] - prev[k] for k in now}
        prev = now
        dt = t - (r.snapshots[-1].t_s if r.snapshots else 0.0)
        # frames the switch sent each gateway this second (a bucket moved in it counts whole for its new owner)
        r.dispatched.append({g: round(max(0, n - last_frames.get(g, n)) / dt, 1) for g, n in frames.items()})
        last_frames = frames
        snap = Snapshot(t_s=round(t, 2), offered_pps=d["tx"] / dt, delivered_pps=d["rx"] / dt,
                        loss=d["lost"] / (d["rx"] + d["lost"]) if d["rx"] + d["lost"] else 0.0,
                        gateway_cpu={g: cpu[g] for g in emu.gateways}, sites=sites, loaded_buckets=loaded,
                        moves=tuple(moves), events=tuple(events))
        r.snapshots.append(snap)
        r.reported.append({g: round(v, 3) if v is not None else None for g, v in reported.items()})
        if any(m.loaded for m in moves):
            last_load_move = t
        reached_since = (reached_since if reached_since is not None else t) if delivers_offered(snap) else None
        ours_since = (ours_since if ours_since is not None else t) if settled(snap) else None
        for m in moves:
            if m.reason not in OWN_REASONS[r.policy]:
                say(f"  {r.label}: a move of another reason: {m.describe()}")
        for line in events:
            say(f"  {r.label}: {line}")
        if len(r.snapshots) % 10 == 0:
            spread, best = bucket_spread(snap)
            say(f"  {r.label} t={t:5.0f}s delivered {100 * snap.delivered_pps / max(1.0, snap.offered_pps):5.1f} % "
                f"of offered, loss {100 * snap.loss:6.2f} %, site A loaded buckets "
                f"{' '.join(str(loaded.get(g, '?')) for g in a.gateways)} (spread {spread:.3f}, best {best:.3f}), "
                f"reported load {' '.join(f'{reported.get(g) or 0:.2f}' for g in a.gateways)}")
        if reached_since is not None and t - reached_since >= HOLD_S and (
                (ours_since is not None and t - ours_since >= HOLD_S) or t - last_load_move >= HOLD_S):
            r.ended = f"settled: the offered load delivered for {HOLD_S:.0f} s and no load move (or our criterion) as long"
            break
    emu.stop()


def metrics(res: Fig5Results) -> dict[str, Metric]:
    out: dict[str, Metric] = {}
    paper = [r for r in res.runs if r.policy == PAPER]
    for r in paper:
        out[f"fig5_paper_offered_reached_s_seed{r.seed}"] = Metric(r.paper_s, "s", note=_note(r, "paper"))
        out[f"fig5_paper_bucket_spread_s_seed{r.seed}"] = Metric(r.spread_s, "s", note=_note(r, "ours"))
    valid = [r.paper_s for r in paper if not r.invalid and r.paper_s is not None]
    out["redistribution_paper_policy_s"] = Metric(
        sorted(valid)[len(valid) // 2] if valid else None, "s",
        note=(f"Algorithm 5 as written, K = 256, 224 hosts all on gateway 1 at t = 0; the paper's criterion (the "
              f"offered load delivered from then on), median of {len(valid)} valid run(s) of {len(paper)}: "
              f"{[r.paper_s for r in paper]}; paper ~180 s, the rebalancer model's 152-164 s")
        if paper else "not measured")
    greedy = next((r for r in res.runs if r.policy == GREEDY), None)
    if greedy is not None:
        out["redistribution_s"] = Metric(
            greedy.spread_s if not greedy.invalid else None, "s", goal=5.0, higher_is_better=False,
            note=f"ours: the shipped greedy policy, {_note(greedy, 'ours')}; the paper's criterion: {greedy.paper_s} s")
    else:
        out["redistribution_s"] = Metric(None, "s", note="not measured")
    return out


def _note(r: Run, which: str) -> str:
    crit = ("the offered load delivered (>= 99 %) in every second from then on" if which == "paper"
            else "no loss and loaded buckets within ceil(B/N) per gateway from then on")
    bad = r.invalid
    if bad:
        return (f"INVALID: {len(bad)} moves of another reason than the policy's ({', '.join(sorted({m.reason for m in bad}))}; "
                f"first {bad[0].describe()}); criterion: {crit}")
    return f"{crit}; run ended: {r.ended}"


def failures(res: Fig5Results) -> list[str]:
    return res.failed + [f"Fig. 5 {r.label}: invalid, {len(r.invalid)} moves not of the policy: "
            + "; ".join(m.describe() for m in r.invalid[:5]) for r in res.runs if r.invalid]


def snapshot_rows(r: Run) -> list[dict[str, Any]]:
    """Every snapshot of a run for the JSON (and the plot)."""
    return [{"t_s": x.t_s, "offered_pps": round(x.offered_pps, 1), "delivered_pps": round(x.delivered_pps, 1),
             "delivered_mbps": round(x.delivered_pps / 2 * BIG_FRAME * 8 / 1e6, 2),
             "loss_percent": round(100 * x.loss, 3), "delivers_offered": delivers_offered(x), "settled": settled(x),
             "bucket_spread": round(bucket_spread(x)[0], 3), "loaded_buckets": dict(x.loaded_buckets),
             "cpu": {g: round(v, 1) for g, v in x.gateway_cpu.items()}, "reported_load": rep,
             "dispatched_pps": sent, "moves": [m.describe() for m in x.moves], "events": list(x.events)}
            for x, rep, sent in zip(r.snapshots, r.reported, r.dispatched)]
