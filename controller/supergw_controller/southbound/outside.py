"""The outside switch: a second P4Runtime device of this controller (remote access).

The same program as the LAN switch with the outside roles (docs/pipeline-contract.md,
"Remote access: the outside role"). This owner holds its own session (`SwitchSession`,
finsy) and mirrors, and offers typed operations in the core's words:

- `reconcile` (each time this controller becomes primary on it): port roles (UPLINK,
  GATEWAY_OUTSIDE), the dispatch settings (K and the hash, as on the LAN), `ra_settings`
  (IP_P, public MAC), flood groups 2 (gateways' outside ports) and 3 (uplinks), the learn
  digest, the gateways' outside MACs in `mac_table`, the buckets (the LAN's assignment:
  one placement steers new clients and LAN hosts alike) and the remote-access tables;
  only the difference is written.
- `set_buckets` (a LAN move, followed), `set_tables` (pins, labels, ranges), `set_fenced`
  (a taken-over gateway's outside port loses its port_roles entry, and reconcile keeps it so).
- learning on uplinks: a learn digest installs `learned_sources` (idle timeout) and a
  `mac_table` entry with role UPLINK for the router's MAC; its idle timeout removes both.
  Until then frames to it flood to the uplinks (group 3), so learning only saves floods.

Nothing outside `southbound/` builds or reads a finsy entity.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from finsy import P4DigestEntry, P4MulticastGroupEntry, P4TableEntry, Switch

from supergw_proto import p4constants as pc
from supergw_controller.config import Config
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import HostSeen, Op, RaTables, Ternary
from supergw_controller.southbound.entities import BucketEntry, Update
from supergw_controller.southbound.reconcile import diff_entries
from supergw_controller.southbound.session import Role, SwitchSession
from supergw_controller.southbound.switch import SessionLike, learn_digest, pump_stream

log = logging.getLogger(__name__)

# What the core wants on the outside, asked at each reconcile: the RA tables given what the
# switch holds (adoption), and the LAN's bucket assignment.
WantedTables = Callable[[RaTables], RaTables]
WantedBuckets = Callable[[], Mapping[int, str]]


class OutsideSouthbound:
    def __init__(
        self,
        config: Config,
        wanted_tables: WantedTables,
        wanted_buckets: WantedBuckets,
        *,
        name: str = "supergw-outside",
        session: SessionLike | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        ra = config.remote_access
        if ra is None:
            raise ValueError("no remote_access section: there is no outside switch")
        self._config = config
        self._ra = ra
        self._wanted_tables = wanted_tables
        self._wanted_buckets = wanted_buckets
        self._on_ready = on_ready
        self._idle_ns = int(config.timing.ageing_s * 1e9)
        self._uplinks = set(ra.uplinks)
        self.targets = {name: (g.port, g.mac) for name, g in ra.gateways.items()}
        self._by_target = {(g.port, ent.mac_int(g.mac)): name for name, g in ra.gateways.items()}
        self.held = RaTables.empty()  # what the switch holds (written or adopted)
        self._fence_wanted: frozenset[str] = frozenset()
        self.fenced: frozenset[str] = frozenset()  # gateways whose port_roles entry the switch no longer holds
        self.assignment: dict[int, str] = {}
        self.learned: dict[str, int] = {}  # router MAC -> uplink
        self.ready = asyncio.Event()
        self.stream_rejected: dict[str, int] = {}  # outside stream items dropped as malformed, by stream
        self._lock = asyncio.Lock()  # one writer: mirrors change only with their writes
        self._finsy: SwitchSession | None = None
        if session is None:
            self._finsy = SwitchSession(config.outside_switch(), self._on_primary, self._on_role, name=name)
            session = self._finsy
        self.session: SessionLike = session

    @property
    def role(self) -> Role:
        return self.session.role

    @property
    def address(self) -> str:
        return self._ra.switch.address

    async def run(self) -> None:
        if self._finsy is None:
            raise RuntimeError("this outside southbound runs on a stand-in session, not on finsy")
        await self._finsy.run()

    # ------------------------------------------------------------------ writes
    async def set_buckets(self, moves: Mapping[int, str]) -> None:
        """Follow LAN moves (bucket -> gateway); only while reconciled."""
        if not self.ready.is_set():
            return  # the next reconcile takes the whole assignment
        async with self._lock:
            updates = [
                Update(Op.MODIFY if b in self.assignment else Op.INSERT, BucketEntry(b, *self.targets[gw]))
                for b, gw in moves.items()
                if self.assignment.get(b) != gw
            ]
            await self.session.write(updates)
            self.assignment.update(moves)

    async def set_tables(self, wanted: RaTables) -> int:
        """Write the pins, labels and ranges of `wanted` that differ from what the switch
        holds (`wanted.pools` belong to the LAN switch); the number of updates written."""
        if not self.ready.is_set():
            return 0
        async with self._lock:
            updates = self._table_updates(self.held, wanted)
            await self.session.write(updates)
            self.held = RaTables(dict(wanted.pins), dict(wanted.labels), dict(wanted.ranges), {})
            return len(updates)

    async def set_fenced(self, gateways: Collection[str]) -> None:
        """Fence exactly `gateways` on the outside: their outside ports lose their port_roles
        entry (all they send is dropped, UNKNOWN_PORT), the others get theirs back. Written
        now while reconciled (the difference only), else by the next reconcile."""
        wanted = frozenset(gateways)
        self._fence_wanted = wanted
        if not self.ready.is_set() or wanted == self.fenced:
            return
        async with self._lock:
            await self.session.write(ent.fence_updates(self.fenced, wanted, self.targets, pc.PortRole.GATEWAY_OUTSIDE))
            self.fenced = wanted

    def _table_updates(self, held: RaTables, wanted: RaTables) -> list[Update]:
        # Labels and ranges before pins: a new gateway's SAs are reachable before its clients are pinned.
        return (
            ent.ra_updates(pc.TABLE_IKE_SPI_LABELS, dict(held.labels), wanted.labels, self.targets)
            + ent.ra_updates(pc.TABLE_ESP_SPI_RANGES, dict(held.ranges), wanted.ranges, self.targets)
            + ent.ra_updates(pc.TABLE_CLIENT_PINS, dict(held.pins), wanted.pins, self.targets)
        )

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self) -> None:
        cfg, ra, s = self._config, self._ra, self.session
        schema = s.schema
        gw_ports = sorted(g.port for g in ra.gateways.values())
        uplinks = sorted(self._uplinks)
        fence = self._fence_wanted
        fenced_ports = {self.targets[g][0] for g in fence}
        roles = [ent.port_role(p, pc.PortRole.UPLINK) for p in uplinks]
        roles += [ent.port_role(p, pc.PortRole.GATEWAY_OUTSIDE) for p in gw_ports if p not in fenced_ports]
        batch = diff_entries(schema, roles, await s.read(P4TableEntry(pc.TABLE_PORT_ROLES)))
        for group, ports in ((pc.GATEWAY_OUTSIDE_FLOOD_GROUP, gw_ports), (pc.UPLINK_FLOOD_GROUP, uplinks)):
            held_group = await s.read_or_none(P4MulticastGroupEntry(group))
            if not held_group:
                batch.append(Update(Op.INSERT, ent.flood_group(ports, group)))
            elif sorted(ent.replica_ports(held_group[0])) != ports:
                batch.append(Update(Op.MODIFY, ent.flood_group(ports, group)))
        if not await s.read_or_none(P4DigestEntry(pc.DIGEST_LEARN_DIGEST)):
            batch.append(Update(Op.INSERT, ent.learn_digest()))

        # mac_table: the gateways' outside MACs; learned routers whose learned_sources is held.
        learned = {
            e.mac: e.port
            for e in ent.held_hosts(await s.read(P4TableEntry(pc.TABLE_LEARNED_SOURCES)), [], []).learned
            if e.port in self._uplinks
        }
        want_l2 = {g.mac: (g.port, pc.PortRole.GATEWAY_OUTSIDE) for g in ra.gateways.values()}
        for mac, port in learned.items():
            want_l2.setdefault(mac, (port, pc.PortRole.UPLINK))
        held_l2 = {m: (p, r) for m, p, r in map(ent.held_l2, await s.read(P4TableEntry(pc.TABLE_MAC_TABLE)))}
        for mac, (port, role) in want_l2.items():
            if held_l2.get(mac) != (port, int(role)):
                op = Op.MODIFY if mac in held_l2 else Op.INSERT
                batch.append(Update(op, ent.outside_mac_entry(mac, port, role)))
        batch += [Update(Op.DELETE, ent.mac_key(m)) for m in held_l2 if m not in want_l2]

        # Buckets: the LAN's assignment.
        held_buckets: dict[int, str | None] = {}
        for e in await s.read(P4TableEntry(pc.TABLE_BUCKETS)):
            bucket, gw_port, gw_mac = ent.held_bucket(e)
            held_buckets[bucket] = self._by_target.get((gw_port, gw_mac))
        target = dict(self._wanted_buckets())
        for b, gw in sorted(target.items()):
            if held_buckets.get(b, "") != gw:
                op = Op.MODIFY if b in held_buckets else Op.INSERT
                batch.append(Update(op, BucketEntry(b, *self.targets[gw])))
        batch += [Update(Op.DELETE, ent.bucket_key(b)) for b in sorted(held_buckets) if b not in target]

        # Remote-access tables: what the core wants given what is held.
        held_ra = {t: ent.held_ra(t, await s.read(P4TableEntry(t)), self._by_target) for t in ent.RA_TABLES[:3]}
        valid = RaTables(
            pins={str(k): g for k, g in held_ra[pc.TABLE_CLIENT_PINS].items() if g is not None},
            labels={k: g for k, g in held_ra[pc.TABLE_IKE_SPI_LABELS].items() if isinstance(k, Ternary) and g is not None},
            ranges={k: g for k, g in held_ra[pc.TABLE_ESP_SPI_RANGES].items() if isinstance(k, Ternary) and g is not None},
            pools={},
        )
        wanted = self._wanted_tables(valid)
        batch += ent.ra_updates(pc.TABLE_IKE_SPI_LABELS, _ternaries(held_ra[pc.TABLE_IKE_SPI_LABELS]), wanted.labels, self.targets)
        batch += ent.ra_updates(pc.TABLE_ESP_SPI_RANGES, _ternaries(held_ra[pc.TABLE_ESP_SPI_RANGES]), wanted.ranges, self.targets)
        batch += ent.ra_updates(
            pc.TABLE_CLIENT_PINS, {str(k): g for k, g in held_ra[pc.TABLE_CLIENT_PINS].items()}, wanted.pins, self.targets
        )
        await s.write(batch)
        self.assignment = target
        self.learned = learned
        self.fenced = fence
        self.held = RaTables(dict(wanted.pins), dict(wanted.labels), dict(wanted.ranges), {})

        # The settings last: until then the outside drops (NOT_CONFIGURED / RA_NOT_CONFIGURED).
        settings = [
            ent.settings(str(cfg.gateway_ip), cfg.vmac_base, cfg.bucket_mask, cfg.dispatch.hash),
            ent.ra_settings(ra.public_ip, ra.public_mac),
        ]
        for want in settings:
            have = await s.read_or_none(P4TableEntry(want.table_id, is_default_action=True))
            if not have or ent.action_sig(schema, have[0]) != ent.action_sig(schema, want):
                await s.write([Update(Op.MODIFY, want)], idempotent=False)
        log.info("outside switch %s reconciled: %d updates", self.address, len(batch))

    # ------------------------------------------------------------------ learning on uplinks
    async def on_digest(self, dl: Any) -> None:
        await learn_digest(self.session, dl, ent.seen_hosts, self._learn_uplinks, self.stream_rejected, "outside digest")

    async def _learn_uplinks(self, hosts: list[HostSeen]) -> None:
        """The uplink routers' MACs (hosts seen on other ports are not the outside's business)."""
        writes: list[Update] = []
        for seen in hosts:
            if seen.port not in self._uplinks or self.learned.get(seen.mac) == seen.port:
                continue
            writes.append(Update(Op.INSERT, ent.learned(seen.mac, seen.port, self._idle_ns)))
            writes.append(Update(Op.INSERT, ent.outside_mac_entry(seen.mac, seen.port, pc.PortRole.UPLINK)))
            self.learned[seen.mac] = seen.port
        if writes:
            async with self._lock:
                await self.session.write(writes)

    async def on_idle_timeout(self, note: Any) -> None:
        gone = [h for h in ent.idle_hosts(self.session.schema, note.table_entry) if self.learned.get(h.mac) == h.port]
        for h in gone:
            del self.learned[h.mac]
        async with self._lock:
            await self.session.write(
                [Update(Op.DELETE, ent.learned_key(h.mac, h.port)) for h in gone]
                + [Update(Op.DELETE, ent.mac_key(h.mac)) for h in gone]
            )

    # ------------------------------------------------------------------ finsy's callbacks
    def _on_role(self, role: Role) -> None:
        if role is not Role.PRIMARY:
            self.ready.clear()

    async def _on_primary(self, _session: SwitchSession, sw: Switch) -> None:
        delay = 0.1
        while True:
            try:
                await self.reconcile()
                break
            except SwitchUnavailable as exc:
                log.warning("outside reconcile failed, retrying in %.1fs: %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        self.ready.set()
        sw.create_task(pump_stream(sw.read_digests(pc.DIGEST_LEARN_DIGEST), self.on_digest, "outside digest", self.stream_rejected))
        sw.create_task(pump_stream(sw.read_idle_timeouts(), self.on_idle_timeout, "outside idle timeout", self.stream_rejected))
        if self._on_ready is not None:
            self._on_ready()


def _ternaries(held: Mapping[ent.RaKey, str | None]) -> dict[Ternary, str | None]:
    return {k: g for k, g in held.items() if isinstance(k, Ternary)}
