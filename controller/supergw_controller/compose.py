"""The composition: the controller's parts wired into one core, and their loops.

| part | module | its job |
|---|---|---|
| southbound owner | `southbound/switch.py` | the switch: session, mirror of the bucket table, typed writes and reads, reconcile, switch events |
| liveness | `liveness.py` | heartbeats, reports, port state -> gateway transitions |
| placement | `placement.py` | decides every bucket move: intent, failover, rebalance rounds, operator commands |
| host learning | `hosts.py` | digests, idle timeouts, the IP-wait sweep, gateway ARP misses |
| event log | `eventlog.py` | ring, history and durable store of moves and events |
| read model | `readmodel.py` | the REST views |
| remote access | `remote_access.py` | clients from reports -> pins, SPI labels and ranges on the outside switch (`southbound/outside.py`, a second device), pools on the LAN; the outside's buckets follow the LAN's |
| takeover | `takeover.py`, `replication_orders.py` | a dead gateway's remote-access SAs taken over by its ring backup (fence, steer, order; the record in the store); every gateway's replication orders, one generation, long-polled by the agents |

`ControllerCore` builds them around one store (`durable.Durable`; fenced under HA) and
is what the REST layer calls (`api.core.Core`, one line per method) and what the
southbound tells about the switch (`SwitchListener`). `ReplicaCore` adds an HA replica:
the same parts, a fenced store, and placement's writes also need the etcd leadership.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from supergw_proto import p4constants as pc
from supergw_proto.api import (
    BucketView,
    ClientView,
    EventView,
    GatewayView,
    HistoryView,
    HostPage,
    HostQuery,
    RebalanceView,
    StatusView,
)
from supergw_proto.reports import AgentOrders, GatewayReport, Heartbeat
from supergw_controller.bucket_stats import BucketStats
from supergw_controller.config import Config, RebalancePolicy
from supergw_controller.durable import Durable
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.etcd_store import EtcdIntentStore
from supergw_controller.eventlog import EventLog
from supergw_controller.gateways import GatewayRegistry, Transition
from supergw_controller.ha.fence import LeaseFence
from supergw_controller.ha.fenced_store import FencedStore
from supergw_controller.ha.gate import leader_check
from supergw_controller.ha.leadership import Leadership
from supergw_controller.ha.replica import Replica
from supergw_controller.ha.view import HaView
from supergw_controller.history import History
from supergw_controller.hosts import HostLearning
from supergw_controller.intent_store import IntentStoreApi
from supergw_controller.liveness import Liveness
from supergw_controller.placement import Placement
from supergw_controller.ndp import parse_router_solicitation
from supergw_controller.readmodel import ReadModel
from supergw_controller.remote_access import RemoteAccess
from supergw_controller.replication_orders import OrdersBoard
from supergw_controller.router_adverts import RouterAdvertiser, build_advertiser
from supergw_controller.southbound.domain import HostIdle, HostSeen, Ip6Idle, Ip6Seen, PacketIn
from supergw_controller.southbound.session import Role
from supergw_controller.southbound.switch import SessionLike, Southbound
from supergw_controller.mirror_pace import MirrorPace
from supergw_controller.stale_watch import StaleEpisode, StaleWatch
from supergw_controller.stores import build_intent_store, etcd_tls
from supergw_controller.takeover import Takeover
from supergw_controller.tasks import run_together
from supergw_controller.views import BucketTraffic, OperatorAction, OrdersAnswer

log = logging.getLogger(__name__)


class WritePermission:
    """Placement's write check: primary on the switch; for a replica also the etcd leader."""

    def __init__(self, switch: Southbound) -> None:
        self._switch = switch
        self._leader: Callable[[str], None] | None = None

    def require_leader(self, check: Callable[[str], None]) -> None:
        """From now on every write also needs `check(what)` to pass (set once, at wiring)."""
        self._leader = check

    def __call__(self, what: str, *, switch: bool = True) -> None:
        if self._leader is not None:
            self._leader(what)
        if switch:
            self._switch.require_primary()


class FollowedBuckets:
    """Placement's switch (`placement.BucketSwitch`): the LAN southbound, and after each
    written move the remote-access part is told, so the outside's buckets follow."""

    def __init__(self, lan: Southbound, follow: Callable[[], None]) -> None:
        self._lan = lan
        self._follow = follow

    @property
    def assignment(self) -> Mapping[int, str]:
        return self._lan.assignment

    @property
    def primary(self) -> bool:
        return self._lan.primary

    async def set_buckets(self, moves: Mapping[int, str]) -> None:
        await self._lan.set_buckets(moves)
        self._follow()

    async def set_backups(self, backups: Mapping[str, str]) -> int:
        return await self._lan.set_backups(backups)


class ControllerCore:
    def __init__(
        self,
        config: Config,
        store: IntentStoreApi | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
        session_name: str = "supergw",
        heartbeat_udp: bool = True,
        session: SessionLike | None = None,
        election_id: Callable[[], str] | None = None,
        outside_session: SessionLike | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._udp = heartbeat_udp
        t = config.timing
        self.durable = Durable(store)
        self.switch = Southbound(config, name=session_name, session=session)
        self.stats = BucketStats()
        self.stale = StaleWatch()
        # Reports older than three report intervals no longer count as the gateway's load.
        history = History(report_stale_s=max(2.0, 3 * config.agent_timing().report_interval_ms / 1000.0))
        self.eventlog = EventLog(self.durable, history=history, wallclock=wallclock)
        self.registry = GatewayRegistry(config, clock(), t.startup_grace_s)
        self.permission = WritePermission(self.switch)
        self.remote_access: RemoteAccess | None = None
        # Agents' replication orders: generations start at the start time in ms, so that they
        # only grow across restarts (`replication_orders`).
        self.orders_board = OrdersBoard(int(wallclock() * 1000))
        buckets: Southbound | FollowedBuckets = self.switch
        if config.remote_access is not None:
            takeover = Takeover(config, self.registry, self.durable, self.eventlog, clock=clock, wallclock=wallclock)
            self.remote_access = RemoteAccess(
                config, self.switch, outside_session=outside_session, drained=self._drained, events=self.eventlog,
                takeover=takeover, board=self.orders_board, clock=clock,
            )
            buckets = FollowedBuckets(self.switch, self.remote_access.kick)
        self.placement = Placement(
            config, self.registry, buckets, self.eventlog, self.durable, self.stats, may_write=self.permission
        )
        self.liveness = Liveness(config, self.registry, self._on_liveness, clock=clock)
        self.hosts_learning = HostLearning(config, self.switch, clock=clock)
        self.advertiser: RouterAdvertiser | None = build_advertiser(config, self.switch, clock=clock)
        self.read = ReadModel(
            config,
            switch=self.switch,
            liveness=self.liveness,
            placement=self.placement,
            hosts=self.hosts_learning,
            stats=self.stats,
            events=self.eventlog,
            election_id=election_id,
            clock=clock,
            remote_access=self.remote_access,
        )
        self.switch.listen(self)

    # ------------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        """Run the core until cancelled."""
        if self.config.rebalancer.policy is RebalancePolicy.PAPER:
            p, told = self.config.rebalancer.paper, self.config.agent_timing()
            log.info(
                "rebalancer.policy paper (Algorithm 5): ring %s (live, undrained ones), agents report every "
                "T_L = %d ms (timing.report_interval_ms %d is not used), a round every T_M = %.3g s, L_D %.3g, |W| %d",
                " -> ".join(g.name for g in self.config.gateways), told.report_interval_ms,
                self.config.timing.report_interval_ms, p.interval_s, p.load_difference, p.move_size,
            )
        await self.load_intent()
        loops = {
            "p4runtime-session": self.switch.run(),
            "liveness": self.liveness.run(udp=self._udp),
            "history": self._history_loop(),
        }
        if self.remote_access is not None:
            loops["remote-access"] = self.remote_access.run()
        await run_together(loops)

    async def load_intent(self) -> None:
        """What the store keeps: operator intent (placement) and takeovers (remote access)."""
        intent = await self.placement.load_intent()
        if self.remote_access is not None:
            await self.remote_access.load(intent)

    async def close(self) -> None:
        """Close the store (after `run` ended)."""
        await self.durable.close()

    def stop_waiting(self) -> None:
        """The process stops: open long-polls answer now instead of holding the API's shutdown."""
        self.orders_board.close()

    @property
    def primary_ready(self) -> asyncio.Event:
        """Set while primary and reconciled (what an HA replica waits for after its claim)."""
        return self.placement.ready

    async def reload_intent(self) -> None:
        """An HA takeover: the previous leader may have changed weights, drains and pins."""
        await self.placement.load_intent(required=True)

    def _drained(self) -> set[str]:
        return {g.name for g in self.registry.all() if g.drained}

    async def _on_liveness(self, transitions: Sequence[Transition]) -> None:
        await self.placement.on_liveness(transitions)
        if self.remote_access is not None:
            await self.remote_access.on_liveness(transitions)

    def note(self, kind: str, reason: str, detail: str) -> None:
        self.eventlog.note(kind, reason, detail)

    async def _history_loop(self) -> None:
        while True:
            await asyncio.sleep(self.eventlog.history.interval_s)
            try:
                self.sample_history()
            except Exception:
                # The plots are not worth stopping the core for.
                log.exception("history sample failed")

    def sample_history(self) -> None:
        """Append one sample of what the core knows now to the history."""
        self.eventlog.sample(self.read.gateways_now(), self.placement.assignment, self.stats.rates, self.placement.imbalance())

    # ------------------------------------------------------------------ the switch (SwitchListener)
    def role_changed(self, role: Role) -> None:
        if role is not Role.PRIMARY:
            self.placement.pause()
        self.eventlog.note("switch", role.value, f"controller is {role.value}")

    async def primary(self) -> None:
        """Just became primary: reconcile (retried until the switch answers)."""
        self.liveness.restart_grace()
        # What this switch's host tables hold: the P4Info it runs says (a Tofino build may differ).
        self.hosts_learning.table.capacity = self.switch.host_capacity()
        delay = 0.1
        while True:
            try:
                async with self.placement.lock:
                    await self.switch.reconcile(self.hosts_learning.reconcile, self.placement.wanted, self.placement.backups)
                return
            except SwitchUnavailable as exc:
                log.warning("reconcile failed, retrying in %.1fs: %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def serving(self) -> None:
        self.switch.spawn(self._periodic(), name="counters-rebalance")
        if self.advertiser is not None:
            self.switch.spawn(self.advertiser.run(), name="router-advertisements")
        if self.remote_access is not None:
            self.remote_access.lan_serving()
        assignment = self.placement.assignment
        log.info(
            "primary and reconciled: %d buckets over %d gateways, %d hosts",
            len(assignment),
            len(set(assignment.values())),
            len(self.hosts_learning.table),
        )
        await self.placement.serve()

    async def backup(self) -> None:
        """A backup only reads: it mirrors the switch's buckets and hosts for its API."""
        self.switch.spawn(self._mirror(), name="backup-mirror")

    async def hosts_seen(self, hosts: list[HostSeen]) -> None:
        await self.hosts_learning.seen(hosts)

    async def hosts_idle(self, hosts: list[HostIdle]) -> None:
        await self.hosts_learning.idle(hosts)

    async def ip6s_seen(self, seen: list[Ip6Seen]) -> None:
        await self.hosts_learning.ip6s_seen(seen)

    async def ip6s_idle(self, idle: list[Ip6Idle]) -> None:
        await self.hosts_learning.ip6s_idle(idle)

    async def packet_in(self, packet: PacketIn) -> None:
        if packet.reason == pc.PuntReason.ROUTER_SOLICITATION:
            self.router_solicitation(packet)
        else:
            await self.hosts_learning.packet_in(packet)

    def router_solicitation(self, packet: PacketIn) -> None:
        """A host's RS (punted by the switch, never forwarded): answered when valid (RFC 4861 §6.1.1)."""
        rs = parse_router_solicitation(packet.payload)
        if self.advertiser is None or rs is None:
            log.debug("router solicitation on port %d ignored (%s)", packet.port,
                      "invalid" if rs is None else "no router_advertisements configured")
            return
        self.advertiser.solicited(rs, packet.port)

    async def _mirror(self) -> None:
        poll_s = self.config.timing.counter_poll_interval_ms / 1000.0
        hosts = MirrorPace(poll_s)
        while True:
            try:
                await self.switch.refresh_buckets()
                if hosts.due(started := time.monotonic()):
                    try:
                        self.hosts_learning.mirror(await self.switch.read_hosts())
                    finally:
                        hosts.done(started, time.monotonic())
            except SwitchUnavailable as exc:
                log.debug("backup mirror read failed: %s", exc)
            await asyncio.sleep(poll_s)

    async def _periodic(self) -> None:
        """The primary's clock: the IP-wait sweep and the counter poll every poll interval,
        a rebalance round every rebalance interval."""
        t = self.config.timing
        poll = t.counter_poll_interval_ms / 1000.0
        every = t.rebalance_interval_ms / 1000.0
        if self.config.rebalancer.policy is RebalancePolicy.PAPER:
            # the paper's clock: a round of decisions every T_M (its loads, the agents' CPU,
            # arrive every T_L: `Config.agent_timing`)
            every = self.config.rebalancer.paper.interval_s
        next_round = self._clock() + every
        failing = False
        while True:
            await asyncio.sleep(min(poll, max(0.01, next_round - self._clock())))
            try:
                await self.hosts_learning.sweep()
                samples = await self.switch.read_bucket_counters()
                self.stats.update(self._clock(), samples)  # the time the read completed
                if t.dataplane_failover:
                    self._note_stale(self.stale.update(await self.switch.read_failover_frames()))
                if self._clock() >= next_round:
                    next_round = self._clock() + every
                    await self.placement.periodic_round()
                failing = False
            except SwitchUnavailable as exc:
                # Once per streak: a lost switch fails every poll until finsy notices.
                log.log(logging.DEBUG if failing else logging.WARNING, "periodic round failed: %s", exc)
                failing = True
            except Exception:
                # A bug in one round must not drop the switch connection.
                log.exception("periodic round failed")

    def _note_stale(self, episodes: list[StaleEpisode]) -> None:
        backups = self.placement.backups()
        timeout = self.config.timing.lan_liveness_timeout_ms
        for e in episodes:
            log.warning("the switch failed %s over by itself: %d frames to %s (no liveness frame for %d ms)",
                        e.gateway, e.frames, backups.get(e.gateway), timeout)
            self.eventlog.note("gateway", "stale", f"{e.gateway}: the switch sent {e.frames} frames of its buckets to "
                                                   f"{backups.get(e.gateway)} (no liveness frame for {timeout} ms)")

    # ------------------------------------------------------------------ the REST layer (api.core.Core)
    async def status(self) -> StatusView:
        return await self.read.status()

    async def gateways(self) -> list[GatewayView]:
        return await self.read.gateways()

    async def gateway(self, name: str) -> GatewayView:
        return await self.read.gateway(name)

    async def drain(self, name: str) -> GatewayView:
        await self.placement.drain(name)
        if self.remote_access is not None:
            self.remote_access.kick()  # its pins go, then its clients are redirected
        return self.read.gateway_view(name)

    async def undrain(self, name: str) -> GatewayView:
        await self.placement.undrain(name)
        if self.remote_access is not None:
            self.remote_access.kick()
        return self.read.gateway_view(name)

    async def set_weight(self, name: str, weight: float) -> GatewayView:
        await self.placement.set_weight(name, weight)
        return self.read.gateway_view(name)

    async def buckets(self) -> list[BucketView]:
        return await self.read.buckets()

    async def buckets_json(self, gateway: str | None = None) -> bytes:
        return await self.read.buckets_json(gateway)

    async def bucket_traffic(self) -> list[BucketTraffic]:
        return self.read.bucket_traffic()

    async def bucket(self, bucket: int) -> BucketView:
        return await self.read.bucket(bucket)

    async def pin(self, bucket: int, gateway: str) -> BucketView:
        await self.placement.pin(bucket, gateway)
        return self.read.bucket_view(bucket)

    async def unpin(self, bucket: int) -> BucketView:
        await self.placement.unpin(bucket)
        return self.read.bucket_view(bucket)

    async def move(self, bucket: int, gateway: str, reason: str = "operator") -> BucketView:
        await self.placement.move(bucket, gateway, reason)
        return self.read.bucket_view(bucket)

    async def hosts(self, query: HostQuery = HostQuery()) -> HostPage:
        return await self.read.hosts(query)

    async def clients(self) -> list[ClientView]:
        return await self.read.clients()

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventView]:
        return await self.read.events(limit, since_id)

    async def history(self, since: float | None = None, limit: int = 600) -> HistoryView:
        return await self.read.history(since, limit)

    async def rebalance(self, dry_run: bool = False) -> RebalanceView:
        return await self.placement.rebalance(dry_run)

    async def accept_report(self, report: GatewayReport) -> None:
        await self.liveness.accept_report(report)
        if self.remote_access is not None:
            self.remote_access.report(report)

    async def accept_heartbeat(self, hb: Heartbeat) -> None:
        await self.liveness.accept_heartbeat(hb)

    def agent_orders(self, name: str) -> AgentOrders:
        return self.remote_access.orders(name) if self.remote_access is not None else AgentOrders()

    async def wait_orders(self, name: str, after: int, wait_s: float) -> OrdersAnswer:
        await self.orders_board.wait_past(after, wait_s)
        return OrdersAnswer(generation=self.orders_board.generation, orders=self.agent_orders(name))

    async def record_operator_action(self, action: OperatorAction) -> None:
        await self.eventlog.operator(action)


class ReplicaCore(ControllerCore):
    """The core of a replicated controller (`ha:`): a fenced store, and placement writes
    only while this replica is the etcd leader (backups answer reads; `/healthz` shows
    `ha_status`). `replica.run()` runs beside `run()` (see app.serve)."""

    def __init__(self, config: Config, store: IntentStoreApi, **kw: Any) -> None:
        ha, etcd = config.ha, config.store.etcd
        if ha is None or etcd is None:
            raise ValueError("a replica needs config.ha and store.etcd (Config validates both)")
        fence = LeaseFence(float(ha.lease_ttl_s), ha.fence_margin_s)
        super().__init__(config, FencedStore(store, fence), election_id=self._election_id, **kw)
        api = ha.api_url or f"{config.api.scheme}://{config.api.listen}"
        self.replica = Replica(
            replica=ha.replica,
            leadership=Leadership(
                etcd.endpoints, etcd.prefix, ha.replica, api, ha.lease_ttl_s, etcd.timeout_s, etcd_tls(etcd)
            ),
            fence=fence,
            switch=self.switch,
            core=self,
            store=store if isinstance(store, EtcdIntentStore) else None,
            keepalive_s=ha.lease_ttl_s / 4,
            poll_s=min(0.5, ha.lease_ttl_s / 4),
        )
        self.permission.require_leader(leader_check(self.replica))

    def _election_id(self) -> str:
        return self.replica.view().election_id

    def ha_status(self) -> HaView:
        return self.replica.view()


def build_core(config: Config) -> ControllerCore:
    """The core `config` asks for, around the store it names (`stores.build_intent_store`)."""
    store = build_intent_store(config)
    return ControllerCore(config, store) if config.ha is None else ReplicaCore(config, store)
