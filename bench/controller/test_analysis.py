"""The benchmark's pure analysis on synthetic receive logs (no root needed)."""

from __future__ import annotations

from bench.controller.__main__ import blackout, converged_at, ratio_series

Entry = tuple[float, int, int, int, int]  # time, gateway index, host, seq, phase


def stream(host: int, gw_of: list[tuple[float, int]], start: float, end: float, period: float, phase: int = 1) -> list[Entry]:
    """Frames of one host every `period`; gw_of = [(from_time, gateway)], None-like gaps via gateway -1."""
    out: list[Entry] = []
    t, seq = start, 0
    while t < end:
        gw = [g for since, g in gw_of if since <= t][-1]
        if gw >= 0:
            out.append((t, gw, host, seq, phase))
        t += period
        seq += 1
    return out


def test_convergence_from_all_on_one_gateway() -> None:
    log: list[Entry] = []
    for h in range(6):
        # all on gateway 0 until 1.0 s, then hosts spread over 3 gateways
        log += stream(h, [(0.0, 0), (1.0, h % 3)], 0.0, 3.0, 0.01)
    xs, ys = ratio_series(log, 1, 0.0, 3.0, 3, 0.1)
    assert ys[0] == 3.0 and ys[-1] == 1.0
    assert converged_at(xs, ys, 1.10, 0.1) == 1.0


def test_never_converged_is_none() -> None:
    log = stream(0, [(0.0, 0)], 0.0, 1.0, 0.01)
    xs, ys = ratio_series(log, 1, 0.0, 1.0, 2, 0.1)
    assert converged_at(xs, ys, 1.10, 0.1) is None


def test_blackout_is_the_longest_gap_of_affected_hosts() -> None:
    kill = 1.0
    log = stream(0, [(0.0, 0), (kill, -1), (1.4, 1)], 0.0, 2.0, 0.01)  # host 0 on the victim: ~400 ms gap
    log += stream(1, [(0.0, 1)], 0.0, 2.0, 0.01)  # host 1 elsewhere: no gap
    log.sort()
    worst, affected, others = blackout(log, 1, victim=0, t_kill=kill)
    assert affected == 1
    assert worst is not None and 400 <= worst <= 420
    assert others is not None and others < 15


def test_blackout_of_a_host_that_never_comes_back_is_none() -> None:
    log = stream(0, [(0.0, 0), (1.0, -1)], 0.0, 2.0, 0.01)
    assert blackout(log, 1, victim=0, t_kill=1.0)[0] is None
