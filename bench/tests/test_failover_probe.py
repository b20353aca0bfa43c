"""The failover benchmark's probe parsing: the gap is the longest silence between replies."""

from __future__ import annotations

import pytest

from bench.probes import BenchError, max_gap_ms

PING = """PING 10.61.0.11 (10.61.0.11) 56(84) bytes of data.
[1795502919.300000] 64 bytes from 10.61.0.11: icmp_seq=1 ttl=62 time=0.494 ms
[1795502919.310000] 64 bytes from 10.61.0.11: icmp_seq=2 ttl=62 time=0.31 ms
[1795502919.317116] From 10.60.0.252 icmp_seq=3 Destination Net Unreachable
[1795502919.620000] 64 bytes from 10.61.0.11: icmp_seq=33 ttl=62 time=0.3 ms
[1795502919.630000] 64 bytes from 10.61.0.11: icmp_seq=34 ttl=62 time=0.3 ms

--- 10.61.0.11 ping statistics ---
"""


def test_gap_is_the_longest_time_between_replies_and_errors_are_not_replies() -> None:
    gap, lost = max_gap_ms(PING)
    assert gap == pytest.approx(310.0, abs=0.01)
    assert lost == 30  # icmp_seq 3..32 got no reply


def test_a_probe_without_replies_is_an_error_not_a_zero_gap() -> None:
    with pytest.raises(BenchError, match="got 0 replies"):
        max_gap_ms("PING 10.61.0.11\n[1.0] From 10.60.0.252 icmp_seq=1 Destination Net Unreachable\n")
