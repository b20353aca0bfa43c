"""bench/results/scaling.{json,md,png}: both figures' metrics, rows, method and failures in one
report (bench/report.py), the JSON with every trial's evidence and every Fig. 5 snapshot."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from bench.report import Metric, write_report
from bench.scaling import fig4, fig5, plots, soak
from bench.scaling.emulation import say
from bench.scaling.settings import Settings


@dataclass
class Results:
    fig4: fig4.Fig4Results = field(default_factory=fig4.Fig4Results)
    fig5: fig5.Fig5Results = field(default_factory=fig5.Fig5Results)
    soak: soak.SoakResult = field(default_factory=soak.SoakResult)
    loadavg: list[dict[str, Any]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # what went wrong in the run itself (a boot, a probe)

    def note_load(self, when: str) -> None:
        one, five, fifteen = os.getloadavg()
        self.loadavg.append({"when": when, "load1": one, "load5": five, "load15": fifteen,
                             "at": time.strftime("%H:%M:%S")})

    def failures(self) -> list[str]:
        """Everything that makes the run's numbers untrustworthy, each saying which and why."""
        return [*self.failed, *fig4.failures(self.fig4), *fig5.failures(self.fig5), *soak.failures(self.soak)]


def method(s: Settings, res: Results) -> str:
    loads = "; ".join(f"{x['when']} ({x['at']}): {x['load1']:.2f} / {x['load5']:.2f} / {x['load15']:.2f}"
                      for x in res.loadavg)
    return (f"{'QUICK RUN (--quick: fewer sizes, trials and seconds; not the committed figures). ' if s.quick else ''}"
            f"FIG. 4. {fig4.__doc__} FIG. 5. {fig5.__doc__} SOAK. {soak.__doc__} Common: two-site emulation "
            f"({s.base.name} with the keys each boot sets: bench/scaling/settings.py boot_changes), two switches running "
            f"our pipeline (eBPF), two controllers, real agents, one supergw-hostsim per site simulating §4.2's 224 "
            f"hosts on one switch port. Zero loss = at most 0.01 % of the frames sent in a {s.probe_s:.0f} s probe lost "
            f"(both directions, sender's count against the receiver's); a search brackets the answer (doubling, or "
            f"small steps from the previous trial's result) and bisects to {100 * s.resolution:.0f} % (at most "
            f"{s.max_probes} rates). Inputs, not results: the quota ({s.quota_percent:g} % of a core per gateway), K = "
            f"256, the partition (and its prediction), the skew factor {s.skew:g}, the offered load of Fig. 5 "
            f"({100 * s.fig5_load:.0f} % of T(3)), Algorithm 5's parameters (T_L 1.33 s, T_M 4 s, L_D 10 points, "
            f"|W| 4) and seeds {s.fig5_seeds}. Machine load average (1/5/15 min): {loads}."
            + (" Notes: " + " ".join(res.fig4.notes + res.fig5.notes + s.notes)
               if res.fig4.notes or res.fig5.notes or s.notes else ""))


def write(s: Settings, res: Results) -> None:
    metrics: dict[str, Metric] = {}
    if s.fig4:
        metrics |= fig4.metrics(s, res.fig4)
    if s.fig5:
        metrics |= fig5.metrics(res.fig5) | soak.metrics(res.soak)
    one, five, fifteen = os.getloadavg()
    metrics["loadavg_1m_end"] = Metric(one, "", note=f"5 min {five:.2f}, 15 min {fifteen:.2f}")
    if res.loadavg:
        metrics["loadavg_1m_max_during_run"] = Metric(max(x["load1"] for x in res.loadavg), "")
    rows = fig4.rows(res.fig4, s.quota_percent)
    runs = [{"run": r.label, "policy": r.policy, "seed": r.seed, "offered_pps_per_dir": round(r.rate_pps),
             "offered_reached_s (paper's)": r.paper_s, "bucket_spread_s (ours)": r.spread_s,
             "moves": sum(len(x.moves) for x in r.snapshots), "invalid_moves": len(r.invalid), "ended": r.ended}
            for r in res.fig5.runs]
    paths = write_report("scaling", metrics, rows, [], title="Clustering paper §4 on the two-site emulation",
                         method=method(s, res), failures=[{"what": f} for f in res.failures()],
                         results_dir=s.results_dir, rows_title="Fig. 4: every (suite, frame, N, partition, quota)",
                         tables={"Fig. 5 runs": runs} if runs else None)
    doc = json.loads(paths.json.read_text())
    doc["fig4_trials"] = {c.key(): [{"rate_pps": t.rate_pps, "lowest_failing_pps": t.lowest_failing_pps,
                                     "probes": t.probes, **fig4.evidence(t)} for t in c.trials]
                          for c in res.fig4.cells}
    doc["fig4_hosts_per_gateway"] = {c.key(): c.hosts for c in res.fig4.cells}
    doc["fig4_controller_events"] = res.fig4.events
    doc["fig5_runs"] = {r.label: {"policy": r.policy, "seed": r.seed, "rate_pps": round(r.rate_pps, 1),
                                  "start": r.start, "ended": r.ended, "offered_reached_s": r.paper_s,
                                  "bucket_spread_s": r.spread_s, "invalid_moves": [m.describe() for m in r.invalid]}
                        for r in res.fig5.runs}
    doc["fig5_snapshots"] = {r.label: fig5.snapshot_rows(r) for r in res.fig5.runs}
    doc["soak"] = res.soak.data
    doc["loadavg"] = res.loadavg
    paths.json.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    site_a = next((list(r.snapshots[0].sites.get("a", [])) for r in res.fig5.runs if r.snapshots), [])
    plots.draw(paths.png, rows, doc["fig5_snapshots"], site_a, s.quota_percent,
               f"Clustering paper §4 on the two-site emulation (UML gateways, kernel ESP, {s.quota_percent:g} % of a "
               "core each)")
    say(f"wrote {paths.json}, {paths.markdown}, {paths.png}")
