"""One controller replica: etcd leadership drives the switch's arbitration.

State machine (one loop, `run`):

- **backup**: holds a P4Runtime stream *without* an election id (reads, mirror of the
  switch for its API) and watches the leader key. It campaigns when the key is gone,
  and only while its own stream to the switch is up (a replica that cannot reach the
  switch must not lead). When the switch says the primary it last announced (the
  current leader's term's id) is gone, that leader's stream is gone: a leader that
  loses its stream resigns (below), so it is not leading any more, or it is dead. The
  backup revokes that leader's lease (etcd deletes the key at once) and campaigns,
  instead of waiting for the lease to expire.
- **leader** (won the campaign, term T = the key's create_revision): fences the store
  (`set_fence(key, T)`), reloads the operator intent from the store, claims primary with
  `election_id(T)`; the core then reconciles from the switch and runs its loops as today.
  It keeps its lease alive every TTL/4; the fence deadline is the *send* time of the
  last successful keep-alive + TTL - margin.
- **step down** on: lease or key lost, fence deadline passed (etcd unreachable), its
  stream to the switch lost or demoted. It revokes the fence first (every write refuses
  from now on), gives up primary on the switch (an arbitration update without id), then
  resigns in etcd (deletes its key if still its own, revokes its lease; best effort).

SIGSTOP and partitions fall back to lease expiry: no replica revokes a lease whose
leader still holds its stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol

from supergw_controller.ha.fence import LeaseFence
from supergw_controller.ha.leadership import EtcdError, LeaderInfo, Leadership
from supergw_controller.ha.term import election_id, format_id
from supergw_controller.ha.view import HaView, WriteWindow
from supergw_controller.southbound.arbitration import ReplicaStream

log = logging.getLogger(__name__)


class StoreFence(Protocol):
    """What the replica uses of the etcd intent store (H1a's `set_fence`)."""

    def set_fence(self, key: str, create_revision: int) -> None: ...


class StreamSource(Protocol):
    """Where the replica gets its P4Runtime stream (`southbound.switch.Southbound`)."""

    def replica_stream(self, on_primary_change: Callable[[bool, int], None], check_write: Callable[[], None],
                       replica: str) -> ReplicaStream: ...


class CoreLike(Protocol):
    """What the replica uses of the core (`compose.ReplicaCore`)."""

    @property
    def primary_ready(self) -> asyncio.Event: ...

    async def reload_intent(self) -> None: ...
    def note(self, kind: str, reason: str, detail: str) -> None: ...




class Replica:
    def __init__(
        self,
        *,
        replica: str,
        leadership: Leadership,
        fence: LeaseFence,
        switch: StreamSource,
        core: CoreLike,
        store: StoreFence | None,
        keepalive_s: float,
        poll_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = replica
        self._lead = leadership
        self.fence = fence
        self._core = core
        self._store = store
        self._keepalive_s = keepalive_s
        self._poll_s = poll_s
        self._clock = clock
        self.stream = switch.replica_stream(self._primary_change, fence.check, replica)
        self.leader: LeaderInfo | None = None
        self.term = 0
        self._lease = 0
        self.takeovers = 0
        self._wake = asyncio.Event()
        self._lost: str | None = None  # why the leader must step down, set by callbacks
        self._channel_up = False
        self._seen_primary_id = 0  # the primary the switch last told us about
        self._no_primary_id = 0  # the switch has no primary: the id of the one that left
        self._claimed = False
        self._bg: set[asyncio.Task[None]] = set()
        self._windows: dict[int, WriteWindow] = {}
        # Record, per term, when the switch accepted this replica's writes: the evidence the
        # partition test and bench/ha compare across replicas (`view().writes`).
        self.stream.record_writes(lambda: self.term, self._wrote)
        self.stream.on_events(up=self._on_channel_up, down=self._on_channel_down, demoted=self._on_become_backup)

    @property
    def leading(self) -> bool:
        return self.term > 0

    def view(self) -> HaView:
        eid = election_id(self.term) if self.leading else 0
        return HaView(
            replica=self.name,
            role="leader" if self.leading else "backup",
            term=self.term if self.leading else (self.leader.term if self.leader else 0),
            election_id=format_id(eid) if eid else "none",
            leader=self.leader.replica if self.leader else None,
            leader_api=self.leader.api if self.leader else None,
            takeovers=self.takeovers,
            writes=sorted(self._windows.values(), key=lambda w: w.term),
        )

    # ------------------------------------------------------------------ write record
    def _wrote(self, term: int, sent: float) -> None:
        done = time.time()
        w = self._windows.get(term)
        if w is None:
            self._windows[term] = WriteWindow(term, 1, sent, done)
            for old in sorted(self._windows)[:-8]:
                del self._windows[old]
        else:
            w.writes, w.last_answered = w.writes + 1, max(w.last_answered, done)

    # ------------------------------------------------------------------ switch events
    def _primary_change(self, present: bool, primary_id: int) -> None:
        log.info("replica %s: the switch says %s (election id %s)", self.name,
                 "a controller is primary" if present else "there is no primary", format_id(primary_id))
        # The switch names the highest id it ever saw when it has no primary, which may
        # be an older cluster's: the primary that left is the one we last saw primary.
        if present:
            self._seen_primary_id, self._no_primary_id = primary_id, 0
        else:
            self._no_primary_id, self._seen_primary_id = self._seen_primary_id, 0
        if not present:
            self._wake.set()
        elif self.leading and self._claimed and primary_id != election_id(self.term):
            self._lost = f"another controller is primary on the switch (election id {format_id(primary_id)})"
            self.fence.revoke(self._lost)
            self._wake.set()

    def _on_channel_up(self) -> None:
        self._channel_up = True
        self._wake.set()

    def _on_channel_down(self) -> None:
        self._channel_up = False
        self._no_primary_id = self._seen_primary_id = 0
        if self.leading:
            self._lost = "lost the P4Runtime stream to the switch"
            self.fence.revoke(self._lost)
        self._wake.set()

    def _on_become_backup(self) -> None:
        if self.leading and self._claimed:
            self._lost = f"the switch made another controller primary (primary id {format_id(self.stream.primary_id)})"
            self.fence.revoke(self._lost)
            self._wake.set()

    # ------------------------------------------------------------------ main loop
    async def run(self) -> None:
        watch = asyncio.create_task(self._watch_loop(), name="ha-watch")
        failing: str | None = None
        try:
            while True:
                try:
                    if self.leading:
                        await self._lead_once()
                    else:
                        await self._backup_once()
                    failing = None
                except EtcdError as exc:
                    if str(exc) != failing:
                        log.warning("replica %s: %s", self.name, exc)
                        failing = str(exc)
                    if self.leading and not self.fence.valid():
                        await self._step_down("the etcd lease could not be confirmed in time (etcd unreachable)")
                    await self._sleep(min(self._poll_s, 0.2))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - one bad round must not end the replica
                    log.exception("replica %s: leadership round failed", self.name)
                    if self.leading:
                        await self._step_down(f"{type(exc).__name__}: {exc}")
                    await self._sleep(self._poll_s)
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch
            if self.leading:
                await self._step_down("shutting down")

    async def _sleep(self, seconds: float) -> bool:
        """Sleep until woken or `seconds` passed; True when woken."""
        woken = False
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(0.0, seconds))
            woken = True
        self._wake.clear()
        return woken

    async def _watch_loop(self) -> None:
        while True:
            try:
                async for _ in self._lead.changes():
                    self._wake.set()
            except EtcdError as exc:
                log.debug("leader watch: %s", exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a broken watch is re-opened; polls cover the gap
                log.debug("leader watch ended: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(self._poll_s)

    async def _backup_once(self) -> None:
        info = await self._lead.leader()
        self.leader = info
        if info is not None and self._no_primary_id and self._no_primary_id == election_id(info.term):
            log.warning(
                "replica %s: the switch has no primary and leader %s (term %d) held its last primary stream: "
                "revoking its lease",
                self.name,
                info.replica,
                info.term,
            )
            self._no_primary_id = 0
            await self._lead.revoke(info.lease)
            info = self.leader = None
        if info is None and self._channel_up:
            campaign, sent = await self._lead.campaign()
            self.leader = campaign.leader
            if campaign.won:
                await self._become_leader(campaign.leader, sent)
                return
            log.info("replica %s: %s leads (term %d)", self.name, campaign.leader.replica, campaign.leader.term)
        await self._sleep(self._poll_s)

    async def _become_leader(self, info: LeaderInfo, sent: float) -> None:
        self.term, self._lease, self._lost, self._claimed = info.term, info.lease, None, False
        self.fence.grant(info.term, sent)
        self.takeovers += 1
        eid = election_id(info.term)
        log.warning("replica %s: leader, term %d, election id %s", self.name, info.term, format_id(eid))
        self._core.note("ha", "leader", f"replica {self.name} leads: term {info.term}, election id {format_id(eid)}")
        if self._store is not None:
            self._store.set_fence(self._lead.key.decode(), info.term)
        await self._take_switch()

    async def _take_switch(self) -> None:
        """Reload the operator intent, then claim primary with our term's id (retried by
        `_lead_once` until it succeeds or the leadership ends)."""
        await self._core.reload_intent()
        self.fence.check()  # the reload may have taken long
        await self.stream.claim(election_id(self.term))
        self._claimed = True
        task = asyncio.get_running_loop().create_task(self._announce_ready(self.term))
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def _announce_ready(self, term: int) -> None:
        await self._core.primary_ready.wait()
        if self.term == term:
            log.warning("replica %s: primary on the switch and reconciled (term %d)", self.name, term)
            self._core.note("ha", "ready", f"replica {self.name} is primary and reconciled: term {term}")

    async def _lead_once(self) -> None:
        if self._lost is not None:
            await self._step_down(self._lost)
            return
        if not self.fence.valid():
            await self._step_down("the etcd lease could not be confirmed in time (etcd unreachable)")
            return
        if not self._claimed:
            await self._take_switch()
        budget = max(0.01, self.fence.remaining())
        sent = self._clock()
        try:
            alive = await asyncio.wait_for(self._lead.keepalive(self._lease), budget)
        except asyncio.TimeoutError:
            await self._step_down("the etcd lease could not be confirmed in time (etcd unreachable)")
            return
        if not alive:
            await self._step_down("the etcd lease expired or was revoked")
            return
        if self._lost is not None:
            await self._step_down(self._lost)
            return
        self.fence.grant(self.term, sent)
        if await self._sleep(min(self._keepalive_s, self.fence.remaining())) and self._lost is None:
            # Woken: the leader key changed (or a switch event): is it still ours?
            budget = max(0.01, self.fence.remaining())
            try:
                info = await asyncio.wait_for(self._lead.leader(), budget)
            except asyncio.TimeoutError:
                return  # the next round steps down if the fence lapsed
            if info is None or info.term != self.term:
                await self._step_down("the leader key was deleted or replaced")

    async def _step_down(self, why: str) -> None:
        if not self.leading:
            return
        term, lease = self.term, self._lease
        self.fence.revoke(f"stepped down: {why}")
        self.term, self._lease, self._lost, self._claimed = 0, 0, None, False
        log.warning("replica %s: stepping down from term %d: %s", self.name, term, why)
        self._core.note("ha", "step-down", f"replica {self.name} stepped down from term {term}: {why}")
        await self._release_primary()
        try:
            await self._lead.resign(term, lease)
        except EtcdError as exc:
            log.info("replica %s: resign of term %d not confirmed (%s); the lease expires by itself", self.name, term, exc)
        self.leader = None

    async def _release_primary(self) -> None:
        """Give up primary on the switch now: an arbitration update with our backup id (none)."""
        await self.stream.release()
