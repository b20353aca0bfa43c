"""IPsec throughput per tuning configuration, measured as the tuning paper measured: default,
each knob group of the paper on its own, the gateway's whole profile, then everything; and the
paper's packet-size sweep of IPsec against plain IP for the default and the whole profile.

A *cell* is one (configuration, path, iperf3 message size); each is run for `seconds` (the
paper: 10 s) until the paper's stopping rule holds (stats.py: 4-12 runs, the 95 % interval of
the mean within +-1.5 %). Runs go in rounds: each round measures every cell not done yet, and
with it the cells it is compared with (the default at its path and size; its other path), so
every gain and ratio is a mean of per-round ratios of runs taken side by side. Rounds
alternate the order of the configurations (forward, then backward ...) so a drift of the
machine over the run does not favour the ones measured late.

Gateways are tuned by their own lifecycle: each configuration is a `tuning` section in both
gateways' configs and `up` applies it (on running gateways it reconciles: what the new
section no longer asks for is restored first). libipsec gateways are restarted when the
ESP socket's host-wide buffer changes, since charon sizes that socket when it opens it. The
hosts (TCP endpoints) get the endpoint groups through the same record/restore code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.gateway.stats import Interval, StoppingRule, interval, paired_ratio
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
PATHS = ("ipsec", "plain")
# iperf3 -l (the bytes of each write, the paper's netperf "packet size"): the per-knob table at the
# paper's largest, the sweep over its range.
MAIN_SIZE = 32768
SIZES = (64, 1024, 32768)


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
SWEPT = ("default", TUNED)  # the configurations of the size sweep, IPsec and plain


@dataclass(frozen=True, order=True)
class Cell:
    config: str
    path: str  # "ipsec" (through the tunnel) or "plain" (same route, tunnel terminated)
    size: int  # iperf3 -l


def plan_cells(configs: Sequence[Config], sizes: Sequence[int] = SIZES, main_size: int = MAIN_SIZE) -> list[Cell]:
    """Every configuration over IPsec at `main_size` (the per-knob table), and the sweep: the
    default and the whole profile at every size, over IPsec and plain."""
    names = [c.name for c in configs]
    out = [Cell(n, "ipsec", main_size) for n in names]
    for n in (x for x in SWEPT if x in names):
        out += [Cell(n, path, sz) for sz in sizes for path in PATHS if Cell(n, path, sz) not in out]
    return out


def references(cell: Cell, cells: Sequence[Cell]) -> list[Cell]:
    """What `cell` is compared with, among `cells`: the default at its path and size (its gain)
    and itself over the other path (the IPsec/plain ratio)."""
    other = Cell(cell.config, "plain" if cell.path == "ipsec" else "ipsec", cell.size)
    return [c for c in (Cell("default", cell.path, cell.size), other) if c != cell and c in cells]




@dataclass
class Sample:
    config: str
    round: int
    path: str  # "ipsec" or "plain"
    size: int  # iperf3 -l
    mbps: float | None

    @property
    def cell(self) -> Cell:
        return Cell(self.config, self.path, self.size)


@dataclass
class Outcome:
    samples: list[Sample] = field(default_factory=list)
    refused: dict[str, list[str]] = field(default_factory=dict)  # config -> "knob (scope): reason", gw-a and host-a

    def runs(self, cell: Cell) -> dict[int, float]:
        """Round -> Mb/s of the cell's runs that gave a result."""
        return {x.round: x.mbps for x in self.samples if x.cell == cell and x.mbps is not None}

    def attempts(self, cell: Cell) -> int:
        return sum(1 for x in self.samples if x.cell == cell)


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


def measure(lab: Lab, configs: Sequence[Config], cells: Sequence[Cell], rule: StoppingRule, seconds: float,
            label: str, say: Callable[[str], None]) -> Outcome:
    """Rounds until every cell is done by `rule` (see the module doc). Gateways must be down;
    they are up during, and down (every knob restored) after."""
    out = Outcome()
    sw = Switcher(lab, say)
    iperf: Iperf | None = None
    by_name = {c.name: c for c in configs}
    try:
        sw.switch(configs[0])
        iperf = Iperf(lab)
        for r in range(rule.max_n):
            active = [c for c in cells if out.attempts(c) < rule.max_n and not rule.done(list(out.runs(c).values()))]
            if not active:
                break
            todo = set(active) | {x for c in active for x in references(c, cells)}
            order = [c for c in configs if any(x.config == c.name for x in todo)]
            say(f"{label} round {r + 1}: {len(active)} cells not done, {len(todo)} to run")
            for conf in order if r % 2 == 0 else list(reversed(order)):
                if sw.current != by_name[conf.name]:
                    sw.switch(conf)
                out.refused.setdefault(conf.name, sw.refused())
                for path in PATHS:
                    sizes = sorted(x.size for x in todo if x.config == conf.name and x.path == path)
                    if not sizes:
                        continue
                    if path == "plain":
                        set_plain(lab, sw.gws, True)
                    try:
                        for size in sizes:
                            mbps = iperf.run(seconds, size)
                            out.samples.append(Sample(conf.name, r, path, size, round(mbps, 1) if mbps is not None else None))
                            say(f"{label} round {r + 1}: {conf.name:<10} {path:<5} {size:>6} B "
                                + (f"{mbps:8.1f} Mb/s" if mbps is not None else "no result"))
                    finally:
                        if path == "plain":
                            set_plain(lab, sw.gws, False)
    finally:
        if iperf is not None:
            iperf.close()
        sw.close()
    return out


@dataclass(frozen=True)
class Row:
    """One cell of the tables: its runs' mean with the 95 % interval, whether the stopping rule
    was met, and its gain over the default at the same path and size (per-round ratios)."""

    config: str
    path: str
    size: int
    runs: int
    mean: float | None
    low: float | None  # 95 % interval of the mean (Mb/s)
    high: float | None
    converged: bool  # the interval within the rule's +-1.5 % in 12 runs or fewer
    gain: float | None  # mean of config_r / default_r over the rounds both ran
    gain_low: float | None  # its 95 % interval
    gain_high: float | None

    @property
    def effect(self) -> str:
        """"gain"/"loss" when the gain's 95 % interval excludes 1.0, else "none" ("—" without one)."""
        if self.gain_low is None or self.gain_high is None:
            return "—"
        return "gain" if self.gain_low > 1.0 else "loss" if self.gain_high < 1.0 else "none"


def row(out: Outcome, cell: Cell, rule: StoppingRule) -> Row:
    runs = out.runs(cell)
    ci = interval(list(runs.values()))
    g = None if cell.config == "default" else paired_ratio(runs, out.runs(Cell("default", cell.path, cell.size)))
    mean = ci.mean if ci else (next(iter(runs.values())) if runs else None)
    return Row(cell.config, cell.path, cell.size, len(runs), mean, ci.low if ci else None, ci.high if ci else None,
               rule.converged(list(runs.values())), 1.0 if cell.config == "default" and runs else g.mean if g else None,
               g.low if g else None, g.high if g else None)


def table(out: Outcome, cells: Sequence[Cell], rule: StoppingRule) -> list[Row]:
    return [row(out, c, rule) for c in cells]


def ratio(out: Outcome, config: str, size: int) -> Interval | None:
    """IPsec/plain for `config` at `size`: the mean of the per-round ratios, with its interval."""
    return paired_ratio(out.runs(Cell(config, "ipsec", size)), out.runs(Cell(config, "plain", size)))
