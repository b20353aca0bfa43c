"""Bucket rebalancing as a pure function: measured rates + assignment in, a plan out.

No I/O and no clock: the core calls `plan_rebalance` every round with what it measured
and writes the plan's moves as one batch. Semantics are documented in
``controller/REBALANCER-API.md`` and checked by property tests.

Two load policies share the mandatory moves (failover, drain, pin, unassigned) and the idle
refill: `plan_rebalance` (the shipped one) sees every bucket's weight, so a greedy "heaviest
gateway gives its best-fitting bucket to the emptiest one" converges in one or two rounds;
`plan_paper` is the clustering paper's Algorithm 5 as written (a ring of gateways, each
passing |W| random flows of its own to its successor when its CPU load is higher by more
than L_D), which needed ~180 s to even out in the paper's §4.3.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class GatewayState(StrEnum):
    """What the rebalancer needs to know about a gateway's health and intent."""

    ALIVE = "alive"
    RECOVERING = "recovering"
    DRAINED = "drained"
    DEAD = "dead"
    # Alive again after its remote-access SAs were taken over by another gateway: it serves
    # (buckets, pins, its SPI label) only when none of those SAs is left (`takeover.py`).
    WITHHELD = "withheld"


ELIGIBLE_STATES = frozenset({GatewayState.ALIVE, GatewayState.RECOVERING})


class MoveReason(StrEnum):
    """Why a bucket moves; also the label of the moves metric."""

    FAILOVER = "failover"
    DRAIN = "drain"
    UNASSIGNED = "unassigned"
    PIN = "pin"
    REBALANCE = "rebalance"
    REFILL = "refill"
    OPERATOR = "operator"
    PAPER = "paper-rebalance"  # a migration of the paper's Algorithm 5 (`plan_paper`)


_MAX_BUCKET_ID = 1 << 32  # above any bucket index, for bisecting (cost, bucket) pairs

BUDGETED_REASONS = frozenset({MoveReason.REBALANCE, MoveReason.REFILL, MoveReason.PAPER})


@dataclass(frozen=True)
class GatewayInput:
    name: str
    weight: float = 1.0
    state: GatewayState = GatewayState.ALIVE
    reported_cpu: float | None = None


@dataclass(frozen=True)
class BucketRate:
    pps: float = 0.0
    bps: float = 0.0


_EMPTY: Mapping[int, str] = MappingProxyType({})


@dataclass(frozen=True)
class RebalanceInput:
    k: int
    rates: Mapping[int, BucketRate]
    assignment: Mapping[int, str]
    gateways: Sequence[GatewayInput]
    pins: Mapping[int, str] = field(default_factory=lambda: _EMPTY)
    # A dead (or withheld) gateway's buckets go to this gateway when it is eligible (the backup the switch
    # already sends them to, `backups.ring_backups`), else to the emptiest.
    failover_to: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class RebalanceParams:
    threshold: float = 1.10
    target: float = 1.05
    move_budget: int = 64
    refill_budget: int = 16
    packet_cost: float = 1.0
    byte_cost: float = 0.001
    cpu_ceiling: float = 0.90

    def __post_init__(self) -> None:
        if not (math.isfinite(self.threshold) and self.threshold >= 1.0):
            raise ValueError(f"threshold must be a finite number >= 1.0, got {self.threshold}")
        if not (math.isfinite(self.target) and 1.0 <= self.target <= self.threshold):
            raise ValueError(f"target must be in [1.0, threshold={self.threshold}], got {self.target}")
        if self.move_budget < 0 or self.refill_budget < 0:
            raise ValueError("move_budget and refill_budget must be >= 0")
        for name in ("packet_cost", "byte_cost"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if not (0.0 < self.cpu_ceiling and math.isfinite(self.cpu_ceiling)):
            raise ValueError(f"cpu_ceiling must be > 0, got {self.cpu_ceiling}")


@dataclass(frozen=True)
class PaperParams:
    """The clustering paper's Algorithm 5 (§3.3; defaults are §4.3's values) for `plan_paper`.

    The ring: the eligible (alive or recovering) gateways in the order of
    `RebalanceInput.gateways` (the controller passes the config's order), so a dead or
    drained gateway is skipped and s(G_i), the successor, is the next eligible one; the last
    one's is the first. Every round (every T_M, the caller's clock) each G_i compares its
    load with its successor's only, both as they were at the round's start; when G_i's is
    higher by more than `load_difference` (L_D, strictly) G_i hands `move_size` (|W|)
    buckets drawn at random from its own (V_i: every unpinned bucket it holds, carrying
    traffic or not) to s(G_i). So each gateway migrates at most once per round and a round
    has up to N migrations, each decided on its own pair.

    Load is the gateway's CPU load, the measure the paper gives its gateways: its Fig. 5
    plots each gateway's CPU load as the trace of redistribution, loss stops when the first
    gateway's CPU load drops below 100 %, and L_D = 10 % is a difference of such loads.
    The controller has it from the agents' reports (`GatewayInput.reported_cpu`: the
    gateway's CPU busy over its last report interval, T_L, as a fraction of the capacity
    it may use, 0..1), divided by the gateway's weight (weight 1, the default and the
    paper's identical gateways, compares the CPU loads as they are; a gateway of weight 2
    counts as level with a neighbour at half its CPU load). A gateway with no report yet
    has no load: its pairs make no decision (a plan warning says so). Bucket counters play
    no part: the paper's gateways had no such thing, and its L_D is a CPU load.
    """

    load_difference: float = 0.10  # L_D: a difference of CPU loads (0.10 = 10 percentage points)
    move_size: int = 4  # |W|

    def __post_init__(self) -> None:
        if not (math.isfinite(self.load_difference) and self.load_difference >= 0):
            raise ValueError(f"load_difference must be a finite number >= 0, got {self.load_difference}")
        if self.move_size < 1:
            raise ValueError(f"move_size must be >= 1, got {self.move_size}")


@dataclass(frozen=True)
class Move:
    bucket: int
    src: str | None
    dst: str
    reason: MoveReason
    cost: float = 0.0  # the bucket's cost when planned; > 0 means it carries traffic


@dataclass(frozen=True)
class Plan:
    moves: tuple[Move, ...]
    load_before: dict[str, float]
    load_after: dict[str, float]
    ratio_before: float
    ratio_after: float
    failover: bool
    warnings: tuple[str, ...] = ()

    @property
    def budgeted_moves(self) -> int:
        """Moves that count against the budgets: REBALANCE/REFILL of buckets carrying traffic
        (idle buckets given back to a recovering gateway move free, see `idle_refill`)."""
        return sum(1 for m in self.moves if m.reason in BUDGETED_REASONS and m.cost > 0)


def bucket_cost(rate: BucketRate, params: RebalanceParams) -> float:
    """One number per bucket: per-packet work plus per-byte (crypto) work."""
    return rate.pps * params.packet_cost + rate.bps * params.byte_cost


def imbalance(loads: Mapping[str, float], gateways: Sequence[GatewayInput]) -> float:
    """max/mean of weight-normalised load over eligible gateways (1.0 if nothing to compare).

    mean = (total load of all named gateways) / (sum of eligible weights), so load stuck
    on ineligible gateways still counts as demand the eligible ones should carry.
    """
    eligible = [g for g in gateways if g.state in ELIGIBLE_STATES]
    total = sum(loads.get(g.name, 0.0) for g in gateways)
    weight = sum(g.weight for g in eligible)
    if not eligible or total <= 0.0 or weight <= 0.0:
        return 1.0
    mean = total / weight
    if mean <= 0.0:  # a subnormal total divided by the weight underflows to zero
        return 1.0
    return max(loads.get(g.name, 0.0) / g.weight for g in eligible) / mean


def hot_first(moves: Sequence[Move]) -> tuple[list[Move], list[Move]]:
    """(moves of buckets carrying traffic, moves of idle buckets), each in plan order.

    A failover of thousands of mostly idle buckets restores traffic sooner when the
    first, small write carries only the hot buckets.
    """
    return [m for m in moves if m.cost > 0], [m for m in moves if m.cost <= 0]


def apply_plan(assignment: Mapping[int, str], plan: Plan) -> dict[int, str]:
    """The assignment after writing every move of `plan`."""
    result = dict(assignment)
    for move in plan.moves:
        result[move.bucket] = move.dst
    return result


def _validate(inp: RebalanceInput) -> dict[str, GatewayInput]:
    if inp.k < 1:
        raise ValueError(f"k must be >= 1, got {inp.k}")
    gws: dict[str, GatewayInput] = {}
    for g in inp.gateways:
        if g.name in gws:
            raise ValueError(f"gateway {g.name!r} listed twice")
        if not (math.isfinite(g.weight) and g.weight > 0):
            raise ValueError(f"gateway {g.name!r}: weight must be a finite number > 0, got {g.weight}")
        gws[g.name] = g
    for what, keys in (("rates", inp.rates), ("assignment", inp.assignment), ("pins", inp.pins)):
        bad = [b for b in keys if not 0 <= b < inp.k]
        if bad:
            raise ValueError(f"{what}: bucket {min(bad)} out of range 0..{inp.k - 1}")
    for b, r in inp.rates.items():
        if not (math.isfinite(r.pps) and math.isfinite(r.bps) and r.pps >= 0 and r.bps >= 0):
            raise ValueError(f"rates: bucket {b} has a negative or non-finite rate {r}")
    return gws


@dataclass(frozen=True)
class _Checkpoint:
    """What `_Planner._restore` needs to take back the moves made since `_checkpoint`."""

    assign: list[str | None]
    loads: dict[str, float]
    counts: dict[str, int]
    moved: set[int]
    moves: int  # len(moves) then


class _Planner:
    """Mutable working state of one planning round (never escapes plan_rebalance)."""

    def __init__(self, inp: RebalanceInput, params: RebalanceParams, gws: dict[str, GatewayInput]) -> None:
        self.params = params
        self.gws = gws
        self.eligible = sorted(n for n, g in gws.items() if g.state in ELIGIBLE_STATES)
        self.cost = [0.0] * inp.k
        for b, rate in inp.rates.items():
            self.cost[b] = bucket_cost(rate, params)
        self.assign: list[str | None] = [inp.assignment.get(b) for b in range(inp.k)]
        self.pins = {b: g for b, g in inp.pins.items() if g in gws}
        self.failover_to = inp.failover_to
        self.weights = {n: g.weight for n, g in gws.items()}
        self.loads = {n: 0.0 for n in gws}
        self.counts = {n: 0 for n in gws}
        for b, g in enumerate(self.assign):
            if g in self.loads:
                self.loads[g] += self.cost[b]
                self.counts[g] += 1
        self.total = sum(self.cost)
        self.moves: list[Move] = []
        self.moved: set[int] = set()
        self.warnings: list[str] = [
            f"bucket {b} pinned to unknown gateway {g!r}: pin ignored"
            for b, g in sorted(inp.pins.items())
            if g not in gws
        ]

    def norm(self, name: str) -> float:
        return self.loads[name] / self.gws[name].weight

    def mean(self) -> float:
        """Weight-normalised mean load; 0.0 when there is nothing to compare.

        A subnormal total divided by the weights underflows to 0.0 too, so callers test
        `mean() > 0.0` before dividing by it."""
        if not self.eligible or self.total <= 0.0:
            return 0.0
        return self.total / sum(self.gws[n].weight for n in self.eligible)

    def ratio(self) -> float:
        mean = self.mean()
        if mean <= 0.0:
            return 1.0
        return max(self.norm(n) for n in self.eligible) / mean

    def move(self, bucket: int, dst: str, reason: MoveReason) -> None:
        src = self.assign[bucket]
        if src in self.loads:
            self.loads[src] -= self.cost[bucket]
            self.counts[src] -= 1
        self.loads[dst] += self.cost[bucket]
        self.counts[dst] += 1
        self.assign[bucket] = dst
        self.moved.add(bucket)
        self.moves.append(Move(bucket, src if src in self.gws else None, dst, reason, self.cost[bucket]))

    def emptiest_for(self, bucket: int) -> str:
        c = self.cost[bucket]
        w, loads = self.weights, self.loads
        best, best_key = "", (math.inf, math.inf)
        if c <= 0.0:
            # An idle bucket weighs nothing now; spread idle buckets by weighted count so
            # that hosts appearing later do not all land on one gateway.
            counts = self.counts
            for n in self.eligible:  # sorted by name: ties go to the first name
                key = (counts[n] / w[n], loads[n] / w[n])
                if key < best_key:
                    best, best_key = n, key
        else:
            for n in self.eligible:
                key = ((loads[n] + c) / w[n], 0.0)
                if key < best_key:
                    best, best_key = n, key
        return best

    def mandatory(self) -> None:
        """Failover, drain, unassigned and pin moves, in full, heaviest bucket first."""
        state = {n: g.state for n, g in self.gws.items()}
        eligible = set(self.eligible)
        todo = [b for b, g in enumerate(self.assign) if g not in eligible or b in self.pins]
        todo.sort(key=lambda b: (-self.cost[b], b))
        for b in todo:
            cur = self.assign[b]
            cur_state = state.get(cur) if cur is not None else None
            pin = self.pins.get(b)
            if pin is not None and state[pin] in ELIGIBLE_STATES:
                if cur != pin:
                    reason = MoveReason.FAILOVER if cur_state is GatewayState.DEAD else MoveReason.PIN
                    self.move(b, pin, reason)
                continue
            if pin is not None and pin == cur and cur_state is GatewayState.DRAINED:
                continue
            if cur_state is None:
                self.move(b, self.emptiest_for(b), MoveReason.UNASSIGNED)
            elif cur_state in (GatewayState.DEAD, GatewayState.WITHHELD):
                to = self.failover_to.get(cur or "")
                self.move(b, to if to in eligible else self.emptiest_for(b), MoveReason.FAILOVER)
            elif cur_state is GatewayState.DRAINED:
                self.move(b, self.emptiest_for(b), MoveReason.DRAIN)

    def _destinations(self, src: str, refills: dict[str, int]) -> list[str]:
        p = self.params
        # The ceiling keeps load off a gateway hot for reasons the counters miss. When the
        # source is at the ceiling too (every gateway busy, as at 90 % of cluster capacity),
        # it would block every move and leave the heaviest gateway overloaded: the counters
        # decide then (measured by bench/scaling, Fig. 5).
        src_cpu = self.gws[src].reported_cpu
        ceiling = p.cpu_ceiling if src_cpu is None or src_cpu < p.cpu_ceiling else math.inf
        out = []
        for n in self.eligible:
            g = self.gws[n]
            if n == src or (g.reported_cpu is not None and g.reported_cpu >= ceiling):
                continue
            if g.state is GatewayState.RECOVERING and refills.get(n, 0) >= p.refill_budget:
                continue
            out.append(n)
        return sorted(out, key=lambda n: (self.norm(n), self.gws[n].reported_cpu or 0.0, n))

    def _best_bucket(self, src: str, dst: str, movable: list[tuple[float, int]], mean: float) -> int | None:
        """The bucket whose cost is closest to what src should shed and dst can take.

        `movable` holds (cost, bucket) of src's movable buckets, sorted, all costs > 0.
        Candidates must lower the pair's peak; they form one cost interval, found by
        bisection, and the nearest costs below/above the ideal transfer are compared.
        """
        ws, wd = self.gws[src].weight, self.gws[dst].weight
        ls, ld = self.loads[src], self.loads[dst]
        limit = ls / ws * (1 - 1e-12)
        ideal = min(ls - mean * ws, mean * wd - ld)

        def valid(c: float) -> bool:
            return max((ls - c) / ws, (ld + c) / wd) < limit

        lo = bisect_right(movable, (ls - limit * ws, _MAX_BUCKET_ID))
        hi = bisect_left(movable, (limit * wd - ld, -1))
        # the rearranged bounds may round differently from `valid`: settle the edges
        while lo > 0 and valid(movable[lo - 1][0]):
            lo -= 1
        while lo < len(movable) and lo < hi and not valid(movable[lo][0]):
            lo += 1
        while hi < len(movable) and valid(movable[hi][0]):
            hi += 1
        while hi > lo and not valid(movable[hi - 1][0]):
            hi -= 1
        if lo >= hi:
            return None
        p = bisect_left(movable, (ideal, -1), lo, hi)
        candidates: list[tuple[float, int]] = []
        if p > lo:  # nearest cost below the ideal: the smallest bucket id of that cost
            q = bisect_left(movable, (movable[p - 1][0], -1), lo, hi)
            candidates.append(movable[q])
        if p < hi:
            candidates.append(movable[p])
        _, bucket = min(candidates, key=lambda cb: (abs(cb[0] - ideal), -cb[0], cb[1]))
        return bucket

    def _checkpoint(self) -> _Checkpoint:
        return _Checkpoint(list(self.assign), dict(self.loads), dict(self.counts), set(self.moved), len(self.moves))

    def _restore(self, c: _Checkpoint) -> None:
        self.assign, self.loads, self.counts, self.moved = c.assign, c.loads, c.counts, c.moved
        del self.moves[c.moves:]

    def load_moves(self) -> None:
        p = self.params
        mean = self.mean()
        if mean <= 0.0 or self.ratio() <= p.threshold:
            return
        movable: dict[str, list[tuple[float, int]]] = {n: [] for n in self.eligible}
        for b, g in enumerate(self.assign):
            if g in movable and self.cost[b] > 0.0 and b not in self.pins and b not in self.moved:
                movable[g].append((self.cost[b], b))
        for lst in movable.values():
            lst.sort()
        refills: dict[str, int] = {}
        budget = p.move_budget
        ratio_start, undo = self.ratio(), self._checkpoint()
        self._greedy_load_moves(movable, refills, budget, mean)
        # Whole buckets may leave the best placement above the target (16 equal buckets on 3
        # gateways: 6/5/5 is 1.125). Counter noise then always finds some move that lowers
        # the peak a little, and the plan would reshuffle every round; a plan that does not
        # gain at least the hysteresis band is noise, not imbalance. A plan the move budget cut
        # short is a first step toward a far target, however small: it stays.
        gain = ratio_start - self.ratio()
        made = len(self.moves) - undo.moves
        if 0 < made < budget and gain < p.threshold - p.target - 1e-9:
            self.warnings.append(
                f"load moves would lower max/mean only {ratio_start:.3f} -> {self.ratio():.3f}, less than the "
                f"hysteresis {p.threshold - p.target:.3f}: whole buckets are as even as they get, none moved"
            )
            self._restore(undo)

    def _greedy_load_moves(
        self, movable: dict[str, list[tuple[float, int]]], refills: dict[str, int], budget: int, mean: float
    ) -> None:
        p = self.params
        while budget > 0 and self.ratio() > p.target:
            src = min(self.eligible, key=lambda n: (-self.norm(n), n))
            chosen: tuple[int, str] | None = None
            for dst in self._destinations(src, refills):
                found = self._best_bucket(src, dst, movable[src], mean)
                if found is not None:
                    chosen = (found, dst)
                    break
            if chosen is None:
                self.warnings.append(
                    f"no load move improves {src!r} further (ratio {self.ratio():.3f} > target {p.target})"
                )
                return
            b, dst = chosen
            src_list = movable[src]
            del src_list[bisect_left(src_list, (self.cost[b], b))]
            recovering = self.gws[dst].state is GatewayState.RECOVERING
            if recovering:
                refills[dst] = refills.get(dst, 0) + 1
            self.move(b, dst, MoveReason.REFILL if recovering else MoveReason.REBALANCE)
            budget -= 1

    def idle_refill(self) -> None:
        """Recovering gateways take idle buckets up to their weighted share of all K.

        Load moves only shift buckets that carry traffic, so on an idle system a gateway
        back from a failover would keep 0 buckets, and every host that appears later would
        land on the others. An idle bucket carries nothing, so all of them move in this
        one round, outside the refill budget (which paces the traffic a recovered gateway
        takes on). Donors are the gateways furthest above their own share.
        """
        recovering = [n for n in self.eligible if self.gws[n].state is GatewayState.RECOVERING]
        if not recovering:
            return
        k = len(self.assign)
        total_w = sum(self.weights[n] for n in self.eligible)
        share = {n: k * self.weights[n] / total_w for n in self.eligible}
        idle: dict[str, list[int]] = {n: [] for n in self.eligible}
        for b, g in enumerate(self.assign):
            if g in idle and self.cost[b] <= 0.0 and b not in self.pins and b not in self.moved:
                idle[g].append(b)
        floor = {n: math.floor(share[n] + 1e-9) for n in self.eligible}
        for r in recovering:
            while self.counts[r] < floor[r]:
                donors = [n for n in self.eligible if n != r and idle[n] and self.counts[n] > floor[n]]
                if not donors:
                    break
                donor = max(donors, key=lambda n: ((self.counts[n] - share[n]) / self.weights[n], n))
                self.move(idle[donor].pop(), r, MoveReason.REFILL)

    def ring_moves(self, paper: PaperParams, rng: random.Random) -> None:
        """One round of Algorithm 5: every gateway against its ring successor (see `PaperParams`).

        Every decision and every W is taken from the state at the round's start (after the
        mandatory moves), so a bucket a gateway receives this round is not passed on in it;
        W is drawn in ring order, so a seeded `rng` gives the same round again.
        """
        ring = [n for n, g in self.gws.items() if g.state in ELIGIBLE_STATES]
        if len(ring) < 2:
            return
        load: dict[str, float] = {}
        for n in ring:
            cpu = self.gws[n].reported_cpu
            if cpu is not None:
                load[n] = cpu / self.gws[n].weight
        owned: dict[str, list[int]] = {n: [] for n in ring}
        for b, g in enumerate(self.assign):
            if g in owned and b not in self.pins and b not in self.moved:
                owned[g].append(b)
        migrations: list[tuple[str, list[int]]] = []
        for i, src in enumerate(ring):
            dst = ring[(i + 1) % len(ring)]
            unknown = [n for n in (src, dst) if n not in load]
            if unknown:
                self.warnings.append(
                    f"no load report from {' or '.join(map(repr, unknown))} yet: "
                    f"{src!r} makes no migration decision towards {dst!r}"
                )
                continue
            if load[src] - load[dst] > paper.load_difference and owned[src]:
                chosen = rng.sample(owned[src], min(paper.move_size, len(owned[src])))
                migrations.append((dst, sorted(chosen)))
        for dst, chosen in migrations:
            for b in chosen:
                self.move(b, dst, MoveReason.PAPER)

    def cpu_warnings(self) -> None:
        """Validate counters against agents' CPU: a hot gateway the counters call light."""
        mean = self.mean()
        if mean <= 0.0:
            return
        for n in self.eligible:
            cpu = self.gws[n].reported_cpu
            if cpu is not None and cpu >= self.params.cpu_ceiling and self.norm(n) < mean:
                self.warnings.append(
                    f"gateway {n!r} reports cpu {cpu:.2f} but carries {self.norm(n) / mean:.2f}x the mean "
                    "by bucket counters (load outside the counters?)"
                )


def plan_rebalance(inp: RebalanceInput, params: RebalanceParams | None = None) -> Plan:
    """Plan the moves of one round. Pure and deterministic; see REBALANCER-API.md."""

    def load_moves(planner: _Planner) -> None:
        planner.cpu_warnings()
        planner.load_moves()

    return _plan(inp, params if params is not None else RebalanceParams(), load_moves)


def plan_paper(
    inp: RebalanceInput, paper: PaperParams, rng: random.Random, costs: RebalanceParams | None = None
) -> Plan:
    """One round of the paper's Algorithm 5 (`rebalancer.policy: paper`; see `PaperParams`).

    Failover, drain, pin and unassigned moves and the idle refill of recovering gateways
    are those of `plan_rebalance` (health is not a load policy); only the load moves
    differ. The ring is `inp.gateways` in order. Pure apart from `rng`, which the caller
    seeds for reproducible runs. `costs` gives the bucket cost weights (packet_cost,
    byte_cost) of the plan's counter loads (`load_before`/`load_after`, `Move.cost`), which
    the ring's decisions do not use.
    """
    return _plan(inp, costs if costs is not None else RebalanceParams(), lambda p: p.ring_moves(paper, rng))


def _plan(inp: RebalanceInput, params: RebalanceParams, load_moves: Callable[[_Planner], None]) -> Plan:
    """One round: the mandatory moves, then the policy's `load_moves`, then the idle refill."""
    gws = _validate(inp)
    planner = _Planner(inp, params, gws)
    load_before = dict(planner.loads)
    ratio_before = planner.ratio()
    if not planner.eligible:
        planner.warnings.append("no eligible gateway (all dead or drained): nothing can move")
    else:
        planner.mandatory()
        load_moves(planner)
        planner.idle_refill()
    return Plan(
        moves=tuple(planner.moves),
        load_before=load_before,
        load_after=dict(planner.loads),
        ratio_before=ratio_before,
        ratio_after=planner.ratio(),
        failover=any(m.reason is MoveReason.FAILOVER for m in planner.moves),
        warnings=tuple(planner.warnings),
    )
