"""The paper's Algorithm 5 (`rebalancer.policy: paper`): the ring round, its convergence and its config."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from supergw_controller.compose import ControllerCore
from supergw_controller.config import ConfigError, RebalancePolicy, parse_config
from supergw_controller.rebalancer import (
    BucketRate,
    GatewayInput,
    GatewayState,
    MoveReason,
    PaperParams,
    Plan,
    RebalanceInput,
    RebalanceParams,
    apply_plan,
    plan_paper,
)

from corekit import TWO_QUIET, RecordingSession, config_data

PPS_ONLY = RebalanceParams(byte_cost=0.0)


def ring(*cpus: float | None, states: Mapping[str, GatewayState] | None = None,
         weights: Mapping[str, float] | None = None) -> list[GatewayInput]:
    """g1, g2, ... in ring order with these CPU loads (None: no report yet)."""
    names = [f"g{i + 1}" for i in range(len(cpus))]
    return [
        GatewayInput(n, weight=(weights or {}).get(n, 1.0), state=(states or {}).get(n, GatewayState.ALIVE),
                     reported_cpu=c)
        for n, c in zip(names, cpus)
    ]


def each_owns(gateways: Sequence[GatewayInput], per_gateway: int = 8) -> dict[int, str]:
    """Buckets 0..per_gateway-1 on the first gateway, the next ones on the second, ..."""
    return {i * per_gateway + j: g.name for i, g in enumerate(gateways) for j in range(per_gateway)}


def one_round(gateways: Sequence[GatewayInput], assignment: Mapping[int, str] | None = None, *,
              params: PaperParams | None = None, seed: int = 0, pins: Mapping[int, str] | None = None,
              rates: Mapping[int, BucketRate] | None = None) -> Plan:
    assignment = dict(assignment if assignment is not None else each_owns(gateways))
    inp = RebalanceInput(k=max(assignment) + 1, rates=dict(rates or {}), assignment=assignment,
                         gateways=list(gateways), pins=dict(pins or {}))
    return plan_paper(inp, params or PaperParams(), random.Random(seed), PPS_ONLY)


def pairs(plan: Plan) -> dict[tuple[str | None, str], int]:
    out: dict[tuple[str | None, str], int] = {}
    for m in plan.moves:
        out[(m.src, m.dst)] = out.get((m.src, m.dst), 0) + 1
    return out


def test_each_gateway_compares_with_its_successor_only() -> None:
    # g3 is the coolest by far, but it is not g1's successor; g1 and g2 are within L_D
    plan = one_round(ring(0.90, 0.85, 0.0))
    assert pairs(plan) == {("g2", "g3"): 4}
    assert all(m.reason is MoveReason.PAPER for m in plan.moves)


def test_the_last_gateways_successor_is_the_first() -> None:
    plan = one_round(ring(0.2, 0.2, 0.9))
    assert pairs(plan) == {("g3", "g1"): 4}


def test_two_gateways_are_each_others_successor() -> None:
    assert pairs(one_round(ring(0.1, 0.8))) == {("g2", "g1"): 4}
    assert pairs(one_round(ring(0.8, 0.1))) == {("g1", "g2"): 4}
    assert one_round(ring(0.8)).moves == ()  # its own successor: nothing to compare


def test_load_difference_is_strict() -> None:
    # 0.75 - 0.5 = 0.25 exactly in binary floating point
    assert one_round(ring(0.75, 0.5), params=PaperParams(load_difference=0.25)).moves == ()
    assert len(one_round(ring(0.75, 0.5), params=PaperParams(load_difference=0.2499)).moves) == 4
    assert one_round(ring(0.59, 0.5)).moves == ()  # 9 points: within the paper's L_D of 10 %
    assert len(one_round(ring(0.61, 0.5)).moves) == 4


def test_w_is_drawn_from_the_sources_own_buckets_loaded_or_not() -> None:
    gws = ring(0.9, 0.1)
    assignment = each_owns(gws)  # g1: 0..7, g2: 8..15
    rates = {0: BucketRate(pps=100.0), 8: BucketRate(pps=100.0)}  # one loaded bucket each
    chosen: set[int] = set()
    for seed in range(20):
        plan = one_round(gws, assignment, rates=rates, seed=seed)
        assert len(plan.moves) == 4
        assert {m.src for m in plan.moves} == {"g1"} and {m.dst for m in plan.moves} == {"g2"}
        chosen |= {m.bucket for m in plan.moves}
    assert chosen == set(range(8))  # every bucket of g1 drawn at some seed, idle ones included
    idle = one_round(gws, assignment, rates=rates, seed=0)
    assert any(m.cost == 0.0 for m in idle.moves)


def test_a_gateway_with_fewer_buckets_than_w_hands_over_all() -> None:
    gws = ring(0.9, 0.1)
    plan = one_round(gws, {0: "g1", 1: "g1", 2: "g2"})
    assert sorted(m.bucket for m in plan.moves) == [0, 1]
    assert one_round(gws, {0: "g2", 1: "g2"}).moves == ()  # g1 owns nothing: nothing to migrate


def test_at_most_one_migration_per_gateway_per_round_decided_on_the_rounds_start() -> None:
    gws = ring(1.0, 0.7, 0.4, 0.1)
    assignment = each_owns(gws)  # g1 0..7, g2 8..15, g3 16..23, g4 24..31
    plan = one_round(gws, assignment)
    # up to N migrations, one per source, each of |W| buckets to its successor
    assert pairs(plan) == {("g1", "g2"): 4, ("g2", "g3"): 4, ("g3", "g4"): 4}
    # what g2 passes on is its own (from V_2 at the round's start), not what g1 just gave it
    for m in plan.moves:
        assert assignment[m.bucket] == m.src
    assert len({m.bucket for m in plan.moves}) == len(plan.moves)


def test_same_seed_same_round_other_seed_other_choice() -> None:
    def chosen(seed: int) -> list[tuple[int, str]]:
        return [(m.bucket, m.dst) for m in one_round(ring(1.0, 0.5, 0.0), seed=seed).moves]

    assert chosen(1) == chosen(1)
    assert len({tuple(chosen(s)) for s in range(10)}) > 1


def test_pinned_buckets_never_move() -> None:
    gws = ring(0.9, 0.1)
    assignment = each_owns(gws)
    pins = {b: "g1" for b in range(5)}  # g1 keeps 0..4 whatever its load
    for seed in range(20):
        plan = one_round(gws, assignment, pins=pins, seed=seed)
        assert sorted(m.bucket for m in plan.moves) == [5, 6, 7]


def test_drained_and_dead_gateways_are_not_in_the_ring() -> None:
    for state in (GatewayState.DRAINED, GatewayState.DEAD):
        gws = ring(0.9, 0.0, 0.5, states={"g2": state})
        plan = one_round(gws)
        paper = [m for m in plan.moves if m.reason is MoveReason.PAPER]
        # g1's successor is g3 now; nothing migrates into or out of g2 by the ring
        assert {(m.src, m.dst) for m in paper} == {("g1", "g3")} and len(paper) == 4
        # g2's own buckets leave by the mandatory moves, as with the shipped policy
        expected = MoveReason.DRAIN if state is GatewayState.DRAINED else MoveReason.FAILOVER
        assert {m.bucket for m in plan.moves if m.reason is expected} == set(range(8, 16))


def test_a_recovering_gateway_is_in_the_ring() -> None:
    plan = one_round(ring(0.9, 0.0, 0.5, states={"g2": GatewayState.RECOVERING}))
    assert ("g1", "g2") in pairs(plan)


def test_no_decision_without_a_load_report() -> None:
    plan = one_round(ring(0.9, None, 0.0))
    # g1 -> g2 and g2 -> g3 lack g2's load; g3 -> g1 is a real comparison (no move)
    assert plan.moves == ()
    assert sum("no load report from 'g2'" in w for w in plan.warnings) == 2


def test_weight_scales_the_compared_load() -> None:
    # g1 may carry twice g2's share: 0.5 / 2 = 0.25 against 0.3 is no excess
    assert one_round(ring(0.5, 0.3, weights={"g1": 2.0})).moves == ()
    assert pairs(one_round(ring(0.5, 0.3))) == {("g1", "g2"): 4}


def test_failover_moves_are_unchanged_by_the_policy() -> None:
    gws = ring(None, 0.1, 0.1, states={"g1": GatewayState.DEAD})
    plan = one_round(gws, {0: "g1", 1: "g1", 2: "g2", 3: "g2", 4: "g3", 5: "g3"})
    assert plan.failover
    assert sorted(m.bucket for m in plan.moves if m.reason is MoveReason.FAILOVER) == [0, 1]


def test_bad_paper_params() -> None:
    with pytest.raises(ValueError, match="move_size"):
        PaperParams(move_size=0)
    with pytest.raises(ValueError, match="load_difference"):
        PaperParams(load_difference=float("nan"))


# ---------------------------------------------------------------- §4.3: every flow on gateway 1

K, HOSTS, OFFERED = 256, 224, 2.7  # offered load: 90 % of three gateways' capacity


def cpu_loads(assignment: Mapping[int, str]) -> dict[str, float]:
    """A gateway's CPU load as its agent would report it: its hosts' demand, saturating at
    100 % as the paper's first gateway did (every host offers the same load)."""
    demand = {"g1": 0.0, "g2": 0.0, "g3": 0.0}
    for b in range(HOSTS):
        demand[assignment[b]] += OFFERED / HOSTS
    return {g: min(1.0, d) for g, d in demand.items()}


def test_every_flow_on_gateway_1_spreads_along_the_ring_until_every_pair_is_within_l_d() -> None:
    # buckets 0..223 carry one host each, all on g1; the 32 idle ones are spread
    assignment = {b: "g1" if b < HOSTS else ("g1", "g2", "g3")[b % 3] for b in range(K)}
    rates = {b: BucketRate(pps=100.0) for b in range(HOSTS)}
    rng, params = random.Random(17), PaperParams()
    first_load_on_g3: str | None = None
    for rounds in range(1, 500):
        loads = cpu_loads(assignment)
        gateways = [GatewayInput(g, reported_cpu=loads[g]) for g in ("g1", "g2", "g3")]
        plan = plan_paper(RebalanceInput(k=K, rates=rates, assignment=assignment, gateways=gateways), params, rng,
                          PPS_ONLY)
        if rounds == 1:  # g2 and g3 are level at 0: only g1 hands over
            assert pairs(plan) == {("g1", "g2"): 4}
        assert set(pairs(plan)) <= {("g1", "g2"), ("g2", "g3"), ("g3", "g1")}
        if first_load_on_g3 is None:
            first_load_on_g3 = next((m.src for m in plan.moves if m.dst == "g3" and m.cost > 0), None)
        if not plan.moves:
            break
        assignment = apply_plan(assignment, plan)
    else:
        pytest.fail("no steady state after 500 rounds")
    assert first_load_on_g3 == "g2"  # the ring carries the load g1 -> g2 -> g3
    loads = cpu_loads(assignment)
    for g, s in (("g1", "g2"), ("g2", "g3"), ("g3", "g1")):
        assert loads[g] - loads[s] <= params.load_difference
    assert max(loads.values()) < 1.0  # no gateway saturated: the paper's end of frame loss
    # g1 had to shed at least 2/3 of its hosts less L_D's worth, at most |W| a round
    shed = HOSTS * (2 / 3) - params.load_difference * HOSTS / OFFERED
    assert rounds >= math.ceil(shed / params.move_size)


# ---------------------------------------------------------------- the controller's config

def config(tmp_path: Path, rebalancer: Any, **over: Any) -> dict[str, Any]:
    """Two gateways without heartbeats, K = 16, and this `rebalancer` section."""
    return config_data(**{**TWO_QUIET, **over}, rebalancer=rebalancer)


def test_config_defaults_are_todays_policy_and_the_papers_values(tmp_path: Path) -> None:
    cfg = parse_config(config(tmp_path, {}), tmp_path)
    assert cfg.rebalancer.policy is RebalancePolicy.SUPERGW
    paper = cfg.rebalancer.paper
    assert (paper.load_window_s, paper.interval_s, paper.load_difference, paper.move_size) == (1.33, 4.0, 0.10, 4)


def test_under_the_paper_policy_agents_report_every_t_l(tmp_path: Path) -> None:
    shipped = parse_config(config(tmp_path, {}, timing={"report_interval_ms": 250}), tmp_path)
    assert shipped.agent_timing().report_interval_ms == 250
    paper = parse_config(config(tmp_path, {"policy": "paper"}, timing={"report_interval_ms": 250}), tmp_path)
    assert paper.agent_timing().report_interval_ms == 1330
    assert paper.agent_timing().heartbeat_interval_ms == paper.timing.heartbeat_interval_ms
    other = parse_config(config(tmp_path, {"policy": "paper", "paper": {"load_window_s": 0.5}}), tmp_path)
    assert other.agent_timing().report_interval_ms == 500


async def test_placement_runs_the_ring_in_config_order(tmp_path: Path) -> None:
    gateways = [
        {"name": "g3", "port": 13, "mac": "52:54:00:00:01:03", "heartbeat": False},
        {"name": "g1", "port": 11, "mac": "52:54:00:00:01:01", "heartbeat": False},
        {"name": "g2", "port": 12, "mac": "52:54:00:00:01:02", "heartbeat": False},
    ]
    data = config_data(gateways=gateways, rebalancer={"policy": "paper", "paper": {"seed": 5, "move_size": 2}})
    core = ControllerCore(parse_config(data, tmp_path), heartbeat_udp=False, session=RecordingSession())
    await core.switch.set_buckets({b: ("g3", "g1", "g2")[b % 3] for b in range(16)})
    for name, cpu in (("g3", 0.9), ("g1", 0.1), ("g2", 0.1)):
        core.registry.get(name).reported_cpu = cpu
    plan = core.placement.plan()
    # the ring is g3 -> g1 -> g2 -> g3: g3's successor is g1, although g2 is as cool
    assert pairs(plan) == {("g3", "g1"): 2}
    assert all(m.reason is MoveReason.PAPER for m in plan.moves)


@pytest.mark.parametrize(
    ("rebalancer", "expected"),
    [
        ({"policy": "fastest"}, "rebalancer.policy"),
        ({"policy": "paper-global"}, "rebalancer.policy"),
        ({"paper": {"move_size": 0}}, "rebalancer.paper.move_size"),
        ({"paper": {"load_window_s": 0}}, "rebalancer.paper.load_window_s"),
        ({"paper": {"interval_s": -4}}, "rebalancer.paper.interval_s"),
        ({"paper": {"load_difference": -0.1}}, "rebalancer.paper.load_difference"),
        ({"paper": {"load_difference": 10}}, "rebalancer.paper.load_difference"),  # 10 %, written as 10
        ({"paper": {"T_M": 4}}, "rebalancer.paper.T_M"),
    ],
)
def test_bad_policy_config_names_the_key(tmp_path: Path, rebalancer: Any, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected.replace(".", r"\.")):
        parse_config(config(tmp_path, rebalancer), tmp_path)


def test_ceiling_does_not_block_moves_when_the_source_is_as_hot() -> None:
    # 90 % of cluster capacity: every gateway reports cpu above the ceiling, the counters
    # show g1 far heavier; the shipped policy still moves load off g1
    from supergw_controller.rebalancer import plan_rebalance

    hot = [GatewayInput("g1", reported_cpu=1.0), GatewayInput("g2", reported_cpu=0.95), GatewayInput("g3", reported_cpu=0.93)]
    inp = RebalanceInput(k=64, rates={b: BucketRate(pps=10.0) for b in range(48)},
                         assignment={b: ("g1" if b < 32 else "g2" if b < 40 else "g3") for b in range(64)}, gateways=hot)
    plan = plan_rebalance(inp, PPS_ONLY)
    assert plan.moves and all(m.src == "g1" for m in plan.moves)
    assert plan.ratio_after <= 1.05
    # a cool source still keeps its load off a hot destination
    cool = [GatewayInput("g1", reported_cpu=0.5), GatewayInput("g2", reported_cpu=0.95), GatewayInput("g3", reported_cpu=0.2)]
    plan = plan_rebalance(RebalanceInput(k=64, rates=inp.rates, assignment=inp.assignment, gateways=cool), PPS_ONLY)
    assert plan.moves and {m.dst for m in plan.moves} == {"g3"}
