"""The chaos run's fault schedule: seeded, so the same seed (and the same emulation shape)
gives the same faults at the same offsets, in the same order, on the same targets.

Every fault kind has a group (what it breaks), a duration range (how long before it is
undone), and a *budget*: how long a flow it hits may stay silent because of it (each silence
is charged to one fault, never to a sum: bench/chaos/checker.py). A controller fault hits no
flow by itself; a gateway fault during one may take the controller fault's budget (the HA
goal: a takeover plus the failover in 1 s). The stated budgets are the project's goals where
it has them (failover 500 ms, HA takeover 1 s) and, where it has none, what the design allows
(`why` says which).

The schedule is a list of `Fault`s. One *main* fault starts every 20-60 s (uniform); with
probability `overlap_p` a *companion* fault starts inside the main fault's window (a gateway
failing while the leader is replaced, a WAN burst during a switch restart ...). Two faults of
one exclusive group never run at once (see `EXCLUSIVE`), so the emulation always keeps a
quorum of etcd members, a leader candidate and one gateway pair per site to fail over to.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

LEASE_TTL_S = 2.0  # topologies/ha.py LEASE_TTL_S: a frozen or partitioned leader is replaced when its lease runs out
GATEWAY_BUDGET_S = 0.5
CONTROLLER_BUDGET_S = 1.0
SWITCH_RESTART_BUDGET_S = 10.0
# A restarted single controller (no HA) serves again after its start (imports, P4Runtime,
# reconcile: measured 2-4 s here on a busy machine); the budget counts from the kill, so the
# time it was down is added (`Kind.plus_duration`).
CONTROLLER_START_S = 5.0
SETTLE_S = 10.0  # after a fault is undone: the gateway refills, the replica rejoins, etcd catches up


@dataclass(frozen=True)
class Kind:
    name: str
    # gateway | controller (site A's replicas, etcd) | controller_b (site B's one controller) | switch | wan | storm
    group: str
    budget_s: float  # silence a flow may have because of it
    duration_s: tuple[float, float]  # from injection to undo (uniform)
    why: str  # where the budget comes from
    plus_duration: bool = False  # the budget grows by the fault's duration (a component down that long)

    def row(self) -> dict[str, Any]:
        return {"kind": self.name, "group": self.group, "budget_ms": round(1000 * self.budget_s),
                "duration_s": f"{self.duration_s[0]:g}-{self.duration_s[1]:g}", "why": self.why}


_GW = "the failover goal (docs/DESIGN.md): a dead gateway's buckets move within 500 ms"
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("gateway_freeze", "gateway", GATEWAY_BUDGET_S, (2, 8), "SIGSTOP of charon and agent; " + _GW),
    Kind("gateway_kill", "gateway", GATEWAY_BUDGET_S, (4, 10), "SIGKILL of charon and agent, `up` again after; " + _GW),
    Kind("gateway_link", "gateway", GATEWAY_BUDGET_S, (2, 8), "its LAN link down (carrier loss on the switch port); " + _GW),
    Kind("gateway_restart", "gateway", GATEWAY_BUDGET_S, (0, 0), "SIGKILL and `up` again at once; " + _GW),
    Kind("agent_kill", "gateway", GATEWAY_BUDGET_S, (4, 10),
         "SIGKILL of the agent only: heartbeats stop, charon forwards; its buckets move away as for a dead gateway"),
    Kind("agent_crashloop", "gateway", GATEWAY_BUDGET_S, (8, 16),
         "the agent is killed 1-2 s after every start: the gateway flaps dead/alive; every move within 500 ms"),
    Kind("charon_restart", "gateway", GATEWAY_BUDGET_S, (0, 0),
         "SIGKILL of charon, `up` again (the agent keeps running): its tunnels are gone until IKE is redone; " + _GW),
    Kind("leader_kill", "controller", CONTROLLER_BUDGET_S, (3, 10),
         "the HA takeover goal (bench/ha): a backup leads within 1 s of the leader's P4Runtime stream ending"),
    Kind("leader_freeze", "controller", LEASE_TTL_S + CONTROLLER_BUDGET_S, (3, 8),
         "SIGSTOP: the stream stays up, so backups take over only when the leader's etcd lease (2 s) runs out; +1 s"),
    Kind("backup_kill", "controller", CONTROLLER_BUDGET_S, (3, 10), "a backup dies: nothing should move; 1 s as a takeover"),
    Kind("etcd_kill", "controller", CONTROLLER_BUDGET_S, (4, 12),
         "one etcd member (2 of 3 keep quorum); its replica uses the other members; 1 s as a takeover"),
    Kind("etcd_partition", "controller", LEASE_TTL_S + CONTROLLER_BUDGET_S, (3, 10),
         "a replica's namespace drops etcd traffic; if it leads, it steps down when its lease (2 s) runs out; +1 s"),
    Kind("controller_restart", "controller_b", CONTROLLER_START_S + GATEWAY_BUDGET_S, (0, 3),
         "SIGKILL of site B's single controller (no HA), started again after 0-3 s: the data plane forwards "
         "meanwhile (a flow no gateway fault hits keeps the baseline); a gateway fault during it waits for the new "
         "controller: the time it was down + its start (stated: 5 s) + the failover goal", plus_duration=True),
    Kind("switch_restart", "switch", SWITCH_RESTART_BUDGET_S, (0, 0),
         "SIGKILL of the eBPF switch and a new one: its TCX links die with it, so nothing forwards until the new "
         "switch is up and the controller has pushed the pipeline and every entry again (stated: 10 s)"),
    Kind("wan_loss", "wan", CONTROLLER_BUDGET_S, (5, 15),
         "netem loss (5-20 %) on every WAN port: probes are lost at random, no flow may go silent for 1 s"),
    Kind("wan_delay", "wan", CONTROLLER_BUDGET_S, (5, 15),
         "netem delay (50-200 ms, 10 % jitter) on every WAN port: answers slow down, none may stop for 1 s"),
    Kind("rebalance_storm", "storm", GATEWAY_BUDGET_S, (0, 0),
         "20-60 operator moves of random unpinned buckets and a rebalance: moves are lossless, the failover budget"),
)}  # fmt: skip

# Groups of which only one fault may run at a time: the gateway group because the run
# drains a gateway at site A (two gateway faults could leave a site with none), the
# controller group because it shares etcd's quorum and the leader.
EXCLUSIVE = ("gateway", "controller", "controller_b", "switch", "wan", "storm")


@dataclass(frozen=True)
class Fault:
    seq: int
    at_s: float  # offset from the start of the run
    kind: str
    site: str  # "a" or "b"
    target: str  # a gateway, "leader", "backup<i>", an etcd member / replica, "switch", "wan", "controller"
    duration_s: float
    param: float  # loss %, delay ms, moves; 0 when the kind has none
    within: int | None  # the main fault this companion starts inside of; None for a main fault

    @property
    def group(self) -> str:
        return KINDS[self.kind].group

    @property
    def budget_s(self) -> float:
        kind = KINDS[self.kind]
        return kind.budget_s + (self.duration_s if kind.plus_duration else 0.0)

    def window(self) -> tuple[float, float]:
        """The offsets it may disturb anything in: injection to undo plus SETTLE_S."""
        return self.at_s, self.at_s + self.duration_s + SETTLE_S

    def describe(self) -> str:
        extra = f" {self.param:g}" if self.param else ""
        return f"#{self.seq} {self.kind}{extra} {self.target}@{self.site} t+{self.at_s:.1f}s for {self.duration_s:.1f}s"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ScheduleError(ValueError):
    pass


@dataclass(frozen=True)
class Shape:
    """What the schedule targets: the gateways per site and site A's replicas (site B has one controller)."""
    gateways: int
    replicas: tuple[str, ...]


def _conflicts(kind: str, at: float, end: float, placed: Sequence[Fault]) -> bool:
    group = KINDS[kind].group
    return any(f.group == group and group in EXCLUSIVE and f.window()[0] < end and at < f.window()[1] for f in placed)


def _target(rng: random.Random, kind: str, shape: Shape) -> tuple[str, str, float]:
    """(site, target, param) for one fault of `kind`."""
    group = KINDS[kind].group
    if group == "gateway":
        site = rng.choice("ab")
        return site, f"{site}gw{rng.randint(1, shape.gateways)}", 0.0
    if kind in ("leader_kill", "leader_freeze"):
        return "a", "leader", 0.0
    if kind == "backup_kill":
        return "a", f"backup{rng.randrange(len(shape.replicas) - 1)}", 0.0
    if kind in ("etcd_kill", "etcd_partition"):
        return "a", rng.choice(shape.replicas), 0.0
    if kind == "controller_restart":
        return "b", "controller", 0.0
    if kind == "switch_restart":
        return rng.choice("ab"), "switch", 0.0
    if kind == "wan_loss":
        return "a", "wan", float(rng.randint(5, 20))
    if kind == "wan_delay":
        return "a", "wan", float(rng.randint(50, 200))
    return rng.choice("ab"), "controller", float(rng.randint(20, 60))  # rebalance_storm


def build(seed: int, minutes: float, shape: Shape, kinds: Sequence[str] | None = None,
          spacing_s: tuple[float, float] = (20.0, 60.0), overlap_p: float = 0.3,
          start_s: float = 10.0) -> list[Fault]:
    """The schedule for `minutes` of run: main faults every `spacing_s` (uniform), the first
    at `start_s`; no fault starts after the end. The same arguments give the same list."""
    chosen = list(KINDS) if kinds is None else list(kinds)
    unknown = [k for k in chosen if k not in KINDS]
    if unknown or not chosen:
        raise ScheduleError(f"unknown fault kinds {unknown} (known: {', '.join(KINDS)})" if unknown
                            else "no fault kinds chosen")
    if len(shape.replicas) < 2 and any(KINDS[k].group == "controller" for k in chosen):
        raise ScheduleError("controller faults need replicated controllers at site A (2 or more replicas)")
    if minutes <= 0 or shape.gateways < 1 or not 0 < spacing_s[0] <= spacing_s[1] or not 0 <= overlap_p <= 1:
        raise ScheduleError(f"bad schedule arguments: minutes {minutes}, gateways {shape.gateways}, "
                            f"spacing {spacing_s}, overlap_p {overlap_p}")
    rng = random.Random(seed)
    end_s = 60.0 * minutes
    out: list[Fault] = []
    t = start_s
    while t < end_s:
        main = _place(rng, chosen, shape, t, out, None, end_s)
        if main is not None:
            out.append(main)
            if rng.random() < overlap_p:
                at = round(t + rng.uniform(0.0, max(main.duration_s, 1.0)), 2)
                companion = _place(rng, chosen, shape, at, out, main.seq, end_s)
                if companion is not None:
                    out.append(companion)
        t = round(t + rng.uniform(*spacing_s), 2)
    return out


def _place(rng: random.Random, kinds: Sequence[str], shape: Shape, at: float, placed: Sequence[Fault],
           within: int | None, end_s: float) -> Fault | None:
    """A fault at `at` of a kind that conflicts with no fault placed (a few draws), or None."""
    if at >= end_s:
        return None
    for _ in range(8):
        kind = rng.choice(kinds)
        lo, hi = KINDS[kind].duration_s
        duration = round(rng.uniform(lo, hi), 2)
        if _conflicts(kind, at, at + duration + SETTLE_S, placed):
            continue
        site, target, param = _target(rng, kind, shape)
        return Fault(len(placed), at, kind, site, target, duration, param, within)
    return None


def counts(faults: Sequence[Fault]) -> dict[str, int]:
    out = {k: 0 for k in KINDS}
    for f in faults:
        out[f.kind] += 1
    return {k: n for k, n in out.items() if n}
