"""The controller's CPU per learned host, without a switch (no root, no lock).

    python -m bench.scale.learncost [--hosts 20000] [--profile FILE.pstats] [--top 25]

A cold start of H dual-stack hosts fed through the controller's real learning path, with
only the switch and the gRPC transport stood in for: per host one learn digest and one IPv6
learn digest (one item each, as the switch sends them), each decoded by finsy as its stream
reader does (`decode_stream`) into finsy's queue; then what the controller runs on a switch:
`gather_lists` (`learning.digest_list_size`, `digest_timeout_ms` of the shipped defaults),
`Southbound.pump` with `DIGESTS_IN_FLIGHT`, `Southbound.on_digests` / `on_ip6_digests`,
`HostLearning` and its `HostTable`, `Southbound.write_hosts`, and a stand-in session that
encodes each write as the real one does (`UpdateEncoder`), serializes the WriteRequest and
takes the switch's time for it (`--switch-rate` entries/s, the eBPF switch's measured batched
rate, as a sleep: it costs no CPU here), and encodes every digest ack as finsy's
`Switch.write` does (`encode_updates`, one StreamMessageRequest per ack, serialized, one
await each). Not in it: gRPC's own reads and writes on the stream (C core and its asyncio
glue, in `bench.scale`'s real runs), REST, heartbeats, reports.

Printed: the process CPU time (time.process_time) from the first digest into finsy's queue to
the last list acked, per host; and with `--profile` the functions that took it (cProfile, which
adds its own cost per call: the parts' shares count, the absolute µs less). It fails (exit 1)
when a host or an entry is missing: every host must be learned with its five entries.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finsy import p4entity
from finsy.p4schema import P4Schema
from finsy.proto import p4r

from supergw_proto import p4constants as pc
from supergw_controller.config import Config, parse_config
from supergw_controller.hosts import HostLearning
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import HostIdle, HostSeen, Ip6Idle, Ip6Seen, PacketIn
from supergw_controller.southbound.entities import Update, UpdateEncoder
from supergw_controller.southbound.session import Role
from supergw_controller.southbound.switch import DIGESTS_IN_FLIGHT, Southbound, digest_queue_size, gather_lists

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "v1model" / "supergw.p4info.txtpb"
HOST_PORT = 1
# The eBPF switch's host-table INSERTs in WriteRequests of 1,000 (bench/results/scale.md).
EBPF_ENTRIES_PER_S = 125_000
ENTRIES_PER_HOST = 5  # learned_sources, mac_table, host_ips; learned_ip6s, host_ip6s


def site_config(workdir: Path) -> Config:
    """One host port and four gateways, K = 4096, dual-stack, the learning defaults."""
    return parse_config(
        {
            "switch": {"address": "127.0.0.1:9559", "device_id": 1},
            "pipeline": {"p4info": str(P4INFO)},
            "gateway_ip": "10.0.0.1",
            "gateway_ip6": {"link_local": "fe80::1", "global": "2001:db8:10::1"},
            "buckets": 4096,
            "api": {"token": "learncost-harness-token"},
            "vmac_base": "02:5e:00:00:00:00",
            "ports": {HOST_PORT: "host", 11: "gateway", 12: "gateway", 13: "gateway", 14: "gateway"},
            "gateways": [
                {"name": f"gw{i}", "port": 10 + i, "mac": f"52:54:00:00:0a:{i:02x}", "heartbeat": False}
                for i in range(1, 5)
            ],
        },
        workdir,
    )


@dataclass
class StandInSession:
    """The switch session as the learning path uses it: writes encoded and serialized as the
    real session's, acks encoded as finsy's `Switch.write` does; the switch's time as a sleep."""

    schema: P4Schema
    entries_per_s: float
    role: Role = Role.PRIMARY
    errors: int = 0
    reconnects: int = 0
    entries: int = 0
    requests: int = 0
    acks: int = 0
    wire_bytes: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    expect_acks: int = 0
    _encoder: UpdateEncoder | None = None

    @property
    def cookie(self) -> int | None:
        return None

    def require_primary(self) -> None:
        pass

    async def write(self, updates: Sequence[Update], *, idempotent: bool = True) -> None:
        if not updates:
            return
        if self._encoder is None:
            self._encoder = UpdateEncoder(self.schema)
        request = p4r.WriteRequest(device_id=1, updates=self._encoder.encode(updates))
        self.wire_bytes += len(request.SerializeToString())
        self.entries += len(updates)
        self.requests += 1
        await asyncio.sleep(len(updates) / self.entries_per_s if self.entries_per_s else 0)

    async def send(self, msgs: Sequence[Any]) -> None:
        for msg in p4entity.encode_updates(list(msgs), self.schema):
            self.wire_bytes += len(msg.SerializeToString())
            await asyncio.sleep(0)  # finsy awaits each stream message's write
        self.acks += len(msgs)
        if self.acks >= self.expect_acks:
            self.done.set()

    async def read(self, entity: Any, *, yield_every: int = 0) -> list[Any]:
        return []

    async def read_or_none(self, entity: Any) -> list[Any] | None:
        return []


class Learner:
    """The core's side of learning (`ControllerCore` passes digests to `HostLearning`)."""

    def __init__(self, learning: HostLearning) -> None:
        self.learning = learning

    def role_changed(self, role: Role) -> None:
        pass

    async def primary(self) -> None:
        pass

    async def serving(self) -> None:
        pass

    async def backup(self) -> None:
        pass

    async def hosts_seen(self, hosts: list[HostSeen]) -> None:
        await self.learning.seen(hosts)

    async def hosts_idle(self, hosts: list[HostIdle]) -> None:
        await self.learning.idle(hosts)

    async def ip6s_seen(self, seen: list[Ip6Seen]) -> None:
        await self.learning.ip6s_seen(seen)

    async def ip6s_idle(self, idle: list[Ip6Idle]) -> None:
        await self.learning.ip6s_idle(idle)

    async def packet_in(self, packet: PacketIn) -> None:
        await self.learning.packet_in(packet)


def digest_messages(schema: P4Schema, hosts: int) -> tuple[list[p4r.StreamMessageResponse], list[p4r.StreamMessageResponse]]:
    """Each host's learn digest and IPv6 learn digest as the switch streams them (one item each)."""
    v4, v6 = schema.digests[pc.DIGEST_LEARN_DIGEST], schema.digests[pc.DIGEST_LEARN_IP6_DIGEST]
    spec4: Any = v4.type_spec  # a struct (finsy types every kind of P4 type here)
    spec6: Any = v6.type_spec
    out4, out6 = [], []
    for i in range(hosts):
        mac = 0x0200_0000_0000 | (i + 1)
        ip = (10 << 24) | (1 << 16) | (i + 2)
        ip6 = (0x2001_0DB8_0010_0000 << 64) | (i + 2)
        item4 = spec4.encode_data({pc.DIGEST_LEARN_DIGEST_SRC_MAC: mac, pc.DIGEST_LEARN_DIGEST_SRC_IP: ip,
                                          pc.DIGEST_LEARN_DIGEST_PORT: HOST_PORT})
        item6 = spec6.encode_data({pc.DIGEST_LEARN_IP6_DIGEST_SRC_MAC: mac,
                                          pc.DIGEST_LEARN_IP6_DIGEST_SRC_IP6: ip6,
                                          pc.DIGEST_LEARN_IP6_DIGEST_PORT: HOST_PORT})
        out4.append(p4r.StreamMessageResponse(digest=p4r.DigestList(digest_id=v4.id, list_id=i + 1, data=[item4])))
        out6.append(p4r.StreamMessageResponse(digest=p4r.DigestList(digest_id=v6.id, list_id=i + 1, data=[item6])))
    return out4, out6


@dataclass
class Outcome:
    hosts: int
    cpu_s: float
    wall_s: float
    session: StandInSession
    learned: int
    ip6s: int

    @property
    def us_per_host(self) -> float:
        return self.cpu_s / self.hosts * 1e6


async def cold_start(config: Config, hosts: int, entries_per_s: float, profiler: cProfile.Profile | None) -> Outcome:
    schema = P4Schema(config.pipeline.p4info)
    msgs4, msgs6 = digest_messages(schema, hosts)
    session = StandInSession(schema, entries_per_s, expect_acks=2 * hosts)
    southbound = Southbound(config, session=session)
    learning = HostLearning(config, southbound, capacity=ent.host_capacity(schema))
    southbound.listen(Learner(learning))
    size = digest_queue_size(None)
    finsy_queues: dict[int, asyncio.Queue[Any]] = {
        schema.digests[pc.DIGEST_LEARN_DIGEST].id: asyncio.Queue(size),
        schema.digests[pc.DIGEST_LEARN_IP6_DIGEST].id: asyncio.Queue(size),
    }

    async def read_digests(queue: asyncio.Queue[Any]) -> AsyncIterator[Any]:
        while True:
            yield await queue.get()

    async def switch_streams() -> None:
        """finsy's stream reader: one message at a time, decoded, into its digest's queue."""
        for m4, m6 in zip(msgs4, msgs6):
            for msg in (m4, m6):
                await finsy_queues[msg.digest.digest_id].put(p4entity.decode_stream(msg, schema))
                await asyncio.sleep(0)  # finsy awaits each message's read

    per_list, wait_s = config.learning.digest_list_size, config.learning.digest_timeout_ms / 1000
    pumps = [
        asyncio.create_task(southbound.pump(gather_lists(read_digests(q), per_list, wait_s, size), handle, what,
                                            DIGESTS_IN_FLIGHT))
        for q, handle, what in (
            (finsy_queues[schema.digests[pc.DIGEST_LEARN_DIGEST].id], southbound.on_digests, "digest"),
            (finsy_queues[schema.digests[pc.DIGEST_LEARN_IP6_DIGEST].id], southbound.on_ip6_digests, "IPv6 digest"),
        )
    ]
    await asyncio.sleep(0)
    if profiler is not None:
        profiler.enable()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    feeder = asyncio.create_task(switch_streams())
    await session.done.wait()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if profiler is not None:
        profiler.disable()
    for task in (feeder, *pumps):
        task.cancel()
    await asyncio.gather(feeder, *pumps, return_exceptions=True)
    return Outcome(hosts, cpu, wall, session, len(learning.table), learning.table.ip6_count)


PARTS = (
    # (part, functions whose cumulative time it is: "file:function")
    ("finsy decodes a digest message", ("p4entity.py:decode_stream",)),
    ("digest item -> HostSeen/Ip6Seen", ("entities.py:seen_hosts", "entities.py:seen_ip6s")),
    ("host table (learn, learn_ip6)", ("learning.py:learn", "learning.py:learn_ip6")),
    ("host writes -> updates (write_hosts)", ("switch.py:<listcomp>",)),
    ("entries encoded (UpdateEncoder)", ("entities.py:encode",)),
    ("acks encoded (finsy encode_updates)", ("p4entity.py:encode_updates",)),
)


def report_parts(stats: pstats.Stats, hosts: int) -> None:
    table: dict[tuple[str, int, str], Any] = stats.stats  # type: ignore[attr-defined]
    print(f"{'part (cProfile cumulative; overlapping parts are not summed)':60} {'µs/host':>9}")
    for part, names in PARTS:
        total = 0.0
        for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in table.items():
            if any(file.endswith(n.split(":")[0]) and func == n.split(":")[1] for n in names):
                total += ct
        print(f"{part:60} {total / hosts * 1e6:9.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=20_000)
    ap.add_argument("--switch-rate", type=float, default=EBPF_ENTRIES_PER_S,
                    help="entries/s the stand-in switch takes (0: no wait)")
    ap.add_argument("--profile", type=Path, help="cProfile the run and write its stats here")
    ap.add_argument("--top", type=int, default=25, help="functions listed with --profile")
    args = ap.parse_args(argv)
    profiler = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory() as tmp:
        config = site_config(Path(tmp))
        out = asyncio.run(cold_start(config, args.hosts, args.switch_rate, profiler))
    s = out.session
    print(f"hosts {out.hosts}: CPU {out.cpu_s:.2f} s = {out.us_per_host:.1f} µs/host "
          f"(wall {out.wall_s:.2f} s, {out.hosts / out.wall_s:,.0f} hosts/s on this core); "
          f"{s.entries} entries in {s.requests} writes ({s.entries / max(1, s.requests):.0f}/write), "
          f"{s.acks} acks, {s.wire_bytes / out.hosts:.0f} wire bytes/host")
    missing = []
    if out.learned != out.hosts or out.ip6s != out.hosts:
        missing.append(f"learned {out.learned} hosts and {out.ip6s} IPv6 addresses of {out.hosts}")
    if s.entries != ENTRIES_PER_HOST * out.hosts:
        missing.append(f"wrote {s.entries} entries, not {ENTRIES_PER_HOST * out.hosts} (one of each per host)")
    if profiler is not None:
        profiler.dump_stats(args.profile)
        stats = pstats.Stats(str(args.profile))
        report_parts(stats, out.hosts)
        stats.sort_stats("tottime").print_stats(args.top)
    if missing:
        print("FAILED: " + "; ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
