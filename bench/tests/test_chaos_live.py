"""bench/chaos's probe counting from ping's lines: what probes_lost is made of."""

from __future__ import annotations

from bench.chaos.live import Probe, ProbeCount
from bench.gaps import unwrap_seq


def reply(seq: int, t: float, ms: float = 0.4) -> str:
    return f"[{t:.6f}] 64 bytes from 10.2.0.11: icmp_seq={seq} ttl=62 time={ms} ms\n"


def silent(seq: int, t: float) -> str:
    return f"[{t:.6f}] no answer yet for icmp_seq={seq}\n"


def test_unwrap_follows_the_16_bit_sequence_across_wraps() -> None:
    assert unwrap_seq(1, 0) == 1
    assert unwrap_seq(0, 65535) == 65536
    assert unwrap_seq(65535, 65536) == 65535  # a late reply from before the wrap
    assert unwrap_seq(3, 2 * 65536 + 65534) == 3 * 65536 + 3


def test_a_run_past_the_wrap_never_answers_more_than_it_sent() -> None:
    # 70001 probes, every 7th unanswered: the old count (highest printed seq) stopped at 65535
    # while answers kept counting, so lost went negative over a 30-minute run.
    count = ProbeCount()
    lost = 0
    for n in range(1, 70002):
        raw, t = n % 65536, 1000.0 + n * 0.02
        if n % 7 == 0:
            count.feed(silent(raw, t + 0.02))
            lost += 1
        else:
            count.feed(reply(raw, t))
    assert count.sent == 70001 and count.answered == 70001 - lost == 60001


def test_duplicates_late_replies_and_a_silent_tail() -> None:
    count = ProbeCount()
    assert count.feed(reply(1, 10.0)) == Probe(1, 10.0 - 0.0004, True, 10.0)
    dup = count.feed(reply(1, 10.001).replace("ms", "ms (DUP!)"))  # still an answer in time
    assert dup is not None and dup.arrival == 10.001
    late = count.feed(reply(2, 12.0, ms=1500))  # later than the reply window: lost
    assert late == Probe(2, 10.5, False)
    for seq in (3, 4, 5):
        assert count.feed(silent(seq, 12.0 + seq)) == Probe(seq, 12.0 + seq, False)  # a flow that never comes
    assert count.feed("PING 10.2.0.11 (10.2.0.11) 56(84) bytes of data.\n") is None  # back still counts its probes
    assert count.sent == 6 and count.answered == 1
