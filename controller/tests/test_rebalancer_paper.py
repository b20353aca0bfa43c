"""The paper's redistribution policy (`rebalancer.policy: paper`): the pure round and its config."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from supergw_controller.config import ConfigError, RebalancePolicy, parse_config
from supergw_controller.compose import ControllerCore
from supergw_controller.rebalancer import (
    BucketRate,
    GatewayInput,
    GatewayState,
    MoveReason,
    PaperParams,
    RebalanceInput,
    RebalanceParams,
    apply_plan,
    plan_paper,
)

from corekit import TWO_QUIET, RecordingSession, config_data

PPS_ONLY = RebalanceParams(byte_cost=0.0)
THREE = [GatewayInput("g1"), GatewayInput("g2"), GatewayInput("g3")]


def all_on_g1(k: int = 64, loaded: int = 48) -> RebalanceInput:
    return RebalanceInput(
        k=k,
        rates={b: BucketRate(pps=100.0) for b in range(loaded)},
        assignment={b: "g1" for b in range(k)},
        gateways=THREE,
    )


def difference(loads: dict[str, float]) -> float:
    mean = sum(loads.values()) / len(loads)
    return (max(loads.values()) - min(loads.values())) / mean


def test_moves_w_random_loaded_buckets_from_most_to_least_loaded() -> None:
    plan = plan_paper(all_on_g1(), PaperParams(), random.Random(7), PPS_ONLY)
    assert len(plan.moves) == 4
    assert {m.src for m in plan.moves} == {"g1"}
    assert {m.dst for m in plan.moves} == {"g2"}  # g2 and g3 tie at 0: the first name
    assert all(m.reason is MoveReason.PAPER and m.bucket < 48 and m.cost > 0 for m in plan.moves)
    assert plan.load_after["g2"] == pytest.approx(400.0)


def test_same_seed_same_choice_other_seed_other_choice() -> None:
    def chosen(seed: int) -> list[int]:
        return [m.bucket for m in plan_paper(all_on_g1(), PaperParams(), random.Random(seed), PPS_ONLY).moves]

    assert chosen(1) == chosen(1)
    assert len({tuple(chosen(s)) for s in range(10)}) > 1


def test_no_move_within_the_load_difference() -> None:
    # loads 105 / 100 / 100: (105 - 100) / 101.7 = 4.9 % < L_D = 10 %
    inp = RebalanceInput(
        k=3,
        rates={0: BucketRate(pps=105.0), 1: BucketRate(pps=100.0), 2: BucketRate(pps=100.0)},
        assignment={0: "g1", 1: "g2", 2: "g3"},
        gateways=THREE,
    )
    assert plan_paper(inp, PaperParams(), random.Random(0), PPS_ONLY).moves == ()
    assert len(plan_paper(inp, PaperParams(load_difference=0.04), random.Random(0), PPS_ONLY).moves) == 1


def test_pinned_and_idle_buckets_stay_and_fewer_than_w_move_all() -> None:
    inp = RebalanceInput(
        k=8,
        rates={0: BucketRate(pps=50.0), 1: BucketRate(pps=50.0)},
        assignment={b: "g1" for b in range(8)},
        gateways=THREE,
        pins={1: "g1"},
    )
    plan = plan_paper(inp, PaperParams(move_size=4), random.Random(3), PPS_ONLY)
    assert [(m.bucket, m.dst) for m in plan.moves] == [(0, "g2")]


def test_failover_moves_are_unchanged_by_the_policy() -> None:
    inp = RebalanceInput(
        k=6,
        rates={},
        assignment={0: "g1", 1: "g1", 2: "g2", 3: "g2", 4: "g3", 5: "g3"},
        gateways=[GatewayInput("g1", state=GatewayState.DEAD), GatewayInput("g2"), GatewayInput("g3")],
    )
    plan = plan_paper(inp, PaperParams(), random.Random(0), PPS_ONLY)
    assert plan.failover
    assert sorted(m.bucket for m in plan.moves if m.reason is MoveReason.FAILOVER) == [0, 1]


def test_rounds_converge_within_the_load_difference_and_then_stop() -> None:
    inp = all_on_g1(k=256, loaded=240)
    rng = random.Random(42)
    assignment = dict(inp.assignment)
    for rounds in range(1, 200):
        plan = plan_paper(
            RebalanceInput(k=inp.k, rates=inp.rates, assignment=assignment, gateways=THREE), PaperParams(), rng,
            PPS_ONLY,
        )
        if not plan.moves:
            break
        assert len(plan.moves) <= 4
        assignment = apply_plan(assignment, plan)
    else:
        pytest.fail("no balance after 200 rounds")
    # 160 of 240 loaded buckets had to leave g1 at 4 per round: the paper's slowness
    assert rounds >= 40
    assert difference(plan.load_after) <= 0.10


def test_bad_paper_params() -> None:
    with pytest.raises(ValueError, match="move_size"):
        PaperParams(move_size=0)
    with pytest.raises(ValueError, match="load_difference"):
        PaperParams(load_difference=float("nan"))


def config(tmp_path: Path, rebalancer: Any) -> dict[str, Any]:
    """Two gateways without heartbeats, K = 16, and this `rebalancer` section."""
    return config_data(**TWO_QUIET, rebalancer=rebalancer)


def test_config_defaults_are_todays_policy_and_the_papers_values(tmp_path: Path) -> None:
    cfg = parse_config(config(tmp_path, {}), tmp_path)
    assert cfg.rebalancer.policy is RebalancePolicy.SUPERGW
    paper = cfg.rebalancer.paper
    assert (paper.load_window_s, paper.interval_s, paper.load_difference, paper.move_size) == (1.33, 4.0, 0.10, 4)


async def test_placement_plans_with_the_configured_policy(tmp_path: Path) -> None:
    cfg = parse_config(config(tmp_path, {"policy": "paper", "paper": {"seed": 5, "move_size": 2}}), tmp_path)
    core = ControllerCore(cfg, heartbeat_udp=False, session=RecordingSession())
    await core.switch.set_buckets({b: "g1" for b in range(16)})
    core.stats.rates = {b: BucketRate(pps=10.0) for b in range(16)}
    plan = core.placement.plan()
    assert [m.reason for m in plan.moves] == [MoveReason.PAPER, MoveReason.PAPER]
    assert {m.dst for m in plan.moves} == {"g2"}


@pytest.mark.parametrize(
    ("rebalancer", "expected"),
    [
        ({"policy": "fastest"}, "rebalancer.policy"),
        ({"paper": {"move_size": 0}}, "rebalancer.paper.move_size"),
        ({"paper": {"load_window_s": 0}}, "rebalancer.paper.load_window_s"),
        ({"paper": {"interval_s": -4}}, "rebalancer.paper.interval_s"),
        ({"paper": {"load_difference": -0.1}}, "rebalancer.paper.load_difference"),
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
