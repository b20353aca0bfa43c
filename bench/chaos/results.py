"""bench/results/chaos.{json,md,png} from a run's Record, and, after a violation, what
replaying it needs: `chaos-replay/` with the schedule, the faults as they ran, the
violations and a copy of every log."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.chaos import badinput
from bench.chaos.checker import percentile
from bench.chaos.runner import Record
from bench.chaos.schedule import KINDS, counts
from bench.report import RESULTS_DIR, Metric, Series, read_report, write_report
from supergw_proto.badinput import tally_dir

REPLAY = "chaos-replay"
BAD_INPUT_TABLE = "Bad input per interface"
COVERAGE_TABLE = "Flows per gateway"


def per_kind(rec: Record) -> list[dict[str, Any]]:
    """One row per fault kind injected: count, budget, recovery median / p99 / max (ms)."""
    by_kind: dict[str, list[float]] = defaultdict(list)
    for seq, inj in rec.injected.items():
        by_kind[inj.fault.kind].append(1000 * rec.recovery_s.get(seq, 0.0))
    rows = []
    for kind, ms in sorted(by_kind.items()):
        rows.append({"kind": kind, "injected": len(ms), "budget_ms": round(1000 * KINDS[kind].budget_s),
                     "recovery_median_ms": round(statistics.median(ms), 1),
                     "recovery_p99_ms": round(percentile(ms, 99) or 0.0, 1), "recovery_max_ms": round(max(ms), 1),
                     "budget_reason": KINDS[kind].why})
    return rows


def history(rec: Record) -> list[dict[str, Any]]:
    out = []
    for f in rec.schedule:
        inj = rec.injected.get(f.seq)
        out.append({**f.as_dict(), "started": None if inj is None else round(inj.start, 2),
                    "undone": None if inj is None or inj.undone is None else round(inj.undone, 2),
                    "hit": None if inj is None else inj.target, "aimed": rec.aimed.get(f.seq),
                    "outcome": rec.outcomes.get(f.seq), "recovery_ms": round(1000 * rec.recovery_s.get(f.seq, 0.0), 1),
                    "charged": [{"flow": s.flow, "start": round(s.start, 3), "ms": round(1000 * s.seconds, 1)}
                                for s in rec.charged.get(f.seq, [])]})
    return out


def coverage(rec: Record) -> list[dict[str, Any]]:
    """Per gateway: how long some flow crossed its pair, and the gateway faults that hit it."""
    hits: dict[str, int] = defaultdict(int)
    for inj in rec.injected.values():
        if inj.fault.group == "gateway":
            hits[inj.target] += 1
    return [{"gateway": g, "carried_a_flow_s": s, "of_run_pct": round(100 * s / rec.ended_at, 1) if rec.ended_at else None,
             "gateway_faults": hits.get(g, 0)} for g, s in sorted(rec.carried_s.items())]


def loss_metrics(rec: Record) -> dict[str, Metric]:
    """The loss-rate invariant's windows: how many, the worst against its allowance, and the
    worst loss of a window no fault on the flow's path explains."""
    if not rec.windows:
        return {"loss_windows": Metric(None, "windows", note="no window was judged (the run ended first)")}
    worst = max(rec.windows, key=lambda w: w.lost / w.allowed)
    quiet = [w for w in rec.windows if not w.faults]
    qworst = max(quiet, key=lambda w: w.lost / w.sent, default=None)
    return {
        "loss_windows": Metric(float(len(rec.windows)), "windows",
                               note=f"{len(rec.windows)} windows of up to 500 probes judged ({len(quiet)} with no fault "
                                    f"on the flow's path); {sum(1 for w in rec.windows if w.lost > w.allowed)} over "
                                    "their allowance (goal 0)"),
        "loss_worst_of_allowance": Metric(round(worst.lost / worst.allowed, 3), "lost/allowed", higher_is_better=False,
                                          note=f"{worst.flow} t+{worst.first:.0f}-{worst.last:.0f}s: {worst.lost} of "
                                               f"{worst.sent} lost, allowed {worst.allowed:.0f} ({worst.why}); > 1 is "
                                               "a violation"),
        "loss_quiet_worst_pct": Metric(None if qworst is None else round(100 * qworst.lost / qworst.sent, 2), "%",
                                       higher_is_better=False,
                                       note="worst window loss with no fault on the flow's path" + (
                                           "" if qworst is None else f" ({qworst.flow} t+{qworst.first:.0f}s, "
                                           f"{qworst.lost} of {qworst.sent})")),
    }


def resource_series(rec: Record) -> list[Series]:
    """RSS per process kind (every controller, switch and the busiest agent), summed over
    restarts: a restarted process continues its line."""
    merged: dict[str, dict[float, float]] = defaultdict(dict)
    for key, pts in rec.resources.items():
        name, metric = key.rsplit(" ", 1)
        proc = re.sub(r"\[\d+\]$", "", name)
        if metric == "rss_mb" and ("controller" in proc or proc.endswith("/switch")):
            for t, v in pts:
                merged[f"{proc} RSS MB"][t] = v
        if metric == "tasks":
            for t, v in pts:
                merged[f"{proc} asyncio tasks"][t] = v
        if metric == "fds":
            for t, v in pts:
                merged["all processes: fds"][t] = merged["all processes: fds"].get(t, 0.0) + v
    return [Series(label, sorted(pts), [pts[t] for t in sorted(pts)], xlabel="seconds into the run",
                   ylabel="MB / count") for label, pts in sorted(merged.items())]


def write(rec: Record, method: str, quick: bool, out_dir: Path = RESULTS_DIR,
          bad_input_dir: Path | None = None) -> Path:
    """The report (with the bad-input tests' tallies from `bad_input_dir`), and
    `<out_dir>/chaos-replay/`; returns that directory."""
    lost = sum(rec.sent.get(f, 0) - rec.answered.get(f, 0) for f in rec.flows)
    by_type = counts([i.fault for i in rec.injected.values()])
    worst = max(((1000 * r, s) for s, r in rec.recovery_s.items()), default=(0.0, -1))
    metrics = {
        "faults_injected": Metric(float(len(rec.injected)), "faults", note=", ".join(f"{k} {n}" for k, n in by_type.items())
                                  + "".join(f"; not injected: #{f.seq} {f.kind} ({rec.outcomes.get(f.seq, 'the run ended first')})"
                                            for f in rec.schedule if f.seq not in rec.injected)),
        "invariant_violations": Metric(float(len(rec.violations)), "violations", note="goal 0; the run stops at the first"),
        "run_s": Metric(round(rec.ended_at, 1), "s", note=f"scheduled {rec.minutes:g} min, seed {rec.seed}"
                        + (" (quick: proves the run works, not a result)" if quick else "")),
        "recovery_max_ms": Metric(round(worst[0], 1), "ms", higher_is_better=False,
                                  note=f"longest flow silence charged to one fault (#{worst[1]}); per-kind budgets "
                                       "below"),
        "probes_lost": Metric(float(lost), "probes", note=f"of {sum(rec.sent.values())} sent by {len(rec.flows)} flows "
                                                           "(20 ms ping each), during faults and between: probes "
                                                           "without an answer within 1 s"),
    }
    aimed = sum(1 for inj in rec.injected.values() if inj.fault.group == "gateway")
    metrics["gateway_faults_on_flows"] = Metric(
        float(aimed), "faults", note=f"every gateway fault hit a gateway whose pair carried a flow when injected; "
                                     f"{len(rec.aimed)} of them re-aimed from a scheduled target that carried none")
    metrics |= loss_metrics(rec)
    bad_metrics, bad_rows = badinput.section(bad_input_dir or tally_dir())
    failures = [{"invariant": v.invariant, "at_s": round(v.at, 2), "what": v.what} for v in rec.violations]
    write_report("chaos", {**metrics, **bad_metrics}, rows=per_kind(rec), series=resource_series(rec),
                 title=f"Chaos: {len(rec.injected)} faults, seed {rec.seed}", method=method,
                 rows_title="Recovery per fault kind", failures=failures, results_dir=out_dir,
                 tables={COVERAGE_TABLE: coverage(rec), BAD_INPUT_TABLE: bad_rows})
    replay = {"seed": rec.seed, "minutes": rec.minutes, "intent": rec.intent, "flows": rec.flows,
              "routes": [asdict(r) for r in rec.routes],
              "loss_windows": [asdict(w) for w in rec.windows if w.lost > 0],
              "violations": failures, "faults": history(rec),
              "silences": [{"flow": s.flow, "start": round(s.start, 3), "ms": round(1000 * s.seconds, 1)}
                           for s in rec.silences]}
    replay_dir = out_dir / REPLAY
    replay_dir.mkdir(parents=True, exist_ok=True)
    (replay_dir / "history.json").write_text(json.dumps(replay, indent=1) + "\n")
    if rec.violations:
        logs = replay_dir / "logs"
        shutil.rmtree(logs, ignore_errors=True)
        for p in rec.logs:
            dest = logs / p.parent.name / p.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dest)
    return replay_dir


def rewrite_bad_input(out_dir: Path = RESULTS_DIR, bad_input_dir: Path | None = None) -> Path:
    """Write `<out_dir>/chaos.*` again from its JSON with the bad-input part read afresh (a
    run's faults and the bad-input tests are independent: the tests need not rerun it)."""
    saved = read_report(out_dir / "chaos.json")
    bad_metrics, bad_rows = badinput.section(bad_input_dir or tally_dir())
    return write_report("chaos", {**saved.metrics, **bad_metrics}, rows=saved.rows, series=saved.series,
                        title=saved.title, method=saved.method, rows_title=saved.rows_title,
                        failures=saved.failures, results_dir=out_dir,
                        tables={**saved.tables, BAD_INPUT_TABLE: bad_rows}).json
