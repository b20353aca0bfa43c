"""bench/scale's arithmetic on made-up numbers: learning from per-host times, percentiles,
the linear fit and its bend, growth exponents, and the topology it boots."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scale import analysis, plan
from topologies.schema import load


def test_percentile_interpolates_between_ranks() -> None:
    assert analysis.percentile([], 99) is None
    assert analysis.percentile([5.0], 99) == 5.0
    assert analysis.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert analysis.percentile(list(map(float, range(101))), 99) == pytest.approx(99.0)
    with pytest.raises(ValueError):
        analysis.percentile([1.0], 101)


def test_learning_counts_hosts_rate_and_per_host_latency() -> None:
    first = {f"h{i}": 10.0 + i * 0.001 for i in range(1000)}  # 1000 hosts over 1 s
    seen = {f"h{i}": 10.0 + i * 0.001 + 0.05 for i in range(990)}  # 50 ms each; 10 never learned
    seen["h0"] = 9.0  # read before its first frame: a clock error counts 0, not negative
    got = analysis.learning(first, seen)
    assert (got.hosts, got.learned, got.missing) == (1000, 990, 10)
    assert got.first_frame_s == 10.0
    assert got.span_s == pytest.approx(0.989 + 0.05)
    assert got.hosts_per_s == pytest.approx(990 / (0.989 + 0.05))
    assert min(got.latencies_s) == 0.0 and got.latency(99) == pytest.approx(0.05)


def test_learning_without_any_host_on_the_switch() -> None:
    got = analysis.learning({"a": 1.0}, {})
    assert got.learned == 0 and got.hosts_per_s is None and got.latency(99) is None and got.missing == 1


def test_a_straight_line_fits_and_does_not_bend() -> None:
    xs = [1000.0, 5000.0, 20000.0, 50000.0]
    fit = analysis.linear_fit(xs, [60e6 + 900 * x for x in xs])
    assert fit.slope == pytest.approx(900) and fit.intercept == pytest.approx(60e6) and fit.r2 == pytest.approx(1)
    assert fit.bend == pytest.approx(1.0)


def test_a_quadratic_term_shows_as_a_bend_and_an_exponent_above_one() -> None:
    xs = [1000.0, 5000.0, 20000.0, 50000.0]
    ys = [900 * x + 0.05 * x * x for x in xs]
    fit = analysis.linear_fit(xs, ys)
    assert fit.bend is not None and fit.bend > 2
    linear = analysis.growth_exponent(xs, [900 * x for x in xs])
    quad = analysis.growth_exponent(xs, ys)
    assert linear == pytest.approx(1.0) and quad is not None and quad > 1.2
    assert analysis.fastest({"memory": linear, "cpu": quad, "flat": 0.0, "unknown": None}) == ("cpu", quad)


def test_fits_refuse_what_cannot_be_fitted() -> None:
    with pytest.raises(ValueError):
        analysis.linear_fit([1.0], [2.0])
    with pytest.raises(ValueError):
        analysis.linear_fit([1.0, 1.0], [2.0, 3.0])
    assert analysis.growth_exponent([1.0, 2.0], [0.0, 5.0]) is None
    assert analysis.fastest({"a": None}) is None


@pytest.mark.parametrize("gateways", [4, 32])
def test_the_topology_validates_and_holds_a_whole_site(tmp_path: Path, gateways: int) -> None:
    spec = load(plan.write_topology(gateways, "ebpf", tmp_path))
    (topo,) = spec.sites
    assert len(topo.gateways) == gateways and topo.lan.buckets == plan.BUCKETS and topo.dual_stack
    assert topo.p4runtime_addr == plan.p4runtime_addr()
    last = plan.SIM_FIRST_IP + 65535  # the largest set of simulated hosts stays in the LAN, off every other address
    assert last in topo.lan.subnet and last != topo.lan.subnet.broadcast_address
    taken = {h.ip for h in topo.hosts} | {g.lan_ip for g in topo.gateways} | {topo.lan.gateway_ip}
    assert all(ip < plan.SIM_FIRST_IP for ip in taken)
    assert plan.sim_first_ip6() == str(topo.lan6(plan.SIM_FIRST_IP))
    with pytest.raises(ValueError):
        plan.topology(33, "ebpf")


def test_every_point_has_macs_of_its_own() -> None:
    firsts = [plan.sim_first_mac(i) for i in range(16)]
    assert len(set(firsts)) == 16 and firsts[1] == "02:64:10:01:00:00"
    assert [p.label for p in plan.points((4, 8), (1000,))] == ["N=4 H=1000", "N=8 H=1000"]
