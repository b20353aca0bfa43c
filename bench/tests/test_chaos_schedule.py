"""bench/chaos's seeded fault schedule: replayable, within its bounds, never two faults of
one exclusive group at once, and overlaps included."""

from __future__ import annotations

import pytest

from bench.chaos.__main__ import main
from bench.chaos.schedule import EXCLUSIVE, KINDS, ScheduleError, Shape, build, counts

SHAPE = Shape(gateways=3, replicas=("c1", "c2", "c3"))


def test_same_seed_same_schedule() -> None:
    assert build(42, 30, SHAPE) == build(42, 30, SHAPE)
    assert build(42, 30, SHAPE) != build(43, 30, SHAPE)


def test_spacing_and_length() -> None:
    faults = build(7, 30, SHAPE)
    mains = [f for f in faults if f.within is None]
    gaps = [b.at_s - a.at_s for a, b in zip(mains, mains[1:])]
    assert gaps and all(20 <= g for g in gaps)
    assert all(f.at_s < 30 * 60 for f in faults)
    # 30 min at one fault every 20-60 s: about 45 main faults, never fewer than 30 (a skipped draw is rare)
    assert 30 <= len(mains) <= 90


def test_every_kind_appears_over_a_long_run_and_overlaps_exist() -> None:
    faults = build(1, 120, SHAPE)
    assert set(counts(faults)) == set(KINDS)
    companions = [f for f in faults if f.within is not None]
    assert companions
    by_seq = {f.seq: f for f in faults}
    for c in companions:
        main = by_seq[c.within]  # type: ignore[index]
        assert main.at_s <= c.at_s <= main.at_s + max(main.duration_s, 1.0)


@pytest.mark.parametrize("seed", range(20))
def test_no_two_faults_of_an_exclusive_group_overlap(seed: int) -> None:
    faults = build(seed, 30, SHAPE)
    for i, f in enumerate(faults):
        for g in faults[i + 1:]:
            if f.group == g.group and f.group in EXCLUSIVE:
                (a0, a1), (b0, b1) = f.window(), g.window()
                assert a1 <= b0 or b1 <= a0, f"{f.describe()} overlaps {g.describe()}"


def test_targets_fit_the_shape() -> None:
    for f in build(5, 120, SHAPE):
        kind = KINDS[f.kind]
        lo, hi = kind.duration_s
        assert lo <= f.duration_s <= hi
        if kind.group == "gateway":
            assert f.target in {f"{s}gw{i}" for s in "ab" for i in (1, 2, 3)} and f.target[0] == f.site
        if kind.group == "controller":
            assert f.site == "a"
            assert f.target in ("leader", "backup0", "backup1", *SHAPE.replicas)
        if f.kind == "wan_loss":
            assert 5 <= f.param <= 20
        if f.kind == "rebalance_storm":
            assert 20 <= f.param <= 60


def test_kinds_filter_and_bad_arguments() -> None:
    assert set(counts(build(3, 30, SHAPE, ["gateway_freeze"]))) == {"gateway_freeze"}
    with pytest.raises(ScheduleError, match="unknown fault kinds"):
        build(3, 30, SHAPE, ["gateway_melt"])
    with pytest.raises(ScheduleError, match="replicated controllers"):
        build(3, 30, Shape(3, ("c1",)), ["leader_kill"])
    with pytest.raises(ScheduleError, match="bad schedule arguments"):
        build(3, 0, SHAPE)


def test_plan_prints_the_same_schedule_for_the_same_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--plan", "--seed", "9", "--minutes", "5"]) == 0
    first = capsys.readouterr().out
    assert main(["--plan", "--seed", "9", "--minutes", "5"]) == 0
    assert capsys.readouterr().out == first
    assert "seed 9" in first and "#0 " in first
    assert main(["--plan", "--kinds", "nope"]) == 2
