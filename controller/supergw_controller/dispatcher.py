"""The controller core: keeps the switch's bucket table, host tables and gateways in line.

One `Dispatcher` per process. `run()` drives the P4Runtime session (finsy), the heartbeat
watchdog and the optional port monitor. Each time this instance becomes primary it
reconciles (reads the switch, writes only the difference), then runs the primary's loops
(digests, packet-ins, idle timeouts, counter polling + rebalancing) until the role or the
channel is lost. The REST layer calls the public coroutines (see controller/CORE-API.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from finsy import P4DigestEntry, P4MulticastGroupEntry, P4TableEntry, Switch

from supergw_proto import p4constants as pc
from supergw_controller.assignment import fill_missing
from supergw_proto.bucket import bucket_of, vmac
from supergw_controller.bucket_stats import BucketStats
from supergw_controller.config import Config, ConfigError, PortRoleName, RebalancePolicy
from supergw_controller.errors import Conflict, SwitchUnavailable, UnknownBucket
from supergw_controller.events import EventRing
from supergw_controller.failover import PortMonitor, watchdog
from supergw_controller.gateways import GatewayRegistry, Transition
from supergw_controller.heartbeat import HeartbeatReceiver
from supergw_controller.intent_store import EventRecord, IntentStoreApi
from supergw_controller.history import GatewayNow, History
from supergw_proto.api import HistoryView
from supergw_controller.learning import ARP_REQUEST, HostTable, arp_reply, parse_arp
from supergw_controller.rebalancer import (
    BUDGETED_REASONS,
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
from supergw_proto.reports import GatewayReport, Heartbeat
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.entities import Op, Update
from supergw_controller.southbound.reconcile import diff_entries
from supergw_controller.southbound.session import Role, SwitchSession
from supergw_controller.views import OperatorAction
from supergw_proto.api import BucketView, EventView, GatewayView, HostView, MoveView, RebalanceView, StatusView

log = logging.getLogger(__name__)

_ELIGIBLE = (GatewayState.ALIVE, GatewayState.RECOVERING)


class Dispatcher:
    def __init__(
        self,
        config: Config,
        store: IntentStoreApi | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
        session_name: str = "supergw",
        heartbeat_udp: bool = True,
    ) -> None:
        self.config = config
        self._store = store
        self._clock = clock
        self._wall = wallclock
        self._started = clock()
        t = config.timing
        self.registry = GatewayRegistry(config, clock(), t.startup_grace_s)
        host_ports = set(config.ports_with_role(PortRoleName.HOST))
        self.host_table = HostTable(
            host_ports, str(config.gateway_ip), int(t.ageing_s * 1e9), ip_wait_s=config.learning.ip_wait_s
        )
        self.assignment: dict[int, str] = {}
        self.pins: dict[int, str] = {}
        self.stats = BucketStats()
        self.events_ring = EventRing()
        # Reports older than three report intervals no longer count as the gateway's load.
        self.history_ring = History(report_stale_s=max(2.0, 3 * t.report_interval_ms / 1000.0))
        self.params = RebalanceParams(
            threshold=config.rebalancer.threshold,
            target=max(1.0, config.rebalancer.threshold - config.rebalancer.hysteresis),
            move_budget=config.rebalancer.move_budget,
            refill_budget=config.rebalancer.refill_budget,
        )
        paper = config.rebalancer.paper
        self.paper_params = PaperParams(load_difference=paper.load_difference, move_size=paper.move_size)
        self._paper_rng = random.Random(paper.seed)
        self.session = SwitchSession(
            config, self._on_primary, self._on_role, name=session_name, on_backup=self._on_backup
        )
        self._lock = asyncio.Lock()  # serialises bucket-table writes and the state they change
        self.primary_ready = asyncio.Event()
        self._failover_pending = False
        self._moves_total: dict[str, int] = {r.value: 0 for r in MoveReason}
        self._failovers = 0
        self._digests = 0
        self._packet_ins = 0
        self._reports = 0
        self._heartbeats = 0
        self._arp_misses_unknown = 0
        # UDP heartbeats on the API's address and port number (see heartbeat.py).
        self.heartbeat_rx = HeartbeatReceiver(_heartbeat_keys(config))
        self._heartbeat_udp = heartbeat_udp
        self._beat_tasks: set[asyncio.Task[None]] = set()
        self._flooded_since: float | None = None  # see _watchdog_tick
        self.silence_verdicts_deferred = 0

    # ------------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Run the core until cancelled."""
        await self._load_intent()
        tasks = [
            asyncio.create_task(self.session.run(), name="p4runtime-session"),
        ]
        interfaces = {p: pcfg.interface for p, pcfg in self.config.ports.items() if pcfg.interface}
        hb_s = self.config.timing.heartbeat_interval_ms / 1000.0
        # Ticks every fifth of a heartbeat interval (cheap: a few comparisons); a tick
        # late by more than half an interval means the loop stalled (see `watchdog`).
        if self._heartbeat_udp:
            sock = self.heartbeat_rx.open(self.config.api.host, self.config.api.port)
            asyncio.get_running_loop().add_reader(sock.fileno(), self._heartbeats_readable)
            log.info("UDP heartbeats on %s:%d", self.config.api.host, self.config.api.port)
        tasks.append(asyncio.create_task(watchdog(hb_s / 5, self._watchdog_tick, stall_s=hb_s / 2), name="watchdog"))
        tasks.append(asyncio.create_task(self._history_loop(), name="history"))
        if self.config.port_monitor.enabled and interfaces:
            monitor = PortMonitor(interfaces, self.config.port_monitor.netns, self._port_changed)
            tasks.append(asyncio.create_task(self._port_monitor(monitor), name="port-monitor"))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                t.result()
        finally:
            if self.heartbeat_rx.sock is not None:
                asyncio.get_running_loop().remove_reader(self.heartbeat_rx.sock.fileno())
                self.heartbeat_rx.close()
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def _history_loop(self) -> None:
        while True:
            await asyncio.sleep(self.history_ring.interval_s)
            try:
                self.sample_history()
            except Exception:
                # The plots are not worth stopping the core for.
                log.exception("history sample failed")

    def sample_history(self) -> None:
        """Append one sample of what the core knows now to `history_ring`."""
        now = self._clock()
        gateways = [
            GatewayNow(g.name, g.state.value, g.last_report, self.registry.report_age(g.name, now))
            for g in self.registry.all()
        ]
        self.history_ring.sample(
            self._wall(),
            gateways,
            self.assignment,
            self.stats.rates,
            self._current_imbalance(),
        )

    async def _port_monitor(self, monitor: PortMonitor) -> None:
        try:
            await monitor.run()
        except OSError as exc:
            # Not on the switch host, or no such namespace: heartbeats still detect death.
            log.error("port monitor unavailable (%s); failover relies on heartbeats only", exc)

    async def _load_intent(self) -> None:
        if self._store is None:
            return
        try:
            await self._store.open()
            intent = await self._store.load()
        except Exception as exc:  # noqa: BLE001 - the controller still works without its store
            log.error("intent store unavailable (%s); starting without operator intent", exc)
            self._store = None
            return
        known = set(self.registry.names())
        self.registry.apply_intent(
            {n: w for n, w in intent.weights.items() if n in known}, {n for n in intent.drained if n in known}
        )
        self.pins = {b: g for b, g in intent.pins.items() if g in known and 0 <= b < self.config.buckets}

    def _on_role(self, role: Role) -> None:
        if role is not Role.PRIMARY:
            self.primary_ready.clear()
        self.events_ring.add(self._wall(), "switch", role.value, detail=f"controller is {role.value}")

    async def _on_primary(self, session: SwitchSession, sw: Switch) -> None:
        """This instance just became primary: reconcile, then start the primary's loops."""
        self.registry.restart_grace(self._clock())
        delay = 0.1
        while True:
            try:
                async with self._lock:
                    await self._reconcile(sw)
                break
            except SwitchUnavailable as exc:
                log.warning("reconcile failed, retrying in %.1fs: %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        sw.create_task(self._digest_loop(sw), name="digests")
        sw.create_task(self._packet_loop(sw), name="packet-ins")
        sw.create_task(self._idle_loop(sw), name="idle-timeouts")
        sw.create_task(self._periodic_loop(), name="counters-rebalance")
        self.primary_ready.set()
        log.info(
            "primary and reconciled: %d buckets over %d gateways, %d hosts",
            len(self.assignment),
            len(set(self.assignment.values())),
            len(self.host_table),
        )
        # Mandatory moves (dead/drained gateways, pins) right away, not at the next round.
        self._failover_pending = True
        await self._failover_if_pending()

    async def _on_backup(self, session: SwitchSession, sw: Switch) -> None:
        """A backup only reads: it mirrors the switch's buckets and hosts for its API."""
        sw.create_task(self._backup_mirror_loop(), name="backup-mirror")

    async def _backup_mirror_loop(self) -> None:
        s = self.session
        while True:
            try:
                current, _ = self._parse_buckets(await s.read(P4TableEntry(pc.TABLE_BUCKETS)))
                learned = await s.read(P4TableEntry(pc.TABLE_LEARNED_SOURCES))
                macs = await s.read(P4TableEntry(pc.TABLE_MAC_TABLE))
                ips = await s.read(P4TableEntry(pc.TABLE_HOST_IPS))
                self.assignment = current
                self.host_table.adopt(learned, macs, ips, self._clock())
            except SwitchUnavailable as exc:
                log.debug("backup mirror read failed: %s", exc)
            await asyncio.sleep(self.config.timing.counter_poll_interval_ms / 1000.0)

    # ------------------------------------------------------------------ reconcile
    async def _reconcile(self, sw: Switch) -> None:
        cfg = self.config
        s = self.session
        schema = s.schema
        now = self._clock()

        # Port roles: exactly the configured ones.
        want_roles = [
            ent.port_role(p, pc.PortRole.HOST if pcfg.role is PortRoleName.HOST else pc.PortRole.GATEWAY)
            for p, pcfg in cfg.ports.items()
        ]
        have_roles = await s.read(P4TableEntry(pc.TABLE_PORT_ROLES))
        batch = diff_entries(schema, want_roles, have_roles)

        # Host flood group.
        host_ports = cfg.ports_with_role(PortRoleName.HOST)
        groups = await s.read_or_none(P4MulticastGroupEntry(pc.HOST_FLOOD_GROUP))
        want_group = ent.flood_group(host_ports)
        if not groups:
            batch.append(Update(Op.INSERT, want_group))
        elif sorted(_replica_ports(groups[0])) != host_ports:
            batch.append(Update(Op.MODIFY, want_group))

        # Learn digest config.
        want_digest = ent.learn_digest()
        digests = await s.read_or_none(P4DigestEntry(pc.DIGEST_LEARN_DIGEST))
        if not digests:
            batch.append(Update(Op.INSERT, want_digest))
        elif (digests[0].max_list_size, digests[0].max_timeout_ns, digests[0].ack_timeout_ns) != (
            want_digest.max_list_size,
            want_digest.max_timeout_ns,
            want_digest.ack_timeout_ns,
        ):
            batch.append(Update(Op.MODIFY, want_digest))

        # Hosts: adopt what the switch learned before we (re)started.
        learned = await s.read(P4TableEntry(pc.TABLE_LEARNED_SOURCES))
        macs = await s.read(P4TableEntry(pc.TABLE_MAC_TABLE))
        ips = await s.read(P4TableEntry(pc.TABLE_HOST_IPS))
        if not learned and not macs and not ips and len(self.host_table):
            # Fresh switch, known hosts: re-install them rather than wait for each to talk.
            batch.extend(self.host_table.reinstall())
        else:
            batch.extend(self.host_table.adopt(learned, macs, ips, now))

        # Buckets: keep every valid assignment the switch has, fill the rest.
        current, bucket_fix = self._parse_buckets(await s.read(P4TableEntry(pc.TABLE_BUCKETS)))
        weights = {g.name: g.weight for g in self.registry.eligible()}
        if not weights:
            # Nobody is known alive yet: keep traffic flowing where it went before.
            weights = {g.name: g.weight for g in self.registry.all() if not g.drained} or {
                g.name: g.weight for g in self.registry.all()
            }
        # A switch that lost its state (restart) gets back what this controller had
        # installed, so no host changes gateway; only buckets nobody owns are filled.
        eligible = {g.name for g in self.registry.eligible()}
        remembered = {b: g for b, g in self.assignment.items() if b not in current and g in eligible}
        target = fill_missing(cfg.buckets, {**current, **remembered}, weights, cfg.dispatch.partition_period)
        for b, name in sorted(target.items()):
            if b not in current:
                gw = self.registry.get(name)
                batch.append(Update(Op.MODIFY if b in bucket_fix else Op.INSERT, ent.bucket(b, gw.port, gw.mac)))
        batch.extend(Update(Op.DELETE, ent.bucket_key(b)) for b in sorted(bucket_fix) if b >= cfg.buckets)
        await s.write(batch)
        self.assignment = target

        # The dispatch settings last: a fresh switch drops everything (NOT_CONFIGURED)
        # until now, and from now on it has buckets, roles and a flood group.
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

    def _parse_buckets(self, entries: Iterable[P4TableEntry]) -> tuple[dict[int, str], set[int]]:
        """Valid bucket -> gateway entries, and the buckets whose entry must be rewritten."""
        valid: dict[int, str] = {}
        fix: set[int] = set()
        for e in entries:
            b = int(dict(e.match or {})["bucket"])
            args = e.action.args if e.action is not None else {}  # type: ignore[union-attr]
            gw = self.registry.by_port(int(args.get("port", -1)))
            if b < self.config.buckets and gw is not None and ent.mac_int(gw.mac) == int(args.get("gateway_mac", -1)):
                valid[b] = gw.name
            else:
                fix.add(b)
        return valid, fix

    # ------------------------------------------------------------------ primary loops
    async def _digest_loop(self, sw: Switch) -> None:
        async for dl in sw.read_digests(pc.DIGEST_LEARN_DIGEST):
            try:
                await self._handle_digest(dl)
            except SwitchUnavailable as exc:
                log.warning("digest handling failed: %s", exc)
            except Exception:
                log.exception("digest %r not understood", dl)

    async def _handle_digest(self, dl: Any) -> None:
        self._digests += 1
        now = self._clock()
        updates: list[Update] = []
        learned: list[str] = []
        for item in dl:
            data = dict(item)
            mac = ent.mac_str(int(data["src_mac"]))
            ip = int(data["src_ip"])
            updates += self.host_table.learn(mac, int(data["port"]), ent.ip_str(ip) if ip else None, now)
            learned.append(mac)
        try:
            await self.session.write(updates)
        except SwitchUnavailable as exc:
            log.warning("learning write failed (host will be re-learned): %s", exc)
            for mac in learned:
                h = self.host_table.get(mac)
                if h is not None:
                    self.host_table.expire(mac, h.port)
        await self.session.send([dl.ack()])

    async def _packet_loop(self, sw: Switch) -> None:
        async for pkt in sw.read_packets():
            try:
                await self._handle_packet_in(pkt)
            except SwitchUnavailable as exc:
                log.warning("packet-in handling failed: %s", exc)
            except Exception:
                log.exception("packet-in %r not understood", pkt)

    async def _handle_packet_in(self, pkt: Any) -> None:
        self._packet_ins += 1
        reason = int(pkt.metadata.get(pc.CTRL_HDR_PACKET_IN_REASON, 0))
        port = int(pkt.metadata.get(pc.CTRL_HDR_PACKET_IN_INGRESS_PORT, -1))
        arp = parse_arp(pkt.payload)
        if reason != pc.PuntReason.GATEWAY_ARP_MISS or arp is None or arp.op != ARP_REQUEST:
            log.debug("packet-in reason %d from port %d ignored", reason, port)
            return
        mac = self.host_table.mac_of_ip(arp.target_ip)
        if mac is None:
            self._arp_misses_unknown += 1
            log.debug("gateway on port %d asks for unknown %s: ignored", port, arp.target_ip)
            return
        await self.session.send([ent.packet_out(arp_reply(arp, mac), port)])
        log.debug("answered ARP for %s (%s) to port %d", arp.target_ip, mac, port)

    async def _idle_loop(self, sw: Switch) -> None:
        async for note in sw.read_idle_timeouts():
            updates: list[Update] = []
            for e in note.table_entry:
                if self.session.schema.tables[e.table_id].name != pc.TABLE_LEARNED_SOURCES:
                    continue
                m = dict(e.match or {})
                mac = ent.mac_str(int(m["src_mac"]))
                log.info("host %s idle on port %d: forgetting it", mac, int(m["port"]))
                updates += self.host_table.expire(mac, int(m["port"]))
            try:
                await self.session.write(updates)
            except SwitchUnavailable as exc:
                log.warning("ageing write failed: %s", exc)

    async def _periodic_loop(self) -> None:
        t = self.config.timing
        poll = t.counter_poll_interval_ms / 1000.0
        every = t.rebalance_interval_ms / 1000.0
        if self.config.rebalancer.policy is RebalancePolicy.PAPER:
            # the paper's clock: loads over T_L (counter reads that far apart), a decision every T_M
            poll, every = self.config.rebalancer.paper.load_window_s, self.config.rebalancer.paper.interval_s
        next_round = self._clock() + every
        failing = False
        while True:
            await asyncio.sleep(min(poll, max(0.01, next_round - self._clock())))
            try:
                await self._sweep_hosts()
                await self._poll_counters()
                if self._clock() >= next_round:
                    next_round = self._clock() + every
                    async with self._lock:
                        await self._round(dry_run=False, mandatory_only=False)
                failing = False
            except SwitchUnavailable as exc:
                # Once per streak: a lost switch fails every poll until finsy notices.
                log.log(logging.DEBUG if failing else logging.WARNING, "periodic round failed: %s", exc)
                failing = True
            except Exception:
                # A bug in one round must not drop the switch connection.
                log.exception("periodic round failed")

    async def _sweep_hosts(self) -> None:
        """Learn the hosts that waited `learning.ip_wait_s` for an IP without one."""
        macs, updates = self.host_table.sweep(self._clock())
        if not updates:
            return
        try:
            await self.session.write(updates)
        except SwitchUnavailable:
            self.host_table.unlearn(macs)
            raise

    async def _poll_counters(self) -> None:
        samples: dict[int, tuple[int, int]] = {}
        for c in await self.session.read(ent.bucket_counters()):
            if c.table_entry is None or c.data is None:
                continue
            b = int(dict(c.table_entry.match or {})["bucket"])
            samples[b] = (c.data.packet_count, c.data.byte_count)
        self.stats.update(self._clock(), samples)

    # ------------------------------------------------------------------ rebalancing
    def _plan(self) -> Plan:
        inp = RebalanceInput(
            k=self.config.buckets,
            rates={b: r for b, r in self.stats.rates.items() if b < self.config.buckets},
            assignment=dict(self.assignment),
            gateways=self.registry.rebalance_inputs(),
            pins=dict(self.pins),
        )
        if self.config.rebalancer.policy is RebalancePolicy.PAPER:
            return plan_paper(inp, self.paper_params, self._paper_rng, self.params)
        return plan_rebalance(inp, self.params)

    async def _round(self, *, dry_run: bool, mandatory_only: bool) -> RebalanceView:
        """Plan one round and (unless dry_run) write its moves in one batch. Hold the lock."""
        plan = self._plan()
        moves = [m for m in plan.moves if not (mandatory_only and m.reason in BUDGETED_REASONS)]
        for w in plan.warnings:
            log.debug("rebalancer: %s", w)
        for g in self.registry.all():
            g.load = plan.load_before.get(g.name, 0.0)
        applied = False
        if moves and not dry_run:
            await self._apply_moves(moves)
            applied = True
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
        )

    async def _apply_moves(self, moves: Sequence[Move], detail: str = "") -> None:
        """Batched writes; state and the event log change only for what was written.

        Buckets carrying traffic go first in their own small write (a failover of an
        idle-heavy gateway rewrites thousands of buckets; the hot ones should not wait
        for them), then the rest in one more write (the session encodes bucket entries
        with its fast `BucketEncoder`).
        """
        hot, cold = hot_first(moves)
        batches = [b for b in (hot, cold) if b]
        done: list[Move] = []
        try:
            for batch in batches:
                updates = []
                for m in batch:
                    gw = self.registry.get(m.dst)
                    op = Op.MODIFY if m.bucket in self.assignment else Op.INSERT
                    updates.append(Update(op, ent.bucket(m.bucket, gw.port, gw.mac)))
                await self.session.write(updates)
                for m in batch:
                    self.assignment[m.bucket] = m.dst
                done.extend(batch)
        finally:
            if done:
                await self._record_moves(done, detail)

    async def _record_moves(self, moves: Sequence[Move], detail: str) -> None:
        ts = self._wall()
        for m in moves:
            self._moves_total[m.reason.value] = self._moves_total.get(m.reason.value, 0) + 1
            self.events_ring.add(
                ts, "move", m.reason.value, bucket=m.bucket, src=m.src, dst=m.dst, detail=detail
            )
        if any(m.reason is MoveReason.FAILOVER for m in moves):
            self._failovers += 1
        self.history_ring.note_moves(ts, Counter(m.reason.value for m in moves))
        log.info(
            "moved %d buckets (%s)",
            len(moves),
            ", ".join(sorted({m.reason.value for m in moves})),
        )
        if self._store is not None:
            try:
                await self._store.record_moves(list(moves), ts)
            except Exception as exc:  # noqa: BLE001 - the ring still has the events
                log.warning("could not store %d move events: %s", len(moves), exc)

    # ------------------------------------------------------------------ liveness
    async def _watchdog_tick(self) -> None:
        # Every beat that reached this host is counted before anyone is judged silent.
        transitions = self._take_heartbeats()
        now = self._clock()
        if self.heartbeat_rx.backlog:
            # A flood of datagrams is still queued (the drain stops at its limit so the loop
            # keeps turning): a good beat may wait behind them, so silence is not judged
            # now -- for at most one dead-after, after which a flood cannot keep a silent
            # gateway alive. Flags (charon or partner down) still count at once.
            if self._flooded_since is None:
                self._flooded_since = now
                log.warning("heartbeat socket flooded (%s rejected so far): silence verdicts deferred up to %.3gs",
                            dict(self.heartbeat_rx.rejected), self.config.timing.dead_after_s)
            if now - self._flooded_since < self.config.timing.dead_after_s:
                self.silence_verdicts_deferred += 1
                await self._transitions(transitions)
                return
        else:
            self._flooded_since = None
        await self._transitions(transitions + self.registry.tick(now))

    def _take_heartbeats(self) -> list[Transition]:
        beats = self.heartbeat_rx.drain()
        if not beats:
            return []
        now = self._clock()
        out: list[Transition] = []
        for b in beats:
            self._heartbeats += 1
            t = self.registry.heartbeat(b.gateway, now, charon_down=b.charon_down, partner_down=b.partner_down)
            if t is not None:
                out.append(t)
        return out

    def _heartbeats_readable(self) -> None:
        transitions = self._take_heartbeats()
        if transitions:  # a revival, or charon reported down: act now, not at the next tick
            task = asyncio.get_running_loop().create_task(self._transitions(transitions))
            self._beat_tasks.add(task)
            task.add_done_callback(self._beat_tasks.discard)

    async def _port_changed(self, port: int, up: bool) -> None:
        t = self.registry.set_port_state(port, up, self._clock())
        await self._transitions([t] if t else [])

    async def _transitions(self, transitions: Sequence[Transition]) -> None:
        ts = self._wall()
        for t in transitions:
            what = "dead" if t.died else "recovering"
            log.warning("gateway %s is %s: %s", t.gateway, what, t.why)
            self.events_ring.add(ts, "gateway", what, src=t.gateway, detail=t.why)
            self.history_ring.note_gateway(ts, t.gateway, t.died, t.why)
        if any(t.died for t in transitions):
            self._failover_pending = True
        await self._failover_if_pending()
        # The durable event log after the failover write: traffic first.
        for t in transitions:
            what = "dead" if t.died else "recovering"
            await self._store_event("gateway", what, src=t.gateway, detail=t.why, ts=ts)

    async def _failover_if_pending(self) -> None:
        """Move every bucket off dead gateways in one batch; retried each tick until it succeeds."""
        if not self._failover_pending or self.session.role is not Role.PRIMARY or not self.primary_ready.is_set():
            return
        async with self._lock:
            if not self._failover_pending:
                return  # done by whoever held the lock before us
            try:
                await self._round(dry_run=False, mandatory_only=True)
                self._failover_pending = False
            except SwitchUnavailable as exc:
                log.error("failover write failed (retried at the next tick): %s", exc)

    async def record_operator_action(self, action: OperatorAction) -> None:
        """The event log's entry for an operator's call (the REST layer knows who made it)."""
        ts = self._wall()
        kw: dict[str, Any] = {"bucket": action.bucket, "src": action.gateway, "dst": action.target, "detail": action.outcome}
        self.events_ring.add(ts, "operator", action.action, who=action.who, **kw)
        await self._store_event("operator", action.action, ts=ts, who=action.who, **kw)

    async def _store_event(self, kind: str, reason: str, *, ts: float, **kw: Any) -> None:
        if self._store is None:
            return
        try:
            await self._store.record_event(
                EventRecord(
                    id=None,
                    ts=ts,
                    kind=kind,
                    bucket=kw.get("bucket"),
                    src=kw.get("src"),
                    dst=kw.get("dst"),
                    reason=reason,
                    detail=kw.get("detail", ""),
                    who=kw.get("who"),
                )
            )
        except Exception as exc:  # noqa: BLE001
            log.warning("could not store event: %s", exc)

    # ------------------------------------------------------------------ API: reads
    async def status(self) -> StatusView:
        cfg = self.config
        now = self._clock()
        eid = cfg.switch.election_id
        return StatusView(
            role=self.session.role.value,
            connected=self.session.role is not Role.DISCONNECTED,
            switch_address=cfg.switch.address,
            device_id=cfg.switch.device_id,
            election_id=f"{eid.high}:{eid.low}",
            pipeline_cookie=self.session.cookie,
            buckets=cfg.buckets,
            gateway_ip=str(cfg.gateway_ip),
            vmac_base=cfg.vmac_base,
            uptime_s=now - self._started,
            gateways_alive=sum(1 for g in self.registry.all() if not g.dead),
            gateways_total=len(self.registry.all()),
            buckets_unassigned=cfg.buckets - len(self.assignment),
            hosts=len(self.host_table),
            imbalance=self._current_imbalance(),
            moves_total=dict(self._moves_total),
            failovers_total=self._failovers,
            digests_total=self._digests,
            packet_ins_total=self._packet_ins,
            p4rt_errors_total=self.session.errors,
            reconnects_total=self.session.reconnects,
            reports_total=self._reports,
            heartbeats_total=self._heartbeats,
            heartbeats_rejected=dict(self.heartbeat_rx.rejected),
            arp_misses_unknown_total=self._arp_misses_unknown,
        )

    def _current_imbalance(self) -> float:
        loads: dict[str, float] = {g.name: 0.0 for g in self.registry.all()}
        for b, r in self.stats.rates.items():
            g = self.assignment.get(b)
            if g in loads:
                loads[g] += r.pps * self.params.packet_cost + r.bps * self.params.byte_cost
        return imbalance(loads, self.registry.rebalance_inputs())

    async def gateways(self) -> list[GatewayView]:
        return [self._gateway_view(g.name) for g in self.registry.all()]

    async def gateway(self, name: str) -> GatewayView:
        return self._gateway_view(name)

    def _gateway_view(self, name: str) -> GatewayView:
        g = self.registry.get(name)
        now = self._clock()
        return GatewayView(
            name=g.name,
            port=g.port,
            mac=g.mac,
            weight=g.weight,
            state=g.state.value,
            drained=g.drained,
            alive=not g.dead,
            port_up=g.port_up,
            buckets=sum(1 for v in self.assignment.values() if v == g.name),
            load=g.load,
            heartbeat_age_s=self.registry.heartbeat_age(name, now),
            tunnel_up=g.tunnel_up,
            partner_up=g.partner_up,
            unhealthy=g.unhealthy_why(),
            report_age_s=self.registry.report_age(name, now),
            last_report=g.last_report,
        )

    async def buckets(self) -> list[BucketView]:
        return [self._bucket_view(b) for b in range(self.config.buckets)]

    async def bucket(self, bucket: int) -> BucketView:
        self._check_bucket(bucket)
        return self._bucket_view(bucket)

    def _bucket_view(self, b: int) -> BucketView:
        pkts, byts = self.stats.totals.get(b, (0, 0))
        rate = self.stats.rates.get(b)
        return BucketView(
            bucket=b,
            vmac=vmac(self.config.vmac_base, b),
            gateway=self.assignment.get(b),
            pinned=self.pins.get(b),
            packets=pkts,
            bytes=byts,
            pps=rate.pps if rate else 0.0,
            bps=rate.bps if rate else 0.0,
        )

    async def hosts(self) -> list[HostView]:
        now = self._clock()
        k = self.config.buckets
        out = []
        for h in self.host_table.hosts():
            b = bucket_of(h.mac, k, self.config.dispatch.hash)
            out.append(
                HostView(
                    mac=h.mac,
                    port=h.port,
                    ip=sorted(h.ips)[0] if h.ips else None,
                    bucket=b,
                    vmac=vmac(self.config.vmac_base, b),
                    gateway=self.assignment.get(b),
                    idle_s=max(0.0, now - h.seen),
                    learned=h.learned,
                )
            )
        return out

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventView]:
        if self._store is not None:
            try:
                recs = await self._store.events(limit=limit, since_id=since_id)
                return [
                    EventView(
                        id=r.id,
                        ts=r.ts,
                        kind=r.kind,
                        bucket=r.bucket,
                        src=r.src,
                        dst=r.dst,
                        reason=r.reason,
                        detail=r.detail,
                        who=r.who,
                    )
                    for r in recs
                ]
            except Exception as exc:  # noqa: BLE001
                log.warning("event store unavailable, serving the in-memory ring: %s", exc)
        return self.events_ring.recent(limit, since_id)

    async def history(self, since: float | None = None, limit: int = 600) -> HistoryView:
        return self.history_ring.since(since, limit)

    # ------------------------------------------------------------------ API: writes
    def _check_bucket(self, bucket: int) -> None:
        if not 0 <= bucket < self.config.buckets:
            raise UnknownBucket(f"bucket {bucket} is outside 0..{self.config.buckets - 1}")

    async def drain(self, name: str) -> GatewayView:
        g = self.registry.get(name)
        self.session.require_primary()
        async with self._lock:
            if not g.drained:
                g.drained = True
                try:
                    await self._round(dry_run=False, mandatory_only=True)
                except SwitchUnavailable:
                    g.drained = False
                    raise
                await self._persist("set_drained", name, True)
        return self._gateway_view(name)

    async def undrain(self, name: str) -> GatewayView:
        g = self.registry.get(name)
        self.session.require_primary()
        async with self._lock:
            if g.drained:
                g.drained = False
                g.recovering = not g.dead  # refilled gradually by the next rounds
                await self._persist("set_drained", name, False)
        return self._gateway_view(name)

    async def set_weight(self, name: str, weight: float) -> GatewayView:
        self.registry.get(name)
        async with self._lock:
            self.registry.set_weight(name, weight)
            await self._persist("set_weight", name, weight)
        return self._gateway_view(name)

    async def pin(self, bucket: int, gateway: str) -> BucketView:
        self._check_bucket(bucket)
        g = self.registry.get(gateway)
        self.session.require_primary()
        if g.state not in _ELIGIBLE:
            raise Conflict(f"gateway {gateway!r} is {g.state.value}: cannot pin a bucket to it")
        async with self._lock:
            if self.assignment.get(bucket) != gateway:
                await self._apply_moves([Move(bucket, self.assignment.get(bucket), gateway, MoveReason.PIN)], "operator pin")
            self.pins[bucket] = gateway
            await self._persist("pin", bucket, gateway)
        return self._bucket_view(bucket)

    async def unpin(self, bucket: int) -> BucketView:
        self._check_bucket(bucket)
        async with self._lock:
            if self.pins.pop(bucket, None) is not None:
                await self._persist("unpin", bucket)
        return self._bucket_view(bucket)

    async def move(self, bucket: int, gateway: str, reason: str = "operator") -> BucketView:
        self._check_bucket(bucket)
        g = self.registry.get(gateway)
        self.session.require_primary()
        pinned = self.pins.get(bucket)
        if pinned is not None and pinned != gateway:
            raise Conflict(f"bucket {bucket} is pinned to {pinned!r}; unpin it first")
        if g.state not in _ELIGIBLE:
            raise Conflict(f"gateway {gateway!r} is {g.state.value}: cannot move a bucket to it")
        async with self._lock:
            if self.assignment.get(bucket) != gateway:
                await self._apply_moves(
                    [Move(bucket, self.assignment.get(bucket), gateway, MoveReason.OPERATOR)], reason
                )
        return self._bucket_view(bucket)

    async def rebalance(self, dry_run: bool = False) -> RebalanceView:
        if not dry_run:
            self.session.require_primary()
        async with self._lock:
            return await self._round(dry_run=dry_run, mandatory_only=False)

    async def accept_report(self, report: GatewayReport) -> None:
        self._reports += 1
        t = self.registry.report(report, self._clock())
        if t is not None:  # else answer at once: a pending failover is the watchdog's
            await self._transitions([t])

    async def accept_heartbeat(self, hb: Heartbeat) -> None:
        self._heartbeats += 1
        t = self.registry.heartbeat(hb.gateway, self._clock(), charon_down=hb.charon_down,
                                    partner_down=hb.partner_down)
        if t is not None:  # else answer at once: a pending failover is the watchdog's
            await self._transitions([t])

    def agent_arriving(self, gateway: str) -> float | None:
        """An authenticated heartbeat/report POST for `gateway` arrived (see app.py):
        its arrival time, or None for an unknown gateway."""
        now = self._clock()
        return now if self.registry.arriving(gateway) else None

    def agent_settled(self, gateway: str, arrived: float) -> None:
        """The POST announced by `agent_arriving` has been answered."""
        self.registry.settled(gateway, arrived, self._clock())

    async def _persist(self, method: str, *args: Any) -> None:
        if self._store is None:
            return
        try:
            await getattr(self._store, method)(*args)
        except Exception as exc:  # noqa: BLE001
            log.error("could not store operator intent %s%s: %s", method, args, exc)
            raise SwitchUnavailable(f"intent store write failed: {exc}") from exc


def _heartbeat_keys(config: Config) -> dict[str, bytes]:
    """HMAC key of each agent's UDP heartbeats: that gateway's agent secret, nothing else."""
    keys: dict[str, bytes] = {}
    for g in config.gateways:
        if not g.heartbeat:
            continue
        try:
            keys[g.name] = config.agent_secret(g.name).encode()
        except ConfigError as exc:
            log.error("gateway %s: UDP heartbeats will be rejected: %s", g.name, exc)
    return keys


def _replica_ports(group: P4MulticastGroupEntry) -> list[int]:
    out = []
    for r in group.replicas:
        if isinstance(r, int):
            out.append(r)
        elif isinstance(r, tuple):
            out.append(int(r[0]))
        else:
            out.append(int(getattr(r, "port")))
    return out


__all__ = ["Dispatcher"]
