"""What the failover-type benchmarks (bench/failover, its two-site variant, bench/ha) share:
the 10 ms ping probe and how its output is read (through bench/gaps.py, the one gap analysis),
the failures they inject into a gateway and how they undo them, the soaks' background load and
their verdict (every failover in a soak is spurious, and fails the run)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from bench.gaps import REPLY_WINDOW_S, FlowGap, ProbeOutputError, ping_flow
from topologies.site import Site

GOAL_MS = 500.0
PING_INTERVAL_S = 0.01
PROBE_PINGS = 500  # 5 s: 1 s before the failure, 4 s after
KINDS = ("freeze", "kill", "link")


class BenchError(RuntimeError):
    pass


def ha_missing(root_for: str) -> str | None:
    """Why a benchmark on replicated controllers cannot run here (bench/ha, bench/chaos), or None."""
    if os.geteuid() != 0:
        return f"needs root ({root_for})"
    if shutil.which("etcd") is None:
        return "etcd is not installed (Debian etcd-server; `make deps` installs it)"
    return None


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()}")
    return proc


def ping_probe(netns: str, dst: str, count: int = PROBE_PINGS) -> subprocess.Popen[str]:
    """A ping every 10 ms, `count` of them, from `netns` to `dst`: with timestamps (`-D`)
    and a line for every probe still unanswered when the next goes out (`-O`), so the output
    shows when each probe was sent, answered or not (bench/gaps.py `ping_flow` reads it)."""
    # -c, not -w: with a deadline ping quits at the first error, and a gateway whose charon
    # died answers "net unreachable" until its hosts are failed over.
    return subprocess.Popen(["ip", "netns", "exec", netns, "ping", "-n", "-D", "-O", "-i", str(PING_INTERVAL_S),
                             "-W", str(int(REPLY_WINDOW_S)), "-c", str(count), dst],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def read_probe(flow: str, out: str, fault: float, budget_s: float) -> FlowGap:
    """The probe's flow, judged (bench/gaps.py): `fault` is the wall-clock instant the failure
    was injected, `budget_s` how long the flow may be silent at the end of the run."""
    try:
        return ping_flow(flow, out, fault, budget_s)
    except ProbeOutputError as exc:
        raise BenchError(f"the probe {flow}: {exc}") from None


def frames_entering(gateways: list[tuple[Site, str]], seconds: float = 1.0) -> list[int]:
    """Frames each (site, gateway) LAN interface received from its switch over `seconds`: with a
    probe running, whether the probe really enters the gateway it is meant to (a 10 ms probe
    brings 100 a second; see MIN_PROBE_FRAMES)."""
    before = [site.lan_rx(gw) for site, gw in gateways]
    time.sleep(seconds)
    return [site.lan_rx(gw) - b for (site, gw), b in zip(gateways, before)]


MIN_PROBE_FRAMES = 50  # of the 100 frames a 10 ms probe sends in a second


def inject(site: Site, kind: str, gateway: str, pids: list[int]) -> None:
    """Fail `gateway` of `site`: freeze (SIGSTOP of its charon and agent, link up), kill (SIGKILL
    of both) or link (its LAN interface down). `pids`: its charon and agent, looked up before
    the probe started (the status CLI takes a while on a busy machine)."""
    if kind == "link":
        site.set_link(gateway, up=False)
        return
    site.signal_gateway(pids, signal.SIGSTOP if kind == "freeze" else signal.SIGKILL)


def fail_under_probe(site: Site, kind: str, gateway: str, pids: list[int], netns: str, dst: str, flow: str,
                     timeout_s: float) -> tuple[FlowGap, float]:
    """Fail `gateway` of `site` (`inject` `kind`; `pids`: its charon and agent) under a 10 ms probe
    from `netns` to `dst`, first checked to enter that gateway (MIN_PROBE_FRAMES in 1 s, or
    BenchError). Returns the probe named `flow` as bench/gaps.py reads it against GOAL_MS, and the
    wall-clock instant of the failure. The failure stays: the caller reads what it needs, then
    calls `restore`."""
    probe = ping_probe(netns, dst)
    try:
        (entered,) = frames_entering([(site, gateway)])
        if entered < MIN_PROBE_FRAMES:
            raise BenchError(f"the probe {flow} does not enter {gateway}, the gateway the controller says serves it "
                             f"({entered} frames in 1 s)")
        t_fault = time.time()
        inject(site, kind, gateway, pids)
        out, _ = probe.communicate(timeout=timeout_s)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    return read_probe(flow, out, t_fault, GOAL_MS / 1000), t_fault


def restore(site: Site, kind: str, gateway: str, pids: list[int]) -> None:
    """Undo `inject`: link up; SIGCONT; or `supergw-gateway up` and a new agent after a kill."""
    if kind == "link":
        site.set_link(gateway, up=True)
    elif kind == "freeze":
        site.signal_gateway(pids, signal.SIGCONT)
    else:
        site.restart_gateway(gateway)


def spurious_failovers(controller: list[str], switch: list[str]) -> list[dict[str, object]]:
    """A soak's failovers as failed-trial rows (bench/report.py `failures`): nobody fails a
    gateway during a soak, so each failover is spurious. `controller`, `switch`: why each was
    made (its event's detail), the controllers' ('gateway dead') and the switches' own
    ('gateway stale')."""
    whose = [("the controller's", why) for why in controller] + [("the switch's own", why) for why in switch]
    return [{"kind": "soak", "problem": f"spurious failover, {who}: {why}"} for who, why in whose]


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
