"""The controller's garbage-collection pauses at the scale point, without a switch (no root, no lock).

    python -m bench.scale.gcpauses [--hosts 50000] [--gateways 32] [--seconds 30] [--no-freeze]

One `ControllerCore` as the controller builds it (N gateways, K = 4096, the shipped defaults,
its GC policy `gcpolicy.GcPolicy` installed as `app.serve` installs it, unless `--no-freeze`:
the controller before the policy), on a stand-in switch session
(`learncost.StandInSession`: writes encoded and serialized as the real session's, no switch
time). Then:

1. adoption and learning: the switch holds the bucket map (round robin), the core serves;
   H dual-stack hosts learned through `ControllerCore.hosts_seen` / `ip6s_seen` in lists of
   `learning.digest_list_size` (the real host table and host writes);
2. an hour of history: `History`'s ring filled (`sample_history` 3,600 times with every
   gateway reporting, as a controller up for an hour holds it);
3. steady state for `--seconds` on the one event loop, all at once: every gateway's report
   (POST /gateways/{name}/report through the in-process REST app, each every 500 ms) and its
   heartbeat (`accept_heartbeat`, every 100 ms); a counter poll of all K buckets and a
   history sample every second; a REST reader doing GET /status, /gateways, /buckets,
   /hosts, /hosts?gateway=, /metrics one after the other, 20 GETs/s; a trickle of new hosts
   (10/s).

Every garbage collection is timed with `gc.callbacks` (its "start" to its "stop", by
generation; the policy's own work after a full collection included) per phase; printed:
count, p99 and max per generation and the time the loop stood still; at each phase's end the
objects a full collection would walk (`len(gc.get_objects())`: frozen ones are in no
generation), the frozen ones (`gc.get_freeze_count()`) and the policy's freezes so far; the
GETs' p50/p99/max, per path too. Timings are this shared machine's, printed, never asserted;
it fails (exit 1) only when a GET or a report failed or a host was not learned.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from finsy.p4schema import P4Schema

from bench.scale.analysis import percentile
from bench.scale.learncost import P4INFO, StandInSession
from supergw_controller.api import API_PREFIX, create_app
from supergw_controller.compose import ControllerCore
from supergw_controller.config import Config, parse_config
from supergw_controller.gcpolicy import GcPolicy
from supergw_controller.southbound.domain import HostSeen, Ip6Seen
from supergw_proto.reports import GatewayReport, Heartbeat, IpsecBackend, SaState

TOKEN = "gcpauses-harness-token"
HOST_PORT = 1
READS = ("/status", "/gateways", "/buckets", "/hosts", "/hosts?gateway=gw01&limit=100", "/metrics")


def site_config(workdir: Path, gateways: int, buckets: int) -> Config:
    return parse_config(
        {
            "switch": {"address": "127.0.0.1:9559", "device_id": 1},
            "pipeline": {"p4info": str(P4INFO)},
            "gateway_ip": "10.0.0.1",
            "gateway_ip6": {"link_local": "fe80::1", "global": "2001:db8:10::1"},
            "buckets": buckets,
            "api": {"token": TOKEN},
            "vmac_base": "02:5e:00:00:00:00",
            "ports": {HOST_PORT: "host"} | {100 + i: "gateway" for i in range(gateways)},
            "gateways": [
                {"name": f"gw{i + 1:02d}", "port": 100 + i, "mac": f"52:54:00:00:{i // 256:02x}:{i % 256:02x}",
                 "agent_token": f"gcpauses-agent-{i + 1:02d}-token"}
                for i in range(gateways)
            ],
        },
        workdir,
    )


@dataclass
class Pauses:
    """Every collection of one phase: (generation, ms); at its end, the objects a full
    collection walks, the frozen ones and the policy's freezes so far."""

    by_gen: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    end: str = ""

    def line(self) -> str:
        parts = []
        for gen in (0, 1, 2):
            ms = sorted(self.by_gen.get(gen, []))
            if ms:
                parts.append(f"gen{gen}: {len(ms)}, p99 {pct(ms, 99):.1f} ms, max {ms[-1]:.1f} ms")
            else:
                parts.append(f"gen{gen}: 0")
        total = sum(sum(v) for v in self.by_gen.values())
        return "; ".join(parts) + f"; stopped {total:.0f} ms in all" + (f"\n{'':34}{self.end}" if self.end else "")


def pct(ms: list[float], p: float) -> float:
    return percentile(ms, p) or 0.0


class PauseClock:
    """gc.callbacks: each collection's start -> stop, into the current phase's `Pauses`."""

    def __init__(self) -> None:
        self.phases: dict[str, Pauses] = {}
        self.current = Pauses()
        self._t0 = 0

    def phase(self, name: str, freezes: int) -> None:
        self.current.end = (f"then: {len(gc.get_objects())} objects walked by a full collection, "
                            f"{gc.get_freeze_count()} frozen, {freezes} freezes")
        self.current = self.phases[name] = Pauses()

    def __call__(self, what: str, info: dict[str, Any]) -> None:
        if what == "start":
            self._t0 = time.perf_counter_ns()
        else:
            self.current.by_gen[info["generation"]].append((time.perf_counter_ns() - self._t0) / 1e6)


def mac(i: int) -> str:
    return f"02:00:00:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}"


async def learn(core: ControllerCore, first: int, count: int, per_list: int) -> None:
    for s in range(first, first + count, per_list):
        ids = range(s, min(first + count, s + per_list))
        await core.hosts_seen([HostSeen(mac(i), HOST_PORT, f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}") for i in ids])
        await core.ip6s_seen([Ip6Seen(mac(i), HOST_PORT, f"2001:db8:10::{i >> 16:x}:{i & 0xFFFF:x}") for i in ids])


def report(gateway: str, t: float) -> GatewayReport:
    n = int(t * 1000)
    return GatewayReport(gateway=gateway, timestamp=t, backend=IpsecBackend.LIBIPSEC, cpu_percent=30.0,
                         softirq_percent=2.0, charon_cpu_percent=25.0, tunnel_bytes_in=1500 * n,
                         tunnel_bytes_out=1400 * n, tunnel_packets_in=n, tunnel_packets_out=n,
                         sas=[SaState(name="site", kind="ike", state="ESTABLISHED", established_s=3600, bytes_in=0,
                                      bytes_out=0, packets_in=0, packets_out=0),
                              SaState(name="site-lan", kind="child", state="INSTALLED", established_s=600,
                                      bytes_in=1500 * n, bytes_out=1400 * n, packets_in=n, packets_out=n)])


async def every(interval: float, step: Callable[[], Any], stop: asyncio.Event) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        r = step()
        if asyncio.iscoroutine(r):
            await r
        await asyncio.sleep(max(0.0, interval - (time.perf_counter() - t0)))


async def run(args: argparse.Namespace, workdir: Path) -> int:
    config = site_config(workdir, args.gateways, args.buckets)
    session = StandInSession(P4Schema(config.pipeline.p4info), 0)
    policy = GcPolicy()
    core = ControllerCore(config, None, session=session, heartbeat_udp=False)
    names = [g.name for g in config.gateways]
    clock = PauseClock()
    failures: list[str] = []
    with contextlib.ExitStack() as stack:
        if not args.no_freeze:
            stack.enter_context(policy.installed())  # first: its work after a full collection is in the pause timed
        gc.callbacks.append(clock)
        stack.callback(gc.callbacks.remove, clock)
        clock.phase("adopt + learn", policy.freezes)
        await core.load_intent()
        await core.primary()  # reconcile: the empty switch gets the bucket map
        await core.placement.serve()
        t0 = time.perf_counter()
        await learn(core, 0, args.hosts, config.learning.digest_list_size)
        learn_s = time.perf_counter() - t0
        if len(core.hosts_learning.table) != args.hosts:
            failures.append(f"learned {len(core.hosts_learning.table)} of {args.hosts} hosts")

        clock.phase("an hour of history", policy.freezes)
        t = time.time()
        for s in range(core.eventlog.history.capacity):
            for name in names:
                core.liveness.registry.get(name).last_report = report(name, t + s)
            core.sample_history()

        clock.phase("steady state", policy.freezes)
        stop = asyncio.Event()
        latencies: dict[str, list[float]] = defaultdict(list)
        hosts = [args.hosts]
        polls = [0]
        app = create_app(core, config)

        async def post_reports(client: httpx.AsyncClient) -> None:
            for i, name in enumerate(names):
                r = await client.post(f"{API_PREFIX}/gateways/{name}/report", content=report(name, time.time()).model_dump_json(),
                                      headers={"Authorization": f"Bearer gcpauses-agent-{i + 1:02d}-token",
                                               "Content-Type": "application/json"})
                if r.status_code != 204:
                    failures.append(f"report of {name}: {r.status_code} {r.text[:200]}")

        async def heartbeats() -> None:
            for name in names:
                await core.accept_heartbeat(Heartbeat(gateway=name, timestamp=time.time()))

        def poll() -> None:
            polls[0] += 1
            p = polls[0]
            core.stats.update(time.monotonic(), {b: (p * (b + 1), p * 1500 * (b + 1)) for b in range(config.buckets)})
            core.sample_history()

        async def trickle() -> None:
            await learn(core, hosts[0], 10, 10)
            hosts[0] += 10

        async def reader(client: httpx.AsyncClient) -> None:
            i = 0
            while not stop.is_set():
                path = READS[i % len(READS)]
                i += 1
                t0 = time.perf_counter()
                r = await client.get(path if path == "/metrics" else API_PREFIX + path,
                                     headers={"Authorization": f"Bearer {TOKEN}"})
                latencies[path].append(1000 * (time.perf_counter() - t0))
                if r.status_code != 200:
                    failures.append(f"GET {path}: {r.status_code} {r.text[:200]}")
                await asyncio.sleep(max(0.0, 0.05 - (time.perf_counter() - t0)))

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sgw") as client:
            tasks = [asyncio.create_task(c) for c in (
                every(0.5, lambda: post_reports(client), stop), every(0.1, heartbeats, stop),
                every(1.0, poll, stop), every(1.0, trickle, stop), reader(client))]
            await asyncio.sleep(args.seconds)
            stop.set()
            await asyncio.gather(*tasks)
        clock.phase("end", policy.freezes)  # (before the policy is removed: it thaws what it froze)

    print(f"{'freeze policy off (--no-freeze)' if args.no_freeze else 'GcPolicy (as shipped)'}: "
          f"N = {args.gateways}, K = {args.buckets}, {args.hosts} hosts learned in {learn_s:.1f} s, "
          f"{args.seconds:.0f} s steady state; {policy.freezes} freezes")
    del clock.phases["end"]
    for name, pauses in clock.phases.items():
        print(f"  GC pauses, {name:20} {pauses.line()}")
    everything = sorted(ms for p in latencies.values() for ms in p)
    print(f"  GETs: {len(everything)}, p50 {statistics.median(everything):.1f} ms, p99 {pct(everything, 99):.1f} ms, "
          f"max {everything[-1]:.1f} ms")
    for path, ms in latencies.items():
        ms.sort()
        print(f"    {path:32} {len(ms):4} GETs, p50 {statistics.median(ms):6.1f} ms, p99 {pct(ms, 99):6.1f} ms, "
              f"max {ms[-1]:6.1f} ms")
    if failures:
        print("FAILED: " + "; ".join(sorted(set(failures))[:10]), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=50_000)
    ap.add_argument("--gateways", type=int, default=32)
    ap.add_argument("--buckets", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=30.0, help="steady state")
    ap.add_argument("--no-freeze", action="store_true", help="the controller before its GC policy: never freeze")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
