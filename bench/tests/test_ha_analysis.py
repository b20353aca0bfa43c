"""bench/ha's pure parts: controller log times, the probe plan, rewritten buckets, ping's summary."""

from __future__ import annotations

import pytest

from bench.ha.analysis import log_time, ping_summary, plan_probe, rewritten
from topologies import ha
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


def test_ping_summary_and_a_probe_without_one() -> None:
    out = "...\n--- 10.61.0.11 ping statistics ---\n500 packets transmitted, 498 received, 0.4% packet loss, time 5012ms\n"
    assert ping_summary(out) == (500, 498)
    with pytest.raises(ValueError, match="without a summary"):
        ping_summary("ping: connect: Network is unreachable\n")
