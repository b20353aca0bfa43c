"""The chaos run's invariants, as pure functions and small trackers fed by the run's samplers
(bench/chaos/live.py) while it runs: each returns the violations it sees *now*, so the run
stops at the first one rather than finding it at the end.

- **Flows** (`FlowTracker`): every flow's silences (last answer -> next answer, or -> now
  while it lasts). A silence may last `allowed_s`: the sum of the budgets of the faults whose
  window (injection -> undo + settle) it overlaps, at least BASELINE_S when none does, plus
  one probe interval (the silence starts at the last answer, up to one interval before the
  fault). An ongoing silence is a violation as soon as it is longer than that.
- **Buckets** (`StuckTracker`): a bucket unassigned, or on a gateway its controller counts
  dead, for longer than the same allowance (baseline: the failover budget).
- **Split brain** (`split_brain`): two terms' accepted switch-write windows that overlap.
- **Intent** (`intent_diff`): the pins, drains and weights set at the start, as the leader shows them.
- **Growth** (`growth`): a process whose RSS, fds, threads or asyncio tasks end a run well
  above where they stood after its warm-up.
- **Logs** (`LogScanner`): tracebacks, panics and fatal errors in the processes' logs.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.chaos.schedule import GATEWAY_BUDGET_S, Fault

BASELINE_S = GATEWAY_BUDGET_S  # a silence with no fault around it: as long as a failover may take


@dataclass(frozen=True)
class Violation:
    invariant: str  # flow | bucket | split_brain | intent | growth | log | fault
    what: str
    at: float  # run offset, seconds

    def line(self) -> str:
        return f"[t+{self.at:.1f}s] {self.invariant}: {self.what}"


@dataclass(frozen=True)
class Injected:
    """A fault as it ran: run offsets of its injection and its undo (None while it lasts)."""
    fault: Fault
    start: float
    undone: float | None

    def window(self, now: float, settle_s: float) -> tuple[float, float]:
        return self.start, (now if self.undone is None else self.undone + settle_s)


def overlapping(faults: Iterable[Injected], lo: float, hi: float, now: float, settle_s: float) -> list[Injected]:
    return [f for f in faults if f.window(now, settle_s)[0] <= hi and lo <= f.window(now, settle_s)[1]]


def allowed_s(faults: Sequence[Injected], lo: float, hi: float, now: float, settle_s: float, slack_s: float) -> float:
    """What a silence from `lo` to `hi` may last: the budgets of the faults it overlaps added
    (BASELINE_S when none), plus `slack_s`."""
    over = overlapping(faults, lo, hi, now, settle_s)
    return max(BASELINE_S, sum(f.fault.budget_s for f in over)) + slack_s


@dataclass(frozen=True)
class Silence:
    flow: str
    start: float  # run offset of the last answer before it
    end: float  # run offset of the answer that ended it (or now, while it lasts)
    ongoing: bool

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class FlowTracker:
    """Answers per flow (run offsets); silences longer than `record_s` are kept."""
    interval_s: float  # the probes' spacing: the slack of every budget
    settle_s: float
    record_s: float = 0.1
    last: dict[str, float] = field(default_factory=dict)
    silences: list[Silence] = field(default_factory=list)
    reported: set[tuple[str, float]] = field(default_factory=set)

    def answer(self, flow: str, at: float) -> None:
        prev = self.last.get(flow)
        if prev is not None and at > prev:
            if at - prev >= self.record_s:
                self.silences.append(Silence(flow, prev, at, False))
            self.last[flow] = at
        elif prev is None:
            self.last[flow] = at

    def check(self, faults: Sequence[Injected], now: float) -> list[Violation]:
        out: list[Violation] = []
        current = [Silence(f, t, now, True) for f, t in self.last.items()]
        for s in [*self.silences, *current]:
            limit = allowed_s(faults, s.start, s.end, now, self.settle_s, self.interval_s)
            if s.seconds > limit and (s.flow, s.start) not in self.reported:
                self.reported.add((s.flow, s.start))
                near = [f.fault.describe() for f in overlapping(faults, s.start, s.end, now, self.settle_s)]
                out.append(Violation("flow", f"{s.flow}: no answer for {1000 * s.seconds:.0f} ms"
                                     + (" (still silent)" if s.ongoing else "")
                                     + f" from t+{s.start:.2f}s, allowed {1000 * limit:.0f} ms; faults around it: "
                                     + (", ".join(near) or "none"), now))
        return out

    def recovery_s(self, fault: Injected, now: float) -> float:
        """The longest silence of any flow that overlaps the fault's window (0: none longer than `record_s`)."""
        lo, hi = fault.window(now, self.settle_s)
        over = [s.seconds for s in self.silences if s.start <= hi and lo <= s.end]
        return max(over, default=0.0)


@dataclass
class StuckTracker:
    """Since when each bucket has been unassigned or on a dead gateway (per site)."""
    settle_s: float
    slack_s: float  # how often the buckets are read
    since: dict[tuple[str, int], tuple[float, str]] = field(default_factory=dict)
    reported: set[tuple[str, int, float]] = field(default_factory=set)

    def observe(self, site: str, buckets: Mapping[int, str | None], dead: set[str], now: float) -> None:
        bad = {b: ("unassigned" if g is None else f"on dead {g}") for b, g in buckets.items() if g is None or g in dead}
        for key in [k for k in self.since if k[0] == site and k[1] not in bad]:
            del self.since[key]
        for b, why in bad.items():
            self.since.setdefault((site, b), (now, why))

    def check(self, faults: Sequence[Injected], now: float) -> list[Violation]:
        out = []
        for (site, b), (t0, why) in sorted(self.since.items()):
            limit = allowed_s(faults, t0, now, now, self.settle_s, self.slack_s)
            if now - t0 > limit and (site, b, t0) not in self.reported:
                self.reported.add((site, b, t0))
                out.append(Violation("bucket", f"site {site} bucket {b} {why} for {now - t0:.1f} s "
                                                f"(allowed {limit:.1f} s)", now))
        return out


def split_brain(pairs: Iterable[tuple[int, int]], seen: set[tuple[int, int]], now: float) -> list[Violation]:
    """Overlapping write windows (supergw_controller.ha.view.overlaps) not reported yet."""
    out = []
    for pair in sorted(set(pairs) - seen):
        seen.add(pair)
        out.append(Violation("split_brain", f"terms {pair[0]} and {pair[1]}: accepted switch writes overlap", now))
    return out


@dataclass(frozen=True)
class Intent:
    """What the operator set at the start, per site: weights, drains, pins."""
    weights: Mapping[str, float]
    drained: frozenset[str]
    pins: Mapping[int, str]


def intent_diff(want: Intent, weights: Mapping[str, float], drained: set[str], pins: Mapping[int, str]) -> list[str]:
    out = [f"{g} weight {weights.get(g)} (set {w:g})" for g, w in want.weights.items() if weights.get(g) != w]
    out += [f"{g} no longer drained" for g in sorted(want.drained - drained)]
    out += [f"{g} drained, not by the run" for g in sorted(drained - want.drained)]
    out += [f"bucket {b} pinned to {pins.get(b)} (set {g})" for b, g in want.pins.items() if pins.get(b) != g]
    out += [f"bucket {b} pinned to {g}, not by the run" for b, g in pins.items() if b not in want.pins]
    return out


# --- growth ---------------------------------------------------------------------------------

GROWTH_LIMITS: dict[str, float] = {"rss_mb": 64.0, "fds": 64.0, "threads": 32.0, "tasks": 64.0}  # absolute growth
GROWTH_FACTOR = 1.5  # and relative: the last quarter's median over the first quarter's
GROWTH_MIN_SAMPLES = 20


def growth(series: Mapping[str, Sequence[tuple[float, float]]], warmup_s: float, now: float) -> list[Violation]:
    """`series`: "<process> <metric>" (metric a GROWTH_LIMITS key) -> (run offset, value),
    for one process lifetime (a restarted process is a new series). Unbounded growth: after
    `warmup_s`, the median of the last quarter of the samples exceeds the first quarter's by
    both GROWTH_FACTOR and the metric's absolute limit."""
    out = []
    for name, pts in series.items():
        metric = name.rsplit(" ", 1)[-1]
        vals = [v for t, v in pts if t >= pts[0][0] + warmup_s]
        if metric not in GROWTH_LIMITS or len(vals) < GROWTH_MIN_SAMPLES:
            continue
        q = len(vals) // 4
        first, last = statistics.median(vals[:q]), statistics.median(vals[-q:])
        if last - first > GROWTH_LIMITS[metric] and last > GROWTH_FACTOR * max(first, 1.0):
            out.append(Violation("growth", f"{name}: {first:g} -> {last:g} over the run (limit +{GROWTH_LIMITS[metric]:g} "
                                           f"and x{GROWTH_FACTOR})", now))
    return out


# --- logs ---------------------------------------------------------------------------------------

LOG_PATTERNS = re.compile(r"Traceback \(most recent call last\)|^panic: |^fatal error: |\"level\":\"(panic|fatal)\"",
                          re.MULTILINE)


@dataclass
class LogScanner:
    """Reads only what each log file gained since the last scan (a file that shrank is read again)."""
    offsets: dict[Path, int] = field(default_factory=dict)

    def scan(self, files: Iterable[Path], now: float) -> list[Violation]:
        out = []
        for path in files:
            try:
                size = path.stat().st_size
                start = self.offsets.get(path, 0)
                if size < start:
                    start = 0
                with open(path, "rb") as f:
                    f.seek(start)
                    data = f.read(size - start)
            except OSError:
                continue
            cut = data.rfind(b"\n") + 1  # whole lines only: the rest is read next time
            self.offsets[path] = start + cut
            text = data[:cut].decode(errors="replace")
            for m in LOG_PATTERNS.finditer(text):
                line_end = text.find("\n", m.start())
                out.append(Violation("log", f"{path.name}: {text[m.start():line_end].strip()[:200]}", now))
        return out


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0-100) of `values`; None when empty."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]
