"""The failover soak's load and what it watches while it runs: every host's UDP flood through
the tunnels (saturating the gateways' IPsec), and the liveness frames' arrival at the switch
(`liveness_gaps.py`, in the switch's namespace)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.probes import BenchError

REPO = Path(__file__).resolve().parents[2]
FLOOD_RATE = "400M"
FLOOD_LEN = 1200
FIRST_PORT = 5301


@contextmanager
def saturated(flows: list[tuple[str, str, str]], seconds: float) -> Iterator[None]:
    """For each (host namespace, remote namespace, remote address): an iperf3 UDP flood from the
    host to an iperf3 server of its own on the remote host, for `seconds`."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, (_host, remote, _ip) in enumerate(flows):
            procs.append(subprocess.Popen(["ip", "netns", "exec", remote, "iperf3", "-s", "-1", "-p", str(FIRST_PORT + i)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)  # the servers listening before the clients connect
        for i, (host, _remote, ip) in enumerate(flows):
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", host, "iperf3", "-c", ip, "-p", str(FIRST_PORT + i), "-u", "-b", FLOOD_RATE,
                 "-l", str(FLOOD_LEN), "-t", str(int(seconds)), "--connect-timeout", "3000"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


@dataclass
class GapWatch:
    result: dict[str, dict[str, float | int | None]] = field(default_factory=dict)


@contextmanager
def liveness_gaps(switch_ns: str, ifaces: list[str], seconds: float) -> Iterator[GapWatch]:
    """bench.failover.liveness_gaps in the switch's namespace for `seconds`; its result once the
    block is left."""
    watch = GapWatch()
    proc = subprocess.Popen(["ip", "netns", "exec", switch_ns, sys.executable, "-m", "bench.failover.liveness_gaps",
                             f"{seconds:g}", *ifaces], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        yield watch
    finally:
        try:
            out, err = proc.communicate(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        if proc.returncode != 0:
            raise BenchError(f"liveness gap listener failed: {err.strip()[-500:]}")
        watch.result = json.loads(out)
