"""Failover on the real one-site emulation (`make run`): real agents, real tunnels, shipped defaults.

`python -m bench.failover [--trials 5] [--soak-s 180]` (root; boots the emulation when it
is not up, and stops it again if it booted it; run it under `flock /tmp/supergw-netns.lock`).

For each kind of failure -- freeze (SIGSTOP of the gateway's charon and agent, link up),
kill (SIGKILL of both), link (its LAN interface down) -- each trial picks a LAN host, the
gateway that serves it (from the controller's host view) as the victim, and a remote host
whose return path does not cross the victim (the remote site is plain routed peers in the
one-site emulation: the return direction is the two-site topology's job). The host pings
the remote host every 10 ms; the longest gap between two replies is the failover gap as a
user sees it. Then the victim is restored (SIGCONT; `supergw-gateway up` and a new agent;
link up), and the time until it holds its weighted share of buckets again is the refill
time (the system is idle apart from the probe). A soak then loads the machine (two busy
loops and 1200-byte pings every 2 ms from every host through the tunnels) and counts
failovers nobody caused. Writes bench/results/failover.{json,md,png}.

`python -m bench.failover --two-site [--trials 5]`: the same failures on the two-site
emulation, with a flow in each direction (two_site.py; bench/results/failover-two-site.*).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import Metric, Series, write_report
from topologies import components, processes
from topologies.configs import HEARTBEAT_MS, MISSED_HEARTBEATS, REPO, controller_url
from topologies.model import Topology, load_topology
from topologies.processes import ProcRecord, RunState
from topologies.run import AGENT_PORT, LOGS, STATE

GOAL_MS = 500.0
PING_INTERVAL_S = 0.01
PROBE_PINGS = 500  # 5 s: 1 s before the failure, 4 s after
KINDS = ("freeze", "kill", "link")
_REPLY = re.compile(r"^\[(\d+\.\d+)\] \d+ bytes from .*icmp_seq=(\d+)")


class BenchError(RuntimeError):
    pass


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


@dataclass
class Trial:
    kind: str
    victim: str
    host: str
    target: str
    gap_ms: float
    lost: int
    detect_ms: float | None  # failure injected -> controller logged the gateway dead
    refill_s: float | None  # restored -> victim holds its weighted share of buckets again


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url.rstrip("/") + "/api/v1", token

    def get(self, path: str) -> Any:
        req = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()}")
    return proc


def max_gap_ms(ping_out: str) -> tuple[float, int]:
    """Longest time between two consecutive replies (ms), and how many sequence numbers got no reply."""
    replies = [(float(m.group(1)), int(m.group(2))) for m in map(_REPLY.match, ping_out.splitlines()) if m]
    if len(replies) < 2:
        raise BenchError(f"the probe got {len(replies)} replies: no path at all?\n{ping_out[-500:]}")
    ts = [t for t, _ in replies]
    seqs = {s for _, s in replies}
    lost = max(seqs) - min(seqs) + 1 - len(seqs)
    return 1000 * max(b - a for a, b in zip(ts, ts[1:])), lost


class Emulation:
    def __init__(self, topo: Topology, state: RunState) -> None:
        self.topo, self.state = topo, state
        token = Path(state.info["token_file"]).read_text().strip()
        self.api = Api(controller_url(topo), token)
        self.conf_dir = Path(state.info["controller_config"]).parent
        self.k = topo.lan.buckets

    def gw_config(self, name: str) -> Path:
        return self.conf_dir / f"gateway-{name}.yaml"

    def gateways(self) -> dict[str, dict[str, Any]]:
        return {g["name"]: g for g in self.api.get("/gateways")}

    def share(self, name: str) -> int:
        gws = self.gateways()
        total = sum(g["weight"] for g in gws.values())
        return int(math.floor(self.k * float(gws[name]["weight"]) / float(total)))

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            gws = self.gateways()
            last = {n: (g["state"], g["buckets"], g.get("tunnel_up")) for n, g in gws.items()}
            if all(g["state"] == "alive" and g.get("tunnel_up") is not False for g in gws.values()):
                return
            time.sleep(0.3)
        raise BenchError(f"gateways not all alive after {timeout:.0f}s: {last}")

    def pick(self, round_: int) -> tuple[str, str, str, str]:
        """(host name, its gateway, remote host name, remote ip) for this trial."""
        served = {h["ip"]: h["gateway"] for h in self.api.get("/hosts") if h.get("gateway") and h.get("ip")}
        hosts = [h for h in self.topo.hosts if str(h.ip) in served]
        if not hosts:
            raise BenchError("the controller has learned no LAN host with a gateway; is the probe traffic flowing?")
        host = hosts[round_ % len(hosts)]
        victim = served[str(host.ip)]
        peer = next(g.peer.name for g in self.topo.gateways if g.name == victim)
        remote = next((r for r in self.topo.remote.hosts if r.via != peer), None)
        if remote is None:
            raise BenchError(f"every remote host returns through {peer}: no probe path avoids {victim}")
        return host.name, victim, remote.name, str(remote.ip)

    def record(self, name: str) -> ProcRecord | None:
        return next((p for p in self.state.processes if p.name == name and processes.alive(p)), None)

    def replace_record(self, name: str, rec: ProcRecord | None) -> None:
        self.state.processes = [p for p in self.state.processes if p.name != name]
        if rec is not None:
            self.state.processes.append(rec)
        self.state.save(STATE)

    def charon_pid(self, gw: str) -> int:
        pid = components.gateway_status(self.gw_config(gw)).get("charon_pid")
        if not isinstance(pid, int):
            raise BenchError(f"{gw}: no charon running")
        return pid

    def agent_pid(self, gw: str) -> int:
        rec = self.record(f"agent-{gw}")
        if rec is None:
            raise BenchError(f"{gw}: its agent is not running")
        return rec.pid

    def inject(self, kind: str, gw: str, pids: list[int]) -> None:
        """`pids`: the gateway's charon and agent, looked up before the probe started (the
        status CLI takes a while on a busy machine)."""
        if kind == "link":
            sh("ip", "netns", "exec", self.topo.ns(gw), "ip", "link", "set", "lan0", "down")
            return
        sig = signal.SIGSTOP if kind == "freeze" else signal.SIGKILL
        for pid in pids:
            os.kill(pid, sig)

    def restore(self, kind: str, gw: str, frozen: list[int]) -> None:
        if kind == "link":
            sh("ip", "netns", "exec", self.topo.ns(gw), "ip", "link", "set", "lan0", "up")
        elif kind == "freeze":
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
        else:
            components.gateway_up(gw, self.gw_config(gw), LOGS)
            self.replace_record(f"charon-{gw}", components.charon_record(gw, self.gw_config(gw), LOGS))
            member = next(g for g in self.topo.gateways if g.name == gw)
            agent = components.start_agent(gw, self.topo.ns(gw), self.gw_config(gw), f"{member.mgmt_ip}:{AGENT_PORT}",
                                           LOGS)
            self.replace_record(f"agent-{gw}", agent)

    def dead_event_ts(self, gw: str, after: float) -> float | None:
        for ev in self.api.get("/events?limit=1000"):
            if ev.get("kind") == "gateway" and ev.get("reason") == "dead" and ev.get("src") == gw and ev["ts"] >= after:
                return float(ev["ts"])
        return None

    def failovers(self) -> int:
        return int(self.api.get("/status")["failovers_total"])

    def trial(self, kind: str, round_: int) -> Trial:
        self.wait_healthy()
        host, victim, remote, rip = self.pick(round_)
        pids = [self.charon_pid(victim), self.agent_pid(victim)]
        probe = subprocess.Popen(
            # -c, not -w: with a deadline ping quits at the first error, and a gateway whose
            # charon died answers "net unreachable" until its hosts are failed over.
            ["ip", "netns", "exec", self.topo.ns(host), "ping", "-n", "-D", "-i", str(PING_INTERVAL_S), "-W", "1",
             "-c", str(PROBE_PINGS), rip],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        try:
            time.sleep(1.0)
            t_inject = time.time()
            self.inject(kind, victim, pids)
            out, _ = probe.communicate(timeout=15)
        finally:
            if probe.poll() is None:
                probe.kill()
                probe.wait()
        gap, lost = max_gap_ms(out)
        dead_ts = self.dead_event_ts(victim, t_inject)
        t_restore = time.monotonic()
        self.restore(kind, victim, pids)
        share = self.share(victim)
        refill: float | None = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            g = self.gateways()[victim]
            if g["state"] in ("alive", "recovering") and g["buckets"] >= share:
                refill = time.monotonic() - t_restore
                break
            time.sleep(0.1)
        t = Trial(kind, victim, host, remote, round(gap, 1), lost,
                  None if dead_ts is None else round(1000 * (dead_ts - t_inject), 1),
                  None if refill is None else round(refill, 2))
        print(f"  {kind:6s} {victim} (probe {host} -> {remote}): gap {t.gap_ms:.0f} ms, {lost} lost, "
              f"declared dead after {t.detect_ms} ms, share {share} buckets back after {t.refill_s} s", flush=True)
        return t

    def soak(self, seconds: float) -> dict[str, Any]:
        self.wait_healthy()
        before = self.failovers()
        t0 = time.time()
        remotes = [str(r.ip) for r in self.topo.remote.hosts]
        busy_pings([(self.topo.ns(h.name), remotes[i % len(remotes)]) for i, h in enumerate(self.topo.hosts)], seconds)
        after = self.failovers()
        dead = [ev for ev in self.api.get("/events?limit=500")
                if ev.get("kind") == "gateway" and ev.get("reason") == "dead" and ev["ts"] >= t0]
        st = self.api.get("/status")
        return {"seconds": seconds, "failovers": after - before, "dead_events": len(dead),
                "dead_detail": [f"{e['src']}: {e['detail']}" for e in dead][:10],
                "heartbeats_rejected": st.get("heartbeats_rejected", {})}


def load_state() -> tuple[Topology, RunState] | None:
    state = RunState.load(STATE)
    if state is None or state.phase != "up":
        return None
    return load_topology(Path(state.topology)), state


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--two-site" in argv:  # both directions on the two-site emulation: two_site.py
        from bench.failover import two_site

        return two_site.main([a for a in argv if a != "--two-site"])
    ap = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5, help="trials per kind of failure (default 5)")
    ap.add_argument("--soak-s", type=float, default=180.0, help="soak duration in seconds (default 180)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench.failover: needs root (namespaces, signals to charon)", file=sys.stderr)
        return 2
    booted = False
    if load_state() is None:
        print("== emulation not up: `python -m topologies.run up`", flush=True)
        booted = True
        if subprocess.run([sys.executable, "-m", "topologies.run", "up"], cwd=REPO).returncode != 0:
            subprocess.run([sys.executable, "-m", "topologies.run", "down"], cwd=REPO)
            print("bench.failover: the emulation did not come up (see above)", file=sys.stderr)
            return 1
    loaded = load_state()
    assert loaded is not None
    emu = Emulation(*loaded)
    trials: list[Trial] = []
    try:
        for kind in KINDS:
            print(f"== {kind}: {args.trials} trials", flush=True)
            for i in range(args.trials):
                trials.append(emu.trial(kind, i))
        print(f"== soak: {args.soak_s:.0f} s under load", flush=True)
        soak = emu.soak(args.soak_s)
        print(f"  {soak}", flush=True)
    finally:
        if booted:
            subprocess.run([sys.executable, "-m", "topologies.run", "down"], cwd=REPO)
    write(trials, soak, args)
    return 0


def write(trials: list[Trial], soak: dict[str, Any], args: argparse.Namespace) -> None:
    metrics: dict[str, Metric] = {}
    for kind in KINDS:
        gaps = [t.gap_ms for t in trials if t.kind == kind]
        metrics[f"failover_{kind}_ms"] = Metric(round(statistics.median(gaps), 1), "ms", goal=GOAL_MS,
                                                higher_is_better=False, note=f"median of {len(gaps)}")
        metrics[f"failover_{kind}_max_ms"] = Metric(max(gaps), "ms", goal=GOAL_MS, higher_is_better=False,
                                                    note=f"worst of {len(gaps)}")
    refills = [t.refill_s for t in trials if t.refill_s is not None]
    missing = sum(1 for t in trials if t.refill_s is None)
    metrics["refill_s"] = Metric(statistics.median(refills) if refills else None, "s",
                                 note=f"median over {len(refills)} recoveries, idle system"
                                      + (f"; {missing} never got their share back in 60 s" if missing else ""))
    metrics["refill_max_s"] = Metric(max(refills) if refills else None, "s", note="worst recovery")
    metrics["spurious_failovers_soak"] = Metric(
        soak["failovers"], "failovers",
        note=f"goal 0; {soak['seconds']:.0f} s under load: two busy loops + 1200 B pings every 2 ms from every host")
    rows = [vars(t) for t in trials]
    series = [Series(kind, x=[i + 1 for i, t in enumerate([t for t in trials if t.kind == kind])],
                     y=[t.gap_ms for t in trials if t.kind == kind], xlabel="trial", ylabel="longest gap (ms)")
              for kind in KINDS]
    method = (
        f"One-site emulation (`make run`, eBPF switch, 3 strongSwan gateways with kernel-libipsec, real agents), "
        f"shipped defaults: UDP heartbeats every {HEARTBEAT_MS} ms, dead after {MISSED_HEARTBEATS} missed, "
        "port monitor on. Per trial: a LAN host pings a remote host every 10 ms (`ping -D -i 0.01`); after 1 s its "
        "gateway is frozen (SIGSTOP charon + agent), killed (SIGKILL both) or unplugged (its LAN interface down); the "
        "longest interval between two replies is the gap. The remote host's return path avoids the victim (one-site "
        "topology: the remote side is routed peers). detect_ms: failure to the controller's 'gateway dead' event. "
        "refill_s: restore (SIGCONT / `supergw-gateway up` + new agent / link up) until the victim holds "
        f"floor(K x weight / total weight) buckets again, on an otherwise idle system. {args.trials} trials per kind. "
        f"Soak: {soak['seconds']:.0f} s with two busy loops on this 2-core machine and 1200-byte pings every 2 ms from "
        f"every host through the tunnels; failovers counted from /api/v1/status (dead events: "
        f"{soak['dead_events']}, {soak['dead_detail']}; UDP heartbeats rejected: {soak['heartbeats_rejected']}). "
        "The machine is shared with other work, so this is a loaded machine."
    )
    paths = write_report("failover", metrics, rows, series, title="Gateway failover on the emulation (shipped defaults)",
                         method=method)
    print(f"wrote {paths.json}, {paths.markdown}, {paths.png}")


if __name__ == "__main__":
    sys.exit(main())
