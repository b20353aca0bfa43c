"""bench/replication's analysis and report on synthetic phases (no root, no charon): per-SA
costs, percentiles, growth exponents, the failures a report must list, the kernel counters'
parsers and the command line's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.replication import analysis, plot
from bench.replication.__main__ import Plan, plan_from, report
from bench.replication.analysis import CHILD, IKE, INITIAL, NEW_BACKUP, TAKEOVER, SizeRun
from bench.replication.lab import split
from bench.replication.measure import CONTROL, PhaseCost, TakeoverResult
from bench.replication.probes import Wire, parse_ss, print_difference, udp_in_errors, wire_between


def phase(name: str, sas: int, per_sa_bytes: float = 600.0, lag_ms: float = 1.0, quadratic_cpu: bool = False,
          **kw: object) -> PhaseCost:
    cpu = 50e-6 * sas * (sas if quadratic_cpu else 1)
    p = PhaseCost(phase=name, sas=sas, sender="rb-g0", receiver="rb-g1", seconds=1.0, messages=6 * sas,
                  payload_bytes=int(per_sa_bytes * sas), wire_bytes=int(1.2 * per_sa_bytes * sas),
                  wire_back_bytes=40 * sas, sender_relay_s=cpu, sender_agent_s=2 * cpu, receiver_relay_s=cpu,
                  receiver_agent_s=cpu, sender_charon_s=1e-3 * sas, receiver_charon_s=2e-4 * sas,
                  lags_ms=[lag_ms] * (6 * sas), lags_full=False, udp_drops=0)
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def control(sas: int, **kw: object) -> PhaseCost:
    """The negative control as it must come out (nothing relayed, every copy stale), then `kw`."""
    p = phase(CONTROL, sas, messages=0, payload_bytes=0, wire_bytes=0, lags_ms=[],
              copy_problem=f"{sas} own IKE SAs, {sas} copies: 0 missing, 0 not the primary's, {sas} with other CHILD SAs")
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def size_run(sas: int, quadratic_cpu: bool = False, udp_drops: int = 0) -> SizeRun:
    kw = {"quadratic_cpu": quadratic_cpu}
    r = SizeRun(sas, 4, [phase(INITIAL, sas, **kw, udp_drops=udp_drops), phase(CHILD, sas, 300, **kw, udp_drops=udp_drops),
                         phase(IKE, sas, 900, **kw, udp_drops=udp_drops), control(sas),
                         phase(NEW_BACKUP, sas, times={"acked_s": 0.001 * sas}, **kw, udp_drops=udp_drops)])
    t = phase(TAKEOVER, sas, times={"children_renewed_s": 0.002 * sas, "ike_rekeyed_s": 0.004 * sas},
              list_sas=[(0.0001 * sas, sas)])
    r.takeover = TakeoverResult(t, pinged=8, answered=8)
    return r


def test_percentile_interpolates_and_refuses_nonsense() -> None:
    assert analysis.percentile([], 0.5) is None
    assert analysis.percentile([3.0], 0.99) == 3.0
    assert analysis.percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert analysis.percentile(list(map(float, range(101))), 0.99) == pytest.approx(99.0)
    with pytest.raises(ValueError):
        analysis.percentile([1.0], 1.5)


def test_growth_exponent_reads_powers_and_needs_two_sizes() -> None:
    xs = [16.0, 64.0, 256.0, 1000.0]
    assert analysis.growth_exponent(xs, [5.0] * 4) == pytest.approx(0.0)
    assert analysis.growth_exponent(xs, [x ** 1.5 for x in xs]) == pytest.approx(1.5)
    assert analysis.growth_exponent([64.0], [1.0]) is None
    assert analysis.growth_exponent(xs, [None, 0.0, None, 2.0]) is None


def test_a_phase_row_is_per_sa() -> None:
    row = analysis.phase_row(phase(INITIAL, 64))
    assert row["messages/SA"] == 6 and row["payload B/SA"] == 600 and row["sender relay µs/SA"] == 50
    assert row["lag p99 ms"] == 1.0 and row["copy"] == "exact"
    with pytest.raises(ValueError):
        analysis.per_sa(1.0, 0)


def test_the_fastest_growing_cost_is_named() -> None:
    runs = [size_run(n) for n in (16, 64, 256)] + [size_run(1000, quadratic_cpu=True)]
    text = analysis.fastest(runs)
    assert "Fastest-growing cost per SA: CPU per SA" in text
    flat = analysis.growth([size_run(n) for n in (16, 64)])
    assert flat["copy_bytes_per_sa"] == pytest.approx(0.0)
    assert flat["takeover_ike_ms_per_sa"] == pytest.approx(0.0)  # 4 ms per SA at both sizes


def test_metrics_at_the_headline_sizes_and_unmeasured_sizes_are_null() -> None:
    m = analysis.metrics([size_run(64)], [64, 1000])
    assert m["copy_bytes_per_sa_n64"].value == 600
    assert m["takeover_ike_rekeyed_s_n64"].value == pytest.approx(0.256)
    assert m["new_backup_copy_s_n64"].value == pytest.approx(0.064)
    assert m["copy_bytes_per_sa_n1000"].value is None and "not measured" in m["copy_bytes_per_sa_n1000"].note
    assert m["udp_drops"].value == 0


def test_every_broken_probe_is_a_failure() -> None:
    good = size_run(64)
    assert analysis.failures([good]) == []
    bad = size_run(64, udp_drops=3)
    bad.phases[0].copy_problem = "64 own IKE SAs, 60 copies: 4 missing"
    bad.phases[1].lags_full = True
    bad.phases[4].counts["old_backup_left"] = 17
    assert bad.takeover is not None
    bad.takeover.new_ike_auths, bad.takeover.replay_drops, bad.takeover.not_rekeyed = 2, 1, 5
    bad.takeover.failures.append("rb-c0 from 10.100.0.1: no answer")
    whys = " | ".join(str(f["why"]) for f in analysis.failures([bad, SizeRun(1000, 4, error="PhaseError: x")]))
    for expected in ("4 missing", "UDP datagrams dropped", "lag list overflowed", "2 new IKE_AUTHs",
                     "1 replay drops", "5 client IKE SAs not rekeyed", "no answer", "PhaseError: x",
                     "still held 17 PASSIVE copies"):
        assert expected in whys


def test_the_negative_control_fails_when_something_was_relayed_or_no_copy_was_seen_stale() -> None:
    good = size_run(64)
    m = analysis.metrics([good], [64])
    assert m["control_messages_replication_off"].value == 0 and m["control_stale_copies_caught"].value == 1
    relayed, blind = size_run(64), size_run(64)
    relayed.phases[3] = control(64, messages=320, payload_bytes=19_000)
    blind.phases[3] = control(64, copy_problem=None)
    whys = [str(f["why"]) for f in analysis.failures([relayed, blind])]
    assert len(whys) == 2
    assert "replication off, yet 320 sync messages" in whys[0] and "the copy check cannot fail" in whys[1]
    assert analysis.metrics([relayed, blind], [64])["control_stale_copies_caught"].value == 1
    partly = size_run(64)
    partly.phases[3] = control(64, copy_problem="64 own IKE SAs, 64 copies: 0 missing, 0 not the primary's, "
                                                "3 with other CHILD SAs")
    assert "cannot fail" in str(analysis.failures([partly])[0]["why"])


def test_the_report_writes_json_markdown_and_the_cost_curve(tmp_path: Path) -> None:
    plan = Plan((16, 64), 4, 200.0, "libipsec", tmp_path / "state", tmp_path)
    rc = report(plan, [size_run(16), size_run(64)])
    assert rc == 0
    doc = json.loads((tmp_path / "replication.json").read_text())
    assert doc["metrics"]["copy_bytes_per_sa_n64"] == 600
    assert "Fastest-growing" in doc["method"] and "block_threshold 5" in doc["method"]
    assert (tmp_path / "replication.png").stat().st_size > 10_000
    assert "Takeover" in (tmp_path / "replication.md").read_text()
    failed = SizeRun(64, 4, error="PhaseError: g0 -> g1 did not settle")
    assert report(plan, [size_run(16), failed]) == 1
    plot.draw(tmp_path / "empty.png", [failed], "nothing measured")  # a run with nothing draws, saying so


def test_parse_ss_keys_each_connection_by_owner_and_ports() -> None:
    text = ("10     0      127.0.0.1:39446 127.0.0.1:47687 users:((\"python\",pid=18585,fd=4))\n"
            "\t bbr wscale:9,9 rto:204 bytes_sent:1000 bytes_acked:1001 bytes_received:10 segs_out:4 segs_in:3\n"
            "0      0      127.0.0.1:47687 127.0.0.1:39446 users:((\"python\",pid=18586,fd=5))\n"
            "\t bbr bytes_sent:10 bytes_acked:10 bytes_received:1000 segs_out:2\n")
    conns = parse_ss(text)
    assert conns[(18585, 47687, 39446)] == Wire(1000, 10, 4)
    assert conns[(18586, 39446, 47687)] == Wire(10, 1000, 2)
    later = {(18585, 47687, 39446): Wire(1500, 30, 9), (18585, 47687, 40000): Wire(200, 5, 3)}
    assert wire_between(conns, later, 18585, 47687) == Wire(700, 25, 8)


def test_udp_in_errors_reads_the_udp_line_and_refuses_other_text() -> None:
    snmp = ("Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 10 0 7 3 7\n"
            "UdpLite: InDatagrams NoPorts InErrors\nUdpLite: 0 0 0\n")
    assert udp_in_errors(snmp) == 7
    with pytest.raises(ValueError):
        udp_in_errors("Ip: Forwarding\nIp: 1\n")


def test_print_difference_names_what_is_missing() -> None:
    own = {("a", "b"): frozenset({("c1", "c2")}), ("d", "e"): frozenset()}
    assert print_difference(own, dict(own)) is None
    diff = print_difference(own, {("a", "b"): frozenset({("x", "y")})})
    assert diff is not None and "1 missing" in diff and "1 with other CHILD SAs" in diff


def test_split_spreads_sas_over_clients() -> None:
    assert split(1000, 4) == [250] * 4
    assert split(10, 4) == [3, 3, 2, 2]
    assert split(2, 4) == [1, 1]
    with pytest.raises(ValueError):
        split(0, 4)


@pytest.mark.parametrize("argv, why", [
    (["--sizes", "16,x"], "whole numbers"),
    (["--sizes", "2000"], "1022"),
    (["--clients", "0"], "--clients"),
    (["--rekey-rate", "0"], "--rekey-rate"),
])
def test_bad_command_lines_are_refused_with_the_reason(argv: list[str], why: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        plan_from(argv)
    assert why in capsys.readouterr().err


def test_quick_is_16_and_64() -> None:
    assert plan_from(["--quick"]).sizes == (16, 64)
    assert plan_from([]).sizes == (16, 64, 256, 1000)
