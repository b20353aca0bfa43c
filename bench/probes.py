"""What the failover-type benchmarks (bench/failover, its two-site variant, bench/ha) share:
the 10 ms ping probe and how its output is read, the failures they inject into a gateway
and how they undo them, and the soaks' background load."""

from __future__ import annotations

import re
import signal
import subprocess
import time

from topologies.site import Site

GOAL_MS = 500.0
PING_INTERVAL_S = 0.01
PROBE_PINGS = 500  # 5 s: 1 s before the failure, 4 s after
KINDS = ("freeze", "kill", "link")
_REPLY = re.compile(r"^\[(\d+\.\d+)\] \d+ bytes from .*icmp_seq=(\d+)")


class BenchError(RuntimeError):
    pass


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()}")
    return proc


def ping_probe(netns: str, dst: str) -> subprocess.Popen[str]:
    """A ping every 10 ms with timestamps (`-D`), PROBE_PINGS of them, from `netns` to `dst`."""
    # -c, not -w: with a deadline ping quits at the first error, and a gateway whose charon
    # died answers "net unreachable" until its hosts are failed over.
    return subprocess.Popen(["ip", "netns", "exec", netns, "ping", "-n", "-D", "-i", str(PING_INTERVAL_S), "-W", "1",
                             "-c", str(PROBE_PINGS), dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def max_gap_ms(ping_out: str) -> tuple[float, int]:
    """Longest time between two consecutive replies (ms), and how many sequence numbers got no reply."""
    replies = [(float(m.group(1)), int(m.group(2))) for m in map(_REPLY.match, ping_out.splitlines()) if m]
    if len(replies) < 2:
        raise BenchError(f"the probe got {len(replies)} replies: no path at all?\n{ping_out[-500:]}")
    ts = [t for t, _ in replies]
    seqs = {s for _, s in replies}
    lost = max(seqs) - min(seqs) + 1 - len(seqs)
    return 1000 * max(b - a for a, b in zip(ts, ts[1:])), lost


def inject(site: Site, kind: str, gateway: str, pids: list[int]) -> None:
    """Fail `gateway` of `site`: freeze (SIGSTOP of its charon and agent, link up), kill (SIGKILL
    of both) or link (its LAN interface down). `pids`: its charon and agent, looked up before
    the probe started (the status CLI takes a while on a busy machine)."""
    if kind == "link":
        site.set_link(gateway, up=False)
        return
    site.signal_gateway(pids, signal.SIGSTOP if kind == "freeze" else signal.SIGKILL)


def restore(site: Site, kind: str, gateway: str, pids: list[int]) -> None:
    """Undo `inject`: link up; SIGCONT; or `supergw-gateway up` and a new agent after a kill."""
    if kind == "link":
        site.set_link(gateway, up=True)
    elif kind == "freeze":
        site.signal_gateway(pids, signal.SIGCONT)
    else:
        site.restart_gateway(gateway)


def busy_pings(flows: list[tuple[str, str]], seconds: float) -> None:
    """For `seconds`: 1200-byte pings every 2 ms for each (namespace, destination) while two
    busy loops load the machine (the soaks' load: a loaded machine must not fake a death)."""
    load: list[subprocess.Popen[bytes]] = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
    for ns, dst in flows:
        load.append(subprocess.Popen(
            ["ip", "netns", "exec", ns, "ping", "-q", "-n", "-i", "0.002", "-s", "1200", "-w", str(int(seconds)), dst],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        time.sleep(seconds)
    finally:
        for p in load:
            p.kill()
            p.wait()
