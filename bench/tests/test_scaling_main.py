"""bench/scaling's command line and Fig. 5's verdicts (no emulation): every bad option is refused
with a message naming it, and a Fig. 5 run with a move of another reason is reported invalid."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scaling import fig5
from bench.scaling.__main__ import parse
from bench.scaling.fig5 import GREEDY, PAPER, Fig5Results, Run
from bench.scaling.redistribution import MoveRecord, Snapshot
from bench.scaling.settings import BIG_FRAME, DEFAULT_SUITE, OTHER_SUITE, PAPER_K, boot_changes


def test_defaults_are_the_full_run_and_quick_is_small() -> None:
    full = parse([])
    assert full.ns == [1, 2, 3, 4] and full.frames == [1408, 64] and full.suites == [DEFAULT_SUITE, OTHER_SUITE]
    assert full.trials >= 3 and full.fig5_seeds == [1, 2, 3] and full.fig5_paper_s >= 300 and full.soak_s == 600
    quick = parse(["--quick"])
    assert quick.ns == [1, 3] and quick.frames == [BIG_FRAME] and quick.suites == [DEFAULT_SUITE] and quick.quick
    assert quick.fig5_seeds == [1] and quick.soak_s == 30


@pytest.mark.parametrize(("argv", "match"), [
    (["--gateways", "5"], "N is 1..4"),
    (["--quota", "0"], "--quota"),
    (["--quota", "150"], "--quota"),
    (["--trials", "0"], "--trials"),
    (["--control-trials", "-1"], "--control-trials"),
    (["--skew", "1"], "--skew"),
    (["--fig5-load", "1.5"], "--fig5-load"),
    (["--soak-s", "-3"], "--soak-s"),
    (["--no-fig4"], "--t3-pps"),
    (["--no-fig4", "--t3-pps", "-5"], "--t3-pps"),
    (["--topology", "/nonexistent/two-site.yaml"], "not a file"),
    (["--suites", "des"], "invalid choice"),
])
def test_bad_options_are_refused_naming_the_option(argv: list[str], match: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    assert match in capsys.readouterr().err


def test_every_boot_is_uml_gateways_under_the_quota_in_the_papers_regime() -> None:
    s = parse(["--quota", "12"])
    boot = boot_changes(s, 3, OTHER_SUITE, {"policy": "paper"})
    assert boot["gateway_backend"] == "uml" and boot["gateway_cpu_percent"] == 12 and boot["gateways"] == 3
    assert boot["buckets"] == PAPER_K == 256 and boot["dispatch"] == {"hash": "identity", "partition_period": 256}
    assert boot["simulated_hosts"]["mac_step"] == 1 and boot["esp_proposals"] == [OTHER_SUITE]
    assert "esp_proposals" not in boot_changes(s, 1, DEFAULT_SUITE, {})
    from topologies.schema import load

    site = load(s.base, changes=boot).sites[0]  # the topology takes every key
    assert site.gateway_backend == "uml" and site.lan.buckets == 256 and site.controller.rebalancer is not None


def test_a_topology_without_simulated_hosts_is_refused(tmp_path: Path) -> None:
    import yaml

    from bench.scaling.emulation import BenchError

    s = parse([])
    data = yaml.safe_load(s.base.read_text())
    data.pop("simulated_hosts")
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump(data))
    with pytest.raises(BenchError, match="no simulated_hosts"):
        boot_changes(parse(["--topology", str(bare)]), 1, DEFAULT_SUITE, {})


def second(t: float, delivered: float, *moves: MoveRecord) -> Snapshot:
    return Snapshot(t_s=t, offered_pps=1000.0, delivered_pps=delivered, loss=max(0.0, 1 - delivered / 1000),
                    sites={"a": ["agw1", "agw2", "agw3"]},
                    loaded_buckets={"agw1": 75, "agw2": 75, "agw3": 74}, moves=moves)


def test_fig5_reports_both_criteria_and_an_invalid_run_says_so() -> None:
    ok = Run(PAPER, 1, 1000.0, {}, [second(t, 1000.0 if t > 2 else 500.0,
                                          MoveRecord(t - 0.5, "a", 30, "agw1", "agw2", "paper-rebalance", True))
                                   for t in range(1, 8)])
    failed_over = MoveRecord(3.2, "b", 40, "bgw1", "bgw2", "failover", True)
    bad = Run(PAPER, 2, 1000.0, {}, [second(t, 1000.0, *((failed_over,) if t == 3 else ())) for t in range(1, 8)])
    greedy = Run(GREEDY, None, 1000.0, {}, [second(t, 1000.0) for t in range(1, 6)])
    res = Fig5Results([ok, bad, greedy])
    m = fig5.metrics(res)
    assert m["fig5_paper_offered_reached_s_seed1"].value == 3.0
    assert m["fig5_paper_bucket_spread_s_seed1"].value == 3.0
    assert m["fig5_paper_offered_reached_s_seed2"].note.startswith("INVALID")
    assert "failover" in m["fig5_paper_offered_reached_s_seed2"].note
    assert m["redistribution_paper_policy_s"].value == 3.0  # the valid run only
    assert "ours" in m["redistribution_s"].note and m["redistribution_s"].value == 1.0
    problems = fig5.failures(res)
    assert len(problems) == 1 and "paper-seed2" in problems[0] and "failover" in problems[0]
    rows = fig5.snapshot_rows(Run(PAPER, 1, 1000.0, {}, ok.snapshots, [{"agw1": 1.0}] * 7, [{"agw1": 900.0}] * 7))
    assert rows[0]["moves"] == ["t=0.5s site a bucket 30 agw1 -> agw2 (paper-rebalance, loaded)"]
    assert rows[2]["delivers_offered"] and not rows[0]["delivers_offered"]
    assert rows[0]["reported_load"] == {"agw1": 1.0} and rows[0]["dispatched_pps"] == {"agw1": 900.0}
