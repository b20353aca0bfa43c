"""bench/ha's pure parts: controller log times, the probe plans (another gateway frozen, or the
probe's own), rewritten buckets; and the verdict: a kill whose probe does not recover fails the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.gaps import FlowGap
from bench.ha import __main__ as ha_bench
from bench.ha.analysis import log_time, plan_own_probe, plan_probe, rewritten
from bench.probes import read_probe
from bench.tests.traces import FAULT, answered_unless, ping_output
from supergw_proto.api import HostView
from topologies import ha
from topologies.emulation import Emulation
from topologies.schema import load

TOPO = load(replicas=ha.HA_REPLICAS).single  # h1..h3; gw1..gw3 with peer1..3; r1 via peer1, r2 via peer2

LOG = """
=== 2026-11-24 12:00:00 start: ip netns exec sgw-emu-c2 supergw-controller --config c2.yaml
ts=2026-11-24T12:00:01.250Z level=warning logger=supergw_controller.ha.replica msg="replica c2: leader, term 7"
ts=2026-11-24T12:00:01.400Z level=warning logger=x msg="replica c2: primary on the switch and reconciled (term 7)"
ts=garbage level=warning logger=x msg="replica c2: primary on the switch and reconciled (term 8)"
ts=2026-11-24T12:00:09.000Z level=warning logger=x msg="replica c2: primary on the switch and reconciled (term 9)"
"""
T_1_400 = 1795521601.4  # 2026-11-24T12:00:01.400Z


def test_log_time_is_the_first_matching_line_at_or_after_the_instant() -> None:
    needle = "primary on the switch and reconciled"
    assert log_time(LOG, needle) == pytest.approx(T_1_400)
    assert log_time(LOG, needle, after=T_1_400 + 0.001) == pytest.approx(T_1_400 + 7.6)
    assert log_time(LOG, needle, after=T_1_400 + 60) is None
    assert log_time(LOG, "stepping down") is None  # absent, and the start banner is not a log line


def test_probe_plan_freezes_a_loaded_gateway_that_serves_neither_direction_of_the_probe() -> None:
    served = {"10.60.0.11": "gw1", "10.60.0.12": "gw2"}
    buckets: dict[int, str | None] = {0: "gw1", 1: "gw2", 2: "gw2", 3: "gw3", 4: None}
    p = plan_probe(TOPO, served, buckets, trial=0)
    assert p is not None
    assert (p.host, p.serving, p.frozen) == ("h1", "gw1", "gw2")  # gw2 holds the most buckets
    assert (p.remote, p.remote_ip) == ("r1", "10.61.0.11")  # r2 returns through peer2 -> gw2
    p = plan_probe(TOPO, served, buckets, trial=1)
    assert p is not None and (p.host, p.serving, p.frozen, p.remote) == ("h2", "gw2", "gw1", "r2")


def test_probe_plan_is_none_without_a_learned_host_or_a_second_gateway_with_buckets() -> None:
    assert plan_probe(TOPO, {}, {0: "gw1", 1: "gw2"}, 0) is None
    assert plan_probe(TOPO, {"10.60.0.11": "gw1"}, {0: "gw1", 1: "gw1"}, 0) is None


def test_rewritten_counts_only_moves_that_did_not_have_to_happen() -> None:
    before: dict[int, str | None] = {0: "gw1", 1: "gw2", 2: "gw3", 3: "gw3"}
    assert rewritten(before, {0: "gw1", 1: "gw2", 2: "gw1", 3: "gw2"}, frozen="gw3") == 0
    assert rewritten(before, {0: "gw2", 1: "gw2", 2: "gw1", 3: "gw2"}, frozen="gw3") == 1
    assert rewritten(before, {1: "gw2", 2: "gw1", 3: "gw1"}, frozen="gw3") == 1  # bucket 0 gone


def test_probe_plan_can_route_the_return_through_the_frozen_gateway_for_testing_the_benchmark() -> None:
    served = {"10.60.0.11": "gw1", "10.60.0.12": "gw2"}
    p = plan_probe(TOPO, served, {0: "gw1", 1: "gw2", 2: "gw2"}, trial=0, unrecoverable=True)
    assert p is not None and (p.frozen, p.remote) == ("gw2", "r2")  # r2 returns through peer2 -> gw2


def _host(ip: str, bucket: int, gateway: str | None) -> HostView:
    return HostView(mac="02:00:00:00:00:01", port=1, ip=ip, bucket=bucket, vmac="02:88:88:88:00:00", gateway=gateway,
                    idle_s=0.0)


def test_own_probe_plan_freezes_the_gateway_the_bucket_map_sends_the_host_to() -> None:
    hosts = [_host("10.60.0.11", 7, "gw1"), _host("10.60.0.12", 9, "gw2"), _host("10.60.0.99", 3, "gw3")]
    buckets: dict[int, str | None] = {7: "gw1", 9: "gw2", 3: "gw3"}
    p = plan_own_probe(TOPO, hosts, buckets, trial=0)
    assert p is not None
    assert (p.host, p.serving, p.frozen, p.bucket) == ("h1", "gw1", "gw1", 7)
    assert p.remote == "r2"  # r1 returns through peer1 -> gw1, the frozen one
    p = plan_own_probe(TOPO, hosts, buckets, trial=1)
    assert p is not None and (p.host, p.frozen, p.remote) == ("h2", "gw2", "r1")
    p = plan_own_probe(TOPO, hosts, buckets, trial=0, unrecoverable=True)
    assert p is not None and (p.frozen, p.remote) == ("gw1", "r1")


def test_own_probe_plan_skips_hosts_whose_view_and_bucket_map_disagree() -> None:
    hosts = [_host("10.60.0.11", 7, "gw1"), _host("10.60.0.12", 9, "gw2")]
    # h1's bucket was moved to gw3 after its host view was read; h2's bucket has no gateway
    assert plan_own_probe(TOPO, hosts, {7: "gw3", 9: None}, trial=0) is None
    p = plan_own_probe(TOPO, hosts, {7: "gw3", 9: "gw2"}, trial=0)
    assert p is not None and (p.host, p.frozen) == ("h2", "gw2")
    assert plan_own_probe(TOPO, [], {7: "gw1"}, trial=0) is None


def _kill(kind: str, flow: FlowGap) -> ha_bench.Kill:
    return ha_bench.Kill(kind, 0, "c1", "c2", 3, 4, 0.05, 0.3, 0, flow.flow, "gw1", "gw1", flow.sent, flow.lost,
                         flow.gap_ms, flow.tail_ms, flow.recovered, flow.problem, 1.2)


def test_a_kill_whose_probe_never_comes_back_fails_the_run_and_is_named_in_the_report(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stopped = read_probe("h1 -> r2", ping_output(answered_unless(lambda seq: seq > 100)), FAULT, 1.0)
    failed_over = read_probe("h1 -> r2", ping_output(answered_unless(lambda seq: 101 <= seq <= 140)),
                                      FAULT, 1.0)
    good = [_kill("kill_own", failed_over)]
    assert ha_bench.shortfalls(good, []) == []
    bad = good + [_kill("kill_own", stopped)]
    short = ha_bench.shortfalls(bad, [])
    assert len(short) == 2  # the flow, and the median gap over the goal because of it
    assert "kill_own trial 0 (frozen gw1), flow h1 -> r2: no answer after the fault" in short[0]
    assert "takeover_failover_gap_ms" in short[1]
    monkeypatch.setattr("bench.report.RESULTS_DIR", tmp_path)
    ha_bench.report(bad, [], Emulation.from_file(replicas=ha.HA_REPLICAS))
    doc = json.loads((tmp_path / "ha.json").read_text())
    assert [(f["kind"], f["flow"]) for f in doc["failures"]] == [("kill_own", "h1 -> r2")]
    assert doc["metrics"]["takeover_failover_gap_max_ms"] > 3900
    assert doc["metrics"]["probes_not_recovered"] == 1
