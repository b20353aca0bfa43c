"""The switch replaced under traffic: what a restart, an upgrade or a crash of supergw-switch
costs the frames crossing it.

Each run sends RESTART_HOSTS hosts' frames, RATE_PER_HOST frames per second each, host ->
gateway (paced by sgw-traffic, every frame to its host's vmac, counted with the rewrite
checked at the gateways' veths), and RESTART_AT seconds into it replaces the switch process:

- `restart`: SIGTERM, then a new supergw-switch from the same command line (what `systemctl
  restart` and a package upgrade do), once its P4Runtime answers again;
- `crash`: SIGKILL, then a new one;
- `control` (negative control, must lose): the same restart of a switch started with
  --teardown-on-exit, whose data plane goes with its process as every switch's did before
  restarts were lossless; the new one is configured again over P4Runtime as the controller's
  reconcile would.

`lost` = frames sent - frames delivered, over the whole run (the generator's count against
the sinks'). No controller runs: the new switch has only what it adopted and its journal.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.dataplane import frames, testbed, trial
from bench.dataplane.cputime import SwitchMeter
from bench.dataplane.generators import Traffic
from bench.dataplane.lan_state import Lan

RESTART_HOSTS = 16
RATE_PER_HOST = 1000.0
RESTART_AT = 2.0  # seconds into the run
SECONDS = 6.0
SIZE = 64
KINDS = ("restart", "crash", "control")


@dataclass(frozen=True)
class Reconfigure:
    """What the runs need of runs.py, which holds the P4Runtime plumbing: wait for the new
    switch's gRPC, and write the LAN's state (the controller's reconcile of a fresh switch)."""

    wait_grpc: Callable[[], None]
    configure: Callable[[], None]


@dataclass(frozen=True)
class RestartRun:
    kind: str
    sent: int
    delivered: int
    down_s: float  # the old process signalled -> the new one answering P4Runtime (control: and configured)

    @property
    def lost(self) -> int:
        return self.sent - self.delivered

    def row(self) -> dict[str, object]:
        return {"what": f"switch {self.kind} under {RESTART_HOSTS} x {RATE_PER_HOST:,.0f} frames/s host -> gateway",
                "sent": self.sent, "delivered": self.delivered, "lost": self.lost, "switch_down_s": round(self.down_s, 3)}


def restart_direction(lan: Lan, hosts: list[frames.Host]) -> trial.Direction:
    """host -> gateway for `hosts` alone: the sinks' shares are those hosts' buckets'."""
    assignment = lan.assignment()
    sink_of = {g.port: f"{ns}:{testbed.FAR_END}" for g, ns in zip(lan.gateways, testbed.GATEWAY_NS)}
    shares = {sink: 0.0 for sink in sink_of.values()}
    for h in hosts:
        shares[sink_of[assignment[frames.bucket_of_host(h.mac, lan.buckets)].port]] += 1 / len(hosts)
    return trial.Direction("host -> gateway", f"{testbed.HOST_NS}:{testbed.FAR_END}", shares, trial.dst_rewritten,
                           "dst MAC = the receiving gateway's MAC")


def one(kind: str, bed: testbed.Testbed, traffic: Traffic, lan: Lan, plan: Path, direction: trial.Direction,
        reconfigure: Reconfigure) -> RestartRun:
    """One run: traffic for SECONDS, the switch replaced RESTART_AT seconds in."""
    rate = RATE_PER_HOST * RESTART_HOSTS
    meter = SwitchMeter(bed.switch_cpu, bed.switch_threads, bed.switch_pid)
    result: list[trial.Trial] = []
    failure: list[BaseException] = []

    def send() -> None:
        try:
            # The switch's threads change with the process: its CPU is not this run's figure.
            result.append(trial.run(traffic, direction, plan, SIZE, SECONDS, bed.traffic_cpu, meter, lan.vmac_base,
                                    lan.buckets, rate))
        except BaseException as exc:  # re-raised in the caller's thread
            failure.append(exc)

    sender = threading.Thread(target=send, name=f"restart-{kind}")
    sender.start()
    time.sleep(RESTART_AT)
    t0 = time.monotonic()
    bed.stop_switch(signal.SIGKILL if kind == "crash" else signal.SIGTERM)
    bed.start_switch()
    reconfigure.wait_grpc()
    if kind == "control":
        reconfigure.configure()  # the controller's reconcile of a switch that lost its state
    down = time.monotonic() - t0
    sender.join(SECONDS + 120)
    if failure:
        raise failure[0]
    if not result:
        raise testbed.TestbedError(f"switch {kind}: the traffic run did not end")
    t = result[0]
    return RestartRun(kind, t.traffic.sent, t.delivered, down)


def measure_restarts(bed: testbed.Testbed, traffic: Traffic, lan: Lan, tmp: Path, rows: list[dict[str, object]],
                     reconfigure: Reconfigure, say: Callable[[str], None]) -> dict[str, RestartRun]:
    """Every kind, in KINDS order; the switch is running and configured before and after."""
    hosts = [frames.Host(mac, ip) for mac, ip in lan.hosts[:RESTART_HOSTS]]
    direction = restart_direction(lan, hosts)
    plan = tmp / "plan-restart.bin"
    frames.write_plan(plan, frames.host_to_gateway(hosts, lan.vmac_base, lan.buckets), SIZE)
    out: dict[str, RestartRun] = {}
    for kind in KINDS:
        if kind == "control":
            # A switch that takes its data plane with it: started so, configured, then restarted.
            bed.stop_switch()
            testbed.teardown_dataplane()
            bed.start_switch(("--teardown-on-exit",))
            reconfigure.wait_grpc()
            reconfigure.configure()
        r = one(kind, bed, traffic, lan, plan, direction, reconfigure)
        rows.append(r.row())
        out[kind] = r
        say(f"switch {kind} under {RESTART_HOSTS} hosts x {RATE_PER_HOST:,.0f} frames/s: {r.lost} of {r.sent} frames "
            f"lost, the switch down {r.down_s:.2f} s")
    return out
