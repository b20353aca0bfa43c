"""P4Runtime write rates of both targets: batched host-table writes (what learning sends) and
full-table rewrites (the bucket table, a whole site's host tables), on a switch of their own.

A switch lab (topologies/switchlab.py: the switch's namespace, one port, a management link)
runs the eBPF `supergw-switch` or BMv2 `simple_switch_grpc` (the perf build when installed:
no logging macros, as bench/dataplane measures BMv2). A primary session (`supergw_p4rt`)
writes entries encoded as the controller encodes them (`HostEncoder`, `BucketEncoder`),
encoded before the clock starts: each number is the switch's time to take the writes, from
sending a WriteRequest to its answer, over gRPC on this machine.
"""

from __future__ import annotations

import ipaddress
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.dataplane.bmv2 import PERF_BUILD, logging_compiled_in
from bench.scale import analysis
from finsy import P4TableEntry
from finsy.proto import p4r
from supergw_controller.southbound.domain import HostIp, HostIp6, HostWrite, L2Entry, LearnedIp6, LearnedSource, Op
from supergw_controller.southbound.entities import BucketEncoder, BucketEntry, HostEncoder, host_update
from supergw_p4rt import DELETE, P4RuntimeSession, load_schema
from supergw_proto import p4constants as pc
from topologies import bmv2
from topologies.paths import BMV2_JSON, P4INFO, SWITCH_BIN
from topologies.switch import SwitchCommand, pin_dir
from topologies.switchlab import Endpoint, MgmtLink, SwitchLab

PREFIX = "sgw-scw"
MGMT = MgmtLink(ipaddress.IPv4Network("10.219.64.0/30"))
ADDR = f"{MGMT.switch_ip}:9559"
DEVICE_ID = 841
IDLE_NS = 300 * 10**9
GATEWAY_PORTS = (11, 12)
GATEWAY_MAC = "02:64:00:00:01:01"
Say = Callable[[str], None]


class Unavailable(RuntimeError):
    """A target cannot run here; the message says why."""


@dataclass
class BatchRate:
    batch: int  # updates per WriteRequest
    requests_ms: list[float]
    entries: int

    @property
    def entries_per_s(self) -> float:
        return self.entries / (sum(self.requests_ms) / 1000)

    def row(self, target: str) -> dict[str, Any]:
        p50, p99 = analysis.percentile(self.requests_ms, 50), analysis.percentile(self.requests_ms, 99)
        return {"target": target, "batch": self.batch, "requests": len(self.requests_ms), "entries": self.entries,
                "entries_per_s": round(self.entries_per_s), "p50_ms": None if p50 is None else round(p50, 2),
                "p99_ms": None if p99 is None else round(p99, 2)}


@dataclass
class TargetWrites:
    target: str
    binary: str
    batches: list[BatchRate] = field(default_factory=list)
    buckets_insert_ms: float | None = None
    buckets_modify_ms: float | None = None
    site_hosts: int = 0
    site_entries: int = 0
    site_insert_s: float | None = None  # every host entry of a site, in batches of SITE_BATCH
    site_delete_s: float | None = None

    def best(self) -> BatchRate | None:
        return max(self.batches, key=lambda b: b.entries_per_s, default=None)


SITE_BATCH = 1000


def host_writes(hosts: int, first: int = 0) -> list[HostWrite]:
    """What learning writes for `hosts` dual-stack hosts: learned_sources, mac_table, host_ips,
    learned_ip6s, host_ip6s per host (5 entries)."""
    out: list[HostWrite] = []
    for k in range(first, first + hosts):
        mac = f"02:65:{(k >> 24) & 255:02x}:{(k >> 16) & 255:02x}:{(k >> 8) & 255:02x}:{k & 255:02x}"
        ip = str(ipaddress.IPv4Address(0x0A400100 + k))
        ip6 = str(ipaddress.IPv6Address(0xFD000064 << 96 | 0x100 + k))
        out += [HostWrite(Op.INSERT, LearnedSource(mac, 1)), HostWrite(Op.INSERT, L2Entry(mac, 1)),
                HostWrite(Op.INSERT, HostIp(ip, mac)), HostWrite(Op.INSERT, LearnedIp6(ip6, mac)),
                HostWrite(Op.INSERT, HostIp6(ip6, mac))]
    return out


def _encode(enc: HostEncoder, writes: list[HostWrite]) -> list[p4r.Update]:
    return [enc.encode(u.op, u.entity) for u in (host_update(w, IDLE_NS) for w in writes)]


def _delete_all(session: P4RuntimeSession, tables: tuple[str, ...]) -> None:
    for table in tables:
        entries = session.read([P4TableEntry(table)])
        for i in range(0, len(entries), 5000):
            ups = []
            for e in entries[i : i + 5000]:
                u = p4r.Update(type=DELETE)
                u.entity.table_entry.table_id = e.table_entry.table_id
                u.entity.table_entry.match.extend(e.table_entry.match)
                ups.append(u)
            session.write(ups)


HOST_TABLES = (pc.TABLE_LEARNED_SOURCES, pc.TABLE_MAC_TABLE, pc.TABLE_HOST_IPS, pc.TABLE_LEARNED_IP6S,
               pc.TABLE_HOST_IP6S)


def measure_target(session: P4RuntimeSession, target: str, binary: str, batches: tuple[int, ...], per_batch: int,
                   site_hosts: int, say: Say) -> TargetWrites:
    enc = HostEncoder(session.schema)
    out = TargetWrites(target, binary)
    for batch in batches:
        total = max(batch, per_batch - per_batch % batch)
        ups = _encode(enc, host_writes(-(-total // 5)))[:total]
        times = [1000 * session.write(ups[i : i + batch]) for i in range(0, len(ups), batch)]
        out.batches.append(BatchRate(batch, times, len(ups)))
        say(f"     {target}: batches of {batch}: {out.batches[-1].entries_per_s:,.0f} entries/s")
        _delete_all(session, HOST_TABLES)
    buckets = BucketEncoder(session.schema)
    ins = [buckets.encode(Op.INSERT, BucketEntry(b, GATEWAY_PORTS[b % 2], GATEWAY_MAC)) for b in range(pc.MAX_BUCKETS)]
    mod = [buckets.encode(Op.MODIFY, BucketEntry(b, GATEWAY_PORTS[(b + 1) % 2], GATEWAY_MAC)) for b in range(pc.MAX_BUCKETS)]
    out.buckets_insert_ms = 1000 * session.write(ins)
    out.buckets_modify_ms = 1000 * session.write(mod)
    if site_hosts:
        ups = _encode(enc, host_writes(site_hosts))
        t0 = time.perf_counter()
        for i in range(0, len(ups), SITE_BATCH):
            session.write(ups[i : i + SITE_BATCH])
        out.site_insert_s = time.perf_counter() - t0
        out.site_hosts, out.site_entries = site_hosts, len(ups)
        t0 = time.perf_counter()
        _delete_all(session, HOST_TABLES)
        out.site_delete_s = time.perf_counter() - t0
        say(f"     {target}: a site of {site_hosts} hosts ({len(ups)} entries) in {out.site_insert_s:.1f} s")
    return out


@contextmanager
def switch(target: str, workdir: Path) -> Iterator[tuple[P4RuntimeSession, str]]:
    """A switch lab with `target` running, and a primary session with its pipeline set."""
    if target == "ebpf":
        if not SWITCH_BIN.is_file():
            raise Unavailable(f"{SWITCH_BIN} is missing (make switch)")
        binary, config = SWITCH_BIN, b""
    else:
        found = PERF_BUILD if PERF_BUILD.is_file() else bmv2.binary()
        if found is None:
            raise Unavailable(f"{bmv2.BINARY} is not installed: {bmv2.INSTALL}")
        if not BMV2_JSON.is_file() or bmv2.stale_json() is not None:
            raise Unavailable(f"no current BMv2 JSON: run `make p4` ({BMV2_JSON})")
        binary, config = found, BMV2_JSON.read_bytes()
    lab = SwitchLab(PREFIX, [Endpoint("h", 1)], mgmt=MGMT)
    pins = pin_dir(PREFIX)
    lab.build()
    cmd = SwitchCommand(target, DEVICE_ID, ADDR, 255, lab.ports(), pin_dir=pins if target == "ebpf" else None,  # type: ignore[arg-type]
                        binary=binary)
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / f"writes-{target}.log", "wb") as log:
        proc = subprocess.Popen(["ip", "netns", "exec", lab.switch_ns, *cmd.argv()], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                session = P4RuntimeSession.connect_primary(ADDR, DEVICE_ID, 1, load_schema(P4INFO, config), timeout=3,
                                                           rpc_timeout=120)
                break
            except Exception as exc:  # noqa: BLE001 - the server is still starting
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise Unavailable(f"{target} switch did not serve P4Runtime: {exc} (log {log.name})") from None
                time.sleep(0.3)
        try:
            session.set_pipeline()
            built = "no logging macros" if target == "bmv2" and not logging_compiled_in(binary) else ""
            yield session, f"{binary}{' (' + built + ')' if built else ''}"
        finally:
            session.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        lab.teardown()
        if pins.exists():
            shutil.rmtree(pins, ignore_errors=True)


def measure(targets: tuple[str, ...], batches: tuple[int, ...], per_batch: int, site_hosts: int, workdir: Path,
            say: Say) -> tuple[list[TargetWrites], dict[str, str]]:
    """Every target that runs here; the others with the reason."""
    done, missing = [], {}
    for target in targets:
        try:
            with switch(target, workdir) as (session, binary):
                done.append(measure_target(session, target, binary, batches, per_batch, site_hosts, say))
        except Unavailable as exc:
            missing[target] = str(exc)
            say(f"     {target}: not measured: {exc}")
    return done, missing
