"""bench/gaps.py on synthetic probe traces: a flow whose replies stop for good must fail with a
gap that runs to the end of the run and every probe after the last answer lost, never report
a small gap; and the exact numbers for a gap in the middle, reordering, no reply at all, a
reply after the end of the run, the recovery budget, the simulated hosts' flows."""

from __future__ import annotations

from typing import Any

import pytest

from bench.gaps import ProbeOutputError, hostsim_flows, ping_flow
from bench.tests.traces import END, FAULT, RTT, STEP, T0, N, answered_unless, ping_output, send

def test_replies_that_stop_for_good_fail_with_a_gap_to_the_end_of_the_run_and_every_probe_lost() -> None:
    out = ping_output(answered_unless(lambda seq: seq > 100))
    f = ping_flow("h1 -> r1", out, FAULT, budget_s=0.5)
    assert not f.recovered
    assert f.problem is not None and "no answer after the fault" in f.problem
    assert (f.sent, f.answered, f.lost) == (500, 100, 400)  # probes 101..500, the 4 s after the last answer
    # from the last answer (probe 100) to the send of the last probe: the run's whole rest, not 10 ms
    assert f.gap_ms == pytest.approx(1000 * (END - send(100) - RTT), abs=0.1)
    assert f.tail_ms == f.gap_ms


def test_replies_that_come_back_and_stop_again_fail_too() -> None:
    out = ping_output(answered_unless(lambda seq: 101 <= seq <= 130 or seq > 400))
    f = ping_flow("h1 -> r1", out, FAULT, budget_s=0.5)
    assert not f.recovered and f.problem is not None and "not recovered" in f.problem
    assert f.lost == 30 + 100
    assert f.gap_ms == pytest.approx(1000 * (END - send(400) - RTT), abs=0.1)  # the tail, 1 s


def test_a_gap_in_the_middle_is_exact_and_its_probes_are_the_loss() -> None:
    out = ping_output(answered_unless(lambda seq: 101 <= seq <= 130))
    f = ping_flow("h1 -> r1", out, FAULT, budget_s=0.5)
    assert f.recovered and f.problem is None
    assert (f.sent, f.answered, f.lost, f.late) == (500, 470, 30, 0)
    assert f.gap_ms == pytest.approx(310.0, abs=0.01)  # answer to 100 (0.99 s) -> answer to 131 (1.30 s)
    assert f.tail_ms == 0


def test_a_gap_before_the_fault_is_not_the_failovers() -> None:
    out = ping_output(answered_unless(lambda seq: 20 <= seq <= 60 or 101 <= seq <= 110))
    f = ping_flow("h1 -> r1", out, FAULT, budget_s=0.5)
    assert f.recovered and f.lost == 41 + 10
    assert f.gap_ms == pytest.approx(110.0, abs=0.01)
    whole = ping_flow("h1 -> r1", out, None, budget_s=0.5)  # without a fault: the whole run
    assert whole.gap_ms == pytest.approx(420.0, abs=0.01)


def test_reordered_replies_are_read_in_arrival_order_and_not_lost() -> None:
    def arrival(seq: int) -> float | None:
        if seq == 201:
            return send(201) + 0.4  # overtaken by the replies to 202..240, within the reply window
        return send(seq) + RTT

    f = ping_flow("h1 -> r1", ping_output(arrival), FAULT, budget_s=0.5)
    assert f.recovered and (f.answered, f.lost, f.late) == (500, 0, 0)
    # the answers kept coming (202 ...): 20 ms from 200's to 202's, not the 400 ms a
    # sequence-ordered reading would see between 200 and 201
    assert f.gap_ms == pytest.approx(20.0, abs=0.01)


def test_a_flow_with_no_reply_at_all_fails_with_the_whole_run_as_its_gap() -> None:
    out = ping_output(lambda seq: None)
    f = ping_flow("h1 -> r1", out, FAULT, budget_s=0.5)
    assert not f.recovered and f.problem == "no answer at all"
    assert (f.sent, f.answered, f.lost) == (500, 0, 500)
    assert f.gap_ms == pytest.approx(1000 * (END - T0), abs=0.1)


def test_a_flow_without_an_answer_before_the_fault_had_no_path_to_measure() -> None:
    out = ping_output(answered_unless(lambda seq: seq <= 100))
    f = ping_flow("h1 -> r1", out, FAULT, budget_s=0.5)
    assert not f.recovered and f.problem is not None and "no answer before the fault" in f.problem
    assert f.lost == 100


def test_the_last_reply_arriving_after_the_last_send_is_no_tail() -> None:
    f = ping_flow("h1 -> r1", ping_output(answered_unless(lambda seq: False)), FAULT, budget_s=0.5)
    assert f.recovered and f.tail_ms == 0 and f.gap_ms == pytest.approx(10.0, abs=0.01)


def test_a_stale_reply_after_the_end_of_the_run_does_not_make_a_dead_flow_recovered() -> None:
    def arrival(seq: int) -> float | None:
        if seq == 150:
            return END + 0.5  # released by a thawed gateway, 4.5 s after it was sent
        return None if seq > 100 else send(seq) + RTT

    f = ping_flow("h1 -> r1", ping_output(arrival), FAULT, budget_s=0.5)
    assert not f.recovered and f.late == 1
    assert (f.answered, f.lost) == (100, 400)  # the late reply answers nothing a user waited for
    assert f.gap_ms == pytest.approx(1000 * (END - send(100) - RTT), abs=0.1)


@pytest.mark.parametrize(("stop_before_end_s", "recovered"), [(0.3, True), (0.6, False)])
def test_answers_that_stop_before_the_end_fail_only_beyond_the_budget(stop_before_end_s: float, recovered: bool) -> None:
    last = round(N - stop_before_end_s / STEP)
    f = ping_flow("h1 -> r1", ping_output(answered_unless(lambda seq: seq > last)), FAULT, budget_s=0.5)
    assert f.recovered is recovered
    assert f.tail_ms == pytest.approx(1000 * stop_before_end_s - 1000 * RTT, abs=0.1)
    assert f.gap_ms == f.tail_ms  # the tail counts in the gap even when it is within the budget


def test_real_ping_lines_errors_and_duplicates() -> None:
    out = """PING 10.61.0.11 (10.61.0.11) 56(84) bytes of data.
[1795502919.300000] 64 bytes from 10.61.0.11: icmp_seq=1 ttl=62 time=0.494 ms
[1795502919.310000] 64 bytes from 10.61.0.11: icmp_seq=2 ttl=62 time=0.31 ms
[1795502919.310100] 64 bytes from 10.61.0.11: icmp_seq=2 ttl=62 time=0.41 ms (DUP!)
[1795502919.317116] From 10.60.0.252 icmp_seq=3 Destination Net Unreachable
[1795502919.330000] no answer yet for icmp_seq=3
[1795502919.620000] 64 bytes from 10.61.0.11: icmp_seq=33 ttl=62 time=0.3 ms
[1795502919.630000] 64 bytes from 10.61.0.11: icmp_seq=34 ttl=62 time=0.3 ms

--- 10.61.0.11 ping statistics ---
34 packets transmitted, 4 received, +1 duplicates, +1 errors, 88.2353% packet loss, time 330ms
"""
    f = ping_flow("h1 -> r1", out, 1795502919.315, budget_s=0.5)
    assert f.recovered and (f.sent, f.answered, f.lost) == (34, 4, 30)
    assert f.gap_ms == pytest.approx(310.0, abs=0.01)


def test_output_without_probes_or_timestamps_is_an_error_not_a_flow() -> None:
    with pytest.raises(ProbeOutputError, match="sent nothing"):
        ping_flow("h1 -> r1", "ping: connect: Network is unreachable\n", FAULT, budget_s=0.5)
    with pytest.raises(ProbeOutputError, match="ping -D -O"):
        ping_flow("h1 -> r1", "64 bytes from 10.61.0.11: icmp_seq=1 ttl=62 time=0.4 ms\n"
                              "1 packets transmitted, 1 received, 0% packet loss\n", FAULT, budget_s=0.5)


# --- the simulated hosts (supergw-hostsim stats, CLOCK_MONOTONIC ns) ---------------------

S = 1_000_000_000


def _stats(rx: list[dict[str, int | float] | None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Flow i sends 400 frames from 10 s to 14 s; rx[i] is what arrived of it (None: nothing)."""
    tx = {"run": {"id": 3}, "flows_tx": [{"flow": i, "src": "a", "dst": f"b{i}", "sent": 400, "first_sent_ns": 10 * S,
                                          "last_sent_ns": 14 * S} for i in range(len(rx))]}
    flows = [{"flow": i, "src": "a", "dst": f"b{i}", "run": 3, "duplicates": 0, **r} for i, r in enumerate(rx) if r]
    return tx, {"flows_rx": flows}


def test_hostsim_flows_see_a_flow_that_stops_arriving_for_good_and_one_that_never_arrives() -> None:
    healthy = {"received": 400, "first_arrival_ns": 10 * S + 100_000, "last_arrival_ns": 14 * S + 100_000,
               "max_gap_ms": 60.0}
    stopped = {"received": 100, "first_arrival_ns": 10 * S + 100_000, "last_arrival_ns": 11 * S, "max_gap_ms": 10.0}
    ok, dead, never = hostsim_flows(*_stats([healthy, stopped, None]), budget_s=1.0)
    assert ok.recovered and ok.lost == 0 and ok.gap_ms == 60.0
    assert not dead.recovered and dead.lost == 300 and dead.gap_ms == pytest.approx(3000.0)  # not its 10 ms
    assert not never.recovered and never.problem == "no answer at all" and never.lost == 400
    assert never.gap_ms == pytest.approx(4000.0)


def test_hostsim_flows_refuse_stats_without_send_times() -> None:
    tx, rx = _stats([None])
    del tx["flows_tx"][0]["first_sent_ns"]
    with pytest.raises(ProbeOutputError, match="make hostsim"):
        hostsim_flows(tx, rx, budget_s=1.0)
