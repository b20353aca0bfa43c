"""The gateway benchmark's statistics and tables: the tuning paper's stopping rule, 95 %
intervals, paired gains and ratios, and which knobs have an effect — from samples."""

from __future__ import annotations

import pytest

from bench.gateway.stats import StoppingRule, interval, paired_ratio, t975
from bench.gateway.tuning import (CONFIGS, MAIN_SIZE, SIZES, TUNED, Cell, Outcome, Sample, plan_cells, ratio,
                                  references, table)
from supergw_gateway.tuning.groups import ENDPOINT_GROUPS, GATEWAY_GROUPS

RULE = StoppingRule()


def samples(config: str, path: str, values: list[float | None], size: int = MAIN_SIZE) -> list[Sample]:
    return [Sample(config, r, path, size, v) for r, v in enumerate(values)]


def test_interval_is_students_t() -> None:
    ci = interval([100.0, 102.0, 98.0, 100.0])
    assert ci is not None and ci.mean == 100.0 and ci.n == 4
    # stdev 1.633, t(3) = 3.182: half-width 2.598
    assert (ci.low, ci.high) == pytest.approx((97.402, 102.598), abs=1e-3)
    assert interval([1.0]) is None
    assert t975(1) == 12.706 and t975(100) == 1.96
    with pytest.raises(ValueError):
        t975(0)


def test_the_papers_stopping_rule() -> None:
    steady = [100.0, 100.5, 99.5, 100.2]
    assert RULE.converged(steady) and RULE.done(steady)
    assert not RULE.converged(steady[:3])  # at least 4 runs
    noisy = [100.0, 120.0, 90.0, 110.0, 95.0]
    assert not RULE.done(noisy)
    assert RULE.done(noisy * 3)  # 15 >= 12 runs: done, not converged
    assert not RULE.converged(noisy * 3)
    with pytest.raises(ValueError):
        StoppingRule(min_n=5, max_n=4)


def test_gains_are_paired_per_round_and_say_whether_they_exclude_one() -> None:
    out = Outcome(samples("default", "ipsec", [100.0, 200.0, 150.0, 120.0])
                  + samples("offloads", "ipsec", [120.0, 240.0, 181.0, 143.0])  # +20 % every round
                  + samples("tcp", "ipsec", [101.0, 195.0, 152.0, 120.0]))  # noise around 1.0
    cells = [Cell("default", "ipsec", MAIN_SIZE), Cell("offloads", "ipsec", MAIN_SIZE), Cell("tcp", "ipsec", MAIN_SIZE)]
    rows = {r.config: r for r in table(out, cells, RULE)}
    assert rows["default"].gain == 1.0 and rows["default"].effect == "—"
    off = rows["offloads"]
    assert off.gain == pytest.approx(1.2, abs=0.01) and off.effect == "gain" and off.gain_low > 1.0  # type: ignore[operator]
    assert rows["tcp"].effect == "none"
    # the means themselves wander 100-200 Mb/s: unpaired, no interval could exclude 1.0
    assert not rows["default"].converged


def test_a_knob_that_costs_throughput_is_a_loss() -> None:
    out = Outcome(samples("default", "ipsec", [100.0, 101.0, 99.0, 100.0])
                  + samples("coalescing", "ipsec", [90.0, 90.5, 89.5, 90.2]))
    rows = table(out, [Cell("default", "ipsec", MAIN_SIZE), Cell("coalescing", "ipsec", MAIN_SIZE)], RULE)
    assert rows[1].effect == "loss" and rows[1].converged


def test_failed_runs_are_not_values() -> None:
    out = Outcome(samples("default", "ipsec", [100.0, None]) + samples("tcp", "ipsec", [None, None]))
    rows = {r.config: r for r in table(out, [Cell("default", "ipsec", MAIN_SIZE), Cell("tcp", "ipsec", MAIN_SIZE)],
                                       RULE)}
    assert rows["default"].runs == 1 and rows["default"].mean == 100.0 and rows["default"].low is None
    assert rows["tcp"].runs == 0 and rows["tcp"].mean is None and rows["tcp"].gain is None
    assert out.attempts(Cell("tcp", "ipsec", MAIN_SIZE)) == 2


def test_ipsec_plain_ratio_per_size() -> None:
    out = Outcome(samples(TUNED, "ipsec", [50.0, 60.0, 55.0], 64) + samples(TUNED, "plain", [100.0, 120.0, 110.0], 64))
    q = ratio(out, TUNED, 64)
    assert q is not None and q.mean == pytest.approx(0.5) and q.n == 3
    assert ratio(out, "default", 64) is None
    assert paired_ratio({0: 1.0}, {1: 2.0}) is None  # never in the same round


def test_cells_and_what_each_is_compared_with() -> None:
    cells = plan_cells(CONFIGS, (64, MAIN_SIZE), MAIN_SIZE)
    per_knob = [c for c in cells if c.size == MAIN_SIZE and c.path == "ipsec"]
    assert [c.config for c in per_knob] == [c.name for c in CONFIGS]
    assert {(c.config, c.path, c.size) for c in cells if c not in per_knob} == {
        (n, p, s) for n in ("default", TUNED) for p in ("ipsec", "plain") for s in (64, MAIN_SIZE)} - {
        ("default", "ipsec", MAIN_SIZE), (TUNED, "ipsec", MAIN_SIZE)}
    assert references(Cell("tcp", "ipsec", MAIN_SIZE), cells) == [Cell("default", "ipsec", MAIN_SIZE)]
    assert references(Cell(TUNED, "plain", 64), cells) == [Cell("default", "plain", 64), Cell(TUNED, "ipsec", 64)]
    assert references(Cell("default", "ipsec", 64), cells) == [Cell("default", "plain", 64)]
    assert SIZES[-1] == MAIN_SIZE


def test_configs_cover_each_knob_alone_then_all() -> None:
    names = [c.name for c in CONFIGS]
    assert names[0] == "default" and names[-1] == TUNED
    alone = {g for c in CONFIGS[1:-2] for g in (*c.gateway, *c.endpoint)}
    assert alone == set(GATEWAY_GROUPS) | set(ENDPOINT_GROUPS)
    assert all(len(set(c.gateway) | set(c.endpoint)) == 1 for c in CONFIGS[1:-2]), "one knob group per row"
    everything = CONFIGS[-1]
    assert set(everything.gateway) == set(GATEWAY_GROUPS) and set(everything.endpoint) == set(ENDPOINT_GROUPS)
    assert not CONFIGS[0].gateway_tuning()["enabled"] and everything.gateway_tuning()["host_wide"]
