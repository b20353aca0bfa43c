"""Learning a point's hosts: from each simulated host's first frame to its entries on the switch.

The hosts all start at once (a cold start of the site: the hardest case for learning). Each
host's first frame is stamped by supergw-hostsim (`first_tx_ns`, CLOCK_MONOTONIC); the
switch's `host_ips` (IPv4, written in the same batch as `learned_sources` and `mac_table`,
after them) is read every `poll_interval`, `host_ip6s` every second time, and a host counts as
learned at the start of the first read that holds its address: its latency is accurate to
one poll interval (stated in the report). On the eBPF switch the pinned maps are read
(`bpfmaps.py`: no lock of the switch's, a few milliseconds for 50,000 entries); on BMv2 a
stream-less P4Runtime session reads the tables (its reads cost BMv2 too; their time is
reported). The controller's and the switch's CPU over the run are charged to learning.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.scale import analysis, plan
from bench.scale.bpfmaps import PinnedMap
from bench.scale.procstat import sample
from bench.scale.site import ScaleSite
from bench.scale.switchtables import Observer, Seen
from supergw_proto import p4constants as pc
from topologies.paths import P4INFO
from topologies.switch import lasting_pin_dir

STALL_S = 30.0  # no new host on the switch for this long: the run ends with what it has
V6_EVERY = 2  # host_ip6s is read at every second poll of host_ips


def poll_interval(hosts: int, switch: str) -> float:
    """The pinned maps cost milliseconds to read, whatever their size; a P4Runtime read of 50,000
    entries holds BMv2's or the eBPF server's lock for tens: poll those less as the table grows."""
    if switch == "ebpf":
        return 0.05 if hosts <= 5000 else 0.25  # 50,000 keys: a few ms of bpf() but ~40 ms of Python
    return 0.1 if hosts <= 5000 else 0.5


class Tables(Protocol):
    """Where the learned addresses are read from, as the switch holds them."""

    def poll(self, table: str, seen: Seen) -> int: ...
    def close(self) -> None: ...


class PinnedTables:
    """The eBPF switch's `sgw_host_ips` / `sgw_host_ip6s`, read from bpffs."""

    def __init__(self, pins: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self._maps = {pc.TABLE_HOST_IPS: PinnedMap(pins / "sgw_host_ips", 4, 6),
                      pc.TABLE_HOST_IP6S: PinnedMap(pins / "sgw_host_ip6s", 16, 6)}
        self._clock = clock

    def poll(self, table: str, seen: Seen) -> int:
        start = self._clock()
        found = self._maps[table].keys()
        seen.reads.append((start, self._clock() - start, len(found)))
        seen.add(found, start)
        return len(found)

    def close(self) -> None:
        for m in self._maps.values():
            m.close()


def tables(site: ScaleSite) -> Tables:
    if site.topo.switch.kind == "ebpf":
        # The emulation's switch pins where its data plane outlives it (topologies.switch);
        # read through the switch process's root, whatever its mount namespace shows.
        pins = lasting_pin_dir(site.topo.prefix) / str(plan.DEVICE_ID)
        return PinnedTables(Path(f"/proc/{site.switch_pid()}/root") / pins.relative_to("/"))
    return Observer(plan.p4runtime_addr(), plan.DEVICE_ID, P4INFO)


@dataclass
class LearningRun:
    hosts: int
    v4: analysis.Learning
    v6: analysis.Learning
    poll_s: float
    controller_cpu_s: float
    switch_cpu_s: float
    controller_rss_before: int
    controller_rss_after: int
    digests: int  # digest lists the controller handled (its status)
    refused: int  # hosts the controller refused (table full)
    reads: list[tuple[float, float, int]] = field(default_factory=list)  # the observer's (start, s, entries), both tables

    def row(self) -> dict[str, Any]:
        def ms(v: float | None) -> float | None:
            return None if v is None else round(1000 * v, 1)

        return {
            "hosts": self.hosts, "sent": self.v4.hosts, "learned": self.v4.learned, "learned_ip6": self.v6.learned,
            "hosts_per_s": None if self.v4.hosts_per_s is None else round(self.v4.hosts_per_s),
            "span_s": None if self.v4.span_s is None else round(self.v4.span_s, 2),
            "p50_ms": ms(self.v4.latency(50)), "p99_ms": ms(self.v4.latency(99)), "max_ms": ms(self.v4.latency(100)),
            "ip6_p99_ms": ms(self.v6.latency(99)),
            "controller_cpu_s": round(self.controller_cpu_s, 2), "switch_cpu_s": round(self.switch_cpu_s, 2),
            "digest_lists": self.digests, "refused": self.refused, "poll_ms": round(1000 * self.poll_s),
            "observer_read_s": round(sum(r[1] for r in self.reads), 2),
        }


def _v4(key: bytes) -> str:
    return str(ipaddress.IPv4Address(int.from_bytes(key, "big")))


def _v6(key: bytes) -> str:
    return str(ipaddress.IPv6Address(int.from_bytes(key, "big")))


def learn(site: ScaleSite, count: int, index: int, say: Callable[[str], None], timeout: float) -> LearningRun:
    """Start `count` hosts (set `index`) on a controller that knows none; poll the switch until
    every IPv4 and IPv6 address is there, nothing new came for STALL_S, or `timeout`."""
    observer = tables(site)
    v4, v6 = Seen(), Seen()
    ctl, sw = site.controller_pid(), site.switch_pid()
    ctl0, sw0 = sample(ctl), sample(sw)
    digests0 = site.status().digests_total
    poll = poll_interval(count, site.topo.switch.kind)
    try:
        hosts = site.start_hosts(count, index)
        deadline = hosts.started + timeout
        last_new = time.monotonic()
        shown = 0.0
        n6, polls = 0, 0
        while True:
            n4 = observer.poll(pc.TABLE_HOST_IPS, v4)
            if polls % V6_EVERY == 0 or n4 >= count:  # IPv6 less often: the reads cost the switch too
                n6 = observer.poll(pc.TABLE_HOST_IP6S, v6)
            polls += 1
            now = time.monotonic()
            if len(v4.first) + len(v6.first) > shown:
                shown, last_new = len(v4.first) + len(v6.first), now
            if n4 >= count and n6 >= count:
                break
            if now - last_new > STALL_S or now > deadline:
                say(f"     learning stopped at {n4}/{count} IPv4, {n6}/{count} IPv6 hosts "
                    f"({'nothing new for %.0f s' % STALL_S if now <= deadline else 'time out'})")
                break
            time.sleep(max(0.0, poll - (time.monotonic() - now)))
        ctl_cpu, sw_cpu = sample(ctl).cpu_s - ctl0.cpu_s, sample(sw).cpu_s - sw0.cpu_s
        st = site.status()
        per_host = hosts.client.stats(hosts=True)["hosts"]
    finally:
        observer.close()
    first_v4 = {h["ip"]: h["first_tx_ns"] / 1e9 for h in per_host if h["first_tx_ns"]}
    first_v6 = {h["ip6"]: h["first_tx_ns"] / 1e9 for h in per_host if h["first_tx_ns"] and h.get("ip6")}
    on_v4 = {_v4(k): t for k, t in v4.first.items()}
    on_v6 = {_v6(k): t for k, t in v6.first.items()}
    return LearningRun(
        hosts=count,
        v4=analysis.learning(first_v4, on_v4),
        v6=analysis.learning(first_v6, on_v6),
        poll_s=poll,
        controller_cpu_s=ctl_cpu,
        switch_cpu_s=sw_cpu,
        controller_rss_before=ctl0.rss_bytes,
        controller_rss_after=sample(ctl).rss_bytes,
        digests=st.digests_total - digests0,
        refused=st.hosts_refused_total,
        reads=sorted(v4.reads + v6.reads),
    )
