"""`follow_move`: a client followed while its SA moves to another gateway (probes stand in)."""

from __future__ import annotations

import time
from collections.abc import Callable

from supergw_gateway.ra.client import follow_move


def answers(pattern: str, step_s: float = 0.02) -> Callable[[], bool]:
    """A probe answered per the next character of `pattern` ('1' yes, '0' no), each taking step_s."""
    it = iter(pattern)

    def probe() -> bool:
        time.sleep(step_s)
        return next(it, pattern[-1]) == "1"
    return probe


def test_back_through_the_new_sa_with_the_old_one_answering_meanwhile() -> None:
    t0 = time.monotonic()
    f = follow_move(answers("0001"), answers("111"), t0, 5.0)
    assert f.back_s is not None and 0.1 < f.back_s < 1.0 and f.probes == 4
    assert f.worst_gap_s < 0.1  # every probe answered by one SA or the other


def test_a_gap_with_neither_sa_answering_is_measured() -> None:
    t0 = time.monotonic()
    f = follow_move(answers("000001"), answers("100000"), t0, 5.0)
    # probes 2..5 unanswered (8 probes of 0.02 s), then the new SA answers
    assert f.back_s is not None and f.worst_gap_s > 0.15


def test_a_client_that_never_comes_back() -> None:
    t0 = time.monotonic()
    f = follow_move(answers("0"), answers("0"), t0, 0.3)
    assert f.back_s is None and f.worst_gap_s >= 0.3
