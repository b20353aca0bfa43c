"""Replicated controllers: leader kills and leader partitions on a real switch and a real etcd.

`python -m bench.ha [--kills 5] [--partitions 20] [--switch ebpf]` (root; run it under
`flock /tmp/supergw-netns.lock`). Shipped defaults throughout: `ha:` defaults (lease 2 s,
fence margin 0.5 s), `store.etcd.timeout_s` 1 s, every `timing` default. One etcd member on
loopback (started here, the test fixture's flags), a switch in namespaces with 2 hosts and
2 gateways (the controller integration tests' topology), 3 replicas (the real CLI), stand-in
agents posting heartbeats to every replica every heartbeat interval.

- **takeover_s** (median over the kills): from the SIGKILL of the leader to the moment a
  new leader is primary on the switch with its state reconciled from the switch, i.e. its
  failover and rebalancing loops run again (the new leader's log line "primary on the
  switch and reconciled", wall clock, same host). At the instant of each kill one gateway
  also goes silent (its heartbeats stop), so the new leader has a failover to do:
  **failover_s** is from the kill to the new leader's failover write (its "moved N
  buckets (failover...)" log line), gateway death detection (3 x 100 ms) included.
  **takeover_rewrites**: the switch updates the new leaders' reconciles wrote (they read
  the switch back and write only what differs: 0 when nothing was wrong).
- **takeover_loss**: packets lost by a probe (ping every 10 ms from a host to the remote
  site through the switch and a gateway) that runs across all kills.
- **split_brain_writes** (over the partitions): an operator client asks every replica, every
  20 ms each, to move one bucket (alternating gateways, so each request a leader accepts is a
  switch write). The leader's relay to etcd is then blackholed (its switch stream stays).
  Every replica records, per term it led, when the switch accepted its writes (sent before
  the first, answered after the last: `/healthz` `ha.writes`). Split brain = a pair of terms
  whose windows overlap (the older term's last write answered after the newer term's first
  was sent); each such pair counts as one (at least one write). A trial proves something
  only when both leaders wrote (`accepted_old`, `accepted_new` > 0 in the rows).
  `stepdown_s` is from the cut to the old leader's step-down.

Writes bench/results/ha.{json,md,png}.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
for _p in (REPO / "controller" / "tests", REPO / "controller" / "tests" / "integration"):
    sys.path.insert(0, str(_p))

from bench.report import Metric, Series, write_report  # noqa: E402
from etcd_server import EtcdServer, etcd_binary, start_etcd  # noqa: E402
from sgwctl_ha import Replica, make_replicas, wait_one_leader  # noqa: E402
from sgwctl_harness import TOKEN, Heartbeats, Setup, skip_reason  # noqa: E402
from sgwctl_topo import REMOTE_IP, Endpoint, Topology  # noqa: E402
from supergw_controller.config import TimingConfig  # noqa: E402
from sgwctl_ha import Writer, overlaps, write_windows  # noqa: E402

GOAL_TAKEOVER_S = 1.0
GATEWAYS = ["g1", "g2"]
NAMES = ["ha-a", "ha-b", "ha-c"]
FIRST_PORT = 18781


def say(msg: str) -> None:
    print(f"bench/ha: {msg}", flush=True)


@dataclass
class Kill:
    trial: int
    old: str
    new: str
    old_term: int
    new_term: int
    takeover_s: float | None
    failover_s: float | None
    reconcile_updates: int | None  # what the new leader wrote when it took over (0: nothing was wrong)


@dataclass
class Partition:
    trial: int
    old: str
    new: str
    accepted_old: int
    accepted_new: int
    split_brain: int  # term pairs (old, new) whose accepted switch writes could overlap
    stepdown_s: float | None
    http_accepted_old: int
    http_accepted_new: int


class Probe:
    """ping every 10 ms from `host` until `stop()`: (transmitted, received)."""

    def __init__(self, host: Endpoint) -> None:
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", host.ns, "ping", "-n", "-q", "-i", "0.01", "-W", "2", REMOTE_IP],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def stop(self) -> tuple[int, int]:
        time.sleep(2.0)  # the last echoes come back
        self.proc.send_signal(signal.SIGINT)  # ip netns exec execs ping: the signal is ping's
        out, _ = self.proc.communicate(timeout=30)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        if m is None:
            raise RuntimeError(f"probe output without a summary: {out[-500:]}")
        return int(m.group(1)), int(m.group(2))


def _term(r: Replica) -> int:
    return int(r.ha().get("term", 0))


def _wait_backup(r: Replica, leader: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        h = r.ha()
        if h.get("role") == "backup" and h.get("leader") == leader and (r.health() or {}).get("role") == "backup":
            return
        time.sleep(0.05)
    raise TimeoutError(f"{r.name} not a backup of {leader} after {timeout}s: {r.health()}")


def _settled_leader(reps: list[Replica]) -> Replica:
    """The one leader, once every other replica follows it as a backup."""
    leader = wait_one_leader(reps, 30)
    for r in reps:
        if r is not leader:
            _wait_backup(r, leader.name)
    return leader


def _wait_alive(r: Replica, gateway: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gws = {g["name"]: g for g in r.controller.get("/gateways")}
        if gws[gateway]["alive"] and any(b == gateway for b in r.controller.bucket_of_gateway().values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{gateway} did not come back with buckets on {r.name}")


def run_kills(reps: list[Replica], beats: Heartbeats, n: int) -> list[Kill]:
    out = []
    for i in range(n):
        old = _settled_leader(reps)
        _wait_alive(old, "g1")
        time.sleep(0.5)
        old_term = _term(old)
        killed_at = time.time()
        beats.silenced.add("g1")
        old.controller.stop(signal.SIGKILL)
        new = wait_one_leader([r for r in reps if r is not old], 30)
        ready = new.controller.log_time_of("primary on the switch and reconciled", after=killed_at)
        deadline = time.monotonic() + 15
        moved = None
        while moved is None and time.monotonic() < deadline:
            moved = new.controller.log_time_of("buckets (failover", after=killed_at)
            time.sleep(0.05)
        m = None
        for line in new.controller.log_tail(400_000).splitlines():
            if 'msg="reconciled:' in line:
                m = re.search(r"reconciled: (\d+) updates", line)
        k = Kill(
            i,
            old.name,
            new.name,
            old_term,
            _term(new),
            None if ready is None else ready - killed_at,
            None if moved is None else moved - killed_at,
            None if m is None else int(m.group(1)),
        )
        say(f"kill {i}: {k}")
        out.append(k)
        beats.silenced.discard("g1")
        old.controller.start("backup")
    return out


def run_partitions(reps: list[Replica], n: int) -> list[Partition]:
    out = []
    for i in range(n):
        old = _settled_leader(reps)
        old_term = _term(old)
        with Writer(reps, bucket=5) as w:
            time.sleep(0.5)
            cut_at = time.time()
            old.link.cut()
            new = wait_one_leader(reps, 30, not_=old)
            time.sleep(1.0)
        old.link.heal()
        new_term = _term(new)
        stepped = old.controller.log_time_of("stepping down", after=cut_at)
        windows = write_windows(reps)
        pairs = [p for p in overlaps(windows) if new_term in p]
        p = Partition(
            i,
            old.name,
            new.name,
            int(windows[old_term][1]["writes"]) if old_term in windows else 0,
            int(windows[new_term][1]["writes"]) if new_term in windows else 0,
            len(pairs),
            None if stepped is None else stepped - cut_at,
            len(w.accepted(old.name)),
            len(w.accepted(new.name)),
        )
        say(f"partition {i}: {p}")
        out.append(p)
        _wait_backup(old, new.name)
    return out


def _median(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ha", description=__doc__)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--switch", choices=["ebpf", "bmv2"], default="ebpf")
    args = ap.parse_args(argv)
    why = skip_reason(args.switch) or (None if etcd_binary() else "etcd is not installed (Debian etcd-server)")
    if os.geteuid() != 0:
        why = "needs root (network namespaces)"
    if why:
        say(f"cannot run: {why}")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-ha-"))
    topo = Topology(tag="hab", index=13, prefix="sgw-ctl", log_dir=tmp, switch=args.switch)
    setup = Setup(topo=topo, tmp=tmp)
    etcd: EtcdServer | None = None
    reps: list[Replica] = []
    try:
        topo.create(hosts=2, gateways=2)
        topo.start_switch()
        etcd = start_etcd(tmp / "etcd")
        timing = TimingConfig().model_dump()
        reps = make_replicas(setup, etcd.endpoint, NAMES, FIRST_PORT, timing=timing)
        interval = TimingConfig().heartbeat_interval_ms / 1000.0
        with Heartbeats([r.controller for r in reps], GATEWAYS, interval=interval) as beats:
            reps[0].controller.start("primary")
            for r in reps[1:]:
                r.controller.start("backup")
            host = topo.endpoints["h1"]
            if host.ping(REMOTE_IP, count=3, interval=0.1)[1] != 3:
                raise RuntimeError("no path from h1 to the remote site before the kills")
            probe = Probe(host)
            time.sleep(1.0)
            kills = run_kills(reps, beats, args.kills)
            sent, got = probe.stop()
            parts = run_partitions(reps, args.partitions)
    finally:
        for r in reps:
            r.controller.stop(signal.SIGKILL)
            r.link.close()
        if etcd is not None:
            etcd.cleanup()
        topo.destroy()
    takeover = _median([k.takeover_s for k in kills])
    failover = _median([k.failover_s for k in kills])
    split = sum(p.split_brain for p in parts)
    proving = sum(1 for p in parts if p.accepted_old and p.accepted_new)
    stepdown = _median([p.stepdown_s for p in parts])
    metrics = {
        "takeover_s": Metric(
            takeover, "s", goal=GOAL_TAKEOVER_S, higher_is_better=False, note=f"median of {len(kills)} leader SIGKILLs"
        ),
        "takeover_loss": Metric(
            float(sent - got), "packets", note=f"of {sent} probe packets (10 ms) across all kills"
        ),
        "split_brain_writes": Metric(
            float(split),
            "writes",
            note=f"over {len(parts)} leader partitions from etcd ({proving} with writes of both leaders)",
        ),
        "takeover_rewrites": Metric(
            float(sum(k.reconcile_updates or 0 for k in kills)),
            "updates",
            note="switch updates the new leaders' reconciles wrote (0: the bucket map read back was right)",
        ),
        "failover_s": Metric(failover, "s", higher_is_better=False, note="kill -> new leader's failover write (median)"),
        "stepdown_s": Metric(
            stepdown, "s", higher_is_better=False, note="etcd cut -> old leader steps down (median; lease 2 s, margin 0.5 s)"
        ),
    }
    rows: list[dict[str, Any]] = [{"kind": "kill", **k.__dict__} for k in kills]
    rows += [{"kind": "partition", **p.__dict__} for p in parts]
    series = [
        Series(
            "takeover_s (new leader primary, reconciled)",
            x=[k.trial for k in kills],
            y=[k.takeover_s for k in kills],
            xlabel="leader SIGKILL #",
            ylabel="seconds after the kill",
        ),
        Series(
            "failover_s (its failover write)",
            x=[k.trial for k in kills],
            y=[k.failover_s for k in kills],
            xlabel="leader SIGKILL #",
            ylabel="seconds after the kill",
        ),
    ]
    write_report("ha", metrics, rows=rows, series=series, method=__doc__ or "")
    say(f"takeover_s={takeover} takeover_loss={sent - got} split_brain_writes={split} (results in bench/results/ha.*)")
    ok = takeover is not None and takeover <= GOAL_TAKEOVER_S and sent == got and split == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
