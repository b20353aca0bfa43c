"""Probe flows and their gaps: the one analysis behind every gap metric of the benchmarks
(bench/failover one- and two-site, bench/ha, the simulated hosts' flows of bench/scaling).

A *flow* is a stream of probes from one host to another: a 10 ms `ping -D -O` (bench/probes.py)
or one UDP flow of supergw-hostsim. Every benchmark reads it through `ping_flow` or
`hostsim_flows`, which both end in `judge`, so every gap number means the same thing:

- **sent**: probes sent over the whole run (ping: its transmitted count; hostsim: the sender's
  per-flow count).
- **answered**: probes that got an answer, each counted once. Ping: an echo reply that arrived
  within `REPLY_WINDOW_S` of its request (ping's `-W`); a later one is counted in **late** and
  as lost (the user had given up on it, and a stale reply released by a thawed gateway says
  nothing about the path now). Hostsim: frames received, duplicates not counted.
- **lost** = sent - answered: every probe without an answer, those sent after the last answer
  included.
- **gap_ms**: the longest silence of the flow after the fault. It starts at *since*, the arrival
  of the last answer to a probe sent before the fault (the last sign the old path worked; the
  first probe's send when no probe before the fault was answered, or when there is no fault);
  then it is the time to the first answer to a probe sent after the fault, between consecutive
  such answers, and from the last answer to the *end of the run* (the send of the last probe).
  A flow with no answer after the fault has gap = end - since: it runs to the end of the run,
  a lower bound of the real outage, never a small number.
- **tail_ms**: end of the run - the last answer (0 when the last probes were answered).
- **recovered**: the flow had an answer before the fault, got answers after it, and its tail is
  within `budget_s` (the benchmark's goal for the gap). A flow that is not recovered carries
  the reason in **problem**, and the benchmark fails its trial.

Answers are ordered by arrival (reordering neither opens nor closes a gap); a flow's send
and arrival times come from one clock (ping: the wall clock of `-D`; hostsim: CLOCK_MONOTONIC,
shared by every hostsim on the machine).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REPLY_WINDOW_S = 1.0  # ping -W: how long an answer may take before its probe counts as lost

_TS = r"^\[(\d+\.\d+)\] "
_REPLY = re.compile(_TS + r"\d+ bytes from .*icmp_seq=(\d+)\b.*time=([\d.]+) ms")
_NO_ANSWER = re.compile(_TS + r"no answer yet for icmp_seq=(\d+)")
_ERROR = re.compile(_TS + r"From .*icmp_seq=(\d+)")
_SUMMARY = re.compile(r"^(\d+) packets transmitted, (\d+) received", re.MULTILINE)


class ProbeOutputError(ValueError):
    """A probe's output from which no flow can be read (it sent nothing, or without timestamps)."""


@dataclass(frozen=True)
class FlowGap:
    flow: str
    sent: int
    answered: int
    late: int
    lost: int
    gap_ms: float
    tail_ms: float
    recovered: bool
    problem: str | None  # why the flow is not recovered; None when it is


def judge(flow: str, *, sent: int, answered: int, late: int, since: float, first: float | None,
          longest_between: float, last: float | None, end: float, budget_s: float,
          answered_before_fault: bool = True) -> FlowGap:
    """The verdict on one flow from its silences (seconds, one clock; see the module doc).

    `since`: where the silence starts; `first`/`last`: the first and last answer counted after
    `since` (None without any); `longest_between`: the longest interval between two consecutive
    such answers; `end`: the send of the last probe."""
    if sent < 1:
        raise ProbeOutputError(f"{flow}: no probe was sent")
    lost = max(0, sent - answered)
    problem: str | None = None
    if first is None or last is None:
        gap = max(0.0, end - since)
        problem = ("no answer at all" if answered == 0
                   else f"no answer after the fault: silent for the last {1000 * gap:.0f} ms of the run")
        return FlowGap(flow, sent, answered, late, lost, round(1000 * gap, 1), round(1000 * gap, 1), False, problem)
    tail = max(0.0, end - last)
    gap = max(first - since, longest_between, tail)
    if not answered_before_fault:
        problem = "no answer before the fault: the probe had no path to measure"
    elif tail > budget_s:
        problem = (f"not recovered: no answer in the last {1000 * tail:.0f} ms of the run "
                   f"(allowed {1000 * budget_s:.0f} ms)")
    return FlowGap(flow, sent, answered, late, lost, round(1000 * gap, 1), round(1000 * tail, 1), problem is None,
                   problem)


ICMP_SEQ_MOD = 1 << 16  # ping prints the 16-bit icmp_seq: it wraps after 65535 (22 min at 20 ms)


def unwrap_seq(raw: int, previous: int) -> int:
    """The absolute probe number of a printed icmp_seq, given the one read before it: the
    candidate nearest to `previous` (probes are read in about the order they were sent)."""
    base = previous - previous % ICMP_SEQ_MOD
    return min((base - ICMP_SEQ_MOD + raw, base + raw, base + ICMP_SEQ_MOD + raw), key=lambda c: abs(c - previous))


def ping_no_answer(line: str) -> tuple[float, int] | None:
    """(time, icmp_seq) of a `ping -D -O` "no answer yet for icmp_seq=k" line, printed just
    before probe k + 1 is sent; None for any other line."""
    m = _NO_ANSWER.match(line)
    return None if m is None else (float(m.group(1)), int(m.group(2)))


def ping_reply(line: str) -> tuple[float, int, float] | None:
    """(arrival, icmp_seq, rtt in s) of one `ping -n -D` reply line; None for any other line
    (bench/chaos reads its long-running pings line by line with it)."""
    m = _REPLY.match(line)
    return None if m is None else (float(m.group(1)), int(m.group(2)), float(m.group(3)) / 1000)


def _send_times(sends: dict[int, float], count: int) -> dict[int, float]:
    """Every probe's send time from the known ones: interpolated between known neighbours,
    extrapolated at the ends with the median spacing (one interval of error at most)."""
    known = sorted(sends.items())
    steps = [(t2 - t1) / (s2 - s1) for (s1, t1), (s2, t2) in zip(known, known[1:]) if s2 > s1]
    step = statistics.median(steps) if steps else 0.01
    out: dict[int, float] = {}
    i = 0
    for seq in range(1, count + 1):
        while i < len(known) and known[i][0] < seq:
            i += 1
        if i < len(known) and known[i][0] == seq:
            out[seq] = known[i][1]
        elif i == 0:
            out[seq] = known[0][1] - (known[0][0] - seq) * step
        elif i == len(known):
            out[seq] = known[-1][1] + (seq - known[-1][0]) * step
        else:
            (s1, t1), (s2, t2) = known[i - 1], known[i]
            out[seq] = t1 + (t2 - t1) * (seq - s1) / (s2 - s1)
    return out


def ping_flow(flow: str, out: str, fault: float | None, budget_s: float,
              window_s: float = REPLY_WINDOW_S) -> FlowGap:
    """One `ping -n -D -O` run (bench/probes.py `ping_probe`) read as a flow; `fault`: the wall
    clock time the failure was injected (None: measure the whole run).

    Send times: a reply's arrival minus its rtt, and `-O`'s "no answer yet for icmp_seq=k",
    which ping prints just before it sends probe k + 1."""
    sends: dict[int, float] = {}
    replies: dict[int, tuple[float, float]] = {}  # seq -> (arrival, rtt s) of its first reply
    highest = last = 0
    for line in out.splitlines():
        if (reply := ping_reply(line)) is not None:
            ts, raw, rtt = reply
            seq = last = unwrap_seq(raw, last)
            replies.setdefault(seq, (ts, rtt))
            sends.setdefault(seq, ts - rtt)
            highest = max(highest, seq)
        elif (silent := ping_no_answer(line)) is not None:
            ts, raw = silent
            seq = last = unwrap_seq(raw, last)
            sends.setdefault(seq + 1, ts)
            highest = max(highest, seq + 1)
        elif m := _ERROR.match(line):
            last = unwrap_seq(int(m.group(2)), last)
            highest = max(highest, last)
    summary = _SUMMARY.search(out)
    count = max(highest, int(summary.group(1)) if summary else 0)
    if count == 0:
        raise ProbeOutputError(f"{flow}: the probe sent nothing: {out.strip()[-300:]!r}")
    if not sends:
        raise ProbeOutputError(f"{flow}: no timestamped reply or 'no answer yet' line in the probe's output "
                               f"(ping -D -O?): {out.strip()[-300:]!r}")
    send = _send_times(sends, count)
    timely = {seq: ts for seq, (ts, rtt) in replies.items() if rtt <= window_s and seq <= count}
    late = sum(1 for seq, (_, rtt) in replies.items() if rtt > window_s and seq <= count)
    start, end = send[1], send[count]
    cut = start if fault is None else fault
    before = [ts for seq, ts in timely.items() if send[seq] < cut]
    since = max(before) if before else start
    after = sorted(ts for seq, ts in timely.items() if send[seq] >= cut and ts >= since)
    between = max((b - a for a, b in zip(after, after[1:])), default=0.0)
    return judge(flow, sent=count, answered=len(timely), late=late, since=since, first=after[0] if after else None,
                 longest_between=between, last=after[-1] if after else None, end=end, budget_s=budget_s,
                 answered_before_fault=fault is None or bool(before))


def hostsim_flows(tx_stats: Mapping[str, Any], rx_stats: Mapping[str, Any], budget_s: float) -> list[FlowGap]:
    """Every flow of the sender's current run (`stats(flows=True)` of both hostsims, read after
    the run stopped and in-flight frames landed), judged over the whole run (no fault: `since`
    is the flow's first send, `end` its last send). The receiver's own `max_gap_ms` is only the
    longest interval between two arrivals; the head and the tail come from the sender's send
    times, so a flow that stops for good, or never arrives, is seen."""
    run_id = tx_stats["run"]["id"]
    received = {(f["src"], f["dst"], f["flow"]): f for f in rx_stats.get("flows_rx", []) if f["run"] == run_id}
    out: list[FlowGap] = []
    for f in tx_stats.get("flows_tx", []):
        if f["sent"] == 0:
            continue
        name = f"{f['src']} -> {f['dst']} (run {run_id} flow {f['flow']})"
        if "first_sent_ns" not in f:
            raise ProbeOutputError(f"{name}: the hostsim reports no send times (an older binary?): "
                                   "rebuild it with `make hostsim`")
        start, end = f["first_sent_ns"] / 1e9, f["last_sent_ns"] / 1e9
        rx = received.get((f["src"], f["dst"], f["flow"]))
        got = 0 if rx is None else rx["received"] - rx["duplicates"]
        if rx is None or got == 0:
            out.append(judge(name, sent=f["sent"], answered=0, late=0, since=start, first=None, longest_between=0.0,
                             last=None, end=end, budget_s=budget_s))
            continue
        out.append(judge(name, sent=f["sent"], answered=got, late=0, since=start, first=rx["first_arrival_ns"] / 1e9,
                         longest_between=rx["max_gap_ms"] / 1000, last=rx["last_arrival_ns"] / 1e9, end=end,
                         budget_s=budget_s))
    return out


def failed(flows: Sequence[FlowGap]) -> list[FlowGap]:
    return [f for f in flows if not f.recovered]
