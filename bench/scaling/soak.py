"""The soak, in the boot of our policy's Fig. 5 run after it: a long steady load at a fraction
of Fig. 4's T(3), counting failovers nobody caused and simulated-host flows that stalled."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench import gaps
from bench.report import Metric
from bench.scaling.emulation import LoadedEmulation, say
from bench.scaling.settings import BIG_FRAME
from topologies.hostsim_client import run_loss

SOAK_LOAD = 0.80  # of Fig. 5's offered load's basis, T(3)
FLOW_BUDGET_S = 1.0  # a flow silent for longer at the end of the soak has not recovered (bench/gaps.py)


@dataclass
class SoakResult:
    seconds: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)


def soak(emu: LoadedEmulation, seconds: float, rate: float, out: SoakResult) -> None:
    before = emu.failovers()
    say(f"soak: {rate:.0f} pps/dir for {seconds:.0f}s, counting failovers")
    emu.start(rate, BIG_FRAME, seconds)
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        time.sleep(min(30.0, seconds - (time.monotonic() - started)) + 0.01)
        say(f"  soak t={time.monotonic() - started:4.0f}s failovers so far {emu.failovers() - before}")
    for site in emu.sites:
        site.hostsim.wait_run_done(timeout=15)
    time.sleep(0.3)
    a, b = emu.sites
    sa, sb = a.hostsim.stats(flows=True), b.hostsim.stats(flows=True)
    ab, ba = run_loss(sa, sb), run_loss(sb, sa)
    # a healthy flow's tail is about one frame spacing (its last frame lost by chance): allow three
    budget = max(FLOW_BUDGET_S, 3 * max(sa["run"]["flows"], sb["run"]["flows"]) / rate)
    flows = gaps.hostsim_flows(sa, sb, budget) + gaps.hostsim_flows(sb, sa, budget)
    stalled = gaps.failed(flows)
    out.seconds = seconds
    out.data = {"seconds": seconds, "rate_pps": round(rate, 1), "failovers": emu.failovers() - before,
                "loss": (ab.lost + ba.lost) / max(1, ab.sent + ba.sent),
                "flows": len(flows), "longest_flow_gap_ms": max((f.gap_ms for f in flows), default=None),
                "flows_not_recovered": len(stalled), "not_recovered": [f"{f.flow}: {f.problem}" for f in stalled][:10]}
    say(f"soak: {out.data['failovers']} failovers, loss {100 * out.data['loss']:.4f} %, longest flow gap "
        f"{out.data['longest_flow_gap_ms']} ms, {len(stalled)} of {len(flows)} flows not recovered")


def metrics(out: SoakResult) -> dict[str, Metric]:
    d = out.data
    if not d:
        return {"spurious_failovers_soak": Metric(None, "", note="soak not run"),
                "soak_flows_not_recovered": Metric(None, "flows", note="soak not run")}
    return {
        "spurious_failovers_soak": Metric(d["failovers"], "", note=f"goal 0; {d['seconds']:.0f} s at "
                                          f"{d['rate_pps']:.0f} pps/dir ({100 * SOAK_LOAD:.0f} % of T(3)), our policy"),
        "soak_flows_not_recovered": Metric(
            d["flows_not_recovered"], "flows",
            note=(f"goal 0; of {d['flows']} simulated-host flows, silent at the end of the soak (bench/gaps.py: last "
                  f"arrival -> last send; longest gap of any flow {d['longest_flow_gap_ms']} ms) {d['not_recovered']}")),
    }


def failures(out: SoakResult) -> list[str]:
    d = out.data
    return ([f"soak: {d['flows_not_recovered']} flows had not recovered at its end: {d['not_recovered']}"]
            if d.get("flows_not_recovered") else [])
