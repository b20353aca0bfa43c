"""Placement: which gateway each bucket goes to. It decides every bucket move.

Operator intent (pins, drains, weights: loaded from the store at start and at an HA
takeover, stored before an operator's call is acknowledged), the initial fill at
reconcile, failover of dead gateways, rebalance rounds (`rebalancer.plan_rebalance` or
`plan_paper`) and the operator's commands all end here. Placement asks the southbound to
write its moves (`BucketSwitch.set_buckets`, hot buckets first in their own small write)
and the event log to record what was written. It writes only when `may_write` allows it:
"primary on the switch" for a single controller, "leader and primary" for a replica.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

from supergw_controller.assignment import fill_missing
from supergw_controller.backups import ring_backups
from supergw_controller.bucket_stats import BucketStats
from supergw_controller.config import Config, RebalancePolicy
from supergw_controller.durable import Durable
from supergw_controller.errors import Conflict, SwitchUnavailable, UnknownBucket
from supergw_controller.eventlog import EventLog
from supergw_controller.gateways import GatewayRegistry, Transition
from supergw_controller.intent_store import Intent
from supergw_controller.rebalancer import (
    BUDGETED_REASONS,
    ELIGIBLE_STATES,
    GatewayState,
    Move,
    MoveReason,
    PaperParams,
    Plan,
    RebalanceInput,
    RebalanceParams,
    hot_first,
    imbalance,
    plan_paper,
    plan_rebalance,
)
from supergw_proto.api import MoveView, RebalanceView

log = logging.getLogger(__name__)


class BucketSwitch(Protocol):
    """What placement asks of the southbound."""

    @property
    def assignment(self) -> Mapping[int, str]:
        """bucket -> gateway, as the switch holds it (the southbound's mirror)."""
        ...

    @property
    def primary(self) -> bool: ...

    async def set_buckets(self, moves: Mapping[int, str]) -> None:
        """Write bucket -> gateway in one batch; the mirror changes only when it succeeded."""
        ...

    async def set_backups(self, backups: Mapping[str, str]) -> int:
        """Write gateway -> backup (gateway_backups) as the difference to what is held."""
        ...


class WriteCheck(Protocol):
    """Raises unless this controller may write now (`NotPrimary`, `SwitchUnavailable`, HA's
    `NotLeader`); `switch` false for intent-only writes (weights, unpins)."""

    def __call__(self, what: str, *, switch: bool = True) -> None: ...


def rebalance_params(config: Config) -> RebalanceParams:
    r = config.rebalancer
    return RebalanceParams(
        threshold=r.threshold,
        target=max(1.0, r.threshold - r.hysteresis),
        move_budget=r.move_budget,
        refill_budget=r.refill_budget,
    )


class Placement:
    def __init__(
        self,
        config: Config,
        registry: GatewayRegistry,
        switch: BucketSwitch,
        events: EventLog,
        durable: Durable,
        stats: BucketStats,
        *,
        may_write: WriteCheck,
    ) -> None:
        self._config = config
        self._k = config.buckets
        self.registry = registry
        self._switch = switch
        self._log = events
        self._durable = durable
        self._stats = stats
        self._may_write = may_write
        self.params = rebalance_params(config)
        paper = config.rebalancer.paper
        self.paper_params = PaperParams(load_difference=paper.load_difference, move_size=paper.move_size)
        self._rng = random.Random(paper.seed)
        self.pins: dict[int, str] = {}
        self.lock = asyncio.Lock()  # serialises bucket-table writes and the state they change
        # Set while this controller is primary and reconciled: failovers may write.
        self.ready = asyncio.Event()
        self._failover_pending = False
        self._backups_pending = False

    @property
    def assignment(self) -> Mapping[int, str]:
        return self._switch.assignment

    # ------------------------------------------------------------------ intent
    async def load_intent(self, *, required: bool = False) -> Intent | None:
        """Drains, weights and pins from the store: at start (`required` false: a store that
        fails is left out) and when a replica takes over (the previous leader may have
        changed them; the store must answer). The whole intent read (None: no store)."""
        intent = await self._durable.load(required=required)
        if intent is None:
            return None
        known = set(self.registry.names())
        self.registry.apply_intent(
            {n: w for n, w in intent.weights.items() if n in known}, {n for n in intent.drained if n in known}
        )
        self.pins = {b: g for b, g in intent.pins.items() if g in known and 0 <= b < self._k}
        return intent

    # ------------------------------------------------------------------ the switch's state
    def wanted(self, held: Mapping[int, str], before: Mapping[int, str]) -> dict[int, str]:
        """The bucket table to reconcile to: every valid entry the switch `held` stays; a
        switch that lost its state (restart) gets back what this controller had installed
        (`before`), so no host changes gateway; only buckets nobody owns are filled."""
        weights = {g.name: g.weight for g in self.registry.eligible()}
        if not weights:
            # Nobody is known alive yet: keep traffic flowing where it went before.
            weights = {g.name: g.weight for g in self.registry.all() if not g.drained} or {
                g.name: g.weight for g in self.registry.all()
            }
        eligible = {g.name for g in self.registry.eligible()}
        remembered = {b: g for b, g in before.items() if b not in held and g in eligible}
        return fill_missing(self._k, {**held, **remembered}, weights, self._config.dispatch.partition_period)

    def backups(self) -> dict[str, str]:
        """Each gateway's backup: where the switch sends its buckets by itself once its
        liveness frames stop, and where its buckets go when it is judged dead. The ring
        successor among the gateways that can serve (`backups.ring_backups`, the config's
        order); empty when the switch is not to fail over by itself."""
        if not self._config.timing.dataplane_failover:
            return {}
        serving = {g.name for g in self.registry.eligible()}
        return {g: b for g, b in ring_backups(self.registry.names(), serving).items() if b is not None}

    async def sync_backups(self) -> None:
        """Write the backups that changed (a death, a return, a drain); retried each tick."""
        if not self._switch.primary or not self.ready.is_set():
            return
        try:
            await self._switch.set_backups(self.backups())
            self._backups_pending = False
        except SwitchUnavailable as exc:
            if not self._backups_pending:
                log.error("gateway backups write failed (retried at the next tick): %s", exc)
            self._backups_pending = True

    async def serve(self) -> None:
        """Primary and reconciled: mandatory moves (dead or drained gateways, pins) now."""
        self.ready.set()
        self._failover_pending = True
        await self.failover_if_pending()
        await self.sync_backups()

    def pause(self) -> None:
        """No longer primary: nothing is written until `serve` again."""
        self.ready.clear()

    # ------------------------------------------------------------------ liveness
    async def on_liveness(self, transitions: Sequence[Transition]) -> None:
        """Liveness's verdicts (every watchdog tick, with or without transitions): a death
        moves the dead gateway's buckets at once; a failed failover is retried here."""
        records = self._log.note_gateways(transitions)
        if any(t.died for t in transitions):
            self._failover_pending = True
        await self.failover_if_pending()
        # Every tick, not only on transitions: a takeover's release (withheld -> serving) is no
        # liveness transition but changes the ring; only a difference is written.
        await self.sync_backups()
        # The durable event log after the failover write: traffic first.
        await self._log.persist(records)

    async def failover_if_pending(self) -> None:
        """Move every bucket off dead gateways in one round; retried each tick until it succeeds."""
        if not self._failover_pending or not self._switch.primary or not self.ready.is_set():
            return
        async with self.lock:
            if not self._failover_pending:
                return  # done by whoever held the lock before us
            try:
                await self._round(dry_run=False, mandatory_only=True)
                self._failover_pending = False
            except SwitchUnavailable as exc:
                log.error("failover write failed (retried at the next tick): %s", exc)

    # ------------------------------------------------------------------ operator commands
    def check_bucket(self, bucket: int) -> None:
        if not 0 <= bucket < self._k:
            raise UnknownBucket(f"bucket {bucket} is outside 0..{self._k - 1}")

    async def drain(self, name: str) -> None:
        """Move all unpinned buckets away now (one round); no new buckets until undrained."""
        g = self.registry.get(name)
        self._may_write("drain gateways")
        async with self.lock:
            if not g.drained:
                # The intent is stored first: a refused call (503) must leave nothing changed,
                # and a store that fails after the switch write would leave the drain in force.
                await self._durable.save("set_drained", name, True)
                g.drained = True
                try:
                    await self._round(dry_run=False, mandatory_only=True)
                except SwitchUnavailable:
                    g.drained = False
                    await self._undo("set_drained", name, False)
                    raise
            await self.sync_backups()

    async def undrain(self, name: str) -> None:
        """Eligible again; the next rounds refill it gradually."""
        g = self.registry.get(name)
        self._may_write("undrain gateways")
        async with self.lock:
            if g.drained:
                await self._durable.save("set_drained", name, False)
                g.drained = False
                g.recovering = not g.dead
                await self.sync_backups()

    async def set_weight(self, name: str, weight: float) -> None:
        self.registry.get(name)
        self._may_write("set weights", switch=False)
        async with self.lock:
            before = self.registry.get(name).weight
            self.registry.set_weight(name, weight)  # refuses a bad weight before anything is stored
            try:
                await self._durable.save("set_weight", name, weight)
            except SwitchUnavailable:
                self.registry.set_weight(name, before)
                raise

    async def pin(self, bucket: int, gateway: str) -> None:
        self.check_bucket(bucket)
        g = self.registry.get(gateway)
        self._may_write("pin buckets")
        if g.state not in ELIGIBLE_STATES:
            raise Conflict(f"gateway {gateway!r} is {g.state.value}: cannot pin a bucket to it")
        async with self.lock:
            before = self.pins.get(bucket)
            await self._durable.save("pin", bucket, gateway)  # first: a refused call changes nothing
            src = self.assignment.get(bucket)
            if src != gateway:
                try:
                    await self._apply([Move(bucket, src, gateway, MoveReason.PIN)], "operator pin")
                except SwitchUnavailable:
                    await (self._undo("unpin", bucket) if before is None else self._undo("pin", bucket, before))
                    raise
            self.pins[bucket] = gateway

    async def unpin(self, bucket: int) -> None:
        """Unpinning an unpinned bucket is a no-op."""
        self.check_bucket(bucket)
        self._may_write("unpin buckets", switch=False)
        async with self.lock:
            if bucket in self.pins:
                await self._durable.save("unpin", bucket)
                del self.pins[bucket]

    async def _undo(self, method: str, *args: object) -> None:
        """Put the stored intent back after the switch refused what it describes; if the store
        fails now too, the log says so (the next start loads the newer intent)."""
        try:
            await self._durable.save(method, *args)
        except SwitchUnavailable as exc:
            log.error("operator intent %s%s could not be undone in the store: %s", method, args, exc)

    async def move(self, bucket: int, gateway: str, reason: str = "operator") -> None:
        self.check_bucket(bucket)
        g = self.registry.get(gateway)
        self._may_write("move buckets")
        pinned = self.pins.get(bucket)
        if pinned is not None and pinned != gateway:
            raise Conflict(f"bucket {bucket} is pinned to {pinned!r}; unpin it first")
        if g.state not in ELIGIBLE_STATES:
            raise Conflict(f"gateway {gateway!r} is {g.state.value}: cannot move a bucket to it")
        async with self.lock:
            src = self.assignment.get(bucket)
            if src != gateway:
                await self._apply([Move(bucket, src, gateway, MoveReason.OPERATOR)], reason)

    async def rebalance(self, dry_run: bool = False) -> RebalanceView:
        """One round now (planned only, with `dry_run`)."""
        if not dry_run:
            self._may_write("rebalance")
        async with self.lock:
            return await self._round(dry_run=dry_run, mandatory_only=False)

    async def periodic_round(self) -> None:
        """The rebalance round of the periodic loop (every `timing.rebalance_interval_ms`)."""
        async with self.lock:
            await self._round(dry_run=False, mandatory_only=False)

    # ------------------------------------------------------------------ planning
    def plan(self) -> Plan:
        inp = RebalanceInput(
            k=self._k,
            rates={b: r for b, r in self._stats.rates.items() if b < self._k},
            assignment=dict(self.assignment),
            gateways=self.registry.rebalance_inputs(),  # the config's order: the paper policy's ring
            pins=dict(self.pins),
            failover_to=self.backups(),
        )
        if self._config.rebalancer.policy is RebalancePolicy.PAPER:
            return plan_paper(inp, self.paper_params, self._rng, self.params)
        return plan_rebalance(inp, self.params)

    def imbalance(self) -> float:
        """max/mean of the gateways' weighted load now, from the bucket counters."""
        loads: dict[str, float] = {g.name: 0.0 for g in self.registry.all()}
        assignment = self.assignment
        for b, r in self._stats.rates.items():
            g = assignment.get(b)
            if g in loads:
                loads[g] += r.pps * self.params.packet_cost + r.bps * self.params.byte_cost
        return imbalance(loads, self.registry.rebalance_inputs())

    async def _round(self, *, dry_run: bool, mandatory_only: bool) -> RebalanceView:
        """Plan one round and (unless dry_run) write its moves. Hold the lock."""
        started = time.perf_counter()
        plan = self.plan()
        planned = time.perf_counter()
        write_ms: float | None = None
        moves = [m for m in plan.moves if not (mandatory_only and m.reason in BUDGETED_REASONS)]
        for w in plan.warnings:
            log.debug("rebalancer: %s", w)
        for g in self.registry.all():
            g.load = plan.load_before.get(g.name, 0.0)
        applied = False
        if moves and not dry_run:
            await self._apply(moves)
            applied = True
            write_ms = (time.perf_counter() - planned) * 1000
        if not dry_run and not mandatory_only:
            refilled = {m.dst for m in moves if m.reason is MoveReason.REFILL}
            for g in self.registry.all():
                if g.state is GatewayState.RECOVERING and g.name not in refilled:
                    self.registry.refilled(g.name)
        return RebalanceView(
            dry_run=dry_run,
            applied=applied,
            moves=[MoveView(bucket=m.bucket, src=m.src, dst=m.dst, reason=m.reason.value) for m in moves],
            load_before=plan.load_before,
            load_after=plan.load_after,
            ratio_before=plan.ratio_before,
            ratio_after=plan.ratio_after,
            warnings=list(plan.warnings),
            plan_ms=(planned - started) * 1000,
            write_ms=write_ms,
        )

    async def _apply(self, moves: Sequence[Move], detail: str = "") -> None:
        """Have the southbound write `moves`; the event log records what was written.

        Buckets carrying traffic go first in their own small write (a failover of an
        idle-heavy gateway rewrites thousands of buckets; the hot ones should not wait
        for them), then the rest in one more write.
        """
        done: list[Move] = []
        try:
            for batch in hot_first(moves):
                if batch:
                    await self._switch.set_buckets({m.bucket: m.dst for m in batch})
                    done.extend(batch)
        finally:
            await self._log.record_moves(done, detail)
