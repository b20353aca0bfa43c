"""bench/scale's report on made-up points: the headline is the largest eBPF point, each goal
is judged there, a missed goal names the part that limits it, lost probes across a restart
fail the run, and the quick run keeps the full run's goals as notes."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gaps import FlowGap
from bench.scale import analysis
from bench.scale.costs import Steady
from bench.scale.faults import FailoverRun, RestartRun
from bench.scale.learning import LearningRun
from bench.scale.plan import Point
from bench.scale.point import PointResult
from bench.scale.rest import Latency
from bench.scale.results import Run, headline, metrics, shortfalls, write


def flow(lost: int = 0, gap_ms: float = 250.0) -> FlowGap:
    return FlowGap("h1 -> r1", sent=500, answered=500 - lost, late=0, lost=lost, gap_ms=gap_ms, tail_ms=0.0,
                   recovered=True, problem=None)


def point(n: int, hosts: int, rate: float, rss_per_host: float, lost: int = 0, p99_ms: float = 20.0) -> PointResult:
    first = {f"h{i}": 0.0 for i in range(hosts)}
    on = {f"h{i}": hosts / rate for i in range(hosts)}
    learned = analysis.learning(first, on)
    p = PointResult("ebpf", Point(n, hosts))
    p.learning = LearningRun(hosts, learned, learned, 0.25, 2.0, 1.0, 80 << 20, 90 << 20, 10, 0)
    p.steady = Steady(10.0, 0.5, 0.1 + 0.005 * n, 0.05, 0.01 * n, int(80e6 + rss_per_host * hosts), 50 << 20, 0, 20 * n, 100 * n)
    p.rest = [Latency("status", [p99_ms] * 10, 800), Latency("hosts", [p99_ms * 2] * 10, 80_000)]
    p.failover = FailoverRun("gw2", 4096 // n, 300.0, 40.0, 4096 // n, flow(), 5.0)
    p.restart = RestartRun(hosts, 3.0, flow(lost))
    return p


def run_of(*points: PointResult) -> Run:
    r = Run()
    r.points = list(points)
    return r


def test_the_headline_is_the_largest_point_and_goals_are_judged_there() -> None:
    r = run_of(point(4, 1000, 9000, 1000), point(32, 50000, 6000, 1000), point(32, 1000, 9000, 1000))
    h = headline(r)
    assert h is not None and (h.point.gateways, h.point.hosts) == (32, 50000)
    m = metrics(r)
    assert m["learning_hosts_per_s"].value == 6000 and m["learning_hosts_per_s"].met()
    assert m["failover_write_ms"].met() and m["rest_p99_ms_status"].met() and m["rest_p99_ms_hosts"].met()
    assert m["controller_bytes_per_host"].value is not None and abs(m["controller_bytes_per_host"].value - 1000) < 1
    assert shortfalls(r, m) == []


def test_a_missed_goal_names_what_limits_it() -> None:
    r = run_of(point(32, 1000, 3000, 1000, p99_ms=150.0), point(32, 50000, 3000, 1000, p99_ms=150.0))
    short = shortfalls(r, metrics(r))
    assert any(s.startswith("learning_hosts_per_s") and "controller's CPU" in s for s in short), short
    assert any(s.startswith("rest_p99_ms_status") and "event loop" in s for s in short), short


def test_lost_probes_across_a_restart_fail_the_run() -> None:
    r = run_of(point(32, 50000, 6000, 1000, lost=3))
    assert any(s.startswith("restart_lost_probes = 3") for s in shortfalls(r, metrics(r)))


def test_memory_bending_up_is_a_superlinear_term() -> None:
    pts = [point(32, h, 9000, 1000) for h in (1000, 5000, 20000, 50000)]
    for p in pts:  # add a quadratic term
        assert p.steady is not None
        p.steady = Steady(**{**p.steady.__dict__, "controller_rss": p.steady.controller_rss + int(0.05 * p.point.hosts ** 2)})
    m = metrics(run_of(*pts))
    assert m["controller_memory_bend"].met() is False


def test_the_quick_run_writes_goals_as_notes_and_fails_only_on_errors(tmp_path: Path) -> None:
    slow = point(4, 1000, 3000, 1000)
    paths, short = write(run_of(slow), "method", tmp_path, quick=True)
    doc = json.loads(paths.json.read_text())
    assert short and doc["failures"] == []
    assert "goal of the full run, not met at this quick point: learning_hosts_per_s" in doc["method"]
    broken = point(4, 1000, 9000, 1000)
    broken.errors.append("failover: BenchError: the probe does not enter gw2")
    paths, _ = write(run_of(broken), "method", tmp_path, quick=True)
    assert json.loads(paths.json.read_text())["failures"] == [{"failed": "ebpf N=4 H=1000: failover: BenchError: "
                                                                         "the probe does not enter gw2"}]
    assert paths.png.stat().st_size > 0


def test_the_report_says_which_points_it_measured(tmp_path: Path) -> None:
    """A run of part of the matrix is labelled with what it covered, not as the full one."""
    paths, _ = write(run_of(point(4, 1000, 9000, 1000), point(32, 1000, 9000, 1000), point(32, 50000, 9000, 1000)),
                     "method", tmp_path, quick=False)
    doc = json.loads(paths.json.read_text())
    assert "points measured: ebpf: N = 4, 32; hosts 1,000, 50,000" in doc["method"]
    assert "points measured: ebpf: N = 4, 32; hosts 1,000, 50,000" in paths.markdown.read_text()
