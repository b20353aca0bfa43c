"""The loss-rate invariant: per flow, per window of WINDOW_PROBES consecutive probes (10 s at
20 ms), the probes without a timely answer may not exceed what the faults that hit the flow
in that window explain.

Silence budgets alone let a flow that loses every third probe forever pass (it is never
silent for long). So each window is judged once all its answers are in: allowed =
expected + SIGMAS x sqrt(expected) + 1 lost probes, where expected (a number of probes) is

- BASE_LOSS of the window's probes (a 2-core machine shared with other work drops a few),
- for each fault that hit the flow (`checker.hits`) in the window: the silence it may cause,
  its budget / probe interval (a gateway fault during a controller fault: that budget, as for
  silences), except
- for a WAN loss burst of p %: 1 - (1 - p)^2 of the probes sent while it lasted (request and
  answer each cross the WAN once), its random loss and nothing more.

The SIGMAS x sqrt(expected) margin is the binomial spread of a loss that rate would give: a
flow losing 30 % of 500 probes (150) against a baseline allowance of 15 fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.chaos.checker import Injected, Violation, budget_s, hits, overlapping
from bench.chaos.paths import PathBook

WINDOW_PROBES = 500
BASE_LOSS = 0.01
SIGMAS = 4.0


@dataclass
class Window:
    flow: str
    index: int  # probes index * WINDOW_PROBES + 1 .. (index + 1) * WINDOW_PROBES
    first: float = math.inf  # run offsets of the earliest and latest send seen
    last: float = -math.inf
    answered: set[int] = field(default_factory=set)

    def see(self, at: float) -> None:
        self.first, self.last = min(self.first, at), max(self.last, at)


@dataclass(frozen=True)
class Judged:
    flow: str
    index: int
    first: float
    last: float
    sent: int
    lost: int
    allowed: float
    why: str  # what the allowance is made of
    faults: int  # faults that hit the flow in the window (0: only the base allowance)


def allowance(faults: Sequence[Injected], flow: str, lo: float, hi: float, sent: int, now: float, settle_s: float,
              interval_s: float, paths: PathBook) -> tuple[float, str, int]:
    """Lost probes a window of `sent` probes sent from `lo` to `hi` may have, why, and how many
    faults that hit the flow it counts."""
    expected = BASE_LOSS * sent
    why = [f"base {100 * BASE_LOSS:g} %"]
    hitting = [f for f in overlapping(faults, lo, hi, now, settle_s) if hits(f, flow, paths, now, settle_s)]
    for f in hitting:
        if f.fault.kind == "wan_loss":
            p = f.fault.param / 100
            end = now if f.undone is None else f.undone
            during = max(0.0, min(hi, end) - max(lo, f.start)) / max(hi - lo, interval_s)
            expected += (1 - (1 - p) ** 2) * sent * min(1.0, during)
            why.append(f"#{f.fault.seq} wan_loss {p:.0%} both ways for {min(1.0, during):.0%} of it")
            continue  # its silences are that random loss, already counted
        budget = budget_s(f, faults, lo, hi, now, settle_s)
        expected += budget / interval_s
        why.append(f"#{f.fault.seq} {f.fault.kind} {1000 * budget:.0f} ms")
    return expected + SIGMAS * math.sqrt(expected) + 1, ", ".join(why), len(hitting)


@dataclass
class LossTracker:
    """Probes per flow in windows (run offsets); each window judged once its answers are in."""
    interval_s: float
    settle_s: float
    reply_window_s: float
    paths: PathBook
    windows: dict[tuple[str, int], Window] = field(default_factory=dict)
    newest: dict[str, int] = field(default_factory=dict)  # flow -> highest probe number seen
    judged: list[Judged] = field(default_factory=list)

    def probe(self, flow: str, seq: int, at: float, answered: bool) -> None:
        """Probe `seq` (1-based, unwrapped) of `flow`, sent about `at`; `answered`: in time."""
        w = self.windows.setdefault((flow, (seq - 1) // WINDOW_PROBES), Window(flow, (seq - 1) // WINDOW_PROBES))
        w.see(at)
        if answered:
            w.answered.add(seq)
        self.newest[flow] = max(self.newest.get(flow, 0), seq)

    def check(self, faults: Sequence[Injected], now: float, final: bool = False) -> list[Violation]:
        """Judge every window whose answers are all in (every window when `final`)."""
        grace = int(math.ceil(self.reply_window_s / self.interval_s)) + 5
        out: list[Violation] = []
        for key, w in sorted(self.windows.items()):
            end = (w.index + 1) * WINDOW_PROBES
            newest = self.newest.get(w.flow, 0)
            if not final and newest < end + grace:
                continue
            del self.windows[key]
            sent = min(end, newest) - w.index * WINDOW_PROBES
            if sent <= 0:
                continue
            lost = sent - len(w.answered)
            allowed, why, hit = allowance(faults, w.flow, w.first, w.last + self.reply_window_s, sent, now,
                                          self.settle_s, self.interval_s, self.paths)
            self.judged.append(Judged(w.flow, w.index, w.first, w.last, sent, lost, allowed, why, hit))
            if lost > allowed:
                out.append(Violation("loss", f"{w.flow}: {lost} of {sent} probes lost ({100 * lost / sent:.1f} %) "
                                             f"from t+{w.first:.1f}s to t+{w.last:.1f}s, allowed {allowed:.0f} "
                                             f"({why})", now))
        return out
