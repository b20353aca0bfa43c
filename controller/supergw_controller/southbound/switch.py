"""The southbound owner: everything the controller does on the switch, in the core's words.

It holds the P4Runtime session (`session.SwitchSession`, finsy) and the mirror of the
bucket table (what the switch holds, bucket -> gateway), and offers typed operations:
`set_buckets`, `write_hosts`, `set_pools`, `set_fenced`, `send_packet`,
`read_bucket_counters`, `read_hosts`, `refresh_buckets`, and `reconcile`. Digests, packet-ins and idle timeouts reach the core
as plain events (`domain.py`) through a `SwitchListener`. Nothing outside `southbound/`
builds or reads a finsy entity.

Gateways are the config's: a bucket written to gateway G points at G's port and MAC; an
entry read back that points at no configured gateway (or lies beyond K) is *foreign* and
reconcile rewrites or deletes it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from finsy import P4CounterEntry, P4DigestEntry, P4MulticastGroupEntry, P4TableEntry, Switch
from finsy.p4schema import P4Schema

from supergw_proto import p4constants as pc
from supergw_controller.config import Config, PortRoleName
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.arbitration import ReplicaStream
from supergw_controller.southbound.digests import DigestPlan, digest_plan
from supergw_controller.southbound.domain import (
    HeldHosts,
    HostCapacity,
    HostIdle,
    HostSeen,
    HostWrite,
    Ip6Idle,
    Ip6Seen,
    Op,
    PacketIn,
)
from supergw_controller.southbound.entities import BucketEntry, Update
from supergw_controller.southbound.reconcile import diff_entries
from supergw_controller.southbound.session import Role, SwitchSession

log = logging.getLogger(__name__)

T = TypeVar("T")


class SwitchListener(Protocol):
    """What the core hears from the southbound."""

    def role_changed(self, role: Role) -> None: ...

    async def primary(self) -> None:
        """This instance just became primary: bring the switch in line (`reconcile`)."""
        ...

    async def serving(self) -> None:
        """Reconciled, and digests, packet-ins and idle timeouts flow."""
        ...

    async def backup(self) -> None: ...

    async def hosts_seen(self, hosts: list[HostSeen]) -> None:
        """One learn digest (acknowledged once this returns)."""
        ...

    async def hosts_idle(self, hosts: list[HostIdle]) -> None: ...

    async def ip6s_seen(self, seen: list[Ip6Seen]) -> None:
        """One IPv6 learn digest (acknowledged once this returns)."""
        ...

    async def ip6s_idle(self, idle: list[Ip6Idle]) -> None: ...

    async def packet_in(self, packet: PacketIn) -> None: ...


class SessionLike(Protocol):
    """The part of `SwitchSession` used here (tests stand in a recording one)."""

    role: Role
    errors: int
    reconnects: int

    @property
    def cookie(self) -> int | None: ...

    @property
    def schema(self) -> P4Schema: ...

    def require_primary(self) -> None: ...
    async def write(self, updates: Sequence[Update], *, idempotent: bool = True) -> None: ...
    async def send(self, msgs: Sequence[Any]) -> None: ...
    async def read(self, entity: Any, *, yield_every: int = 0) -> list[Any]: ...
    async def read_or_none(self, entity: Any) -> list[Any] | None: ...


class Southbound:
    def __init__(self, config: Config, *, name: str = "supergw", session: SessionLike | None = None) -> None:
        self._config = config
        self._k = config.buckets
        self._idle_ns = int(config.timing.ageing_s * 1e9)
        self._targets = {g.name: (g.port, g.mac) for g in config.gateways}
        self._by_target = {(g.port, ent.mac_int(g.mac)): g.name for g in config.gateways}
        self._assignment: dict[int, str] = {}
        self._pools: dict[str, str] = {}  # client_pools as written: pool -> gateway
        self._backups: list[P4TableEntry] = []  # gateway_backups as written or read
        self._timeout_us = config.timing.lan_liveness_timeout_ms * 1000
        # Fenced gateways (remote-access takeover): their ports' port_roles entries are gone.
        self._fence_wanted: frozenset[str] = frozenset()
        self._fenced: frozenset[str] = frozenset()  # as the switch holds it
        self._listener: SwitchListener | None = None
        self._finsy: SwitchSession | None = None
        self._digests = digest_plan(config.learning, config.pipeline.device_config)
        log.info("%s", self._digests.describe())
        # stream items dropped as not understood (digest items, packet-ins, idle notes), by stream
        self.stream_rejected: dict[str, int] = {}
        if session is None:
            self._finsy = SwitchSession(config, self._on_primary, self._on_role, name=name, on_backup=self._on_backup)
            session = self._finsy
        self.session: SessionLike = session

    @property
    def digests(self) -> DigestPlan:
        """Who batches the learn digests, and with which numbers."""
        return self._digests

    def listen(self, listener: SwitchListener) -> None:
        self._listener = listener

    # ------------------------------------------------------------------ state
    @property
    def assignment(self) -> Mapping[int, str]:
        """bucket -> gateway as the switch holds it (valid entries only)."""
        return self._assignment

    @property
    def pools(self) -> Mapping[str, str]:
        """client_pools as written or read: pool -> gateway."""
        return self._pools

    @property
    def role(self) -> Role:
        return self.session.role

    @property
    def primary(self) -> bool:
        return self.session.role is Role.PRIMARY

    @property
    def cookie(self) -> int | None:
        return self.session.cookie

    @property
    def errors(self) -> int:
        return self.session.errors

    def host_capacity(self) -> HostCapacity:
        """What the host tables of the pipeline hold (its P4Info's sizes)."""
        return ent.host_capacity(self.session.schema)

    @property
    def reconnects(self) -> int:
        return self.session.reconnects

    @property
    def switch(self) -> Switch:
        """finsy's Switch (for primary-scoped tasks and a replica's stream)."""
        if self._finsy is None:
            raise RuntimeError("this southbound runs on a stand-in session, not on finsy")
        return self._finsy.switch

    def require_primary(self) -> None:
        self.session.require_primary()

    def replica_stream(
        self, on_primary_change: Callable[[bool, int], None], check_write: Callable[[], None], replica: str
    ) -> ReplicaStream:
        """This session's stream as an HA replica drives it (`ha/replica.py`): its own
        arbitration installed before the session runs."""
        return ReplicaStream(self.switch, on_primary_change, check_write, replica)

    async def run(self) -> None:
        """Run the P4Runtime session until cancelled (finsy reconnects)."""
        if self._finsy is None:
            raise RuntimeError("this southbound runs on a stand-in session, not on finsy")
        await self._finsy.run()

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Run `coro` while this instance keeps its role (finsy cancels it when the role is lost)."""
        self.switch.create_task(coro, name=name)

    # ------------------------------------------------------------------ writes
    async def set_buckets(self, moves: Mapping[int, str]) -> None:
        """bucket -> gateway, one batch; the mirror changes only when it was written."""
        updates = [
            Update(Op.MODIFY if b in self._assignment else Op.INSERT, BucketEntry(b, *self._targets[name]))
            for b, name in moves.items()
        ]
        await self.session.write(updates)
        self._assignment.update(moves)

    async def write_hosts(self, writes: Sequence[HostWrite]) -> None:
        if writes:
            await self.session.write([ent.host_update(w, self._idle_ns) for w in writes])

    async def set_pools(self, wanted: Mapping[str, str]) -> int:
        """`client_pools` (remote access): pool "a.b.c.d/n" -> gateway, written as the
        difference to what the switch holds; the number of updates."""
        updates = ent.ra_updates(pc.TABLE_CLIENT_POOLS, dict(self._pools), wanted, self._targets)
        await self.session.write(updates)
        self._pools = dict(wanted)
        return len(updates)

    @property
    def fenced(self) -> frozenset[str]:
        """Gateways whose port_roles entry the switch no longer holds (written or reconciled)."""
        return self._fenced

    async def set_fenced(self, gateways: Collection[str]) -> None:
        """Fence exactly `gateways`: their ports lose their port_roles entry, so everything
        they send is dropped (counted UNKNOWN_PORT); the others get theirs back. Reconcile
        keeps it so. Written now when primary (the difference only), else at reconcile."""
        wanted = frozenset(gateways)
        self._fence_wanted = wanted
        if not self.primary or wanted == self._fenced:
            return
        await self.session.write(ent.fence_updates(self._fenced, wanted, self._targets, pc.PortRole.GATEWAY))
        self._fenced = wanted

    async def read_pools(self) -> dict[str, str]:
        """`client_pools` as held (entries of configured gateways; the others are deleted
        by the next `set_pools`)."""
        held = ent.held_ra(pc.TABLE_CLIENT_POOLS, await self.session.read(P4TableEntry(pc.TABLE_CLIENT_POOLS)), self._by_target)
        self._pools = {str(k): g for k, g in held.items() if g is not None}
        foreign = [str(k) for k, g in held.items() if g is None]
        if foreign:
            await self.session.write([Update(Op.DELETE, ent.ra_entry(pc.TABLE_CLIENT_POOLS, k)) for k in foreign])
        return dict(self._pools)

    def backup_entries(self, backups: Mapping[str, str]) -> list[P4TableEntry]:
        """gateway_backups for gateway -> backup (by the config's ports and MACs)."""
        out = []
        for gateway, backup in sorted(backups.items()):
            port, _ = self._targets[gateway]
            out.append(ent.gateway_backup(port, *self._targets[backup], self._timeout_us))
        return out

    async def set_backups(self, backups: Mapping[str, str]) -> int:
        """gateway_backups (gateway -> backup; a gateway left out has no backup), written as
        the difference to what the switch holds; the number of updates."""
        wanted = self.backup_entries(backups)
        updates = diff_entries(self.session.schema, wanted, self._backups)
        if updates:
            await self.session.write(updates)
        self._backups = wanted
        return len(updates)

    async def send_packet(self, frame: bytes, port: int) -> None:
        await self.session.send([ent.packet_out(frame, port)])

    # ------------------------------------------------------------------ reads
    async def read_bucket_counters(self) -> dict[int, tuple[int, int]]:
        """bucket -> (packets, bytes) of every `buckets` entry's direct counter."""
        samples: dict[int, tuple[int, int]] = {}
        for c in await self.session.read(ent.bucket_counters(), yield_every=READ_SLICE):
            if c.table_entry is None or c.data is None:
                continue
            samples[ent.counter_bucket(c.table_entry)] = (c.data.packet_count, c.data.byte_count)
        return samples

    async def read_failover_frames(self) -> dict[str, int]:
        """gateway -> packets of its buckets the switch sent to its backup (`failover_frames`)."""
        by_port = {port: name for name, (port, _) in self._targets.items()}
        out = {name: 0 for name in self._targets}
        for c in await self.session.read(P4CounterEntry(pc.COUNTER_FAILOVER_FRAMES)):
            name = by_port.get(c.index)
            if name is not None and c.data is not None:
                out[name] = c.data.packet_count
        return out

    async def read_hosts(self) -> HeldHosts:
        async def table(name: str) -> list[Any]:
            return await self.session.read(P4TableEntry(name), yield_every=READ_SLICE)

        learned = await table(pc.TABLE_LEARNED_SOURCES)
        macs = await table(pc.TABLE_MAC_TABLE)
        ips = await table(pc.TABLE_HOST_IPS)
        held = ent.held_hosts(learned, macs, ips)
        if self._config.gateway_ip6 is not None:
            held.learned_ip6s[:], ip6s = ent.held_ip6s(await table(pc.TABLE_LEARNED_IP6S), await table(pc.TABLE_HOST_IP6S))
            held.ip6s.update(ip6s)
        return held

    async def refresh_buckets(self) -> None:
        """Read the bucket table into the mirror (a backup shows what the primary wrote)."""
        self._assignment = self._held_buckets(await self.session.read(P4TableEntry(pc.TABLE_BUCKETS)))[0]

    def _held_buckets(self, entries: Sequence[P4TableEntry]) -> tuple[dict[int, str], set[int]]:
        """Valid bucket -> gateway entries, and the foreign ones (to rewrite or delete)."""
        valid: dict[int, str] = {}
        foreign: set[int] = set()
        for e in entries:
            b, port, mac = ent.held_bucket(e)
            name = self._by_target.get((port, mac))
            if b < self._k and name is not None:
                valid[b] = name
            else:
                foreign.add(b)
        return valid, foreign

    # ------------------------------------------------------------------ reconcile
    async def reconcile(
        self,
        hosts: Callable[[HeldHosts], list[HostWrite]],
        buckets: Callable[[Mapping[int, str], Mapping[int, str]], dict[int, str]],
        backups: Callable[[], Mapping[str, str]] = dict,
    ) -> None:
        """Read what the switch holds and write only the difference to what the core wants,
        in one batch: `hosts(held)` says what to write to the host tables, `buckets(held,
        before)` the bucket table wanted (from the valid entries held and the mirror before
        the read), `backups()` each gateway's backup (gateway_backups; entries for anything
        else are deleted). The dispatch settings last: a fresh switch drops everything until
        then, and from then on it has buckets, roles and a flood group."""
        cfg = self._config
        s = self.session
        schema = s.schema

        # Port roles: exactly the configured ones, but a fenced gateway's.
        fenced_ports = {self._targets[g][0] for g in self._fence_wanted}
        want_roles = [
            ent.port_role(p, pc.PortRole.HOST if pcfg.role is PortRoleName.HOST else pc.PortRole.GATEWAY)
            for p, pcfg in cfg.ports.items()
            if p not in fenced_ports
        ]
        fence = self._fence_wanted
        batch = diff_entries(schema, want_roles, await s.read(P4TableEntry(pc.TABLE_PORT_ROLES)))

        # Host flood group.
        host_ports = cfg.ports_with_role(PortRoleName.HOST)
        groups = await s.read_or_none(P4MulticastGroupEntry(pc.HOST_FLOOD_GROUP))
        want_group = ent.flood_group(host_ports)
        if not groups:
            batch.append(Update(Op.INSERT, want_group))
        elif sorted(ent.replica_ports(groups[0])) != host_ports:
            batch.append(Update(Op.MODIFY, want_group))

        # Learn digest config (IPv6 addresses only when the LAN is dual-stack): batched by the
        # switch or sent at once for the controller to gather, as the digest plan says (digests.py).
        for want_digest in self._digests.entries(ip6=cfg.gateway_ip6 is not None):
            digests = await s.read_or_none(P4DigestEntry(want_digest.digest_id))
            if not digests:
                batch.append(Update(Op.INSERT, want_digest))
            elif (digests[0].max_list_size, digests[0].max_timeout_ns, digests[0].ack_timeout_ns) != (
                want_digest.max_list_size,
                want_digest.max_timeout_ns,
                want_digest.ack_timeout_ns,
            ):
                batch.append(Update(Op.MODIFY, want_digest))

        # Hosts: what the core makes of the switch's host tables.
        batch.extend(ent.host_update(w, self._idle_ns) for w in hosts(await self.read_hosts()))

        # Buckets: the table the core wants; entries held right are not rewritten.
        held, foreign = self._held_buckets(await s.read(P4TableEntry(pc.TABLE_BUCKETS)))
        target = buckets(held, dict(self._assignment))
        for b, name in sorted(target.items()):
            if held.get(b) != name:
                op = Op.MODIFY if b in held or b in foreign else Op.INSERT
                batch.append(Update(op, BucketEntry(b, *self._targets[name])))
        batch.extend(Update(Op.DELETE, ent.bucket_key(b)) for b in sorted(foreign) if b >= self._k)

        # Each gateway's backup (the switch's own failover): only the difference.
        want_backups = self.backup_entries(backups())
        batch.extend(diff_entries(schema, want_backups, await s.read(P4TableEntry(pc.TABLE_GATEWAY_BACKUPS))))

        # The gateway's IPv6 addresses (ND answers); none configured -> the initial default.
        ip6 = cfg.gateway_ip6
        want_nd = ent.nd_settings(ip6.link_local if ip6 else None, ip6.global_ if ip6 else None)
        have_nd = await s.read_or_none(P4TableEntry(pc.TABLE_ND_SETTINGS, is_default_action=True))
        if not have_nd or ent.action_sig(schema, have_nd[0]) != ent.action_sig(schema, want_nd):
            batch.append(Update(Op.MODIFY, want_nd))
        await s.write(batch)
        self._assignment = dict(target)
        self._backups = want_backups
        self._fenced = fence

        want_settings = ent.settings(str(cfg.gateway_ip), cfg.vmac_base, cfg.bucket_mask, cfg.dispatch.hash)
        have_settings = await s.read_or_none(P4TableEntry(pc.TABLE_SETTINGS, is_default_action=True))
        settings_ok = (
            have_settings is not None
            and len(have_settings) > 0
            and ent.action_sig(schema, have_settings[0]) == ent.action_sig(schema, want_settings)
        )
        if not settings_ok:
            await s.write([Update(Op.MODIFY, want_settings)], idempotent=False)
        log.info("reconciled: %d updates, settings %s", len(batch), "unchanged" if settings_ok else "written")

    # ------------------------------------------------------------------ finsy's callbacks
    def _on_role(self, role: Role) -> None:
        if self._listener is not None:
            self._listener.role_changed(role)

    async def _on_primary(self, _session: SwitchSession, sw: Switch) -> None:
        """Primary: reconcile, then serve. The digest and idle-timeout queues open first: the
        switch sends a digest once (not again until it is acked or times out), and finsy drops
        one that finds no queue, so a host whose digest came during the reconcile was never
        learned if it sent nothing more. What arrives meanwhile waits until the reconcile is
        done (it rebuilds the host table)."""
        listener = self._need_listener()
        reconciled = asyncio.Event()

        def after(handle: Callable[[T], Awaitable[None]]) -> Callable[[T], Awaitable[None]]:
            async def handled(item: T) -> None:
                await reconciled.wait()
                await handle(item)

            return handled

        capacity = self.host_capacity()
        per_list, wait_s = self._digests.gather_items, self._digests.gather_wait_s

        def gathered(digest_id: str, capacity: int | None) -> AsyncIterator[list[Any]]:
            size = digest_queue_size(capacity)
            return gather_lists(sw.read_digests(digest_id, queue_size=size), per_list, wait_s, size,
                                create_task=sw.create_task)

        sw.create_task(self.pump(gathered(pc.DIGEST_LEARN_DIGEST, capacity.hosts), after(self.on_digests),
                                 "digest", DIGESTS_IN_FLIGHT), name="digests")
        if self._config.gateway_ip6 is not None:
            sw.create_task(self.pump(gathered(pc.DIGEST_LEARN_IP6_DIGEST, capacity.ip6s), after(self.on_ip6_digests),
                                     "IPv6 digest", DIGESTS_IN_FLIGHT), name="ip6-digests")
        sw.create_task(self.pump(sw.read_idle_timeouts(), after(self.on_idle_timeout), "idle timeout"),
                       name="idle-timeouts")
        await asyncio.sleep(0)  # the pumps run up to their queue's first get: the queues exist now
        await listener.primary()
        reconciled.set()
        sw.create_task(self.pump(sw.read_packets(), self.on_packet_in, "packet-in"), name="packet-ins")
        await listener.serving()

    async def _on_backup(self, _session: SwitchSession, _sw: Switch) -> None:
        await self._need_listener().backup()

    def _need_listener(self) -> SwitchListener:
        if self._listener is None:
            raise RuntimeError("the southbound runs without a listener: call listen() first")
        return self._listener

    # -- one item of each switch stream (finsy's digest list, packet-in, idle-timeout notification)
    async def on_digest(self, dl: Any) -> None:
        await self.on_digests([dl])

    async def on_digests(self, lists: Sequence[Any]) -> None:
        await learn_digests(self.session, lists, ent.seen_hosts,
                            lambda hosts: self._need_listener().hosts_seen(hosts), self.stream_rejected, "digest")

    async def on_ip6_digest(self, dl: Any) -> None:
        await self.on_ip6_digests([dl])

    async def on_ip6_digests(self, lists: Sequence[Any]) -> None:
        await learn_digests(self.session, lists, ent.seen_ip6s,
                            lambda ip6s: self._need_listener().ip6s_seen(ip6s), self.stream_rejected, "IPv6 digest")

    async def on_packet_in(self, pkt: Any) -> None:
        await self._need_listener().packet_in(ent.packet_in(dict(pkt.metadata), pkt.payload))

    def _rejected(self, stream: str, why: str) -> None:
        count_rejected(self.stream_rejected, stream, why)

    async def on_idle_timeout(self, note: Any) -> None:
        listener = self._need_listener()
        if hosts := ent.idle_hosts(self.session.schema, note.table_entry):
            await listener.hosts_idle(hosts)
        if ip6s := ent.idle_ip6s(self.session.schema, note.table_entry):
            await listener.ip6s_idle(ip6s)

    async def pump(self, stream: AsyncIterator[T], handle: Callable[[T], Awaitable[None]], what: str,
                   in_flight: int = 1) -> None:
        await pump_stream(stream, handle, what, self.stream_rejected, in_flight=in_flight)


# Large reads (counters, host tables) let other work run after this many entities.
READ_SLICE = 256
# Gathered digest lists learned at once per digest: the next is learned while the switch takes
# the write of the one before (a cold start of 50,000 hosts waited on each write in turn).
DIGESTS_IN_FLIGHT = 2
DIGEST_QUEUE_MIN = 50  # finsy's own default
DIGEST_QUEUE_MAX = 65536


def digest_queue_size(capacity: int | None) -> int:
    """How many digests the controller buffers while it learns: finsy drops a digest that finds
    its queue full (with a warning), and the switch sends it again only after its ack timeout,
    at the host's next frame. The switch sends one host per digest, and a cold start of a whole
    table arrives at once: room for the whole table, within bounds."""
    hosts = capacity if capacity is not None else pc.LEARNED_SOURCES_TABLE_SIZE
    return min(max(DIGEST_QUEUE_MIN, hosts), DIGEST_QUEUE_MAX)


def gather_lists(
    stream: AsyncIterator[Any],
    max_items: int,
    wait_s: float,
    queue_size: int,
    *,
    create_task: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]] = asyncio.create_task,
) -> AsyncIterator[list[Any]]:
    """The switch's digest lists, gathered: each batch holds the lists already waiting, and
    those that come within `wait_s` of its first, up to `max_items` items (hosts), so that
    hosts that appear together are learned in one write and a lone host waits `wait_s` at
    most (`digests.DigestPlan`: `learning.digest_list_size`, and `digest_timeout_ms` when the
    switch sends each digest at once, 0 when it batches them itself). Lists of any length are
    taken whole: a batch ends with the list that fills it. A batch is made
    when its learner asks for it: while the learners are busy, lists wait. The reader of
    `stream` starts now (`create_task`), so the stream's queue opens before anything is asked.

    A cold start brings a list per host per address family, tens of thousands at once: the
    reader only appends each list and wakes the batcher when the batch it waits for is there
    (its first list, then a full batch), so a batch costs one wake-up and one timer, not one
    of each per list."""
    waiting: collections.deque[Any] = collections.deque()
    held = 0  # items (hosts) in `waiting`
    want = 1  # the batcher is woken once `held` reaches this
    wake = asyncio.Event()
    room = asyncio.Event()
    room.set()

    async def read() -> None:
        nonlocal held
        async for item in stream:
            while len(waiting) >= queue_size:
                room.clear()
                await room.wait()
            waiting.append(item)
            held += len(item)
            if held >= want:
                wake.set()

    reader = create_task(read())

    async def wait_for(items: int, timeout: float | None) -> None:
        nonlocal want
        if held >= items:
            return
        want = items
        wake.clear()
        try:
            async with asyncio.timeout(timeout):
                await wake.wait()
        except TimeoutError:
            pass

    async def batches() -> AsyncIterator[list[Any]]:
        nonlocal held
        try:
            while True:
                await wait_for(1, None)
                await wait_for(max_items, wait_s)
                batch: list[Any] = []
                items = 0
                while waiting and items < max_items:
                    item = waiting.popleft()
                    batch.append(item)
                    items += len(item)
                held -= items
                room.set()
                yield batch
        finally:
            reader.cancel()

    return batches()


def count_rejected(counts: dict[str, int], stream: str, why: str) -> None:
    """Count a dropped stream item; log the first ten of a stream, then every thousandth
    (a misbehaving switch must not flood the log)."""
    n = counts[stream] = counts.get(stream, 0) + 1
    if n <= 10 or n % 1000 == 0:
        log.warning("switch %s not understood, dropped (%d so far): %s", stream, n, why)


async def pump_stream(
    stream: AsyncIterator[T], handle: Callable[[T], Awaitable[None]], what: str, rejected: dict[str, int],
    *, in_flight: int = 1,
) -> None:
    """Hand each item of a switch stream to `handle`; a failure is counted in `rejected` and
    logged (without a traceback: it is the switch's input, not our bug), never the end.
    `in_flight` > 1: that many items are handled at once, so the next one is worked on while
    the switch takes an earlier one's write (learning: a digest list's hosts are its own; no
    host is in two lists the switch has not both been acked for)."""

    async def one(item: T) -> None:
        try:
            await handle(item)
        except SwitchUnavailable as exc:
            log.warning("%s handling failed: %s", what, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            count_rejected(rejected, what, f"{type(exc).__name__}: {exc} ({item!r:.200})")

    if in_flight <= 1:
        async for item in stream:
            await one(item)
        return
    slots = asyncio.Semaphore(in_flight)

    async def held(item: T) -> None:
        try:
            await one(item)
        finally:
            slots.release()

    items = aiter(stream)
    async with asyncio.TaskGroup() as group:  # cancelled with the pump: so are the items in flight
        while True:
            await slots.acquire()  # the next item is taken when it can be worked on (gather_lists)
            try:
                item = await anext(items)
            except StopAsyncIteration:
                break
            group.create_task(held(item))


async def learn_digest(
    session: SessionLike,
    dl: Any,
    parse: Callable[[Any], tuple[list[T], list[str]]],
    deliver: Callable[[list[T]], Awaitable[None]],
    rejected: dict[str, int],
    stream: str,
) -> None:
    """One digest list, as `learn_digests`."""
    await learn_digests(session, [dl], parse, deliver, rejected, stream)


async def learn_digests(
    session: SessionLike,
    lists: Sequence[Any],
    parse: Callable[[Any], tuple[list[T], list[str]]],
    deliver: Callable[[list[T]], Awaitable[None]],
    rejected: dict[str, int],
    stream: str,
) -> None:
    """`deliver` learns what the digest lists' good items say, all in one call; then each list
    is acknowledged, also when some or all of its items were malformed (else the switch would
    send it again and again). Each malformed item is counted in `rejected`."""
    try:
        items: list[T] = []
        for dl in lists:
            good, dropped = parse(dl)
            items += good
            for why in dropped:
                count_rejected(rejected, stream, f"digest item dropped: {why}")
        if items:
            await deliver(items)
    finally:
        await session.send([dl.ack() for dl in lists])
