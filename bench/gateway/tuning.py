"""IPsec throughput per tuning configuration: default, each knob group of the tuning paper on
its own, the gateway's whole profile, then everything; measured in one run, side by side.

Gateways are tuned by their own lifecycle: each configuration is a `tuning` section in both
gateways' configs and `up` applies it (on running gateways it reconciles: what the new
section no longer asks for is restored first). libipsec gateways are restarted when the
ESP socket's host-wide buffer changes, since charon sizes that socket when it opens it. The
hosts (TCP endpoints) get the endpoint groups through the same record/restore code.

Rounds alternate the order (forward, then backward, ...) so a drift of the machine over the
run does not favour the configurations measured late; every statistic is a median with its
range over the rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.gateway.throughput import Iperf, set_plain
from supergw_gateway.executor import LocalExecutor
from supergw_gateway.lab import HOST_DEV, LAN_DEV, WAN_DEV, Lab
from supergw_gateway.runtime import Gateway
from supergw_gateway.tuning import lifecycle
from supergw_gateway.tuning.groups import GATEWAY_GROUPS, SECTION, EndpointGroup, GatewayGroup
from supergw_gateway.tuning.hostwide import HostKnobs
from supergw_gateway.tuning.knobs import Knob
from supergw_gateway.tuning.plan import TuneRecord
from supergw_gateway.tuning.profile import ProfileInput, build

JUMBO = 9000


@dataclass(frozen=True)
class Config:
    name: str
    what: str
    gateway: tuple[GatewayGroup, ...] = ()
    endpoint: tuple[EndpointGroup, ...] = ()

    def gateway_tuning(self) -> dict[str, Any]:
        """The gateways' `tuning` section: every hop of the lab is a veth, so jumbo is declared."""
        if not self.gateway:
            return {"enabled": False}
        return {"enabled": True, "knobs": list(self.gateway), "host_wide": True,
                "path_mtu": {LAN_DEV: JUMBO, WAN_DEV: JUMBO}}


CONFIGS: tuple[Config, ...] = (
    Config("default", "nothing tuned"),
    Config("tcp", SECTION["tcp"], endpoint=("tcp",)),
    Config("coalescing", SECTION["coalescing"], gateway=("coalescing",)),
    Config("mtu", SECTION["mtu"] + " (hosts too)", gateway=("mtu",), endpoint=("mtu",)),
    Config("offloads", SECTION["offloads"], gateway=("offloads",)),
    Config("softirq", SECTION["softirq"], gateway=("softirq",)),
    Config("esp_socket", SECTION["esp_socket"], gateway=("esp_socket",)),
    Config("gateway", "the gateway's whole profile (what `up` applies), hosts untouched", gateway=GATEWAY_GROUPS),
    Config("all", "the whole profile on the gateways and the hosts", gateway=GATEWAY_GROUPS,
           endpoint=("tcp", "mtu")),
)
TUNED = "all"
PLAIN_CONFIGS = ("default", TUNED)  # where the plain path is measured too (secondary rows)


@dataclass
class Sample:
    config: str
    round: int
    path: str  # "ipsec" or "plain"
    mbps: float | None


@dataclass
class Outcome:
    samples: list[Sample] = field(default_factory=list)
    refused: dict[str, list[str]] = field(default_factory=dict)  # config -> "knob (scope): reason", gw-a and host-a


class Switcher:
    """Puts the lab's gateways and hosts into one configuration, through the gateway lifecycle."""

    def __init__(self, lab: Lab, say: Callable[[str], None]) -> None:
        self.lab = lab
        # The gateways' progress without a line per refused or restored knob: the JSON keeps
        # every refusal with its reason, and the summary line per `up`/`down` stays.
        self.say: Callable[[str], None] = lambda m: None if ":   [" in m else say(m)
        self.gws = {k: Gateway(lab.config(k), say) for k in ("b", "a")}
        self.current: Config | None = None
        self.hosts = HostKnobs(LocalExecutor())

    def _endpoint(self, k: str) -> tuple[lifecycle.Target, Path, str]:
        target = lifecycle.Target(here=self.lab.host(k), whole_kernel=False, libipsec=False)
        return target, self.lab.state_dir / f"bench-endpoint-{self.lab.tag}-{k}.json", f"bench-endpoint-{self.lab.tag}-{k}"

    def switch(self, c: Config) -> None:
        restart = self.current is None or (self.lab.backend.value != "uml" and
                                           ("esp_socket" in c.gateway) != ("esp_socket" in self.current.gateway))
        self.gws = {k: Gateway(self.lab.config(k, tuning=c.gateway_tuning()), self.say) for k in ("b", "a")}
        if restart:
            for g in self.gws.values():
                g.down()
        for g in self.gws.values():  # b (the responder) first
            g.up()
        for k in ("a", "b"):
            target, path, holder = self._endpoint(k)
            inp = ProfileInput(role="endpoint", where=target.here.where, whole_kernel=False, host_wide=True,
                               groups=c.endpoint, path_mtu={HOST_DEV: JUMBO})
            lifecycle.tune(build(inp).knobs, target, path, holder, "endpoint", holder, self.hosts, c.endpoint)
        self.current = c

    def refused(self) -> list[str]:
        """What gw-a and host-a refused in this configuration, each with its reason."""
        h = lifecycle.health(self.gws["a"].cfg)
        out = [f"{r['knob']} ({r['scope']}): {r['reason']}" for r in h.get("refused", [])]  # type: ignore[attr-defined]
        rec = TuneRecord.load(self._endpoint("a")[1])
        for e in rec.refused if rec else []:
            out.append(f"{Knob.from_entry(e).label} ({e['scope']}): {e['reason']}")
        return out

    def close(self) -> None:
        """Everything back as it was: hosts' knobs, then the gateways (whose `down` restores theirs)."""
        for k in ("a", "b"):
            target, path, holder = self._endpoint(k)
            lifecycle.untune(target, path, holder, holder, self.hosts, role="endpoint")
        for g in self.gws.values():
            g.down()


def measure(lab: Lab, configs: Sequence[Config], rounds: int, seconds: float, label: str,
            say: Callable[[str], None]) -> Outcome:
    """Gateways must be down; they are up during, and down (every knob restored) after."""
    out = Outcome()
    sw = Switcher(lab, say)
    iperf: Iperf | None = None
    try:
        sw.switch(configs[0])
        iperf = Iperf(lab)
        for r in range(rounds):
            order = list(configs) if r % 2 == 0 else list(reversed(configs))
            for c in order:
                if sw.current != c:
                    sw.switch(c)
                out.refused.setdefault(c.name, sw.refused())
                paths = ("ipsec", "plain") if c.name in PLAIN_CONFIGS else ("ipsec",)
                for path in paths:
                    if path == "plain":
                        set_plain(lab, sw.gws, True)
                    try:
                        mbps = iperf.run(seconds)
                    finally:
                        if path == "plain":
                            set_plain(lab, sw.gws, False)
                    out.samples.append(Sample(c.name, r, path, round(mbps, 1) if mbps is not None else None))
                    say(f"{label} round {r + 1}/{rounds}: {c.name:<10} {path:<5} "
                        + (f"{mbps:8.1f} Mb/s" if mbps is not None else "no result"))
    finally:
        if iperf is not None:
            iperf.close()
        sw.close()
    return out


@dataclass(frozen=True)
class Row:
    """One line of the per-knob table."""

    config: str
    runs: int
    median: float | None
    low: float | None
    high: float | None
    gain: float | None  # median(config) / median(default)
    gain_low: float | None  # range of the per-round gains (config_r / default_r)
    gain_high: float | None


def _values(samples: Sequence[Sample], config: str, path: str) -> dict[int, float]:
    return {s.round: s.mbps for s in samples if s.config == config and s.path == path and s.mbps is not None}


def table(samples: Sequence[Sample], configs: Sequence[Config], path: str = "ipsec") -> list[Row]:
    base = _values(samples, "default", path)
    base_med = statistics.median(base.values()) if base else None
    rows = []
    for c in configs:
        v = _values(samples, c.name, path)
        if not v:
            if any(s.config == c.name and s.path == path for s in samples):
                rows.append(Row(c.name, 0, None, None, None, None, None, None))
            continue
        med = statistics.median(v.values())
        paired = [v[r] / base[r] for r in v if r in base and base[r] > 0]
        rows.append(Row(c.name, len(v), med, min(v.values()), max(v.values()),
                        med / base_med if base_med else None,
                        min(paired) if paired else None, max(paired) if paired else None))
    return rows


def gain(rows: Sequence[Row], config: str = TUNED) -> Row | None:
    return next((r for r in rows if r.config == config), None)
