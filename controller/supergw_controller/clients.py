"""Remote-access clients as the gateways report them, and the tables that follow (pure state).

Each gateway's report carries what it serves (`remote_access`: IP_P, its inner-address
pool, its inbound ESP SPI range, its IKE SPI label under a mask; static, from the gateway's
own config) and the clients whose IKE SA it holds (`clients`). `ClientBook` keeps the last
of each per gateway and says what the switches should hold (`RaTables`):

- `ike_spi_labels`, `esp_spi_ranges` (outside) and `client_pools` (LAN) from each gateway's
  `remote_access`, once it is accepted: IP_P must be the controller's, and its pool, range
  and label must not overlap another gateway's (the later claim is refused, with the reason,
  so one mis-configured gateway cannot pull another's clients or return traffic);
- `client_pins`: each client's outer address -> the live gateway that lists it. The data
  plane keys pins on the address alone, so clients behind one NAT address share a pin:
  the pin stays with its gateway while that gateway lists some client there, else goes to
  the gateway listing the most of them. Only their IKE_SA_INITs (and unlabelled packets)
  follow it; everything after goes by SPI to whichever gateway holds each SA.
- A dead gateway's pins go at once (its clients reconnect and land by hash on live
  gateways); its labels, ranges and pool stay (no other gateway holds those SAs or
  addresses, and a restarted gateway keeps its config). A drained gateway's pins go too
  (its clients are redirected and must land elsewhere), while it still lists them.
- **Takeover** (`takeover.py`): a gateway whose SAs another gateway took over (`set_takeovers`:
  taken-over gateway -> holder) has its label, ranges and pool steered to the holder, and the
  clients of its last report before its death pinned to the holder until the holder lists them
  itself. A label or range also goes to any live gateway that reports SAs still under it
  (`replication.foreign_sas`), the one with most. A withheld gateway (alive again, not
  released) pins nothing of its own. A client whose inner address lies in another gateway's
  pool, where that pool is not routed to the gateway listing it, gets a /32 `client_pools`
  entry to that gateway (so a pool can return to its owner while taken-over clients keep their
  addresses). A taken-over pool goes to its holder once the holder renewed every CHILD SA it
  took over from that gateway; before, each client the holder lists as `esp_renewed` gets a
  /32 to it, so its return traffic does not wait for the other clients' rekeys.
- `pin_changes` says why each pin came, went or moved (the event log's words).
- After a controller restart, entries the switch already holds for a gateway that has not
  reported since are kept (`adopt`), so a restart moves no established client.
"""

from __future__ import annotations

import ipaddress
import logging
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from supergw_proto import p4constants as pc
from supergw_controller.southbound.domain import RaTables, Ternary
from supergw_proto.reports import ClientSession, GatewayReport, RemoteAccessInfo

log = logging.getLogger(__name__)
K = TypeVar("K")

# esp_spi_ranges holds 64 entries; a range that needs more prefixes than this is refused.
MAX_PREFIXES_PER_RANGE = 8
# client_pools holds the pools and the /32s of clients away from their pool's gateway.
MAX_POOL_ENTRIES = pc.CLIENT_POOLS_TABLE_SIZE


class PinReason(StrEnum):
    """Why a client pin came, went or moved (the event log's `reason` of a `client_pin` event)."""

    SA_UP = "sa-up"  # a live gateway reports a client at a new address
    SA_DOWN = "sa-down"  # no live gateway lists the address any more
    SA_MOVED = "sa-moved"  # its gateway no longer lists it, another does
    GATEWAY_DEAD = "gateway-dead"
    DRAIN = "drain"
    TAKEOVER = "takeover"  # a dead gateway's client, pinned to the gateway that took its SA over


@dataclass(frozen=True)
class PinChange:
    """One pin written: `src` None = added, `dst` None = removed."""

    address: str
    src: str | None
    dst: str | None
    reason: PinReason


def esp_prefixes(spi_min: int, spi_max: int) -> list[Ternary]:
    """The ternary prefixes that together match exactly [spi_min, spi_max] (32-bit SPIs)."""
    if spi_min > spi_max:
        raise ValueError(f"ESP SPI range {spi_min:#x}..{spi_max:#x} is empty")
    nets = ipaddress.summarize_address_range(ipaddress.IPv4Address(spi_min), ipaddress.IPv4Address(spi_max))
    return [Ternary(int(n.network_address), int(n.netmask)) for n in nets]


class ClientBook:
    def __init__(self, gateways: Sequence[str], public_ip: ipaddress.IPv4Address, *, pins: bool = True) -> None:
        self._order = {name: i for i, name in enumerate(gateways)}
        self._public_ip = public_ip
        self._pins = pins
        self._seen: set[str] = set()  # reported since start
        self._dead: set[str] = set()
        self._drained: frozenset[str] = frozenset()
        self._info: dict[str, RemoteAccessInfo] = {}  # accepted
        self._refused: dict[str, str] = {}
        self._clients: dict[str, list[ClientSession]] = {}
        self._last_clients: dict[str, list[ClientSession]] = {}  # of dead gateways, as their last report said
        self._holders: dict[str, str] = {}  # taken-over gateway -> the gateway holding its SAs
        self._withheld: frozenset[str] = frozenset()
        self._foreign: dict[str, dict[str, int]] = {}  # gateway -> {other gateway: its SAs held here}
        # gateway -> {taken-over gateway: CHILD SAs taken over from it not renewed yet}, and
        # whom it took over (its last report said)
        self._unrenewed: dict[str, dict[str, int]] = {}
        self._took: dict[str, frozenset[str]] = {}
        self._early_short = False  # client_pools had no room for every early /32 (logged once)

    # ------------------------------------------------------------------ input
    def report(self, report: GatewayReport) -> None:
        """Take a gateway's report (unknown gateways are the REST layer's to refuse)."""
        name = report.gateway
        if name not in self._order:
            return
        self._seen.add(name)
        self._clients[name] = list(report.clients or [])
        rep = report.replication
        self._foreign[name] = {} if rep is None else {g: n for g, n in rep.foreign_sas.items() if n > 0}
        self._unrenewed[name] = {} if rep is None else {g: n for g, n in rep.unrenewed_children.items() if n > 0}
        self._took[name] = frozenset() if rep is None else frozenset(rep.taken_over)
        info = report.remote_access
        if info is None:
            self._info.pop(name, None)
            self._refused.pop(name, None)
            return
        why = self._conflict(name, info)
        if why is None:
            self._info[name] = info
            if self._refused.pop(name, None) is not None:
                log.info("gateway %s: remote_access accepted now", name)
        else:
            self._info.pop(name, None)
            if self._refused.get(name) != why:
                log.error("gateway %s: remote_access refused, its clients are not dispatched by SPI: %s", name, why)
            self._refused[name] = why

    def set_alive(self, name: str, alive: bool) -> None:
        """A liveness verdict; a dead gateway's clients are forgotten until it reports again
        (kept aside for a takeover: `set_takeovers`)."""
        if alive:
            self._dead.discard(name)
            if name not in self._holders:
                self._last_clients.pop(name, None)
        elif name in self._order:
            self._dead.add(name)
            self._last_clients[name] = self._clients.pop(name, [])

    def set_takeovers(self, holders: Mapping[str, str], withheld: Collection[str]) -> None:
        """Taken-over gateway -> the gateway holding its SAs now, and the gateways withheld
        (alive, not released: they pin nothing of their own). A gateway released from a
        takeover forgets its last clients."""
        self._holders = {v: h for v, h in holders.items() if v in self._order and h in self._order}
        self._withheld = frozenset(withheld)
        for v in [v for v in self._last_clients if v not in self._holders and v not in self._dead]:
            del self._last_clients[v]

    def restore(self, name: str, info: RemoteAccessInfo) -> None:
        """A taken-over gateway's claim kept by the store: steered (to its holder) although it has
        not reported since this controller started; its own report replaces it."""
        if name in self._order and name not in self._seen and name not in self._info:
            self._info[name] = info

    @property
    def dead(self) -> frozenset[str]:
        """The gateways whose death this book was told of (and not their return)."""
        return frozenset(self._dead)

    def set_drained(self, names: Collection[str]) -> None:
        """The gateways an operator drained: their clients keep their SAs but lose their pins
        (they are being redirected, and their new IKE_SA_INIT must land elsewhere)."""
        self._drained = frozenset(names)

    # ------------------------------------------------------------------ views
    def clients(self, name: str) -> list[ClientSession]:
        return list(self._clients.get(name, []))

    def last_clients(self, name: str) -> list[ClientSession]:
        """A dead gateway's clients as its last report listed them."""
        return list(self._last_clients.get(name, []))

    def steered_to(self, name: str) -> str:
        """Where `name`'s IKE SPI label, ESP SPI range and pool point: the live gateway
        reporting most SAs still under them, else its holder after a takeover, else itself."""
        claims = [(n, g) for g, f in self._foreign.items() if g != name and g not in self._dead and (n := f.get(name, 0)) > 0]
        if claims:
            return min(claims, key=lambda c: (-c[0], self._order[c[1]]))[1]
        return self._holders.get(name, name)

    def renewed(self, holder: str, origin: str) -> bool:
        """Whether `holder` said the CHILD SAs it took over from `origin` all have new outbound
        sequence numbers. Until then ESP it sends on them would be replays to the clients: the
        return traffic of `origin`'s pool waits for it (lost meanwhile at the fenced gateway's
        port, never dropped by a client as a replay), but for each client `holder` lists as
        renewed (`_away_from_pool`). Per origin: a second takeover does not take back the pool
        of a first one."""
        return origin in self._took.get(holder, frozenset()) and not self._unrenewed.get(holder, {}).get(origin)

    def info(self, name: str) -> RemoteAccessInfo | None:
        return self._info.get(name)

    def refused(self, name: str) -> str | None:
        return self._refused.get(name)

    def _conflict(self, name: str, info: RemoteAccessInfo) -> str | None:
        if info.public_address != self._public_ip:
            return f"its public address {info.public_address} is not remote_access.public_ip {self._public_ip}"
        try:
            prefixes = esp_prefixes(info.esp_spi_min, info.esp_spi_max)
        except ValueError as exc:
            return str(exc)
        if len(prefixes) > MAX_PREFIXES_PER_RANGE:
            return (
                f"its ESP SPI range {info.esp_spi_min:#x}..{info.esp_spi_max:#x} needs {len(prefixes)} prefixes "
                f"(at most {MAX_PREFIXES_PER_RANGE}): align it to a power of two"
            )
        if info.ike_spi_mask == 0 or info.ike_spi_label & ~info.ike_spi_mask:
            return f"IKE SPI label {info.ike_spi_label:#x} does not lie under a non-zero mask {info.ike_spi_mask:#x}"
        label = Ternary(info.ike_spi_label, info.ike_spi_mask)
        for other, o in self._info.items():
            if other == name:
                continue
            if info.pool.overlaps(o.pool):
                return f"its pool {info.pool} overlaps gateway {other}'s {o.pool}"
            if info.esp_spi_min <= o.esp_spi_max and o.esp_spi_min <= info.esp_spi_max:
                return (
                    f"its ESP SPI range {info.esp_spi_min:#x}..{info.esp_spi_max:#x} overlaps gateway {other}'s "
                    f"{o.esp_spi_min:#x}..{o.esp_spi_max:#x}"
                )
            if label.overlaps(Ternary(o.ike_spi_label, o.ike_spi_mask)):
                return f"its IKE SPI label {info.ike_spi_label:#x} overlaps gateway {other}'s {o.ike_spi_label:#x}"
        return None

    # ------------------------------------------------------------------ what the switches should hold
    def wanted(self, held: RaTables) -> RaTables:
        """The tables wanted now, given what the switches hold (`held`, for adoption and
        for keeping a shared pin where it is)."""
        labels: dict[Ternary, str] = {}
        ranges: dict[Ternary, str] = {}
        pools: dict[str, str] = {}
        for name, info in self._info.items():
            target = self.steered_to(name)
            labels[Ternary(info.ike_spi_label, info.ike_spi_mask)] = target
            for prefix in esp_prefixes(info.esp_spi_min, info.esp_spi_max):
                ranges[prefix] = target
            pools[str(info.pool)] = target if target == name or self.renewed(target, name) else name
        away, early = self._away_from_pool(pools, held.pools)
        room = max(0, MAX_POOL_ENTRIES - len(pools))
        if len(away) > room:  # the rest go without (`routes_missing` counts them)
            away = dict(sorted(away.items())[:room])
        room -= len(away)
        fresh = sorted(key for key in early if key not in away)
        if len(fresh) > room:  # they wait for their pool, as all did before
            if not self._early_short:
                log.warning("client_pools has room for %d of the %d /32 routes of taken-over clients already renewed: "
                            "the rest get their return traffic when their pool moves (said once)", room, len(fresh))
            self._early_short = True
            early = {key: gw for key, gw in early.items() if key in away or key in fresh[:room]}
        else:
            self._early_short = False
        # The /32s first: written before a pool they carve out of goes back to its owner.
        pools = away | early | pools
        for key, gw in self._adoptable(held.labels).items():
            labels.setdefault(key, gw)
        for key, gw in self._adoptable(held.ranges).items():
            ranges.setdefault(key, gw)
        for net, gw in self._adoptable(held.pools).items():
            pools.setdefault(net, gw)
        return RaTables(self._wanted_pins(held.pins), labels, ranges, pools)

    def _away_from_pool(self, pools: Mapping[str, str],
                        held: Mapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
        """("vip/32" -> gateway for each client listed by a serving gateway whose inner address
        lies in a pool that is not routed to that gateway, and the same for the clients whose
        CHILD SAs a gateway still renewing a takeover has renewed already).

        The first: a taken-over client after its pool went back to its owner. The /32s `held`
        for a gateway that is dead, withheld or has not renewed what it took over stay where
        they are until a serving gateway lists the client: dropped, the client's return traffic
        would go to its pool's gateway, which may hold a copy of its SA (its backup's) and
        encrypt it with sequence numbers the client has seen.

        The second (early): a holder that has not renewed every CHILD SA it took over keeps the
        pool waiting, but each client it lists as `esp_renewed` can take its ESP already, so its
        return traffic goes there at once rather than with the last client's rekey. A client
        not said renewed (False, or None from an older agent) waits for its pool."""
        nets = [(info.pool, str(info.pool)) for info in self._info.values()]
        kept: dict[str, str] = {}
        served: set[str] = set()  # "vip/32" of every client a serving gateway lists
        out: dict[str, str] = {}
        early: dict[str, str] = {}
        for name in self._order:
            gone = name in self._dead or name in self._withheld
            renewing = not gone and bool(self._unrenewed.get(name))
            if gone or renewing:
                kept |= {key: gw for key, gw in (held or {}).items() if gw == name and key.endswith("/32")}
            if gone:
                continue
            for s in self._clients.get(name, []):
                if renewing and s.esp_renewed is not True:
                    continue
                for vip in s.vips:
                    key = f"{vip}/32"
                    pool = next((k for net, k in nets if vip in net), None)
                    elsewhere = pool is not None and pools.get(pool) != name
                    if renewing:
                        if elsewhere:
                            early[key] = name
                        continue
                    served.add(key)
                    if elsewhere:
                        out[key] = name
        settled = {key: gw for key, gw in kept.items() if key not in served} | out
        # An early /32 already held for its holder is settled (kept) like any other.
        return settled, {key: gw for key, gw in early.items() if key not in out and settled.get(key) != gw}

    def routes_missing(self, pools: Mapping[str, str]) -> int:
        """Clients away from their pool's gateway whose /32 is not in `pools` (the `wanted`
        pools: `client_pools` had no room left for it)."""
        return sum(1 for key in self._away_from_pool(pools)[0] if key not in pools)

    def _adoptable(self, held: Mapping[K, str]) -> dict[K, str]:
        """Held entries of configured gateways that have not reported since start."""
        return {k: gw for k, gw in held.items() if gw in self._order and gw not in self._seen and gw not in self._dead}

    def _wanted_pins(self, held: Mapping[str, str]) -> dict[str, str]:
        if not self._pins:
            return {}
        listed: dict[str, Counter[str]] = {}
        unpinned = self._dead | self._drained | self._withheld
        for name, sessions in self._clients.items():
            if name in unpinned:
                continue
            for s in sessions:
                listed.setdefault(str(s.remote_host), Counter())[name] += 1
        # A taken-over gateway's clients: to its holder, until the holder lists them itself.
        for name, sessions in self._last_clients.items():
            target = self.steered_to(name)
            if target == name or target in unpinned:
                continue
            for s in sessions:
                by_gw = listed.setdefault(str(s.remote_host), Counter())
                if target not in by_gw:
                    by_gw[target] += 1
        pins: dict[str, str] = {}
        for ip, by_gw in listed.items():
            current = held.get(ip)
            if current is not None and current in by_gw:
                pins[ip] = current
            else:
                pins[ip] = min(by_gw, key=lambda g: (-by_gw[g], self._order[g]))
        for ip, gw in self._adoptable(held).items():
            if gw not in self._drained:
                pins.setdefault(ip, gw)
        return pins

    def pin_changes(self, before: Mapping[str, str], after: Mapping[str, str]) -> list[PinChange]:
        """The pins that came, went or moved from `before` to `after`, each with why."""
        out: list[PinChange] = []
        for ip in sorted(set(before) | set(after)):
            src, dst = before.get(ip), after.get(ip)
            if src == dst:
                continue
            if src is None:
                reason = PinReason.SA_UP
            elif dst is not None and src in self._holders and self.steered_to(src) == dst:
                reason = PinReason.TAKEOVER
            elif src in self._dead:
                reason = PinReason.GATEWAY_DEAD
            elif src in self._drained:
                reason = PinReason.DRAIN
            else:
                reason = PinReason.SA_DOWN if dst is None else PinReason.SA_MOVED
            out.append(PinChange(ip, src, dst, reason))
        return out
