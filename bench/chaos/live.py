"""What the chaos run samples while it runs: long-running pings read line by line (each
answer handed to the checker as it arrives) and the processes' resources."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.gaps import REPLY_WINDOW_S, ping_no_answer, ping_reply, unwrap_seq
from supergw_proto.rest import ApiError, ControllerClient
from topologies.processes import ProcRecord, alive

PING_INTERVAL_S = 0.02


@dataclass(frozen=True)
class FlowSpec:
    name: str  # "ah1 -> bh1"
    netns: str
    dst: str


@dataclass(frozen=True)
class Probe:
    """One probe as a line of ping showed it: its number (unwrapped, 1-based), about when it
    was sent (wall clock) and whether this line is its timely answer (`arrival` then)."""
    seq: int
    sent: float
    answered: bool
    arrival: float | None = None


class ProbeCount:
    """Probes sent, and answered within REPLY_WINDOW_S, by one long-running `ping -n -D -O`,
    read line by line: icmp_seq unwrapped (it wraps after 65535, 22 minutes at 20 ms), a
    duplicate reply counted once, and probes that never got an answer counted as sent from
    `-O`'s "no answer yet" lines."""

    def __init__(self) -> None:
        self.sent = 0
        self._last = 0
        self._timely: set[int] = set()

    @property
    def answered(self) -> int:
        return len(self._timely)

    def feed(self, line: str) -> Probe | None:
        """The probe a reply or "no answer yet" line is about (None for any other line)."""
        if (silent := ping_no_answer(line)) is not None:
            self._last = unwrap_seq(silent[1], self._last)
            self.sent = max(self.sent, self._last + 1)  # printed just before probe last + 1 is sent
            return Probe(self._last, silent[0], False)
        if (reply := ping_reply(line)) is None:
            return None
        arrival, raw, rtt = reply
        self._last = unwrap_seq(raw, self._last)
        self.sent = max(self.sent, self._last)
        if rtt > REPLY_WINDOW_S:
            return Probe(self._last, arrival - rtt, False)
        self._timely.add(self._last)
        return Probe(self._last, arrival - rtt, True, arrival)


class Pings:
    """One `ping -D` per flow, every PING_INTERVAL_S, until `stop`; `on_probe(flow, probe)` for
    every probe line (an answer within REPLY_WINDOW_S of its request is `answered`; a later one
    is a lost probe, as in bench/gaps.py)."""

    def __init__(self, flows: list[FlowSpec], on_probe: Callable[[str, Probe], None]) -> None:
        self.flows, self.on_probe = flows, on_probe
        self.procs: list[subprocess.Popen[str]] = []
        self.threads: list[threading.Thread] = []
        self.sent: dict[str, int] = {}
        self.answered: dict[str, int] = {}

    def start(self) -> None:
        for f in self.flows:
            # stdbuf: ping's stdout is a pipe, which stdio would buffer by the 4 KiB block
            p = subprocess.Popen(["ip", "netns", "exec", f.netns, "stdbuf", "-oL", "ping", "-n", "-D", "-O",
                                  "-i", str(PING_INTERVAL_S), "-W", str(int(REPLY_WINDOW_S)), f.dst],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.procs.append(p)
            t = threading.Thread(target=self._read, args=(f.name, p), name=f"ping {f.name}", daemon=True)
            t.start()
            self.threads.append(t)

    def _read(self, flow: str, p: subprocess.Popen[str]) -> None:
        assert p.stdout is not None
        count = ProbeCount()
        for line in p.stdout:
            probe = count.feed(line)
            self.sent[flow], self.answered[flow] = count.sent, count.answered
            if probe is not None:
                self.on_probe(flow, probe)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for t in self.threads:
            t.join(timeout=5)


_STATUS = re.compile(r"^(VmRSS|Threads):\s+(\d+)", re.MULTILINE)
_TASKS = re.compile(r"^supergw_asyncio_tasks (\S+)$", re.MULTILINE)


def proc_sample(pid: int) -> dict[str, float] | None:
    """RSS (MB), open fds and threads of `pid` from /proc; None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    found = dict(_STATUS.findall(status))
    if "VmRSS" not in found:
        return None  # a zombie
    return {"rss_mb": round(int(found["VmRSS"]) / 1024, 2), "fds": float(fds), "threads": float(found["Threads"])}


def asyncio_tasks(api: ControllerClient) -> float | None:
    """The controller's `supergw_asyncio_tasks` gauge (None when it does not answer)."""
    try:
        m = _TASKS.search(api.metrics())
    except ApiError:
        return None
    return None if m is None else float(m.group(1))


def sample(procs: list[ProcRecord], controllers: dict[str, ControllerClient]) -> dict[str, float]:
    """"<site>/<process>[pid] <metric>" -> value for every live process, and the asyncio tasks
    of each controller (keyed by its process record, so a restarted one starts a new series)."""
    out: dict[str, float] = {}
    by_name = {f"{r.site}/{r.name}": r for r in procs}
    for key, rec in by_name.items():
        if not alive(rec) or (s := proc_sample(rec.pid)) is None:
            continue
        for metric, v in s.items():
            out[f"{key}[{rec.pid}] {metric}"] = v
    for key, api in controllers.items():
        ctl = by_name.get(key)
        if ctl is not None and (n := asyncio_tasks(api)) is not None:
            out[f"{key}[{ctl.pid}] tasks"] = n
    return out
