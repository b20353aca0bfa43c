"""bench/remote without an emulation: iperf3's output read, and the report built from
recorded runs (metrics, ratio, failures) — rootless."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gaps import FlowGap
from bench.remote.__main__ import Plan, Results, merge_ike_part, merge_takeover_part, report
from bench.remote.ikecost import Cost, VanishRun, predicted_pct
from bench.remote.measure import DrainTrial, FailoverTrial, IkeRound, MoveSoak, TransferRun, received_bits_per_s
from bench.remote.sessions import SessionRun, recorded_since
from supergw_gateway.ra.client import Followed
from supergw_gateway.ra.ikecache import Connection, analyse


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
    res.failovers.append(FailoverTrial("kill", "gw1", "gw2", 2, [_flow("rw1 -> h1", 220), _flow("rw3 -> h1", 30000, False)],
                                       1, 0, None, None, None))
    res.failovers.append(FailoverTrial("freeze", "gw1", "gw2", 1, [_flow("rw1 -> h1", 300)], 0, 2, 40, 0, 0))
    res.failures.append({"trial": "failover 1", "flow": "rw3 -> h1", "why": "no answer after the fault"})
    res.control = FailoverTrial("kill", "gw2", None, 2, [_flow("rw2 -> h1", 30000, False)] * 2, 0, 0, None, None, None)
    res.drains.append(DrainTrial("gw2", {"rw2": Followed(1.5, 0.4, 5), "rw4": Followed(2.5, 0.6, 8),
                                         "rw6": Followed(None, 60.0, 90)}))
    res.soak = MoveSoak(20, 4, [], [])
    report(plan, res, tmp_path)
    doc = json.loads((tmp_path / "remote.json").read_text())
    m = doc["metrics"]
    assert m["ipsec_mbit_s_n2_c4"] == 400.0 and m["plain_gateway_cpu_per_client_n1_c4"] == 0.2
    assert m["ike_handshakes_per_s_n1"] == 2.0 and m["ike_capacity_ratio_n2_n1"] == 2.0
    assert doc["metric_details"]["ike_capacity_ratio_n2_n1"]["met"] is True
    assert m["client_failover_s"] == 15.11 and m["client_failover_max_s"] == 30.0
    assert m["client_failover_not_recovered"] == 1 and m["client_failover_new_ike_auth"] == 1
    assert doc["metric_details"]["client_failover_s"]["met"] is False
    assert m["client_failover_freeze_s"] == 0.3 and m["client_failover_freeze_esp_refused"] == 2
    assert m["thaw_fenced_frames"] == 40 and m["thaw_esp_refused"] == 0
    assert m["control_no_takeover_recovered"] == 0
    assert m["client_drain_s"] == 2.0 and m["client_drain_max_s"] == 2.5
    assert m["client_drain_worst_gap_s"] == 60.0 and m["client_drain_not_back"] == 1
    assert m["move_disruptions"] == 0
    assert doc["failures"] and "Quick run" in doc["method"]
    assert (tmp_path / "remote.png").stat().st_size > 0 and "paper" in (tmp_path / "remote.md").read_text()

    # --only takeover: the failover part replaced, the rest kept
    again = Results()
    again.failovers.append(FailoverTrial("kill", "gw2", "gw1", 1, [_flow("rw2 -> h1", 400)], 0, 0, None, None, None))
    merge_takeover_part(plan, again, tmp_path)
    doc = json.loads((tmp_path / "remote.json").read_text())
    m = doc["metrics"]
    assert m["client_failover_s"] == 0.4 and m["client_failover_not_recovered"] == 0
    assert "client_failover_freeze_s" not in m and "control_no_takeover_recovered" not in m
    assert m["ipsec_mbit_s_n2_c4"] == 400.0 and m["client_drain_s"] == 2.0
    assert [r["victim"] for r in doc["rows"] if "failover_trial" in r] == ["gw2", "gw2"]
    assert not any(str(f.get("trial")).startswith("failover") for f in doc["failures"])
    assert "--only takeover" in doc["method"]


def _session(identity: str, start: float, seconds: float, nbytes: int) -> str:
    return json.dumps({"ike_id": 1, "identity": identity, "remote_host": "100.64.0.11", "remote_port": 4500,
                       "initiator_spi": "483b6c576a93e601", "responder_spi": "011dfef0ad6de489",
                       "vips": ["10.90.0.1"], "established_at": start, "bytes_in": nbytes // 2,
                       "bytes_out": nbytes // 2, "present": True, "present_s": seconds, "ike_rekeys": 0, "v": 1,
                       "gateway": "gw1", "ended_at": start + seconds, "end_reason": "deleted",
                       "addresses": ["100.64.0.11"], "full_exchange": True})


def test_sessions_recorded_since_the_run_began(tmp_path: Path) -> None:
    gw1, gw2 = tmp_path / "gw1.jsonl", tmp_path / "gw2.jsonl"
    gw1.write_text(_session("rw1", 100.0, 10, 1000) + "\n" + _session("rw1", 200.0, 10, 1000) + "\n")
    conns = recorded_since([gw1, gw2], 150.0)  # gw2's log is not there yet: no sessions, no error
    assert [c.start for c in conns] == [200.0]


def test_sessions_report_beside_the_paper(tmp_path: Path) -> None:
    # rw1 comes back every 60 s (10 s connected): 4 full exchanges; with a clocked lifetime
    # of 4 cycles (240 s) only the first is needed, with an established lifetime of 1 cycle
    # (60 s: 10 s used per connection) too; rw2 connects once.
    conns = [Connection("rw1", 60.0 * k, 60.0 * k + 10, 1000) for k in range(4)] + [Connection("rw2", 5.0, 20.0, 10)]
    run = SessionRun(2, 240.0, 20.0, 40.0, connects=6, recorded=5)
    run.lifetimes_s = [15.0, 30.0, 60.0, 120.0, 240.0, 480.0]
    run.analysis = analyse(conns, run.lifetimes_s, [2000])
    plan = Plan([2], 2, [1], 3.0, 1, 2, 1, 20, 15.0, True, 240.0, 1)
    res = Results(sessions=run)
    report(plan, res, tmp_path)
    doc = json.loads((tmp_path / "remote.json").read_text())
    m = doc["metrics"]
    assert m["sessions_actual"] == 5
    assert m["sessions_unrecorded"] == 1  # a connection no log holds is counted, not hidden
    assert m["ike_cache_clocked_4cycles_pct"] == 40.0 and m["ike_cache_established_1cycles_pct"] == 40.0
    fig6 = next(t for title, t in doc["tables"].items() if title.startswith("Fig. 6"))
    data = [r for r in fig6 if r["strategy"] == "data"]
    assert data == [{"strategy": "data", "lifetime": "2000 B", "actual": 5, "needed": 3, "needed_of_actual_pct": 60.0}]
    assert "The paper's figures (Shue et al. §IV-B)" in doc["tables"]


def _sessions() -> SessionRun:
    conns = [Connection("rw1", 60.0 * k, 60.0 * k + 10, 1000) for k in range(4)] + [Connection("rw2", 5.0, 20.0, 10)]
    run = SessionRun(2, 240.0, 20.0, 40.0, connects=5, counted=5, recorded=5, trace=conns)
    run.lifetimes_s = [15.0, 60.0, 240.0]
    run.analysis = analyse(conns, run.lifetimes_s, [2000])
    return run


def test_live_cache_beside_the_replay_and_the_ike_esp_ratio(tmp_path: Path) -> None:
    cached = VanishRun("clocked", 240.0, 240.0, 20.0, 40.0, presences=10, exchanges=4, returns=8, resumed=6,
                       by_how={"link": 5, "sleep": 3}, resumed_by_how={"link": 4, "sleep": 2})
    control = VanishRun("clocked", 15.0, 240.0, 20.0, 40.0, presences=10, exchanges=12, returns=8, resumed=0)
    cost = Cost(handshakes=64, ike_cpu_s=0.64, esp_packets=200_000, esp_bytes=200_000 * 1400, esp_cpu_s=2.0,
                idle_cpu_per_s=0.01, esp_mbit_s=300.0)
    assert cost.ike_ms_per_handshake == 10.0 and cost.esp_us_per_packet == 10.0 and cost.ratio == 1000.0
    res = Results(sessions=_sessions(), vanish=[cached, control], cost=cost)
    # rw1 comes back every 60 s: within a 240 s lifetime 1 of its 4 connections needs IKE, rw2's 1
    assert predicted_pct(_sessions().trace, 240.0) == 40.0 and predicted_pct(_sessions().trace, 15.0) == 100.0
    report(Plan([2], 2, [1], 3.0, 1, 2, 1, 20, 15.0, True, 240.0, 1), res, tmp_path)
    doc = json.loads((tmp_path / "remote.json").read_text())
    m = doc["metrics"]
    assert m["ike_cache_live_clocked_4cycles_pct"] == 40.0 and m["ike_cache_live_clocked_0.25cycles_pct"] == 120.0
    assert m["sessions_counted"] == 5
    assert m["ike_esp_cost_ratio"] == 1000 and m["ike_cpu_ms_per_exchange"] == 10.0
    [table] = [t for title, t in doc["tables"].items() if title.startswith("IKE caching live")]
    first = table[0]
    assert first["needed_live_pct"] == 40.0 and first["saved_live_pct"] == 60.0
    assert first["needed_replay_pct"] == 40.0 and table[1]["needed_replay_pct"] == 100.0
    assert first["link_loss"] == "4/5 resumed" and first["suspend"] == "2/3 resumed"
    assert "vanish" in doc["method"]


def test_no_cost_without_packets_or_exchanges() -> None:
    empty = Cost(0, 0.0, 0, 0, 0.0, 0.0, 0.0)
    assert empty.ike_ms_per_handshake is None and empty.esp_us_per_packet is None and empty.ratio is None
    below_idle = Cost(4, -0.01, 100, 100, 0.5, 0.01, 1.0)  # less CPU than idle: not resolved, not 0
    assert below_idle.ike_ms_per_handshake is None and below_idle.ratio is None


def test_ikecost_only_replaces_its_part_and_keeps_the_rest(tmp_path: Path) -> None:
    plan = Plan([1, 2], 4, [1, 4], 3.0, 1, 2, 1, 20, 15.0, True)
    res = Results()
    res.transfers[1] = [TransferRun(m, 1, 3.0, 100.0, 100.0, 0.2, 1.5, 0) for m in ("ipsec", "plain")]
    res.failures.append({"trial": "sessions", "why": "old sessions failure"})
    res.failures.append({"trial": "failover 1", "why": "kept"})
    res.sessions = _sessions()
    report(plan, res, tmp_path)
    new = Results(sessions=_sessions(), vanish=[VanishRun("clocked", 60.0, 240.0, 20.0, 40.0, presences=4,
                                                          exchanges=2)])
    merge_ike_part(plan, new, tmp_path)
    doc = json.loads((tmp_path / "remote.json").read_text())
    assert doc["metrics"]["ipsec_mbit_s_n1_c1"] == 100.0  # the rest is kept
    assert doc["metrics"]["ike_cache_live_clocked_1cycles_pct"] == 50.0
    assert [f["why"] for f in doc["failures"]] == ["kept"]
    assert doc["method"].count("### The IKE-cost paper live") == 1
