"""The capacity-capped Fig. 4 series: the gateway cap's tc commands (topologies/shaping.py) and
each gateway's row at T(N) with the spreads of hosts and bytes (bench/scaling/__main__.py)."""

from __future__ import annotations

import json

import pytest

from bench.scaling.__main__ import (CAPACITY, CPU, Results, Settings, fig4_hosts, goal_note, per_gateway, ratio_bounds,
                                    ratio_metrics, spreads)
from bench.scaling.analysis import GatewayShare
from bench.scaling.emulation import BenchError, ProbeResult
from topologies.shaping import MAX_FRAME_BYTES, EgressCap, parse_root_qdisc, remove_argv, show_argv


def test_the_cap_is_a_packet_rate_whatever_the_packet_size() -> None:
    cap = EgressCap(1000)
    argv = cap.add_argv()
    assert argv[:7] == ["tc", "qdisc", "replace", "dev", "wan0", "root", "tbf"]
    opts = dict(zip(argv[7::2], argv[8::2]))
    assert opts["mpu"] == str(MAX_FRAME_BYTES) == "1514"
    # 1000 packets of at least 1514 bytes each: a 64-byte frame costs as much as a full one
    assert opts["rate"] == f"{1000 * 1514 * 8}bit"
    assert int(opts["burst"]) >= MAX_FRAME_BYTES  # never below one whole packet, or tbf drops every such packet
    assert opts["latency"] == "50ms"
    assert cap.add_argv("eth9")[4] == "eth9"
    assert "1000 packets/s" in cap.describe() and "mpu 1514" in cap.describe()


def test_the_cap_is_removed_with_the_root_qdisc() -> None:
    assert remove_argv() == ["tc", "qdisc", "del", "dev", "wan0", "root"]
    assert show_argv("wan0") == ["tc", "-s", "-j", "qdisc", "show", "dev", "wan0"]


@pytest.mark.parametrize("kwargs", [
    {"pps": 0}, {"pps": -5}, {"pps": float("nan")}, {"pps": float("inf")}, {"pps": 1e9},
    {"pps": 100, "packet_bytes": 10}, {"pps": 100, "burst_packets": 0}, {"pps": 100, "latency_ms": 0.1},
])
def test_a_cap_that_means_nothing_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        EgressCap(**kwargs)  # type: ignore[arg-type]


def test_the_root_qdisc_is_read_from_tc_json() -> None:
    out = json.dumps([{"kind": "tbf", "handle": "8001:", "root": True, "bytes": 121758, "packets": 2027, "drops": 12},
                      {"kind": "pfifo", "handle": "1:", "parent": "8001:", "packets": 3, "drops": 0}])
    q = parse_root_qdisc(out)
    assert (q.kind, q.packets, q.drops) == ("tbf", 2027, 12)
    assert parse_root_qdisc(json.dumps([{"kind": "noqueue", "root": True}])).kind == "noqueue"
    with pytest.raises(ValueError, match="no root qdisc"):
        parse_root_qdisc("[]")
    with pytest.raises(ValueError, match="no JSON"):
        parse_root_qdisc("Cannot find device")


def probe_result(shares: dict[str, GatewayShare] | None, drops: dict[str, int] | None) -> ProbeResult:
    return ProbeResult(rate_pps=3000, sent=12000, received=12000, loss=0.0, achieved_pps=3000, machine_cpu=90.0,
                       cpu={"agw1": 5.0, "agw2": 5.5, "bgw1": 4.0, "bgw2": 4.5}, shares=shares, cap_drops=drops)


def test_each_gateway_at_the_peak_and_the_spreads() -> None:
    shares = {"agw1": GatewayShare(1500, 16.9, 1500, 1480), "agw2": GatewayShare(1500, 16.9, 1500, 1520),
              "bgw1": GatewayShare(1000, 11.3, 1000, 1500), "bgw2": GatewayShare(2000, 22.5, 2000, 1500)}
    hosts = {"a": {"agw1": 112, "agw2": 112}, "b": {"bgw1": 100, "bgw2": 124}}
    rows = per_gateway(probe_result(shares, {"agw1": 0, "agw2": 3, "bgw1": 0, "bgw2": 0}), hosts)
    assert rows["agw2"] == {"hosts": 112, "dispatch_pps": 1500.0, "dispatch_mbps": 16.9, "esp_out_pps": 1500.0,
                            "esp_in_pps": 1520.0, "cap_drops": 3, "cpu_percent": 5.5}
    got = spreads(rows, {"a": ["agw1", "agw2"], "b": ["bgw1", "bgw2"]})
    assert got["hosts"] == pytest.approx(124 / 112, abs=1e-3)  # site b is the worse one
    assert got["dispatch_mbps"] == pytest.approx(22.5 / 16.9, abs=1e-3)
    assert got["esp_out_pps"] == pytest.approx(2000 / 1500, abs=1e-3)


def test_a_peak_without_accounting_leaves_the_byte_spread_unmeasured() -> None:
    rows = per_gateway(probe_result(None, None), {"a": {"agw1": 10, "agw2": 12}})
    assert rows["agw1"]["dispatch_pps"] is None and rows["agw1"]["hosts"] == 10
    got = spreads(rows, {"a": ["agw1", "agw2"]})
    assert got["hosts"] == pytest.approx(12 / 11, abs=1e-3) and got["dispatch_mbps"] is None
    assert per_gateway(None, {"a": {"agw1": 1}})["agw1"]["cpu_percent"] is None  # no rate passed at all


def fig4_row(series: str, n: int, pps: float, failing: float | None = None) -> dict[str, object]:
    return {"series": series, "suite": "gcm", "frame_bytes": 1408, "n": n, "pps": pps, "mbps": pps * 1408 * 8 / 1e6,
            "host_spread": 1.0, "byte_spread": 1.01, "lowest_failing_pps": failing}


def test_the_ratio_comes_with_the_bounds_the_searches_leave() -> None:
    res = Results(fig4=[fig4_row(CAPACITY, 1, 600, 624), fig4_row(CAPACITY, 3, 1800, 1872), fig4_row(CAPACITY, 4, 2400)])
    assert ratio_bounds(res, CAPACITY, 3) == pytest.approx((1800 / 624, 1872 / 600))
    assert "2.88 .. 3.12" in ratio_metrics(res, CAPACITY)["ratio_n3"].note
    assert ratio_bounds(res, CAPACITY, 4) is None  # no rate failed at N = 4: no upper bound
    assert ratio_bounds(res, CPU, 3) is None


def test_the_two_series_have_their_own_keys_and_only_the_capacity_one_has_goals() -> None:
    res = Results(fig4=[fig4_row(CAPACITY, 1, 1000), fig4_row(CAPACITY, 3, 2800), fig4_row(CAPACITY, 4, 3960),
                        fig4_row(CPU, 1, 2000), fig4_row(CPU, 3, 4700)])
    cap = ratio_metrics(res, CAPACITY)
    assert cap["ratio_n3"].value == pytest.approx(2.8) and cap["ratio_n3"].goal == 2.9
    assert "0.10 (3.4 %) short of the goal" in cap["ratio_n3"].note
    assert cap["ratio_n4"].value == pytest.approx(3.96) and "short" not in cap["ratio_n4"].note
    assert cap["ratio_n2"].value is None and "not measured" in cap["ratio_n2"].note
    assert cap["zero_loss_gcm_1408_n3_pps"].value == 2800 and cap["host_spread_n3"].value == 1.0
    cpu = ratio_metrics(res, CPU)
    assert cpu["cpu_capped_ratio_n3"].value == pytest.approx(2.35) and cpu["cpu_capped_ratio_n3"].goal is None
    assert "CPU-capped" in cpu["cpu_capped_ratio_n3"].note
    assert not set(cap) & set(cpu)
    assert goal_note(None, 2.9, "x") == "x: not measured" and goal_note(3.0, 2.9, "x") == "x"


def test_fig4_uses_the_files_hosts_with_one_bucket_each(tmp_path: object) -> None:
    from pathlib import Path

    from bench.scaling.__main__ import BASE_TOPOLOGY

    hosts = fig4_hosts(BASE_TOPOLOGY)
    assert hosts["mac_step"] == 1 and hosts["count"] == 224
    bare = Path(str(tmp_path)) / "bare.yaml"
    bare.write_text("kind: two-site\n")
    with pytest.raises(BenchError, match="no simulated_hosts"):
        fig4_hosts(bare)


def test_settings_has_both_series_by_default() -> None:
    from bench.scaling.__main__ import parse

    s: Settings = parse(["--quick"])
    assert s.series == [CAPACITY, CPU] and s.cap_pps == 600.0
    assert parse(["--series", "cpu"]).series == [CPU]
    with pytest.raises(SystemExit):
        parse(["--cap-pps", "0"])
