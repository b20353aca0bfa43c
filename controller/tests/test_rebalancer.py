"""Rebalancer: worked examples plus hypothesis properties of the pure planner."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supergw_controller.rebalancer import (
    BucketRate,
    GatewayInput,
    GatewayState,
    MoveReason,
    Plan,
    RebalanceInput,
    RebalanceParams,
    apply_plan,
    hot_first,
    imbalance,
    plan_rebalance,
)

A, D, R, X = GatewayState.ALIVE, GatewayState.DEAD, GatewayState.RECOVERING, GatewayState.DRAINED
PPS_ONLY = RebalanceParams(byte_cost=0.0)


def gws(*spec: tuple[str, float, GatewayState]) -> list[GatewayInput]:
    return [GatewayInput(n, w, s) for n, w, s in spec]


def rates(values: dict[int, float]) -> dict[int, BucketRate]:
    return {b: BucketRate(pps=v) for b, v in values.items()}


def run_rounds(inp: RebalanceInput, params: RebalanceParams, rounds: int) -> tuple[dict[int, str], list[Plan]]:
    assignment = dict(inp.assignment)
    plans = []
    for _ in range(rounds):
        plan = plan_rebalance(
            RebalanceInput(inp.k, inp.rates, assignment, inp.gateways, inp.pins), params
        )
        plans.append(plan)
        assignment = apply_plan(assignment, plan)
        if not plan.moves:
            break
    return assignment, plans


# ---------------------------------------------------------------- examples


def test_balanced_input_plans_nothing() -> None:
    inp = RebalanceInput(4, rates({0: 10, 1: 10, 2: 10, 3: 10}), {0: "a", 1: "a", 2: "b", 3: "b"}, gws(("a", 1, A), ("b", 1, A)))
    plan = plan_rebalance(inp, PPS_ONLY)
    assert plan.moves == ()
    assert plan.ratio_before == pytest.approx(1.0)


def test_all_on_one_gateway_converges_in_one_round() -> None:
    k = 64
    inp = RebalanceInput(k, rates({b: 1.0 + (b % 5) for b in range(k)}), {b: "a" for b in range(k)}, gws(("a", 1, A), ("b", 1, A), ("c", 1, A)))
    plan = plan_rebalance(inp, RebalanceParams(byte_cost=0.0, move_budget=64))
    assert plan.ratio_before == pytest.approx(3.0)
    assert plan.ratio_after <= 1.05
    assert all(m.reason is MoveReason.REBALANCE and m.src == "a" for m in plan.moves)


def test_big_buckets_move_first_fewest_moves() -> None:
    # a carries two elephants and many mice; one elephant is exactly what b should take.
    r = {0: 50.0, 1: 40.0} | {b: 1.0 for b in range(2, 12)}
    inp = RebalanceInput(12, rates(r), {b: "a" for b in r}, gws(("a", 1, A), ("b", 1, A)))
    plan = plan_rebalance(inp, PPS_ONLY)
    assert [m.bucket for m in plan.moves] == [0]
    assert plan.ratio_after <= 1.10


def test_hysteresis_below_threshold_does_nothing() -> None:
    # ratio 1.08 < 1.10: no move although a move would improve it.
    inp = RebalanceInput(2, rates({0: 54, 1: 46}), {0: "a", 1: "b"}, gws(("a", 1, A), ("b", 1, A)))
    assert plan_rebalance(inp, PPS_ONLY).moves == ()


def test_weights_respected() -> None:
    k = 30
    inp = RebalanceInput(k, rates({b: 1.0 for b in range(k)}), {b: "small" for b in range(k)}, gws(("big", 2, A), ("small", 1, A)))
    plan = plan_rebalance(inp, RebalanceParams(byte_cost=0.0, move_budget=100))
    assert plan.load_after == {"big": 20.0, "small": 10.0}


def test_failover_moves_everything_regardless_of_budget() -> None:
    k = 32
    inp = RebalanceInput(k, rates({b: 1.0 for b in range(k)}), {b: ("a" if b < 16 else "b") for b in range(k)}, gws(("a", 1, D), ("b", 1, A), ("c", 1, A), ("d", 1, X)))
    plan = plan_rebalance(inp, RebalanceParams(byte_cost=0.0, move_budget=2))
    fo = [m for m in plan.moves if m.reason is MoveReason.FAILOVER]
    assert len(fo) == 16 and plan.failover
    assert {m.dst for m in fo} <= {"b", "c"}
    after = apply_plan(inp.assignment, plan)
    assert "a" not in after.values() and "d" not in after.values()


def test_drain_evacuates_unpinned_keeps_pinned() -> None:
    inp = RebalanceInput(4, rates({0: 1, 1: 1, 2: 1, 3: 1}), {0: "a", 1: "a", 2: "b", 3: "b"}, gws(("a", 1, X), ("b", 1, A)), pins={0: "a"})
    plan = plan_rebalance(inp, PPS_ONLY)
    assert [(m.bucket, m.reason) for m in plan.moves] == [(1, MoveReason.DRAIN)]


def test_pinned_bucket_of_dead_gateway_fails_over_and_comes_back() -> None:
    g_dead = gws(("a", 1, D), ("b", 1, A))
    inp = RebalanceInput(2, rates({0: 5, 1: 5}), {0: "a", 1: "b"}, g_dead, pins={0: "a"})
    plan = plan_rebalance(inp, PPS_ONLY)
    assert [(m.bucket, m.dst, m.reason) for m in plan.moves] == [(0, "b", MoveReason.FAILOVER)]
    back = RebalanceInput(2, inp.rates, apply_plan(inp.assignment, plan), gws(("a", 1, R), ("b", 1, A)), pins={0: "a"})
    plan2 = plan_rebalance(back, PPS_ONLY)
    assert (0, "a", MoveReason.PIN) in [(m.bucket, m.dst, m.reason) for m in plan2.moves]


def test_recovering_gateway_refilled_gradually() -> None:
    k = 64
    inp = RebalanceInput(k, rates({b: 1.0 for b in range(k)}), {b: "a" if b % 2 else "b" for b in range(k)}, gws(("a", 1, A), ("b", 1, A), ("c", 1, R)))
    params = RebalanceParams(byte_cost=0.0, move_budget=64, refill_budget=4)
    plan = plan_rebalance(inp, params)
    assert len(plan.moves) == 4 and all(m.reason is MoveReason.REFILL and m.dst == "c" for m in plan.moves)


def test_recovering_gateway_gets_its_idle_share_back_at_once() -> None:
    """An idle system: no load moves at all, yet the recovered gateway gets floor(K x w / W)."""
    k = 256
    assign = {b: "a" if b % 2 else "b" for b in range(k)}  # c failed over: a and b hold 128 each
    inp = RebalanceInput(k, {}, assign, gws(("a", 1, A), ("b", 1, A), ("c", 1, R)))
    plan = plan_rebalance(inp, RebalanceParams(refill_budget=4))
    after = apply_plan(assign, plan)
    counts = {n: sum(1 for g in after.values() if g == n) for n in "abc"}
    assert counts["c"] == 85 and sorted((counts["a"], counts["b"])) == [85, 86]
    assert all(m.reason is MoveReason.REFILL and m.dst == "c" and m.cost == 0 for m in plan.moves)
    assert plan.budgeted_moves == 0  # idle buckets do not spend the refill budget
    # Weighted: c has weight 2 of 4, so half of K.
    inp2 = RebalanceInput(k, {}, assign, gws(("a", 1, A), ("b", 1, A), ("c", 2, R)))
    after2 = apply_plan(assign, plan_rebalance(inp2, RebalanceParams()))
    assert sum(1 for g in after2.values() if g == "c") == 128
    # Hot buckets still come back paced by the refill budget; pinned ones never move.
    hot = rates({b: 5.0 for b in range(0, k, 8)})
    inp3 = RebalanceInput(k, hot, assign, gws(("a", 1, A), ("b", 1, A), ("c", 1, R)), pins={1: "a"})
    plan3 = plan_rebalance(inp3, RebalanceParams(byte_cost=0.0, refill_budget=4))
    assert sum(1 for m in plan3.moves if m.cost > 0 and m.reason is MoveReason.REFILL) <= 4
    assert all(m.bucket != 1 for m in plan3.moves)
    assert sum(1 for m in plan3.moves if m.dst == "c") == 85
    # An alive gateway (no longer recovering) is left alone on an idle system.
    assert plan_rebalance(RebalanceInput(k, {}, assign, gws(("a", 1, A), ("b", 1, A), ("c", 1, A))), RebalanceParams()).moves == ()


def test_unassigned_and_unknown_gateway_buckets_get_assigned() -> None:
    inp = RebalanceInput(4, rates({0: 1, 1: 1}), {0: "ghost"}, gws(("a", 1, A), ("b", 1, A)))
    plan = plan_rebalance(inp, PPS_ONLY)
    assert {m.bucket for m in plan.moves} == {0, 1, 2, 3}
    assert all(m.reason is MoveReason.UNASSIGNED and m.src is None for m in plan.moves)


def test_cpu_ceiling_skips_hot_destination_and_warns() -> None:
    g = [GatewayInput("a"), GatewayInput("b", reported_cpu=0.95), GatewayInput("c", reported_cpu=0.2)]
    inp = RebalanceInput(8, rates({b: 1.0 for b in range(8)}), {b: "a" for b in range(8)}, g)
    plan = plan_rebalance(inp, PPS_ONLY)
    assert plan.moves and all(m.dst == "c" for m in plan.moves)
    assert any("'b' reports cpu" in w for w in plan.warnings)


def test_no_eligible_gateway_warns_and_moves_nothing() -> None:
    inp = RebalanceInput(2, rates({0: 1}), {0: "a"}, gws(("a", 1, D), ("b", 1, X)))
    plan = plan_rebalance(inp, PPS_ONLY)
    assert plan.moves == () and "no eligible gateway" in plan.warnings[0]


def test_infeasible_single_elephant_stops_with_warning() -> None:
    inp = RebalanceInput(4, rates({0: 100, 1: 1}), {0: "a", 1: "a"}, gws(("a", 1, A), ("b", 1, A)))
    plan = plan_rebalance(inp, PPS_ONLY)
    # moving the mouse would lower max/mean 2.00 -> 1.98: less than the hysteresis, so not worth a move
    assert not [m for m in plan.moves if m.reason is MoveReason.REBALANCE]
    assert plan.ratio_after == plan.ratio_before
    assert any("no load move improves" in w for w in plan.warnings)
    assert any("less than the hysteresis" in w for w in plan.warnings)


def test_whole_buckets_as_even_as_they_get_are_not_reshuffled_on_noise() -> None:
    # 16 loaded buckets at 6/5/5 (max/mean 1.125 > threshold 1.10, the best whole buckets
    # allow): counter noise makes one move lower the peak a little; the plan must not take it.
    # a 6.03, b 4.85, c 5.00: moving one of a's 1.0 buckets to b lowers the peak to 5.85
    noisy = {0: 1.03, **{b: 1.0 for b in range(1, 6)}, **{b: 0.97 for b in range(6, 11)}, **{b: 1.0 for b in range(11, 16)}}
    assignment = {b: ("a" if b < 6 else "b" if b < 11 else "c") for b in range(16)}
    inp = RebalanceInput(16, rates(noisy), assignment, gws(("a", 1, A), ("b", 1, A), ("c", 1, A)))
    plan = plan_rebalance(inp, PPS_ONLY)
    assert plan.ratio_before > 1.10
    assert plan.moves == ()
    # the same plan without noise far from even still moves (16/0/0 -> 6/5/5)
    inp = RebalanceInput(16, rates(noisy), {b: "a" for b in range(16)}, gws(("a", 1, A), ("b", 1, A), ("c", 1, A)))
    plan = plan_rebalance(inp, PPS_ONLY)
    assert sorted(Counter(apply_plan(inp.assignment, plan).values()).values()) == [5, 5, 6]


def test_bytes_count_with_byte_cost() -> None:
    r = {0: BucketRate(pps=100, bps=1_500_000), 1: BucketRate(pps=100, bps=6_400)}
    inp = RebalanceInput(2, r, {0: "a", 1: "b"}, gws(("a", 1, A), ("b", 1, A)))
    plan = plan_rebalance(inp, RebalanceParams())
    assert plan.load_before == {"a": pytest.approx(1600.0), "b": pytest.approx(106.4)}


@pytest.mark.parametrize(
    ("inp", "message"),
    [
        (RebalanceInput(0, {}, {}, gws(("a", 1, A))), "k must be >= 1"),
        (RebalanceInput(4, {}, {7: "a"}, gws(("a", 1, A))), "assignment: bucket 7 out of range 0..3"),
        (RebalanceInput(4, {-1: BucketRate()}, {}, gws(("a", 1, A))), "rates: bucket -1 out of range"),
        (RebalanceInput(4, {}, {}, gws(("a", 0, A))), "weight must be a finite number > 0"),
        (RebalanceInput(4, {}, {}, gws(("a", 1, A), ("a", 1, A))), "listed twice"),
        (RebalanceInput(4, {0: BucketRate(pps=-1)}, {}, gws(("a", 1, A))), "negative or non-finite"),
        (RebalanceInput(4, {0: BucketRate(pps=math.nan)}, {}, gws(("a", 1, A))), "negative or non-finite"),
    ],
)
def test_bad_input_is_a_clear_value_error(inp: RebalanceInput, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_rebalance(inp)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threshold": 0.9}, "threshold"),
        ({"threshold": 1.1, "target": 1.2}, "target"),
        ({"move_budget": -1}, "budget"),
        ({"byte_cost": -1.0}, "byte_cost"),
    ],
)
def test_bad_params(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RebalanceParams(**kwargs)  # type: ignore[arg-type]


def test_imbalance_helper() -> None:
    g = gws(("a", 1, A), ("b", 1, A), ("c", 1, D))
    assert imbalance({"a": 30, "b": 10, "c": 0}, g) == pytest.approx(1.5)
    assert imbalance({}, g) == 1.0


# ---------------------------------------------------------------- properties

NAMES = ["g0", "g1", "g2", "g3", "g4"]


@st.composite
def scenarios(draw: st.DrawFn, alive_only: bool = False) -> RebalanceInput:
    k = draw(st.sampled_from([4, 8, 16, 32, 64]))
    n = draw(st.integers(min_value=1, max_value=len(NAMES)))
    states = st.just(A) if alive_only else st.sampled_from([A, A, A, R, D, X])
    gateways = [
        GatewayInput(NAMES[i], draw(st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0])), draw(states),
                     draw(st.one_of(st.none(), st.floats(0.0, 1.0))) if not alive_only else None)
        for i in range(n)
    ]
    rate_values = st.one_of(st.just(0.0), st.floats(0.0, 1000.0, allow_nan=False), st.integers(0, 50).map(float))
    r = {b: BucketRate(pps=draw(rate_values)) for b in range(k) if draw(st.booleans())}
    choices = NAMES[:n] + ([] if alive_only else ["ghost"])
    assignment = {b: draw(st.sampled_from(choices)) for b in range(k) if alive_only or draw(st.integers(0, 9)) > 0}
    pins: dict[int, str] = {}
    if not alive_only:
        pins = draw(st.dictionaries(st.integers(0, k - 1), st.sampled_from(NAMES[:n]), max_size=3))
    return RebalanceInput(k, r, assignment, gateways, pins)


params_st = st.builds(
    RebalanceParams,
    threshold=st.sampled_from([1.05, 1.10, 1.25]),
    target=st.just(1.0),
    move_budget=st.integers(0, 16),
    refill_budget=st.integers(0, 8),
    byte_cost=st.just(0.0),
)


@settings(max_examples=100, deadline=None)
@given(scenarios(), params_st)
def test_prop_pinned_buckets_never_move_unless_pin_gateway_dead(inp: RebalanceInput, params: RebalanceParams) -> None:
    plan = plan_rebalance(inp, params)
    state = {g.name: g.state for g in inp.gateways}
    for m in plan.moves:
        pin = inp.pins.get(m.bucket)
        if pin is None:
            continue
        # allowed: onto its pin; or, while the pin's gateway cannot take it, a mandatory
        # move of a bucket that is not on its pinned gateway anyway
        mandatory = (MoveReason.FAILOVER, MoveReason.DRAIN, MoveReason.UNASSIGNED)
        assert (
            m.dst == pin
            or (m.src == pin and state[pin] is D and m.reason is MoveReason.FAILOVER)
            or (m.src != pin and state[pin] in (D, X) and m.reason in mandatory)
        ), m


@settings(max_examples=100, deadline=None)
@given(scenarios(), params_st)
def test_prop_never_assigns_to_dead_or_drained(inp: RebalanceInput, params: RebalanceParams) -> None:
    plan = plan_rebalance(inp, params)
    state = {g.name: g.state for g in inp.gateways}
    assert all(state[m.dst] in (A, R) for m in plan.moves)


@settings(max_examples=100, deadline=None)
@given(scenarios(), params_st)
def test_prop_load_moves_bounded_by_budget(inp: RebalanceInput, params: RebalanceParams) -> None:
    plan = plan_rebalance(inp, params)
    assert plan.budgeted_moves <= params.move_budget
    refills: dict[str, int] = {}
    for m in plan.moves:
        if m.reason is MoveReason.REFILL and m.cost > 0:  # idle buckets refill outside the budget
            refills[m.dst] = refills.get(m.dst, 0) + 1
    assert all(v <= params.refill_budget for v in refills.values())


@settings(max_examples=100, deadline=None)
@given(scenarios(), params_st)
def test_prop_deterministic_and_consistent(inp: RebalanceInput, params: RebalanceParams) -> None:
    p1, p2 = plan_rebalance(inp, params), plan_rebalance(inp, params)
    assert p1 == p2
    # each bucket moves at most once per round, and load_after matches the moves
    assert len({m.bucket for m in p1.moves}) == len(p1.moves)
    after = apply_plan(inp.assignment, p1)
    expect = {g.name: 0.0 for g in inp.gateways}
    for b, g in after.items():
        if g in expect:
            expect[g] += inp.rates.get(b, BucketRate()).pps
    assert p1.load_after == pytest.approx(expect)


@settings(max_examples=100, deadline=None)
@given(scenarios(alive_only=True), params_st)
def test_prop_balanced_input_produces_no_moves(inp: RebalanceInput, params: RebalanceParams) -> None:
    plan = plan_rebalance(inp, params)
    if plan.ratio_before <= params.threshold:
        assert plan.moves == ()


@st.composite
def feasible_scenarios(draw: st.DrawFn) -> RebalanceInput:
    """Many small buckets next to a fair share, so max/mean <= 1.10 is reachable."""
    k = draw(st.sampled_from([256, 1024]))
    n = draw(st.integers(2, 5))
    gateways = [GatewayInput(NAMES[i], draw(st.sampled_from([1.0, 2.0, 3.0]))) for i in range(n)]
    values = draw(st.lists(st.integers(0, 3), min_size=k, max_size=k))
    one = draw(st.booleans())
    assignment = {b: (NAMES[0] if one else draw(st.sampled_from(NAMES[:n]))) for b in range(k)}
    return RebalanceInput(k, {b: BucketRate(pps=float(v)) for b, v in enumerate(values)}, assignment, gateways)


@settings(max_examples=40, deadline=None)
@given(feasible_scenarios(), st.integers(16, 64))
def test_prop_converges_when_feasible(inp: RebalanceInput, budget: int) -> None:
    params = RebalanceParams(threshold=1.10, target=1.05, move_budget=budget, byte_cost=0.0)
    total = sum(r.pps for r in inp.rates.values())
    mean_share = total / sum(g.weight for g in inp.gateways)
    if mean_share < 3.0 * 20:  # keep each bucket <= 5 % of a fair share
        return
    nonzero = sum(1 for r in inp.rates.values() if r.pps > 0)
    final, plans = run_rounds(inp, params, nonzero // budget + 2)
    loads = {g.name: 0.0 for g in inp.gateways}
    for b, g in final.items():
        loads[g] += inp.rates[b].pps
    assert imbalance(loads, inp.gateways) <= params.threshold + 1e-9, (len(plans), plans[-1].warnings)
    # convergence stays quiet: once balanced, the next round plans nothing
    assert plan_rebalance(RebalanceInput(inp.k, inp.rates, final, inp.gateways), params).moves == ()


def test_hot_first_splits_failover_by_traffic() -> None:
    inp = RebalanceInput(8, rates({0: 5.0, 5: 1.0}), {b: "a" for b in range(8)}, gws(("a", 1, D), ("b", 1, A)))
    hot, cold = hot_first(plan_rebalance(inp, PPS_ONLY).moves)
    assert [m.bucket for m in hot] == [0, 5] and all(m.cost > 0 for m in hot)
    assert sorted(m.bucket for m in cold) == [1, 2, 3, 4, 6, 7]


def test_idle_buckets_of_a_dead_gateway_spread_by_weight() -> None:
    k = 64
    inp = RebalanceInput(k, rates({0: 10.0}), {b: "a" for b in range(k)}, gws(("a", 1, D), ("b", 1, A), ("c", 2, A)))
    after = apply_plan(inp.assignment, plan_rebalance(inp, PPS_ONLY))
    counts = {g: sum(1 for v in after.values() if v == g) for g in ("b", "c")}
    assert abs(counts["c"] - 2 * counts["b"]) <= 3, counts


@settings(max_examples=300, deadline=None)
@given(
    costs=st.lists(st.one_of(st.integers(1, 20).map(float), st.floats(0.001, 500.0)), min_size=1, max_size=40),
    other=st.floats(0.0, 300.0),
    ws=st.sampled_from([0.5, 1.0, 2.0]),
    wd=st.sampled_from([0.5, 1.0, 3.0]),
)
def test_bisect_best_bucket_equals_brute_force(costs: list[float], other: float, ws: float, wd: float) -> None:
    """The bisection in _best_bucket picks exactly what a scan over all buckets would."""
    from supergw_controller.rebalancer import _Planner

    k = len(costs) + 1
    inp = RebalanceInput(k, {b: BucketRate(pps=c) for b, c in enumerate(costs)} | {k - 1: BucketRate(pps=other)},
                         {b: "s" for b in range(len(costs))} | {k - 1: "d"},
                         [GatewayInput("s", ws), GatewayInput("d", wd)])
    planner = _Planner(inp, PPS_ONLY, {g.name: g for g in inp.gateways})
    mean = planner.total / (ws + wd)
    movable = sorted((c, b) for b, c in enumerate(costs))
    ls, ld = planner.loads["s"], planner.loads["d"]
    peak, ideal = ls / ws, min(ls - mean * ws, mean * wd - ld)
    brute = min(
        ((abs(c - ideal), -c, b) for b, c in enumerate(costs) if max((ls - c) / ws, (ld + c) / wd) < peak * (1 - 1e-12)),
        default=None,
    )
    assert planner._best_bucket("s", "d", movable, mean) == (None if brute is None else brute[2])


def test_subnormal_total_load_is_treated_as_no_load() -> None:
    """Found by hypothesis: a subnormal rate divided by the weights underflows to a zero mean."""
    inp = RebalanceInput(
        k=8,
        rates={7: BucketRate(pps=5e-324, bps=0.0)},
        assignment={},
        gateways=gws(("g0", 0.5, A), ("g1", 0.5, A), ("g2", 0.5, A), ("g3", 0.5, A)),
        pins={},
    )
    params = RebalanceParams(threshold=1.05, target=1.0, move_budget=0, refill_budget=0, packet_cost=1.0, byte_cost=0.0)
    plan = plan_rebalance(inp, params)
    assert plan == plan_rebalance(inp, params)
    assert imbalance({"g0": 5e-324}, inp.gateways) == 1.0
