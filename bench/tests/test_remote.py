"""bench/remote without an emulation: iperf3's output read, and the report built from
recorded runs (metrics, ratio, failures) — rootless."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gaps import FlowGap
from bench.remote.__main__ import Plan, Results, report
from bench.remote.measure import DrainTrial, FailoverTrial, IkeRound, MoveSoak, TransferRun, received_bits_per_s
from supergw_gateway.ra.client import Followed


def test_iperf_receiver_rate_or_none() -> None:
    ok = json.dumps({"end": {"sum_received": {"bits_per_second": 123e6}, "sum_sent": {"bits_per_second": 9e9}}})
    assert received_bits_per_s(ok) == 123e6
    assert received_bits_per_s(json.dumps({"error": "unable to connect to server"})) is None
    assert received_bits_per_s(json.dumps({"end": {"sum_received": {"bits_per_second": 0}}})) is None
    assert received_bits_per_s("iperf3: error - control socket has closed unexpectedly") is None
    assert received_bits_per_s("[1, 2]") is None


def _flow(name: str, gap_ms: float, recovered: bool = True) -> FlowGap:
    return FlowGap(name, 600, 400, 0, 200, gap_ms, 0.0 if recovered else 30000.0, recovered,
                   None if recovered else "no answer after the fault")


def test_report_from_recorded_runs(tmp_path: Path) -> None:
    plan = Plan([1, 2], 4, [1, 4], 3.0, 1, 2, 1, 20, 15.0, True)
    res = Results()
    for n in (1, 2):
        res.transfers[n] = [TransferRun(m, c, 3.0, 100.0 * c, 100.0, 0.2 * c, 1.5, 0) for m in ("ipsec", "plain")
                            for c in (1, 4)]
    res.ike[1] = [IkeRound(4, 4, 2.0, 2.0, {"gw1": 4})]
    res.ike[2] = [IkeRound(4, 4, 1.0, 4.0, {"gw1": 2, "gw2": 2})]
    res.failovers.append(FailoverTrial("gw1", 2, [_flow("rw1 -> h1", 22000), _flow("rw3 -> h1", 30000, False)]))
    res.failures.append({"trial": "failover 1", "flow": "rw3 -> h1", "why": "no answer after the fault"})
    res.drains.append(DrainTrial("gw2", {"rw2": Followed(1.5, 0.4, 5), "rw4": Followed(2.5, 0.6, 8),
                                         "rw6": Followed(None, 60.0, 90)}))
    res.soak = MoveSoak(20, 4, [], [])
    report(plan, res, tmp_path)
    doc = json.loads((tmp_path / "remote.json").read_text())
    m = doc["metrics"]
    assert m["ipsec_mbit_s_n2_c4"] == 400.0 and m["plain_gateway_cpu_per_client_n1_c4"] == 0.2
    assert m["ike_handshakes_per_s_n1"] == 2.0 and m["ike_capacity_ratio_n2_n1"] == 2.0
    assert doc["metric_details"]["ike_capacity_ratio_n2_n1"]["met"] is True
    assert m["client_failover_s"] == 26.0 and m["client_failover_max_s"] == 30.0
    assert m["client_failover_not_recovered"] == 1
    assert m["client_drain_s"] == 2.0 and m["client_drain_max_s"] == 2.5
    assert m["client_drain_worst_gap_s"] == 60.0 and m["client_drain_not_back"] == 1
    assert m["move_disruptions"] == 0
    assert doc["failures"] and "Quick run" in doc["method"]
    assert (tmp_path / "remote.png").stat().st_size > 0 and "paper" in (tmp_path / "remote.md").read_text()
