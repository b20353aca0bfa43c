"""The P4Runtime side of an HA replica (`ha/replica.py`): arbitration without bids of its
own, only the etcd leader's claim; stream events; the record of accepted writes.

finsy's `Arbitrator` always sends an election id and, when the switch reports that the
primary left (NOT_FOUND), bids for primary with the old primary's id. P4Runtime (and the
eBPF target's arbiter, and PI) promote the highest connected id when the primary goes:
a backup with any election id could become primary without etcd's say. So a backup
replica here sends its MasterArbitrationUpdate *without* an election id (P4Runtime 1.4:
such a client is a backup forever; it may read and it hears every arbitration update),
and only `claim(eid)`, called by the etcd leader with its term's id, bids. It never
lowers its id on a conflict and never adopts another's: a failed claim stays backup.

`on_primary_change(present, primary_id)` reports what the switch says about the primary
(the switch tells every stream when the primary changes): a backup learns within
milliseconds that the leader's stream is gone. `check_write` runs on every Write and
SetForwardingPipelineConfig request (the fence), the last point before it leaves.

Installed on a finsy `Switch` by `install()`: finsy has no hook for a custom
arbitrator, so this replaces its private `_arbitrator` (finsy 0.30, pinned); `install`
checks the attribute exists so an upgrade that renames it fails loudly at start.
`ReplicaStream` is all the replica sees of it (the replica never touches finsy).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable
from typing import Any

from finsy import P4ClientError, Switch, SwitchEvent
from finsy.grpcutil import GRPCStatusCode
from finsy.p4arbitrator import Arbitrator
from finsy.p4client import P4RpcStatus
from finsy.proto import U128, p4r

from supergw_controller.ha.term import format_id, term_of

log = logging.getLogger(__name__)

PrimaryChange = Callable[[bool, int], None]


class ClaimRefused(RuntimeError):
    """The switch did not make us primary with our term's election id."""


class ReplicaArbitrator(Arbitrator):
    def __init__(self, on_primary_change: PrimaryChange, check_write: Callable[[], None], replica: str = "") -> None:
        super().__init__(0)
        self._on_change = on_primary_change
        self._check_write = check_write
        # PI (BMv2) takes a missing election id for id 0 and refuses a second stream with
        # it: a backup then falls back to a small id of its own (far below every term's id).
        self._backup_base = 1 + zlib.crc32(replica.encode())
        self.backup_id = 0  # the id this stream holds as a backup (0: none)
        self.claimed_id = 0  # the term id we bid with, while we do
        self.primary_present = False

    # -- what the replica calls
    async def claim(self, switch: Switch, eid: int) -> None:
        """Bid for primary with `eid` on the open stream; the answer arrives as an update."""
        if switch._p4client is None:  # noqa: SLF001 - see module docstring
            raise ClaimRefused("no P4Runtime channel to the switch")
        self.election_id = self.claimed_id = eid
        await self._send(switch)

    async def release(self, switch: Switch) -> None:
        """Give up primary: the same stream, back to its backup id (none, or PI's fallback)."""
        self.claimed_id = 0
        self.election_id = self.backup_id
        await self._send(switch)

    # -- finsy's Arbitrator interface
    async def handshake(self, switch: Switch, *, conflict: bool = False) -> None:
        if conflict:
            if self.claimed_id:
                # Two streams with one term id: only a replica of the same term could do that.
                raise ClaimRefused(f"election id {format_id(self.election_id)} is already used by another stream")
            self._next_backup_id()
        for _ in range(8):
            await self._send(switch)
            response = await self._receive(switch)
            if response is not None:
                self._apply(switch, response, initial=True)
                return
            self._next_backup_id()
        raise ClaimRefused(f"the switch refused every backup election id up to {format_id(self.election_id)}")

    def _next_backup_id(self) -> None:
        self.backup_id = self.election_id = self._backup_base if self.backup_id == 0 else self.backup_id + 1
        log.info("the switch refused a second stream without election id: backup id %s", format_id(self.backup_id))

    async def update(self, switch: Switch, msg: p4r.MasterArbitrationUpdate) -> None:
        self._apply(switch, msg, initial=False)

    def _apply(self, switch: Switch, msg: p4r.MasterArbitrationUpdate, *, initial: bool) -> None:
        code = P4RpcStatus.from_status(msg.status).code
        if code not in (GRPCStatusCode.OK, GRPCStatusCode.ALREADY_EXISTS, GRPCStatusCode.NOT_FOUND):
            raise ClaimRefused(f"unexpected arbitration status {code.name}: {msg.status.message}")
        primary_id = U128.decode(msg.election_id) if msg.HasField("election_id") else 0
        self.primary_id = primary_id
        was = self.is_primary
        # Only a term id is a primary that counts: PI promotes a backup's fallback id when
        # the primary leaves; that backup is fenced (not the etcd leader) and stays passive.
        leader_present = code != GRPCStatusCode.NOT_FOUND and term_of(primary_id) is not None
        mine = code == GRPCStatusCode.OK and self.claimed_id != 0 and primary_id == self.claimed_id
        self.is_primary = mine
        changed = leader_present != self.primary_present
        self.primary_present = leader_present
        if not initial:
            if mine and not was:
                switch._become_primary()  # type: ignore[no-untyped-call]  # noqa: SLF001 - finsy's own transition
            elif was and not mine:
                switch._become_backup()  # type: ignore[no-untyped-call]  # noqa: SLF001
        if changed or initial:
            self._on_change(leader_present, primary_id)

    def reset(self) -> None:
        # The stream closed: whatever we were, we reconnect as a backup without an id.
        super().reset()
        self.election_id = self.backup_id = self.claimed_id = 0
        self.primary_present = False

    def complete_request(self, msg: Any) -> None:
        if isinstance(msg, (p4r.SetForwardingPipelineConfigRequest, p4r.WriteRequest)):
            self._check_write()
            if self.election_id:
                msg.election_id.CopyFrom(U128.encode(self.election_id))

    async def _send(self, switch: Switch) -> None:
        assert switch._p4client is not None  # noqa: SLF001
        arb = p4r.MasterArbitrationUpdate(device_id=switch.device_id)
        if self.election_id:
            arb.election_id.CopyFrom(U128.encode(self.election_id))
        await switch._p4client.send(p4r.StreamMessageRequest(arbitration=arb))  # noqa: SLF001


def install(switch: Switch, arbitrator: ReplicaArbitrator) -> None:
    """Make `switch` (not running yet) arbitrate with `arbitrator`."""
    if not isinstance(getattr(switch, "_arbitrator", None), Arbitrator):
        raise RuntimeError("finsy.Switch has no _arbitrator: this finsy version is not supported for HA")
    if switch._p4client is not None:  # noqa: SLF001
        raise RuntimeError("install the arbitrator before the switch runs")
    switch._arbitrator = arbitrator  # noqa: SLF001


class ReplicaStream:
    """A replica's P4Runtime stream: `claim` and `release` primary, the stream's events, and
    a record of the writes the switch accepted (wall-clock windows per term)."""

    def __init__(self, switch: Switch, on_primary_change: PrimaryChange, check_write: Callable[[], None],
                 replica: str) -> None:
        self._switch = switch
        self.arbitrator = ReplicaArbitrator(on_primary_change, check_write, replica)
        install(switch, self.arbitrator)

    @property
    def primary_id(self) -> int:
        """The primary's election id as the switch last said it."""
        return int(self.arbitrator.primary_id)

    def on_events(self, *, up: Callable[[], None], down: Callable[[], None], demoted: Callable[[], None]) -> None:
        """`up`/`down`: the stream opened or closed; `demoted`: the switch made another primary."""
        self._switch.ee.on(SwitchEvent.CHANNEL_UP, lambda _sw: up())
        self._switch.ee.on(SwitchEvent.CHANNEL_DOWN, lambda _sw: down())
        self._switch.ee.on(SwitchEvent.BECOME_BACKUP, lambda _sw: demoted())

    def record_writes(self, term: Callable[[], int], accepted: Callable[[int, float], None]) -> None:
        """Call `accepted(term, sent)` for every Write the switch took (answered OK, or with
        per-update results), `term` read and `sent` (wall clock) taken as it leaves."""
        inner = self._switch.write

        async def write(*args: Any, **kw: Any) -> None:
            t, sent = term(), time.time()
            try:
                await inner(*args, **kw)
            except P4ClientError as exc:
                if exc.details:  # per-update results: the switch took the request
                    accepted(t, sent)
                raise
            accepted(t, sent)

        self._switch.write = write  # type: ignore[method-assign]

    async def claim(self, eid: int) -> None:
        await self.arbitrator.claim(self._switch, eid)

    async def release(self, timeout_s: float = 1.0) -> None:
        """Give up primary now: an arbitration update with our backup id (none); without a
        stream there is nothing to give up. Failures are logged (the fence refuses anyway)."""
        self.arbitrator.claimed_id = 0
        self.arbitrator.election_id = self.arbitrator.backup_id
        if self._switch._p4client is None:  # noqa: SLF001 - see module docstring
            return
        try:
            await asyncio.wait_for(self.arbitrator.release(self._switch), timeout_s)
        except Exception as exc:  # noqa: BLE001 - the fence already refuses every write
            log.info("could not release primary on the switch: %s", exc)
