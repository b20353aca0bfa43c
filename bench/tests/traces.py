"""Synthetic probe traces: what `ping -n -D -O -i 0.01 -c N` prints for a given fate of each
probe (bench/probes.py runs it so; bench/gaps.py reads it)."""

from __future__ import annotations

from collections.abc import Callable

T0 = 1795502919.0
STEP = 0.01  # ping -i 0.01
RTT = 0.0005
N = 500  # 5 s: the fault after 1 s, as bench/probes.py runs it
FAULT = T0 + 1.0 - STEP / 2  # between probe 100 (sent at T0 + 0.99) and probe 101
END = T0 + (N - 1) * STEP  # the send of the last probe


def send(seq: int) -> float:
    return T0 + (seq - 1) * STEP


def ping_output(arrival: Callable[[int], float | None], n: int = N) -> str:
    """What `ping -n -D -O -i 0.01 -c n` prints when probe `seq` is answered at `arrival(seq)`
    (None: never): a reply line at each arrival, "no answer yet for icmp_seq=k" just before
    probe k + 1 goes out when k has no reply by then, and the summary."""
    lines: list[tuple[float, str]] = []
    got = 0
    for seq in range(1, n + 1):
        a = arrival(seq)
        if a is not None:
            got += 1
            lines.append((a, f"64 bytes from 10.61.0.11: icmp_seq={seq} ttl=62 time={1000 * (a - send(seq)):.3f} ms"))
        if seq > 1:
            prev = arrival(seq - 1)
            if prev is None or prev > send(seq):
                lines.append((send(seq), f"no answer yet for icmp_seq={seq - 1}"))
    body = "\n".join(f"[{t:.6f}] {text}" for t, text in sorted(lines))
    return (f"PING 10.61.0.11 (10.61.0.11) 56(84) bytes of data.\n{body}\n\n--- 10.61.0.11 ping statistics ---\n"
            f"{n} packets transmitted, {got} received, {100 * (n - got) / n:.0f}% packet loss, time 5000ms\n")


def answered_unless(lost: Callable[[int], bool]) -> Callable[[int], float | None]:
    return lambda seq: None if lost(seq) else send(seq) + RTT
